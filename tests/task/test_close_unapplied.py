"""``bar task close`` (and ``bar worktree remove --complete``) says what of the task's work
no branch has yet, with the ``bar apply`` command that lands it; ``--json`` has it as
``unapplied``. Applied work, no work, and work a branch holds already say nothing. Real
repositories and real ``bar apply``; the command the close gives is run as given."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import jsonshape
import pytest
from helpers import bar, bar_exe, new_task, run_sh

from conftest import git


def closed_json(capfd: pytest.CaptureFixture[str], *args: str) -> Any:
    res = bar(capfd, "task", "close", *args, "--json")
    assert res.code == 0, res.err
    out = res.json()
    defs = {k: v for k, v in jsonshape.shapes().items() if k.startswith("$")}
    jsonshape.check(out, jsonshape.shapes()["bar task close --json"], defs, "bar task close")
    return out


def run_given(capfd: pytest.CaptureFixture[str], command: str) -> None:
    """Run the ``bar ...`` command line a close gave, as a person would paste it."""
    words = shlex.split(command)
    assert words[0] == "bar", command
    res = bar(capfd, *words[1:])
    assert res.code == 0, (command, res.err)


def test_close_says_what_is_not_applied_and_the_command_that_lands_it(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "login")
    run_sh(capfd, "echo fix > auth.py")
    run_sh(capfd, "echo test > test_auth.py; echo changed > README.md")
    res = bar(capfd, "task", "close")
    assert res.code == 0, res.err
    assert "Closed task login" in res.out
    said = res.out.splitlines()
    assert "  not applied: main does not have its work (3 files +3 -1: README.md, auth.py, " in (
        res.out
    )
    assert any("from steps 0001, 0002)" in line for line in said), res.out
    assert f"  land it: bar apply --task {t['id']}" in said

    # what it names lands it: the task is applied from its record
    run_given(capfd, f"bar apply --task {t['id']}")
    assert (inited_clean / "auth.py").read_text() == "fix\n"


def test_the_json_of_a_close_has_unapplied_and_null_once_applied(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "login")
    run_sh(capfd, "echo fix > auth.py")
    out = closed_json(capfd)
    work = out["unapplied"]
    assert work["target_branch"] == "main" and work["steps"] == ["0001"]
    assert work["diff_stat"]["file_list"] == ["auth.py"] and work["applied_step"] is None
    assert work["conflicts"] == [] and work["command"] == f"bar apply --task {t['id']}"
    run_given(capfd, work["command"])
    assert bar(capfd, "task", "reopen", t["id"]).code == 0
    out = closed_json(capfd)
    assert out["unapplied"] is None and out["state"] == "closed"
    assert "not applied" not in bar(capfd, "task", "show", t["id"]).out


def test_applied_work_no_work_and_work_merged_by_hand_say_nothing(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "applied")
    run_sh(capfd, "echo a > a.txt")
    assert bar(capfd, "apply").code == 0
    res = bar(capfd, "task", "close")
    assert res.code == 0 and "not applied" not in res.out, res.out

    new_task(capfd, "nothing")
    run_sh(capfd, "true")
    assert closed_json(capfd)["unapplied"] is None

    new_task(capfd, "by-hand")
    run_sh(capfd, "echo h > h.txt")
    (inited_clean / "h.txt").write_text("h\n")  # the same change, landed by hand
    git(inited_clean, "add", "h.txt")
    git(inited_clean, "commit", "-qm", "by hand")
    assert closed_json(capfd)["unapplied"] is None


def test_work_added_since_an_apply_names_those_steps_and_that_branch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "login")
    run_sh(capfd, "echo one > one.txt")
    assert bar(capfd, "apply", "--target", "review", "--create").code == 0  # step 0002
    run_sh(capfd, "echo two > two.txt")
    run_sh(capfd, "true")  # changes nothing: not named
    run_sh(capfd, "echo three > three.txt")
    res = bar(capfd, "task", "close")
    assert res.code == 0, res.err
    assert "not applied: review does not have its work (2 files +2 -0: three.txt, two.txt" in (
        res.out
    )
    assert "from steps 0003, 0005 since the apply of step 0002)" in res.out
    command = f"bar apply --task {t['id']} --target review"
    assert f"  land it: {command}" in res.out.splitlines()
    run_given(capfd, command)
    assert git(inited_clean, "show", "review:three.txt") == "three\n"


def test_worktree_remove_complete_says_it_too(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "login")
    run_sh(capfd, "echo fix > auth.py")
    res = bar_exe("worktree", "remove", "login", "--complete", cwd=inited_clean)
    assert res.code == 0, res.err
    assert "is completed" in res.out
    assert "not applied: main does not have its work (1 file +1 -0: auth.py; from step 0001)" in (
        res.out
    )
    assert f"land it: bar apply --task {t['id']}" in res.out

    new_task(capfd, "other")
    run_sh(capfd, "echo o > o.txt")
    removed = bar(capfd, "worktree", "remove", "other", "--json")  # not closed: not said
    assert removed.code == 0 and removed.json()["unapplied"] is None
    done = bar(capfd, "worktree", "remove", "other", "--complete", "--json")  # now closed
    assert done.code == 0, done.err
    defs = {k: v for k, v in jsonshape.shapes().items() if k.startswith("$")}
    shape = jsonshape.shapes()["bar worktree remove --json"]
    jsonshape.check(done.json(), shape, defs, "bar worktree remove")
    assert done.json()["task"]["state"] == "closed"
    assert done.json()["unapplied"]["diff_stat"]["file_list"] == ["o.txt"]
