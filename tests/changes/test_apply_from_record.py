"""Apply needs no worktree: a task whose worktree was removed (``bar worktree remove``:
pending again) or is gone lands what its record holds, as a closed task does. And a
target branch that does not exist is made by ``--create`` (at the task's base, or at the
ref given), in the same compare-and-swap that lands the apply; without it the refusal
names the command that works."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, bar_exe, ledger, new_task, run_sh, worktree

from conftest import git


def worked(capfd: pytest.CaptureFixture[str], name: str = "work") -> dict[str, object]:
    t = new_task(capfd, name)
    run_sh(capfd, "echo feature > feature.txt; echo changed > README.md")
    return t


def test_a_task_whose_worktree_was_removed_applies_from_its_record(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked(capfd)
    snapshot = ledger(str(t["id"]))[-1]["snapshot"]
    removed = bar(capfd, "worktree", "remove", "work")
    assert removed.code == 0, removed.err
    assert not worktree(t).exists()
    assert bar(capfd, "task", "show", "work", "--json").json()["state"] == "pending"
    before = git(inited_clean, "rev-parse", "main").strip()

    dry = bar(capfd, "apply", "--task", "work", "--dry-run")
    assert dry.code == 0, dry.err
    assert "would change 2 files +2 -1; no conflicts" in dry.out and "feature.txt" in dry.out
    assert "could not be stored" not in dry.err and "free space" not in dry.err
    as_json = bar(capfd, "apply", "--task", "work", "--dry-run", "--json")
    assert as_json.code == 0, as_json.err
    assert as_json.json()["diff_stat"]["files"] == 2 and as_json.json()["refusal"] is None
    assert git(inited_clean, "rev-parse", "main").strip() == before
    assert not worktree(t).exists()  # a dry run makes no worktree either

    res = bar(capfd, "apply", "--task", "work", "-m", "Land it")
    assert res.code == 0, res.err
    assert "Applied task work to main" in res.out
    assert git(inited_clean, "rev-parse", "main^{tree}") == git(
        inited_clean, "rev-parse", f"{snapshot}^{{tree}}"
    )
    assert (inited_clean / "feature.txt").read_text() == "feature\n"  # the checkout too
    step = ledger(str(t["id"]))[-1]
    assert step["kind"] == "apply" and step["snapshot"] == snapshot
    assert not worktree(t).exists()  # applied without making one
    shown = bar(capfd, "task", "show", "work", "--json").json()
    assert shown["state"] == "pending" and shown["board"]["status"] == "pending"


def test_a_task_whose_worktree_is_gone_applies_its_record_and_says_so(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import shutil

    t = worked(capfd)
    shutil.rmtree(worktree(t))
    res = bar(capfd, "apply")
    assert res.code == 0, res.err
    assert "the worktree of task work is missing" in res.err
    assert "bar doctor --repair" in res.err
    assert (inited_clean / "feature.txt").read_text() == "feature\n"


def test_a_target_that_does_not_exist_names_create_and_create_makes_it_at_the_base(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked(capfd)
    base = str(t["base_commit"])
    git(inited_clean, "commit", "-q", "--allow-empty", "-m", "main moved on")
    moved = git(inited_clean, "rev-parse", "main").strip()

    refused = bar(capfd, "apply", "--target", "feature-x")
    assert refused.code == 3
    assert "target branch 'feature-x' does not exist" in refused.err
    assert "`bar apply --target feature-x --create` makes it at the task's base" in refused.err
    assert f"main at {base[:10]}" in refused.err
    assert git(inited_clean, "branch", "--list", "feature-x") == ""

    dry = bar(capfd, "apply", "--target", "feature-x", "--create", "--dry-run")
    assert dry.code == 0, dry.err
    assert f"feature-x does not exist yet: the apply would make it at {base[:10]}" in dry.out
    assert "(dry run: nothing was changed)" in dry.out
    assert git(inited_clean, "branch", "--list", "feature-x") == ""
    dry_json = bar(capfd, "apply", "--target", "feature-x", "--create", "--dry-run", "--json")
    assert dry_json.json()["created_branch"] is True
    assert dry_json.json()["target_before"] == base

    made = bar(capfd, "apply", "--target", "feature-x", "--create", "--json")
    assert made.code == 0, made.err
    done = made.json()
    assert done["created_branch"] is True and done["checkout"] is None
    tip = git(inited_clean, "rev-parse", "feature-x").strip()
    assert done["commit_sha"] == tip
    assert git(inited_clean, "rev-parse", "feature-x^").strip() == base  # on the base
    assert git(inited_clean, "show", "feature-x:feature.txt") == "feature\n"
    assert git(inited_clean, "rev-parse", "main").strip() == moved  # main untouched
    reflog = git(inited_clean, "reflog", "show", "--format=%gs", "feature-x").splitlines()
    assert reflog == ["bar: apply (commit)"]  # made in one move, by the apply itself
    assert ledger(str(t["id"]))[-1]["target_branch"] == "feature-x"

    again = bar(capfd, "apply", "--target", "feature-x", "--create")
    assert again.code == 2 and "exists already" in again.err
    assert "bar apply --target feature-x" in again.err
    assert git(inited_clean, "rev-parse", "feature-x").strip() == tip


def test_create_at_a_ref_and_the_wrong_inputs(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    worked(capfd)
    git(inited_clean, "commit", "-q", "--allow-empty", "-m", "release point")
    git(inited_clean, "tag", "v2")
    v2 = git(inited_clean, "rev-parse", "v2").strip()
    made = bar(capfd, "apply", "--target", "on-v2", "--create", "v2")
    assert made.code == 0, made.err
    assert f"Made branch on-v2 at {v2[:10]} (v2)" in made.out
    assert git(inited_clean, "rev-parse", "on-v2^").strip() == v2
    # a start point that has the work already: nothing to apply, and no branch made
    same = bar(capfd, "apply", "--target", "copy", "--create", "on-v2", "--json")
    assert same.code == 0, same.err
    assert same.json()["nothing_to_do"] is True and same.json()["created_branch"] is False
    assert git(inited_clean, "branch", "--list", "copy") == ""

    for args, code, said in (
        (["--target", "x", "--create", "no-such-ref"], 3, "no such commit or branch"),
        (["--target", "bad..name", "--create"], 2, "cannot be a branch name"),
        (["--target", "bad..name"], 2, "cannot be a branch name"),
        (["--create"], 2, "--create makes the branch --target names"),
    ):
        res = bar(capfd, "apply", *args)
        assert res.code == code and said in res.err, (args, res.err)
    assert git(inited_clean, "branch", "--list", "x") == ""


def test_a_merge_onto_a_new_branch_of_a_task_without_worktree(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked(capfd)
    assert bar(capfd, "worktree", "remove", "work").code == 0
    res = bar(capfd, "apply", "--task", "work", "--mode", "merge", "--target", "m", "--create")
    assert res.code == 0, res.err
    parents = git(inited_clean, "rev-list", "--parents", "-n1", "m").split()
    assert len(parents) == 3 and parents[1] == t["base_commit"]
    assert git(inited_clean, "show", "m:feature.txt") == "feature\n"


def test_the_installed_bar_applies_a_removed_worktrees_task_onto_a_new_branch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    worked(capfd)
    assert bar(capfd, "worktree", "remove", "work").code == 0
    refused = bar_exe("apply", "--task", "work", "--target", "review-me", cwd=inited_clean)
    assert refused.code == 3, refused.err
    assert "`bar apply --task work --target review-me --create`" in refused.err
    made = bar_exe("apply", "--task", "work", "--target", "review-me", "--create", cwd=inited_clean)
    assert made.code == 0, made.err
    assert git(inited_clean, "show", "review-me:feature.txt") == "feature\n"
