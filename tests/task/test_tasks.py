"""Tasks: task.json, names, list/show/switch and close, on real repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bar, bar_exe, ledger, new_task, project_dir, task_dir, worktree

from conftest import git

# --- init ----------------------------------------------------------------------------


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    # Policy is exercised in its own tests; keep the core loop independent of it.
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    return repo


def test_task_new_writes_task_json_exactly(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd, "fix-bug", "-d", "Fix the bug", "--tag", "bug", "--tag", "urgent")
    rec = json.loads((task_dir(t["id"]) / "task.json").read_text())
    assert set(rec) == {
        "version",
        "id",
        "name",
        "repo_root",
        "base_ref",
        "base_commit",
        "branch",
        "workspace_path",
        "status",
        "created_at",
        "updated_at",
        "closed_at",
        "metadata",
        "snapshot_ref",
        "board",
    }
    assert rec["version"] == 1  # the seed's: bar's keys are additions (docs/storage.md)
    assert rec["board"] == {"status": "in_progress", "owner": "", "worktree": "fix-bug"}
    assert len(rec["id"]) == 8 and all(c.isalnum() or c in "_-" for c in rec["id"])
    assert rec["name"] == "fix-bug"
    assert rec["repo_root"] == str(inited.resolve())
    assert rec["base_ref"] == "main"
    assert rec["base_commit"] == git(inited, "rev-parse", "main").strip()
    assert rec["branch"] == f"bar/fix-bug-{rec['id']}"
    assert rec["workspace_path"] == f"workspaces/{rec['id']}"
    assert rec["status"] == "active" and rec["closed_at"] is None
    assert rec["metadata"] == {"description": "Fix the bug", "tags": ["bug", "urgent"]}
    assert rec["snapshot_ref"] == f"refs/bar/tasks/{rec['id']}"
    assert (project_dir() / rec["workspace_path"] / "README.md").exists()
    state = json.loads((project_dir() / "state.json").read_text())
    assert state["active_task_id"] == rec["id"]
    events = [json.loads(x) for x in (project_dir() / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[-3:] == ["worktree.create.before", "task.created", "worktree.create.after"]
    assert all(isinstance(e["ts"], float) for e in events[-3:])
    assert git(inited, "rev-parse", rec["snapshot_ref"]).strip() == rec["base_commit"]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a/b", "slash"),
        ("a..b", "'..'"),
        ("has space", "whitespace"),
        ("tab\there", "whitespace"),
        ("ctl\x01", "control"),
        ("x" * 65, "at most 64"),
        ("", "empty"),
        ("-flag", "starts with"),
    ],
)
def test_task_names_are_validated(
    inited: Path, capfd: pytest.CaptureFixture[str], name: str, problem: str
) -> None:
    res = bar(capfd, "task", "new", "--", name)
    assert res.code == 2
    assert problem in res.err
    assert not (project_dir() / "tasks").exists() or not any((project_dir() / "tasks").iterdir())


def test_task_list_show_switch(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    a = new_task(capfd, "alpha")
    b = new_task(capfd, "beta")
    rows = bar(capfd, "task", "list", "--json").json()
    assert [r["name"] for r in rows] == ["alpha", "beta"]
    assert [r["active"] for r in rows] == [False, True]
    assert bar(capfd, "task", "switch", "alpha").code == 0
    shown = bar(capfd, "task", "show", "--json").json()
    assert shown["id"] == a["id"]
    human = bar(capfd, "task", "list").out
    assert "alpha" in human and "beta" in human and b["id"] in human
    res = bar(capfd, "task", "switch", "nope")
    assert res.code == 3 and "no task" in res.err


def test_close_removes_worktree_keeps_branch_and_history(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "closing")
    wt = worktree(t)
    assert bar(capfd, "run", "--", "sh", "-c", "echo hi > new.txt").code == 0
    (wt / "hand.txt").write_text("edited by hand\n")
    res = bar(capfd, "task", "close")
    assert res.code == 5 and "--force" in res.err
    assert wt.exists()
    res = bar(capfd, "task", "close", "--force")
    assert res.code == 0, res.err
    assert not wt.exists()
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["run", "manual"]
    assert "hand.txt" in steps[1]["diff_stat"]["file_list"]
    assert git(inited, "rev-parse", "--verify", t["branch"]).strip()
    snap = git(inited, "rev-parse", t["snapshot_ref"]).strip()
    assert git(inited, "show", f"{snap}:hand.txt") == "edited by hand\n"
    rec = json.loads((task_dir(t["id"]) / "task.json").read_text())
    assert rec["status"] == "closed" and rec["closed_at"]
    events = [
        json.loads(x)["event"] for x in (project_dir() / "events.jsonl").read_text().splitlines()
    ]
    assert events[-3:] == ["worktree.remove.before", "worktree.remove.after", "task.completed"]
    assert json.loads((project_dir() / "state.json").read_text())["active_task_id"] is None


# --- run -----------------------------------------------------------------------------


def test_switch_inside_another_tasks_worktree_says_which_task_commands_there_act_on(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a = new_task(capfd, "alpha")
    b = new_task(capfd, "beta")
    inside = worktree(a)
    res = bar_exe("task", "switch", "beta", cwd=inside)
    assert res.code == 0 and res.out.startswith("Active task: beta")
    assert res.err == (
        f"note: you are in the worktree of task alpha ({a['id']}); commands here act on it, "
        "not on beta (cd elsewhere, or pass --task beta)\n"
    )
    # as the note says: alpha here, beta from the checkout
    assert bar_exe("status", "--json", cwd=inside).json()["task"]["id"] == a["id"]
    assert bar_exe("status", "--json", cwd=inited).json()["task"]["id"] == b["id"]
    # no note where the active task is the one you are in, or in the checkout
    assert bar_exe("task", "switch", "alpha", cwd=inside).err == ""
    assert bar_exe("task", "switch", "beta", cwd=inited).err == ""
    made = bar_exe("task", "new", "gamma", "--json", cwd=inside)
    assert made.code == 0 and "commands here act on it, not on gamma" in made.err
