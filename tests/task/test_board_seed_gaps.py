"""What a client of the task-board design found missing on bar's board: owners changed
and cleared, refusals logged, a lost registry, files where a worktree is to be made, and
worktrees made before their task. Real git, real bar."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, project_dir, task_dir


def plan(capfd: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    res = bar(capfd, "task", "new", name, "--plan", "--json")
    assert res.code == 0, res.err
    data: dict[str, Any] = res.json()
    return data


def events() -> list[dict[str, Any]]:
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_an_owner_is_changed_only_when_asked_and_cleared_by_unclaim(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = plan(capfd, "ui")
    assert bar(capfd, "task", "claim", "ui", "--owner", "agent-b").code == 0
    taken = bar(capfd, "task", "claim", "ui", "--owner", "agent-c")
    assert taken.code == 1 and "already claimed by agent-b" in taken.err
    moved = bar(capfd, "task", "claim", "ui", "--owner", "agent-c", "--reassign", "--json")
    assert moved.code == 0 and moved.json()["board"]["owner"] == "agent-c"
    assert events()[-1]["event"] == "task.claimed" and events()[-1]["task"]["was"] == "agent-b"
    wrong = bar(capfd, "task", "unclaim", "ui", "--owner", "agent-b")
    assert wrong.code == 1 and "agent-c" in wrong.err
    freed = bar(capfd, "task", "unclaim", "ui", "--json")
    assert freed.code == 0 and freed.json()["board"]["owner"] == ""
    assert events()[-1]["event"] == "task.unclaimed"
    assert events()[-1]["task"] == {
        "id": t["id"],
        "name": "ui",
        "status": "pending",
        "was": "agent-c",
    }
    again = bar(capfd, "task", "unclaim", "ui")
    assert again.code == 0 and "has no owner" in again.out


def test_files_put_where_a_worktree_is_to_be_made_are_never_deleted(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = plan(capfd, "later")
    place = Path(t["worktree"])
    place.mkdir(parents=True)
    (place / "precious.txt").write_text("mine\n")
    refused = bar(capfd, "task", "start", "later")
    assert refused.code != 0 and "holds files bar did not put there" in refused.err
    assert (place / "precious.txt").read_text() == "mine\n"
    assert [e["event"] for e in events()[-2:]] == [
        "worktree.create.before",
        "worktree.create.failed",
    ]
    doctor = bar(capfd, "doctor", "--repair")
    assert "holds files bar did not put there" in doctor.out
    assert (place / "precious.txt").read_text() == "mine\n"
    (place / "precious.txt").unlink()
    assert bar(capfd, "task", "start", "later").code == 0  # an empty directory is no one's


def test_a_lost_registry_is_shown_from_disk_and_rebuilt_with_what_was_kept(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b", "c"):
        plan(capfd, name)
        assert bar(capfd, "task", "start", name).code == 0
    assert bar(capfd, "worktree", "keep", "b").code == 0
    (project_dir() / "workspaces" / "index.json").unlink()
    listed = bar(capfd, "worktree", "list")
    assert "No worktrees" not in listed.out and "index.json is missing" in listed.err
    assert [line.split()[0] for line in listed.out.splitlines()] == [
        "[active]",
        "[kept]",
        "[active]",
    ]
    assert bar(capfd, "doctor", "--repair").code == 0
    index = json.loads((project_dir() / "workspaces" / "index.json").read_text())
    assert {e["name"]: e["status"] for e in index["worktrees"]} == {
        "a": "active",
        "b": "kept",
        "c": "active",
    }


def test_a_worktree_made_before_its_task_is_bound_and_its_files_recorded(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    made = bar(capfd, "worktree", "create", "lane", "--json")
    assert made.code == 0, made.err
    lane = Path(made.json()["path"])
    assert made.json()["task_id"] == ""
    (lane / "draft.txt").write_text("draft\n")
    # bar records nothing where no task is bound: a step here would go nowhere
    inside = subprocess.run(
        [BAR_EXE, "run", "--", "true"], cwd=lane, capture_output=True, text=True, check=False
    )
    assert inside.returncode == 2 and "no task is bound to it" in inside.stderr
    kept = bar(capfd, "worktree", "remove", "lane")
    assert kept.code != 0 and (lane / "draft.txt").exists()
    assert events()[-1]["event"] == "worktree.remove.failed"
    t = plan(capfd, "work")
    bound = bar(capfd, "task", "bind", "work", "lane", "--json")
    assert bound.code == 0, bound.err
    assert bound.json()["recorded"] == ["0001"]
    assert bound.json()["worktree"]["name"] == "lane"
    wt = Path(task_dir(t["id"]).parent.parent / "workspaces" / t["id"])
    assert (wt / "draft.txt").read_text() == "draft\n" and not lane.exists()
    shown = bar(capfd, "show", "--task", "work", "1", "--json")
    assert shown.code == 0 and "draft.txt" in json.dumps(shown.json())
    assert bar(capfd, "status", "--task", "work").code == 0
    # the worktree keeps its name: keep and remove find it so
    assert bar(capfd, "worktree", "keep", "lane").code == 0
    # a task with recorded work takes only a clean worktree
    assert bar(capfd, "worktree", "remove", "lane").code == 0
    assert bar(capfd, "worktree", "create", "lane2").code == 0
    other = Path(project_dir() / "workspaces" / "lanes" / "lane2")
    (other / "x.txt").write_text("x\n")
    clash = bar(capfd, "task", "bind", "work", "lane2")
    assert clash.code != 0 and "recorded work" in clash.err
    (other / "x.txt").unlink()
    again = bar(capfd, "task", "bind", "work", "lane2")
    assert again.code == 0, again.err
    wt2 = Path(task_dir(t["id"]).parent.parent / "workspaces" / t["id"])
    assert (wt2 / "draft.txt").read_text() == "draft\n"  # its recorded state, checked out
    assert "recorded step" not in again.out
    assert os.path.isdir(wt2)


# --- what a red-team pass found ----------------------------------------------------------


def test_a_worktree_holding_what_no_step_records_is_not_bound(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / ".gitignore").write_text("*.log\n")
    subprocess.run(["git", "add", ".gitignore"], cwd=inited, check=True)
    subprocess.run(["git", "commit", "-qm", "ignore"], cwd=inited, check=True)
    made = bar(capfd, "worktree", "create", "lane", "--json")
    lane = Path(made.json()["path"])
    (lane / "x.log").write_text("ignored\n")
    plan(capfd, "work")
    refused = bar(capfd, "task", "bind", "work", "lane")
    assert refused.code != 0 and "x.log" in refused.err and (lane / "x.log").exists()
    (lane / "x.log").unlink()
    inner = lane / "nested"
    inner.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=inner, check=True)
    (inner / "inner.txt").write_text("inner\n")
    refused = bar(capfd, "task", "bind", "work", "lane")
    assert refused.code != 0 and "nested" in refused.err and (inner / "inner.txt").exists()
    # a `.git` file deeper down, which git shows nowhere, keeps the worktree too
    subprocess.run(["rm", "-rf", str(inner)], check=True)
    (lane / "notes").mkdir()
    (lane / "notes" / ".git").write_text("mine\n")
    assert bar(capfd, "worktree", "remove", "lane").code != 0
    assert (lane / "notes" / ".git").read_text() == "mine\n"


def test_a_bind_stopped_after_the_move_is_finished_by_running_it_again(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    lane = Path(bar(capfd, "worktree", "create", "lane", "--json").json()["path"])
    (lane / "draft.txt").write_text("draft\n")
    t = plan(capfd, "work")
    killed = subprocess.run(
        [BAR_EXE, "task", "bind", "work", "lane"],
        cwd=inited,
        env={**os.environ, "BAR_FAULT_AT": "bind: after moving the worktree"},
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -9
    started = bar(capfd, "task", "start", "work")
    assert started.code != 0 and "bar task bind" in started.err
    again = bar(capfd, "task", "bind", "work", "lane", "--json")
    assert again.code == 0, again.err
    assert again.json()["recorded"] == ["0001"]
    assert (Path(t["worktree"]) / "draft.txt").read_text() == "draft\n"
    assert not (task_dir(t["id"]) / "binding.json").exists()
    assert bar(capfd, "status", "--task", "work").code == 0


def test_a_stopped_start_is_run_again_whatever_it_left(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = plan(capfd, "job")
    assert bar(capfd, "task", "start", "job").code == 0
    assert bar(capfd, "run", "--task", "job", "--", "sh", "-c", "echo work > w.txt").code == 0
    assert bar(capfd, "worktree", "remove", "job").code == 0
    # what a start killed while writing a file leaves: its mark and a file cut short
    place = Path(t["worktree"])
    place.mkdir(parents=True)
    (place / "w.txt").write_text("wo")
    (task_dir(t["id"]) / "starting").touch()
    assert bar(capfd, "task", "start", "job").code == 0
    assert (place / "w.txt").read_text() == "work\n"
    assert not (task_dir(t["id"]) / "starting").exists()


def test_a_lost_registry_forgets_no_worktree_of_no_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "worktree", "create", "lane").code == 0
    (project_dir() / "workspaces" / "index.json").unlink()
    listed = bar(capfd, "worktree", "list")
    assert "lane" in listed.out and "missing" in listed.err
    assert bar(capfd, "doctor", "--repair").code == 0
    plan(capfd, "work")
    assert bar(capfd, "task", "bind", "work", "lane").code == 0


def test_worktree_names_that_would_name_another_task_are_refused(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a = plan(capfd, "A")
    plan(capfd, "B")
    taken = bar(capfd, "worktree", "create", "A", "--task", "B")
    assert taken.code != 0 and "name of task A" in taken.err
    assert bar(capfd, "worktree", "create", a["id"]).code != 0
    assert bar(capfd, "worktree", "create", "12").code != 0
    for bad in (".hidden", "x.lock", "a..b", "a/b", "x."):
        res = bar(capfd, "worktree", "create", bad)
        assert res.code != 0 and "invalid worktree name" in res.err and "git -c" not in res.err
    assert bar(capfd, "doctor").code == 0
