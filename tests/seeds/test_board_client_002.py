"""Reference 002's own client on the board bar keeps in the seed's layout
(``board.layout: seed``): the design's tour done with bar's commands, read back by a
client that knows only the reference (``board_client_002``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from board_client_002 import SeedBoard
from helpers import bar, project_dir, set_config


def test_the_seed_client_reads_the_board_bar_keeps_in_the_seed_layout(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(board={"layout": "seed"})
    client = SeedBoard(inited)
    # 1. Create tasks for backend auth and frontend login page, then list tasks.
    assert bar(capfd, "task", "new", "auth-refactor", "--plan", "-d", "backend auth").code == 0
    assert bar(capfd, "task", "new", "ui-login", "--plan").code == 0
    assert client.listing() == ["[ ] #1: auth-refactor", "[ ] #2: ui-login"]
    first = client.task(1)
    assert first["status"] == "pending" and first["worktree"] == "" and first["owner"] == ""
    assert first["description"] == "backend auth" and first["blockedBy"] == []
    # 2. Create worktree "auth-refactor" for task 1, create worktree "ui-login", then bind
    #    task 2 to "ui-login".
    assert bar(capfd, "worktree", "create", "auth-refactor", "--task", "1").code == 0
    assert bar(capfd, "worktree", "create", "ui-login").code == 0
    lane = client.worktree("ui-login")
    assert lane is not None and lane["task_id"] is None and lane["status"] == "active"
    assert client.run("ui-login", "echo draft > draft.txt") == ""
    bound = bar(capfd, "task", "bind", "2", "ui-login")
    assert bound.code == 0, bound.err
    assert "recorded step 0001 (manual)" in bound.out  # what the worktree held
    assert client.task(2)["status"] == "in_progress"
    assert client.task(2)["worktree"] == "ui-login"
    assert client.worktree("ui-login")["task_id"] == 2  # type: ignore[index]
    assert client.run("ui-login", "cat draft.txt") == "draft"
    assert bar(capfd, "task", "claim", "1", "--owner", "agent-A").code == 0
    assert client.listing() == [
        "[>] #1: auth-refactor owner=agent-A wt=auth-refactor",
        "[>] #2: ui-login wt=ui-login",
    ]
    # 3. Run "git status --short" in worktree "auth-refactor".
    assert bar(capfd, "run", "--task", "1", "--", "sh", "-c", "echo x > a.txt").code == 0
    assert "a.txt" in client.run("auth-refactor", "ls")
    assert client.status("auth-refactor").startswith("## ")
    # 4. Keep worktree "ui-login", then list worktrees and inspect worktree events.
    assert bar(capfd, "worktree", "keep", "ui-login").code == 0
    assert client.worktree("ui-login")["status"] == "kept"  # type: ignore[index]
    kept = [e for e in client.events(50) if e["event"] == "worktree.keep"]
    assert kept and kept[-1]["task"]["id"] == 2 and kept[-1]["worktree"]["name"] == "ui-login"
    # a refusal is an event too: a worktree holding changes no step recorded
    Path(client.worktree("auth-refactor")["path"], "hand.txt").write_text("by hand\n")  # type: ignore[index]
    refused = bar(capfd, "worktree", "remove", "auth-refactor")
    assert refused.code == 5
    assert [e["event"] for e in client.events(2)] == [
        "worktree.remove.before",
        "worktree.remove.failed",
    ]
    assert "no step recorded" in client.events(1)[0]["error"]
    # 5. Remove worktree "auth-refactor" with complete_task=true, then list
    #    tasks/worktrees/events.
    done = bar(capfd, "worktree", "remove", "auth-refactor", "--complete", "--force")
    assert done.code == 0, done.err
    assert client.task(1)["status"] == "completed"
    assert client.worktree("auth-refactor")["status"] == "removed"  # type: ignore[index]
    tail = [e["event"] for e in client.events(3)]
    assert tail == ["worktree.remove.before", "worktree.remove.after", "task.completed"]
    for event in client.events(100):
        assert {"event", "ts", "task", "worktree"} <= set(event)
        assert isinstance(event["ts"], float)
        if event["task"]:
            assert isinstance(event["task"]["id"], int)

    # crash recovery: the two planes alone give the whole picture, consistent
    seen = client.recover()
    assert seen["problems"] == []
    assert set(seen["worktrees"]) == {"ui-login"}
    assert {t["id"]: t["status"] for t in seen["tasks"].values()} == {
        1: "completed",
        2: "in_progress",
    }
    # bar's own files keep bar's meanings
    own = json.loads(
        (project_dir() / "tasks" / client.task(1)["bar"]["id"] / "task.json").read_text()
    )
    assert own["status"] == "closed" and own["board"]["status"] == "completed"


def test_a_copy_that_fell_behind_is_said_by_doctor_and_written_again(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(board={"layout": "seed"})
    client = SeedBoard(inited)
    assert bar(capfd, "task", "new", "one", "--plan").code == 0
    assert bar(capfd, "task", "start", "#1").code == 0
    (inited / ".worktrees" / "index.json").unlink()
    (inited / ".tasks" / "task_1.json").write_text("{}")
    said = bar(capfd, "doctor")
    assert "the board's copy in the repository is out of date" in said.out
    assert bar(capfd, "doctor", "--repair").code == 0
    assert client.task(1)["status"] == "in_progress"
    assert client.worktree("one")["task_id"] == 1  # type: ignore[index]
    assert [e["event"] for e in client.events(3)] == [
        "worktree.create.before",
        "worktree.create.after",
        "task.started",
    ]
    assert "board's copy" not in bar(capfd, "doctor").out


def test_numbers_are_never_given_twice_and_a_file_bar_did_not_write_is_left_alone(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(board={"layout": "seed"})
    (inited / ".tasks").mkdir()
    (inited / ".tasks" / "task_7.json").write_text('{"id": 7, "subject": "theirs"}')
    (inited / ".tasks" / "notes.md").write_text("mine\n")
    assert bar(capfd, "task", "new", "a", "--plan").code == 0
    assert bar(capfd, "task", "new", "b", "--plan").code == 0
    client = SeedBoard(inited)
    assert [t["subject"] for t in client.tasks()] == ["theirs", "a", "b"]
    assert [t["id"] for t in client.tasks()] == [7, 8, 9]
    assert bar(capfd, "task", "close", "a").code == 0
    assert bar(capfd, "task", "delete", "a", "--force").code == 0
    assert bar(capfd, "task", "new", "c", "--plan").code == 0
    assert [t["id"] for t in client.tasks()] == [7, 9, 10]  # 8 went with its task
    assert (inited / ".tasks" / "task_7.json").read_text() == '{"id": 7, "subject": "theirs"}'
    assert (inited / ".tasks" / "notes.md").read_text() == "mine\n"
    # a link where the directory should be is never written through
    (inited / ".worktrees").rename(inited / "elsewhere")
    (inited / ".worktrees").symlink_to(inited / "elsewhere")
    before = (inited / "elsewhere" / "events.jsonl").read_bytes()
    made = bar(capfd, "task", "new", "d", "--plan")
    assert made.code == 0 and "is not a directory" in made.err
    assert (inited / "elsewhere" / "events.jsonl").read_bytes() == before


def test_what_another_client_of_the_design_writes_there_is_kept(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(board={"layout": "seed"})
    assert bar(capfd, "task", "new", "ours", "--plan").code == 0
    index = inited / ".worktrees" / "index.json"
    data = json.loads(index.read_text())
    theirs = {
        "name": "theirs",
        "path": str(inited / ".worktrees" / "theirs"),
        "branch": "wt/theirs",
        "task_id": None,
        "status": "active",
    }
    data["worktrees"].append(theirs)
    index.write_text(json.dumps(data))
    with (inited / ".worktrees" / "events.jsonl").open("a") as log:
        log.write(
            json.dumps(
                {
                    "event": "worktree.create.after",
                    "ts": 1.0,
                    "task": {},
                    "worktree": {"name": "theirs"},
                }
            )
            + "\n"
        )
    assert bar(capfd, "task", "start", "ours").code == 0
    client = SeedBoard(inited)
    assert client.worktree("theirs") == theirs
    assert client.worktree("ours")["task_id"] == 1  # type: ignore[index]
    assert "worktree.create.after" in [e["event"] for e in client.events(10)]
    assert len([e for e in client.events(10) if e["worktree"].get("name") == "theirs"]) == 1
    assert "board's copy" not in bar(capfd, "doctor").out


def test_nothing_planted_in_the_copy_stops_the_board_or_is_written_through(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import os
    import subprocess

    from helpers import BAR_EXE

    set_config(board={"layout": "seed"})
    assert bar(capfd, "task", "new", "one", "--plan").code == 0
    tasks = inited / ".tasks"
    os.mkfifo(tasks / "task_7.json")
    (tasks / "task_².json").write_text("{}")
    (tasks / "task_9.json").mkdir()
    private = inited.parent / "private"
    private.write_text("secret\n")
    private.chmod(0o600)
    (inited / ".worktrees" / "events.jsonl").unlink()
    os.link(private, inited / ".worktrees" / "events.jsonl")
    made = subprocess.run(
        [BAR_EXE, "task", "new", "two", "--plan"],
        cwd=inited,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    assert "not written" in made.stderr or "left as it is" in made.stderr
    assert private.read_text() == "secret\n" and (private.stat().st_mode & 0o777) == 0o600
    assert bar(capfd, "task", "start", "one").code == 0


def test_repair_appends_what_the_copy_lacks_and_keeps_other_lines(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(board={"layout": "seed"})
    assert bar(capfd, "task", "new", "a", "--plan").code == 0
    log = inited / ".worktrees" / "events.jsonl"
    with log.open("a") as out:
        out.write('{"event":"client.own","ts":1}\n')
    lines = log.read_text().splitlines()
    assert bar(capfd, "task", "start", "a").code == 0
    kept = log.read_text().splitlines()
    log.write_text("\n".join(kept[:-2]) + "\n")  # two events lost in a crash
    said = bar(capfd, "doctor")
    assert "2 event(s) of bar's log are missing" in said.out
    assert bar(capfd, "doctor", "--repair").code == 0
    assert log.read_text().splitlines() == kept
    assert lines[-1] == '{"event":"client.own","ts":1}'
    # a worktree removed (the task pending again) and a task deleted: the copy says so
    assert bar(capfd, "worktree", "remove", "a").code == 0
    client = SeedBoard(inited)
    assert client.task(1)["status"] == "pending" and client.task(1)["worktree"] == ""
    assert bar(capfd, "task", "close", "a").code == 0
    assert bar(capfd, "task", "delete", "a", "--force").code == 0
    assert not (inited / ".tasks" / "task_1.json").exists()
    assert bar(capfd, "task", "new", "b", "--plan").code == 0
    assert [t["id"] for t in client.tasks()] == [2]


def test_a_number_that_is_also_a_name_is_refused_as_ambiguous(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(board={"layout": "seed"})
    assert bar(capfd, "task", "new", "first", "--plan").code == 0
    assert bar(capfd, "task", "new", "1", "--plan").code == 0
    both = bar(capfd, "task", "start", "1")
    assert both.code != 0 and "#1" in both.err
    assert bar(capfd, "task", "start", "#1").code == 0
    assert SeedBoard(inited).task(1)["subject"] == "first"


def test_files_the_repository_tracks_there_are_never_written_over(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import subprocess

    set_config(board={"layout": "seed"})
    (inited / ".tasks").mkdir()
    planted = '{"id": 1, "bar": "not an object"}\n'
    (inited / ".tasks" / "task_1.json").write_text(planted)
    subprocess.run(["git", "add", "-f", ".tasks"], cwd=inited, check=True)
    subprocess.run(["git", "commit", "-qm", "the project's own"], cwd=inited, check=True)
    made = bar(capfd, "task", "new", "one", "--plan")
    assert made.code == 0 and "the repository tracks files in .tasks/" in made.err
    assert (inited / ".tasks" / "task_1.json").read_text() == planted
    subprocess.run(["git", "rm", "-q", "--cached", "-r", ".tasks"], cwd=inited, check=True)
    subprocess.run(["git", "commit", "-qm", "untracked"], cwd=inited, check=True)
    assert bar(capfd, "task", "new", "two", "--plan").code == 0  # a malformed file: skipped
    assert [t["subject"] for t in SeedBoard(inited).tasks()[1:]] == ["one", "two"]
