"""``bar task rename``: a task takes another name; its id, branch and worktree stay, the
rename is an event, and a name that would clash is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bar, new_task, project_dir, run_sh, task_dir


def events(kind: str) -> list[dict[str, object]]:
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def test_a_task_takes_another_name(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd, "fix-login")
    run_sh(capfd, "echo a > a.txt")
    res = bar(capfd, "task", "rename", "fix-login", "fix-auth")
    assert res.code == 0, res.err
    assert res.out.startswith(f"Renamed task fix-login ({t['id']}) to fix-auth\n")
    assert f"bar/fix-login-{t['id']}" in res.out  # the branch keeps its name
    stored = json.loads((task_dir(str(t["id"])) / "task.json").read_text())
    assert stored["name"] == "fix-auth" and stored["branch"] == t["branch"]
    assert stored["workspace_path"] == t["workspace_path"]
    shown = bar(capfd, "task", "show", "fix-auth", "--json").json()
    assert shown["id"] == t["id"] and shown["steps"] == 1
    assert bar(capfd, "log", "--task", "fix-auth").code == 0
    gone = bar(capfd, "task", "show", "fix-login")
    assert gone.code == 3 and "no task with id or name 'fix-login'" in gone.err
    (renamed,) = events("task.renamed")
    assert renamed["task"]["id"] == t["id"]
    assert renamed["changed"] == {"name": {"from": "fix-login", "to": "fix-auth"}}
    assert "task.renamed" in bar(capfd, "events").out
    # one name: the active task; --json: the task and the name it had
    again = bar(capfd, "task", "rename", "fix-auth-redirect", "--json")
    assert again.code == 0, again.err
    assert again.json()["name"] == "fix-auth-redirect" and again.json()["was"] == "fix-auth"
    by_option = bar(capfd, "task", "rename", "--task", "fix-auth-redirect", "login")
    assert by_option.code == 0 and "to login" in by_option.out
    assert "login" in bar(capfd, "task", "list").out


def test_a_name_that_would_clash_is_refused(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    one = new_task(capfd, "one")
    new_task(capfd, "two")
    for args, said, code in (
        (["one", "two"], "an open task is already named 'two'", 2),
        (["one", "one"], "is already named 'one'", 2),
        (["one", "a b"], "invalid task name 'a b': it contains whitespace", 2),
        (["one", "x/y"], "it contains a slash", 2),
        (["two", str(one["id"])[:5]], f"starts the id of task {one['id']}", 2),
        (["nobody", "three"], "no task with id or name 'nobody'", 3),
    ):
        res = bar(capfd, "task", "rename", *args)
        assert res.code == code and said in res.err and "hint:" in res.err, (args, res.err)
    assert not events("task.renamed")
    names = sorted(t["name"] for t in bar(capfd, "task", "list", "--json").json())
    assert names == ["one", "two"]
    # a closed task's name is free for an open one, as with bar task new
    assert bar(capfd, "task", "close", "two").code == 0
    assert bar(capfd, "task", "rename", "one", "two").code == 0
    assert bar(capfd, "task", "rename", "x", "y", "z").code == 2
