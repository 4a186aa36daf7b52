"""Naming a task: one open task per name, a closed task's name free again, and a task
found by its id, its name or the first characters of its id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import bar, new_task, project_dir, task_dir

from bar.model import journals
from bar.model.journals import CreateIntent
from bar.store.layout import TaskPaths
from conftest import git


def test_a_second_open_task_of_the_same_name_is_refused(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = new_task(capfd, "fix-login")
    res = bar(capfd, "task", "new", "fix-login")
    assert res.code == 1  # not a bad command line: it works once the other is closed
    assert f"an open task is already named 'fix-login' ({first['id']})" in res.err
    assert "hint: pick another name, or close that task first" in res.err
    assert f"bar task close {first['id']}" in res.err
    rows = bar(capfd, "task", "list", "--all", "--json").json()
    assert [r["id"] for r in rows] == [first["id"]]  # nothing was made
    # the name still finds the one task
    assert bar(capfd, "task", "show", "fix-login", "--json").json()["id"] == first["id"]


def test_a_closed_tasks_name_is_free_and_the_open_one_wins(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    old = []
    for _ in range(2):
        old.append(new_task(capfd, "again"))
        assert bar(capfd, "task", "close", "again").code == 0
    fresh = new_task(capfd, "again")
    assert len({t["id"] for t in [*old, fresh]}) == 3
    for cmd in (("task", "show", "again"), ("status", "--task", "again"), ("log", "-t", "again")):
        res = bar(capfd, *cmd, "--json")
        assert res.code == 0, res.err
    assert bar(capfd, "task", "show", "again", "--json").json()["id"] == fresh["id"]
    assert bar(capfd, "status", "--task", "again", "--json").json()["task"]["id"] == fresh["id"]


def test_reopening_a_closed_task_whose_name_was_taken_again_is_refused(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    old = new_task(capfd, "dup")
    assert bar(capfd, "task", "close", "dup").code == 0
    fresh = new_task(capfd, "dup")
    for ref in ("dup", old["id"]):
        res = bar(capfd, "task", "reopen", ref)
        assert res.code == 1, res.err
        assert f"an open task is already named 'dup' ({fresh['id']})" in res.err
        assert f"hint: close that task first (`bar task close {fresh['id']}`)" in res.err
        assert f"`bar task reopen {old['id']}` again" in res.err
    # nothing changed: the old one is closed, without a worktree; the name finds the new one
    rows = {r["id"]: r for r in bar(capfd, "task", "list", "--all", "--json").json()}
    assert rows[old["id"]]["status"] == "closed" and rows[fresh["id"]]["status"] == "active"
    assert not Path(old["worktree"]).exists()
    for cmd in (("task", "show", "dup"), ("task", "switch", "dup")):
        res = bar(capfd, *cmd, "--json")
        assert res.code == 0 and res.json()["id"] == fresh["id"], res.err
    res = bar(capfd, "task", "switch", old["id"])
    assert res.code == 1 and "is closed" in res.err and f"bar task reopen {old['id']}" in res.err
    # once the new one is closed, the old one comes back under its name
    assert bar(capfd, "task", "close", "dup").code == 0
    assert bar(capfd, "task", "reopen", old["id"]).code == 0
    assert bar(capfd, "task", "show", "dup", "--json").json()["id"] == old["id"]
    assert bar(capfd, "task", "close", "dup").code == 0


def test_several_closed_tasks_of_a_name_are_listed_by_id(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for _ in range(2):
        ids.append(new_task(capfd, "spike")["id"])
        assert bar(capfd, "task", "close", "spike").code == 0
    res = bar(capfd, "task", "show", "spike")
    assert res.code == 2
    assert "2 closed tasks are named 'spike'" in res.err
    for task_id in ids:
        assert f"{task_id} (spike, closed)" in res.err
    assert "hint: give the task's id" in res.err
    # one closed task of a name is found by it
    assert bar(capfd, "task", "show", ids[0], "--json").json()["status"] == "closed"


def test_duplicates_made_before_names_were_unique_are_told_apart(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a = new_task(capfd, "one")
    b = new_task(capfd, "two")
    path = task_dir(b["id"]) / "task.json"  # as an older bar let happen
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "name": "one"}))
    res = bar(capfd, "log", "--task", "one")
    assert res.code == 2
    assert "2 open tasks are named 'one'" in res.err
    assert a["id"] in res.err and b["id"] in res.err


def test_the_first_characters_of_an_id_find_the_task(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "prefixed")
    other = new_task(capfd, "other")
    for n in (4, 5, 7, 8):
        res = bar(capfd, "task", "show", t["id"][:n], "--json")
        assert res.code == 0, (n, res.err)
        assert res.json()["id"] == t["id"]
    assert bar(capfd, "status", "-t", other["id"][:4], "--json").json()["task"]["id"] == other["id"]
    assert bar(capfd, "task", "switch", t["id"][:4]).code == 0
    assert bar(capfd, "task", "show", "--json").json()["id"] == t["id"]


def test_too_short_a_prefix_is_not_taken_but_named_in_the_hint(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "short")
    res = bar(capfd, "task", "show", t["id"][:3])
    assert res.code == 3
    assert f"no task with id or name {t['id'][:3]!r}" in res.err
    assert "first 4 characters or more" in res.err and t["id"] in res.err


def test_an_ambiguous_prefix_lists_the_candidates(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a = new_task(capfd, "alpha")
    b = new_task(capfd, "beta")
    # give two tasks ids that share their first four characters, as chance can
    for old, new in ((a["id"], "Zq9x" + a["id"][4:]), (b["id"], "Zq9x" + b["id"][4:])):
        src = task_dir(old)
        rec = json.loads((src / "task.json").read_text())
        dest = src.parent / new
        src.rename(dest)
        rec.update(id=new, workspace_path=f"workspaces/{new}", snapshot_ref=f"refs/bar/tasks/{new}")
        (dest / "task.json").write_text(json.dumps(rec))
    res = bar(capfd, "task", "show", "Zq9x")
    assert res.code == 2
    assert "2 task ids start with 'Zq9x'" in res.err
    assert "Zq9x" + a["id"][4:] in res.err and "Zq9x" + b["id"][4:] in res.err
    assert "hint: give more characters of the id" in res.err
    one_more = "Zq9x" + b["id"][4]
    if a["id"][4] != b["id"][4]:
        assert bar(capfd, "task", "show", one_more, "--json").json()["name"] == "beta"


def test_an_unknown_reference_names_what_is_accepted(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "real")
    res = bar(capfd, "task", "switch", "1")
    assert res.code == 3
    assert "bar: no task with id or name '1'" in res.err
    assert "numbered" not in res.err
    # (the hint also names the task whose random id happens to start with "1")
    assert "`bar task list --all` shows every task" in res.err


def test_a_name_that_is_another_tasks_id_prefix_is_ambiguous_and_a_full_id_wins(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "first")
    named = new_task(capfd, t["id"][:5])  # a task named like the start of another's id
    res = bar(capfd, "task", "show", t["id"][:5], "--json")
    assert res.code == 2 and t["id"] in res.err and named["id"] in res.err
    assert bar(capfd, "task", "show", named["id"], "--json").json()["id"] == named["id"]
    assert bar(capfd, "task", "show", t["id"], "--json").json()["id"] == t["id"]


def test_a_name_a_live_task_new_is_making_is_taken(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Two `bar task new` of one name at once: the second sees the first's intent (its
    task.json is not written yet) while the first holds the task's lock."""
    paths = TaskPaths(project_dir() / "tasks" / "Mk1ngAbC")
    paths.dir.mkdir(parents=True)
    base = git(inited_clean, "rev-parse", "HEAD").strip()
    journals.CREATE.write(
        paths,
        CreateIntent("Mk1ngAbC", "racing", "bar/racing-Mk1ngAbC", base, "2024-01-15T10:00:00Z"),
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            f"f = open({str(paths.lock)!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('held', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        res = bar(capfd, "task", "new", "racing")
        assert res.code == 1
        assert "an open task is already named 'racing' (Mk1ngAbC)" in res.err
    finally:
        holder.kill()
        holder.wait()
    # its maker died: the half-made task is cleared and the name is free
    made = new_task(capfd, "racing")
    assert made["id"] != "Mk1ngAbC" and not paths.dir.exists()
