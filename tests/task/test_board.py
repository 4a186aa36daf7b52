"""The task board (docs/board.md): planned tasks, claim, start, close, the worktree registry,
the event log and what ``bar doctor`` rebuilds of them. Real git, real bar processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, project_dir, run_sh, task_dir

from conftest import git


def plan(capfd: pytest.CaptureFixture[str], name: str, *extra: str) -> dict[str, Any]:
    res = bar(capfd, "task", "new", name, "--plan", "--json", *extra)
    assert res.code == 0, res.err
    data: dict[str, Any] = res.json()
    return data


def task_json(task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((task_dir(task_id) / "task.json").read_text())
    return data


def registry() -> list[dict[str, Any]]:
    data = json.loads((project_dir() / "workspaces" / "index.json").read_text())
    assert set(data) == {"version", "worktrees"}
    entries: list[dict[str, Any]] = data["worktrees"]
    return entries


def events() -> list[dict[str, Any]]:
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def names(task_id: str) -> list[str]:
    return [e["event"] for e in events() if e["task"].get("id") == task_id]


# --- plan, start, run ----------------------------------------------------------------


def test_a_planned_task_has_a_branch_and_no_worktree_and_leaves_the_active_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = new_task(capfd, "first")
    t = plan(capfd, "later", "-d", "do it later")
    rec = task_json(t["id"])
    assert rec["version"] == 1 and rec["status"] == "active"
    assert rec["board"] == {"status": "pending", "owner": "", "worktree": ""}
    assert t["state"] == "pending" and t["worktree_missing"] is False
    assert not Path(t["worktree"]).exists()
    base = git(inited, "rev-parse", "main").strip()
    assert git(inited, "rev-parse", rec["branch"]).strip() == base
    assert git(inited, "rev-parse", rec["snapshot_ref"]).strip() == base
    state = json.loads((project_dir() / "state.json").read_text())
    assert state["active_task_id"] == first["id"]
    assert names(t["id"]) == ["task.created"]
    assert events()[-1]["task"] == {"id": t["id"], "name": "later", "status": "pending"}
    assert events()[-1]["worktree"] == {}
    listed = bar(capfd, "task", "list", "--pending", "--json").json()
    assert [r["id"] for r in listed] == [t["id"]]
    shown = bar(capfd, "task", "show", "later")
    assert "board       pending" in shown.out and "bar task start later" in shown.out
    assert bar(capfd, "status", "--task", "later").code == 0
    assert bar(capfd, "log", "--task", "later").code == 0
    refused = bar(capfd, "undo", "--task", "later")
    assert refused.code == 1 and "planned and has no worktree yet" in refused.err
    assert "bar task start" in refused.err
    assert bar(capfd, "doctor").code == 0


def test_start_makes_the_worktree_from_where_the_base_is_now(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = plan(capfd, "later")
    (inited / "new.txt").write_text("on main since\n")
    git(inited, "add", "new.txt")
    git(inited, "commit", "-qm", "main moved")
    moved = git(inited, "rev-parse", "main").strip()
    res = bar(capfd, "task", "start", "later")
    assert res.code == 0, res.err
    assert "starts from main as it is now" in res.err
    rec = task_json(t["id"])
    assert rec["base_commit"] == moved
    assert rec["board"] == {"status": "in_progress", "owner": "", "worktree": "later"}
    wt = Path(t["worktree"])
    assert (wt / "new.txt").read_text() == "on main since\n"
    assert git(inited, "rev-parse", rec["snapshot_ref"]).strip() == moved
    assert names(t["id"])[-3:] == [
        "worktree.create.before",
        "worktree.create.after",
        "task.started",
    ]
    (entry,) = registry()
    assert entry["task_id"] == t["id"] and entry["status"] == "active"
    assert entry["name"] == "later" and entry["path"] == str(wt)
    assert entry["branch"] == rec["branch"] and isinstance(entry["created_at"], float)
    assert json.loads((project_dir() / "state.json").read_text())["active_task_id"] == t["id"]
    again = bar(capfd, "task", "start", "later")
    assert again.code == 0 and "Already started" in again.out
    assert names(t["id"]).count("task.started") == 1
    # the move is recorded where the task goes (task.json) and in the event log
    assert rec["base_moved"]["from"] == t["base_commit"] and rec["base_moved"]["to"] == moved
    (event,) = [e for e in events() if e["event"] == "task.base_moved"]
    assert event["changed"] == {"base_commit": {"from": t["base_commit"], "to": moved}}
    shown = bar(capfd, "task", "show", "later").out
    assert f"planned on {t['base_commit'][:10]}; main had moved on to {moved[:10]}" in shown


def test_start_never_takes_a_planned_task_back_to_an_older_base(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / "kept.txt").write_text("in the planned base\n")
    git(inited, "add", "kept.txt")
    git(inited, "commit", "-qm", "planned on this")
    t = plan(capfd, "later")
    git(inited, "reset", "-q", "--hard", "HEAD~1")  # main went back (or was rewritten)
    res = bar(capfd, "task", "start", "later")
    assert res.code == 0, res.err
    assert "as it is now" not in res.err
    rec = task_json(t["id"])
    assert rec["base_commit"] == t["base_commit"] and "base_moved" not in rec
    assert (Path(t["worktree"]) / "kept.txt").read_text() == "in the planned base\n"
    assert "task.base_moved" not in names(t["id"])


def test_the_first_run_starts_a_planned_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = plan(capfd, "later")
    res = bar(capfd, "run", "--task", "later", "--", "sh", "-c", "echo hi > hi.txt")
    assert res.code == 0, res.err
    assert "was planned: started it" in res.err
    assert (Path(t["worktree"]) / "hi.txt").read_text() == "hi\n"
    assert [s["step_id"] for s in ledger(t["id"])] == ["0001"]
    assert task_json(t["id"])["board"]["status"] == "in_progress"


# --- claim -----------------------------------------------------------------------------


def test_a_claim_is_taken_once_and_said_to_the_other(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = plan(capfd, "job")
    assert bar(capfd, "task", "claim", "job", "--owner", "agent-a").code == 0
    again = bar(capfd, "task", "claim", "job", "--owner", "agent-a")
    assert again.code == 0
    other = bar(capfd, "task", "claim", "--task", "job", "--owner", "agent-b")
    assert other.code == 1 and "already claimed by agent-a" in other.err
    assert task_json(t["id"])["board"]["owner"] == "agent-a"
    assert names(t["id"]).count("task.claimed") == 1
    listed = bar(capfd, "task", "list")
    assert "@agent-a" in listed.out and "pending" in listed.out
    bad = bar(capfd, "task", "claim", "job", "--owner", " ")
    assert bad.code == 2 and "invalid owner" in bad.err


def test_of_many_concurrent_claimers_exactly_one_wins(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    tasks = [plan(capfd, f"job{i}") for i in range(4)]
    for t in tasks:
        procs = [
            subprocess.Popen(
                [BAR_EXE, "task", "claim", t["id"], "--owner", f"w{n}"],
                cwd=inited,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for n in range(4)
        ]
        results = [
            (p.wait(timeout=120), p.stderr.read().decode() if p.stderr else "") for p in procs
        ]
        won = [n for n, (code, _) in enumerate(results) if code == 0]
        assert len(won) == 1, results
        for code, err in results:
            assert code == 0 or "already claimed by" in err or "busy" in err, err
        assert task_json(t["id"])["board"]["owner"] == f"w{won[0]}"


def test_claim_with_start_starts_it_without_switching(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = new_task(capfd, "first")
    t = plan(capfd, "job")
    res = bar(capfd, "task", "claim", "job", "--owner", "w1", "--start", "--json")
    assert res.code == 0, res.err
    assert res.json()["board"] == {"status": "in_progress", "owner": "w1", "worktree": "job"}
    assert Path(t["worktree"]).is_dir()
    assert json.loads((project_dir() / "state.json").read_text())["active_task_id"] == first["id"]


# --- closing out -----------------------------------------------------------------------


def test_keep_then_close_leaves_the_worktree_and_says_so_everywhere(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "ui-login")
    res = bar(capfd, "worktree", "keep", "ui-login", "--json")
    assert res.code == 0, res.err
    assert res.json()["status"] == "kept" and isinstance(res.json()["kept_at"], float)
    assert bar(capfd, "task", "close", "--task", "ui-login").code == 0
    assert Path(t["worktree"]).is_dir()
    rec = task_json(t["id"])
    assert rec["status"] == "closed"
    assert rec["board"] == {"status": "completed", "owner": "", "worktree": "ui-login"}
    assert names(t["id"])[-2:] == ["worktree.keep", "task.completed"]
    (entry,) = registry()
    assert entry["status"] == "kept"
    listed = bar(capfd, "worktree", "list")
    assert "[kept]" in listed.out and "ui-login" in listed.out
    assert bar(capfd, "doctor").code == 0
    # a kept worktree is removed when asked by name, the task's record left whole
    res = bar(capfd, "worktree", "remove", "ui-login")
    assert res.code == 0, res.err
    assert not Path(t["worktree"]).exists() and registry()[0]["status"] == "removed"
    assert task_json(t["id"])["board"] == {"status": "completed", "owner": "", "worktree": ""}


def test_remove_complete_removes_even_a_worktree_marked_kept(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "both")
    assert bar(capfd, "worktree", "keep", "both").code == 0
    assert bar(capfd, "worktree", "remove", "both", "--complete").code == 0
    assert not Path(t["worktree"]).exists()
    assert registry()[0]["status"] == "removed"
    assert task_json(t["id"])["status"] == "closed"


def test_remove_with_complete_closes_the_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "auth")
    run_sh(capfd, "echo x > x.txt")
    res = bar(capfd, "worktree", "remove", "auth", "--complete", "--json")
    assert res.code == 0, res.err
    assert res.json()["worktree"]["status"] == "removed"
    assert not Path(t["worktree"]).exists()
    rec = task_json(t["id"])
    assert rec["status"] == "closed"
    assert rec["board"] == {"status": "completed", "owner": "", "worktree": ""}
    assert names(t["id"])[-3:] == [
        "worktree.remove.before",
        "worktree.remove.after",
        "task.completed",
    ]
    after = [e for e in events() if e["event"] == "worktree.remove.after"][-1]
    assert after["task"]["status"] == "completed" and after["worktree"]["status"] == "removed"
    assert bar(capfd, "worktree", "list").out.startswith("No worktrees.")
    assert "[removed]" in bar(capfd, "worktree", "list", "--all").out


def test_remove_without_complete_returns_the_task_to_pending_and_start_restores_it(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "wip")
    run_sh(capfd, "echo kept > work.txt")
    wt = Path(t["worktree"])
    (wt / "hand.txt").write_text("by hand\n")
    refused = bar(capfd, "worktree", "remove", "wip")
    assert refused.code == 5 and "no step recorded" in refused.err and wt.is_dir()
    res = bar(capfd, "worktree", "remove", "wip", "--force")
    assert res.code == 0, res.err
    assert "Recorded step 0002 (manual)" in res.out
    assert not wt.exists()
    assert task_json(t["id"])["board"] == {"status": "pending", "owner": "", "worktree": ""}
    assert json.loads((project_dir() / "state.json").read_text())["active_task_id"] is None
    assert bar(capfd, "task", "start", "wip").code == 0
    assert (wt / "work.txt").read_text() == "kept\n"
    assert (wt / "hand.txt").read_text() == "by hand\n"
    assert bar(capfd, "status", "--json").json()["unrecorded_changes"] is False
    assert registry()[0]["status"] == "active"


def test_a_step_cannot_be_closed_from_under_it_and_task_actions_take_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "one")
    both = bar(capfd, "task", "close", "one", "--task", "two")
    assert both.code == 2 and "two tasks were named" in both.err
    none = bar(capfd, "task", "reopen")
    assert none.code == 2 and "needs the task" in none.err
    assert bar(capfd, "task", "close", "--task", "one").code == 0
    assert bar(capfd, "task", "reopen", "--task", "one").code == 0
    assert bar(capfd, "task", "show", "--task", "one").code == 0


# --- events ------------------------------------------------------------------------------


def test_bar_events_reads_old_lines_bad_lines_and_follows(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = project_dir() / "events.jsonl"
    old = {
        "version": 1,
        "ts": "2024-01-15T10:00:00.000Z",
        "event": "worktree.created",
        "task_id": "AbCdEfGh",
        "path": "/x",
        "branch": "bar/x-AbCdEfGh",
    }
    with log.open("a") as f:
        f.write(json.dumps(old) + "\n" + "{torn\n")
    t = new_task(capfd, "live")
    shown = bar(capfd, "events", "-n", "6", "--json").json()
    migrated = next(e for e in shown if e["task"].get("id") == "AbCdEfGh")
    assert migrated["event"] == "worktree.create.after"
    assert migrated["ts"] == 1705312800.0
    assert migrated["worktree"] == {"path": "/x", "branch": "bar/x-AbCdEfGh", "status": "active"}
    assert {"event": "parse_error", "raw": "{torn"} in shown
    assert shown[-1]["event"] == "worktree.create.after" and shown[-1]["task"]["id"] == t["id"]
    text = bar(capfd, "events", "-n", "2")
    assert "worktree.create.after" in text.out and "live" in text.out
    follower = subprocess.Popen(
        [BAR_EXE, "events", "--follow", "--json", "-n", "1"],
        cwd=inited,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        # the last event, shown once it knows where the log ends: what follows comes after
        last = json.loads(follower.stdout.readline())
        assert last["event"] == "worktree.create.after" and last["task"]["id"] == t["id"]
        assert bar_exe("task", "new", "later", "--plan", cwd=inited).code == 0
        line = follower.stdout.readline()
        assert json.loads(line)["event"] == "task.created"
    finally:
        follower.kill()
        follower.wait()


# --- crashes and doctor ---------------------------------------------------------------


def test_doctor_rebuilds_the_registry_and_the_board_from_disk(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a = new_task(capfd, "a")
    b = new_task(capfd, "b")
    assert bar(capfd, "worktree", "keep", "b").code == 0
    assert bar(capfd, "task", "close", "a").code == 0
    c = plan(capfd, "c")
    want = registry()
    index = project_dir() / "workspaces" / "index.json"
    index.write_text("{garbled")
    rec = task_json(b["id"])
    rec["board"] = {"status": "completed", "owner": "", "worktree": ""}
    (task_dir(b["id"]) / "task.json").write_text(json.dumps(rec))
    Path(c["worktree"]).mkdir(parents=True)  # as a stopped `bar task start` leaves it
    found = bar(capfd, "doctor", "--json").json()
    messages = " ".join(f["message"] for f in found["findings"])
    assert "worktree registry" in messages
    assert "has board" in messages
    assert "stopped `bar task start`" in messages
    fixed = bar(capfd, "doctor", "--repair")
    assert fixed.code == 0, fixed.out + fixed.err
    got = {e["task_id"]: e["status"] for e in registry()}
    assert got == {a["id"]: "removed", b["id"]: "kept"}  # (b's "kept": from the event log)
    assert {e["task_id"] for e in want} == set(got)
    assert task_json(b["id"])["board"]["status"] == "in_progress"
    assert not Path(c["worktree"]).exists()
    assert bar(capfd, "doctor", "--json").json()["findings"] == []
    assert bar(capfd, "task", "start", "c").code == 0


def test_a_task_json_of_an_older_bar_gets_its_board_from_its_status(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    open_ = new_task(capfd, "open")
    closed = new_task(capfd, "kept")
    assert bar(capfd, "task", "close", "kept", "--keep-worktree").code == 0
    for t in (open_, closed):
        rec = task_json(t["id"])
        del rec["board"]
        (task_dir(t["id"]) / "task.json").write_text(json.dumps(rec))
    rows = {r["name"]: r for r in bar(capfd, "task", "list", "--all", "--json").json()}
    assert rows["open"]["board"] == {"status": "in_progress", "owner": "", "worktree": "open"}
    assert rows["kept"]["board"] == {"status": "completed", "owner": "", "worktree": "kept"}
    assert bar(capfd, "doctor").code == 0
    assert bar(capfd, "task", "switch", "open").code == 0
    run_sh(capfd, "echo x > x")
    assert "board" not in task_json(open_["id"])  # a step does not rewrite task.json
    assert bar(capfd, "task", "claim", "open", "--owner", "me").code == 0
    rec = task_json(open_["id"])
    assert rec["version"] == 1 and rec["board"]["owner"] == "me"


def test_a_task_json_version_2_of_an_earlier_bar_is_read_and_written_back_as_1(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # version 2 was version 1 with `board` beside the seed's keys: retired, read as 1
    t = new_task(capfd, "two")
    rec = task_json(t["id"])
    rec["version"] = 2
    rec["board"]["owner"] = "agent-a"
    (task_dir(t["id"]) / "task.json").write_text(json.dumps(rec))
    shown = bar(capfd, "task", "show", "two", "--json").json()
    assert shown["board"] == {"status": "in_progress", "owner": "agent-a", "worktree": "two"}
    assert bar(capfd, "task", "edit", "two", "-d", "read back").code == 0
    rec = task_json(t["id"])
    assert rec["version"] == 1 and rec["board"]["owner"] == "agent-a"
    rec["version"] = 3  # the next change a version-1 reader cannot read
    (task_dir(t["id"]) / "task.json").write_text(json.dumps(rec))
    res = bar(capfd, "task", "show", t["id"])
    assert res.code != 0 and "unsupported task.json version 3" in res.err
