"""bar apply never writes into another task's worktree.

A task may be created from another task's branch (``bar task new b --base bar/a-<id>``).
That branch is checked out in the other task's worktree, where its agent works: landing
there would rewrite the other task's files (and, while its step runs, be recorded as part
of that step). So it is never the default target, and no target checked out in a task's
worktree is accepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import bar, files_on_disk, ledger, new_task, run_sh, worktree

from conftest import git


def stacked(capfd: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Task a with a commit of its agent on its branch, and task b created from that
    branch, with work of its own recorded."""
    a = new_task(capfd, "a")
    run_sh(capfd, "echo a > a.txt && git add a.txt && git commit -qm 'a: first'")
    b = new_task(capfd, "b", "--base", a["branch"])
    run_sh(capfd, "echo b > b.txt")
    return a, b


def test_a_task_from_another_tasks_branch_lands_on_the_default_base(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a, b = stacked(capfd)
    a_tip = git(inited_clean, "rev-parse", a["branch"]).strip()
    a_files = files_on_disk(worktree(a))
    dry = bar(capfd, "apply", "--dry-run", "--json")
    assert dry.code == 0 and dry.json()["target_branch"] == "main"
    assert dry.json()["checkout"] == str(inited_clean)
    # sync prepares the apply: by default it merges the same branch in
    assert bar(capfd, "task", "sync", "--dry-run", "--json").json()["onto"] == "main"
    res = bar(capfd, "apply", "-m", "b's work")
    assert res.code == 0, res.err
    assert "to main as" in res.out and f"updated the checkout at {inited_clean}" in res.out
    # task a: its branch, its worktree and its record exactly as they were
    assert git(inited_clean, "rev-parse", a["branch"]).strip() == a_tip
    assert files_on_disk(worktree(a)) == a_files and not (worktree(a) / "b.txt").exists()
    assert git(worktree(a), "status", "--porcelain") == ""
    assert [s["kind"] for s in ledger(a["id"])] == ["run"]
    # main got b's work, on top of the work of a it was built on
    assert git(inited_clean, "show", "main:b.txt") == "b\n"
    assert (inited_clean / "b.txt").read_text() == "b\n"
    assert ledger(b["id"])[-1]["target_branch"] == "main"


@pytest.mark.parametrize("dry", [False, True])
def test_a_target_checked_out_in_a_task_worktree_is_refused(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], dry: bool
) -> None:
    a, b = stacked(capfd)
    a_tip = git(inited_clean, "rev-parse", a["branch"]).strip()
    a_files = files_on_disk(worktree(a))
    res = bar(capfd, "apply", "--target", a["branch"], *(["--dry-run"] if dry else []))
    assert res.code == 1
    assert res.err.splitlines() == [
        f"bar: {a['branch']} is checked out in the worktree of task a ({a['id']}) at "
        f"{worktree(a)}; bar never writes into another task's worktree; nothing was changed",
        "hint: land it on another branch with --target BRANCH (your checkout's, e.g. main), "
        f"or apply task a ({a['id']}) first and then this one",
    ]
    assert git(inited_clean, "rev-parse", a["branch"]).strip() == a_tip
    assert files_on_disk(worktree(a)) == a_files
    assert [s["kind"] for s in ledger(b["id"])] == ["run"]
    # its own branch too: the task's worktree is no place to land either
    assert bar(capfd, "apply", "--target", b["branch"]).code == 1


def test_a_task_branch_no_worktree_holds_may_still_be_named(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Once task a is closed (its worktree removed), its branch is a branch like any
    other: named with --target it is moved by compare-and-swap; never by default."""
    a, _b = stacked(capfd)
    assert bar(capfd, "task", "close", a["id"]).code == 0
    assert not worktree(a).exists()
    assert bar(capfd, "apply", "--dry-run", "--json").json()["target_branch"] == "main"
    res = bar(capfd, "apply", "--target", a["branch"], "-m", "onto a")
    assert res.code == 0, res.err
    assert git(inited_clean, "show", f"{a['branch']}:b.txt") == "b\n"


def test_sync_onto_another_tasks_branch_stays_possible_when_asked(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A sync only reads the branch it merges in: onto a's branch, named, it brings a's
    new commits into b and leaves task a alone."""
    a, b = stacked(capfd)
    bar(capfd, "task", "switch", a["id"])
    run_sh(capfd, "echo more >> a.txt && git commit -qam 'a: more'")
    a_files = files_on_disk(worktree(a))
    bar(capfd, "task", "switch", b["id"])
    res = bar(capfd, "task", "sync", "--onto", a["branch"])
    assert res.code == 0, res.err
    assert (worktree(b) / "a.txt").read_text() == "a\nmore\n"
    assert (worktree(b) / "b.txt").read_text() == "b\n"
    assert files_on_disk(worktree(a)) == a_files
