"""What bar task delete and bar task prune must not lose, on real repositories.

Each test builds the loss with real git and real steps, shows bar refusing it (and
prune keeping the task), and that --force still deletes. Whether a commit survives is
asked of git itself: which refs still reach it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import bar, bar_exe, new_task, run_sh, task_dir, worktree

from conftest import git


def refs_reaching(repo: Path, commit: str) -> list[str]:
    return git(repo, "for-each-ref", "--contains", commit, "--format=%(refname)").split()


def commit_by_hand(repo: Path, branch: str, where: Path, name: str) -> str:
    """A commit on ``branch`` made outside bar, in a checkout of its own (then removed)."""
    git(repo, "worktree", "add", "-q", str(where), branch)
    (where / name).write_text(f"{name}\n")
    git(where, "add", name)
    git(where, "commit", "-qm", f"add {name} by hand")
    sha = git(where, "rev-parse", "HEAD").strip()
    git(repo, "worktree", "remove", str(where))
    return sha


def prune_plan(capfd: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    res = bar(capfd, "task", "prune", "--json", *extra)
    assert res.code == 0, res.err
    plan: dict[str, Any] = res.json()
    return plan


# --- a commit held only by tasks that go -----------------------------------------------


def test_prune_never_deletes_the_last_task_holding_a_commit_made_by_hand(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = new_task(capfd, "A")
    assert bar(capfd, "task", "close").code == 0
    y = commit_by_hand(inited_clean, a["branch"], tmp_path / "by-hand", "y.txt")
    dry = bar(capfd, "task", "delete", "A", "--dry-run")
    assert "holds 1 commit no step recorded" in dry.out
    c = new_task(capfd, "C", "--base", a["branch"])  # stacked on A's branch: its base is y
    assert c["base_commit"] == y
    assert bar(capfd, "task", "close").code == 0
    assert refs_reaching(inited_clean, y)

    plan = prune_plan(capfd, "--dry-run")  # judged as the prune itself will judge
    assert [d["name"] for d in plan["deleted"]] == ["A"]
    assert [s["name"] for s in plan["skipped"]] == ["C"]
    (why,) = plan["skipped"][0]["lost"]
    assert "holds 1 commit no step recorded" in why and f"its base {y[:10]} among them" in why

    done = prune_plan(capfd)
    assert [d["name"] for d in done["deleted"]] == ["A"]
    assert [s["name"] for s in done["skipped"]] == ["C"]
    assert refs_reaching(inited_clean, y)  # y is still on a ref: C's branch
    assert git(inited_clean, "cat-file", "-t", y).strip() == "commit"
    res = bar(capfd, "task", "delete", "C")
    assert res.code == 5 and "among them" in res.err and "--force" in res.err

    git(inited_clean, "branch", "keep-y", y)  # another ref keeps it: nothing is lost any more
    assert [d["name"] for d in prune_plan(capfd)["deleted"]] == ["C"]
    assert refs_reaching(inited_clean, y) == ["refs/heads/keep-y"]


def test_force_deletes_the_last_holder_of_a_commit_anyway(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = new_task(capfd, "A")
    assert bar(capfd, "task", "close").code == 0
    y = commit_by_hand(inited_clean, a["branch"], tmp_path / "by-hand", "y.txt")
    new_task(capfd, "C", "--base", a["branch"])
    assert bar(capfd, "task", "close").code == 0
    plan = prune_plan(capfd, "--force")
    assert {d["name"] for d in plan["deleted"]} == {"A", "C"} and plan["skipped"] == []
    assert any(d["lost"] for d in plan["deleted"])  # and it said what went
    assert refs_reaching(inited_clean, y) == []


def test_commits_the_steps_recorded_and_a_base_on_main_are_no_loss(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "committer")
    run_sh(capfd, "echo c > c.txt && git add c.txt && git commit -qm 'by a step'")
    assert bar(capfd, "apply", "-m", "land it").code == 0
    assert bar(capfd, "task", "close").code == 0
    res = bar(capfd, "task", "delete", "committer")
    assert res.code == 0, res.err
    assert not task_dir(t["id"]).exists()


# --- states recorded on the way back to the base ----------------------------------------


@pytest.mark.parametrize(
    "back",
    [["run", "--", "sh", "-c", "rm p.txt"], ["rollback", "--to", "base"], ["undo"]],
    ids=["removed", "rollback", "undo"],
)
def test_a_task_back_at_its_base_keeps_the_states_its_steps_recorded(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], back: list[str]
) -> None:
    t = new_task(capfd, "t2")
    run_sh(capfd, "echo precious > p.txt")
    assert bar(capfd, *back).code == 0
    assert not (worktree(t) / "p.txt").exists()
    assert bar(capfd, "task", "close").code == 0
    why = "its steps recorded changes it ends without (steps 0001, 0002): they go with it"

    plan = prune_plan(capfd)
    assert plan["deleted"] == [] and [s["name"] for s in plan["skipped"]] == ["t2"]
    assert plan["skipped"][0]["lost"] == [why]
    res = bar(capfd, "task", "delete", "t2")
    assert res.code == 5 and why in res.err
    # what it kept can still be had: reopened, it rolls back to step 1
    assert bar(capfd, "task", "reopen", "t2").code == 0
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert (worktree(t) / "p.txt").read_text() == "precious\n"
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert bar(capfd, "task", "close").code == 0
    assert bar(capfd, "task", "delete", "t2", "--force").code == 0
    assert not task_dir(t["id"]).exists()


def test_a_task_back_at_its_base_after_its_work_was_applied_is_prunable(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "landed")
    run_sh(capfd, "echo kept > k.txt")
    assert bar(capfd, "apply", "-m", "land k").code == 0
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert bar(capfd, "task", "close").code == 0
    assert git(inited_clean, "show", "main:k.txt") == "kept\n"
    assert [d["name"] for d in prune_plan(capfd)["deleted"]] == ["landed"]
    assert not task_dir(t["id"]).exists()


def test_a_task_that_recorded_no_change_stays_prunable(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "quiet")
    run_sh(capfd, "true")
    run_sh(capfd, "echo gone > tmp && rm tmp")
    assert bar(capfd, "task", "close").code == 0
    assert [d["name"] for d in prune_plan(capfd)["deleted"]] == ["quiet"]


# --- ignored files in a kept worktree ----------------------------------------------------


def test_ignored_files_of_a_kept_worktree_are_not_pruned_silently(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited_clean / ".gitignore").write_text("*.local\ncache/\n")
    git(inited_clean, "add", ".gitignore")
    git(inited_clean, "commit", "-qm", "ignore local files")
    t = new_task(capfd, "kept")
    assert bar(capfd, "task", "close", "--keep-worktree").code == 0
    (worktree(t) / "notes.local").write_text("only here\n")
    (worktree(t) / "cache").mkdir()
    (worktree(t) / "cache" / "data.bin").write_bytes(b"\0" * 64)
    assert bar(capfd, "diff", "--task", "kept", "--unrecorded", "--stat").out.strip() == ""

    plan = prune_plan(capfd)
    assert plan["deleted"] == []
    assert plan["skipped"][0]["lost"] == ["its kept worktree holds 2 ignored files, e.g. cache/"]
    res = bar(capfd, "task", "delete", "kept")
    assert res.code == 5 and "ignored files, e.g. cache/" in res.err
    assert (worktree(t) / "notes.local").read_text() == "only here\n"

    (worktree(t) / "cache" / "data.bin").unlink()
    (worktree(t) / "cache").rmdir()
    res = bar(capfd, "task", "delete", "kept", "--dry-run")
    assert "1 ignored file, e.g. notes.local" in res.out
    assert bar(capfd, "task", "delete", "kept", "--force").code == 0
    assert not worktree(t).exists()


def test_a_kept_worktree_without_ignored_files_is_prunable(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "clean")
    assert bar(capfd, "task", "close", "--keep-worktree").code == 0
    assert [d["name"] for d in prune_plan(capfd)["deleted"]] == ["clean"]
    assert not worktree(t).exists()


def test_a_kept_worktree_of_applied_work_is_prunable_and_a_later_edit_is_not_lost(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Steps recorded, applied, the worktree kept: a closed task's git is pinned as an
    active one's, so its kept worktree is compared with its record (it was counted as
    lost work); an edit made there after closing is found and kept."""
    for name in ("landed", "edited"):
        t = new_task(capfd, name)
        run_sh(capfd, f"echo {name} > {name}.txt")
        assert bar(capfd, "apply", "-m", f"land {name}").code == 0
        assert bar(capfd, "task", "close", "--keep-worktree").code == 0
    (worktree(t) / "edited.txt").write_text("after closing\n")
    plan = bar_exe("task", "prune", "--json", cwd=inited_clean)
    assert plan.code == 0, plan.err
    assert [d["name"] for d in plan.json()["deleted"]] == ["landed"]
    [skipped] = plan.json()["skipped"]
    assert skipped["lost"] == [f"its kept worktree {worktree(t)} holds changes made after closing"]
    refused = bar_exe("task", "delete", "edited", cwd=inited_clean)
    assert refused.code == 5 and "changes made after closing" in refused.err
    assert (worktree(t) / "edited.txt").read_text() == "after closing\n"


# --- a name that starts another task's id ------------------------------------------------


def test_a_name_that_starts_another_tasks_id_is_ambiguous(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = new_task(capfd, "first")
    assert bar(capfd, "task", "close").code == 0
    prefix = first["id"][:4]
    named = new_task(capfd, prefix)
    assert bar(capfd, "task", "close").code == 0
    for args in (["task", "delete", prefix, "--force"], ["task", "show", prefix]):
        res = bar(capfd, *args)
        assert res.code == 2, res.err
        assert f"{first['id']} (first, closed)" in res.err
        assert f"{named['id']} ({prefix}, closed)" in res.err
        assert "full id" in res.err
    assert task_dir(first["id"]).exists() and task_dir(named["id"]).exists()
    # a full id always wins; a longer prefix is no name, so it is not ambiguous
    assert bar(capfd, "task", "delete", named["id"], "--force").code == 0
    assert task_dir(first["id"]).exists()
    assert bar(capfd, "task", "delete", first["id"][:6], "--force").code == 0
    assert not task_dir(first["id"]).exists()
