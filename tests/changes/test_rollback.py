"""Rollback on real repositories (docs/internals/record.md, "Order of writes"): restores
exactly, and is itself undoable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import (
    bar,
    ledger,
    new_task,
    plain_git_tree,
    recorded_tree,
    run_sh,
    task_dir,
    worktree,
)

from conftest import git


def tree_of_worktree(wt: Path) -> dict[str, bytes]:
    files = {}
    for p in sorted(wt.rglob("*")):
        if ".git" in p.relative_to(wt).parts:
            continue
        if p.is_symlink():
            files[str(p.relative_to(wt))] = b"-> " + os.readlink(p).encode()
        elif p.is_file():
            mode = b"x" if os.access(p, os.X_OK) else b""
            files[str(p.relative_to(wt))] = mode + p.read_bytes()
    return files


def run(capfd: pytest.CaptureFixture[str], script: str) -> None:
    run_sh(capfd, script)


def test_rollback_one_step_and_undo(inited_clean: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo one > a.txt")
    run(capfd, "echo two >> a.txt; rm README.md; mkdir -p d && echo x > d/y")
    after_two = tree_of_worktree(wt)
    res = bar(capfd, "rollback")
    assert res.code == 0, res.err
    assert (wt / "a.txt").read_text() == "one\n"
    assert (wt / "README.md").exists() and not (wt / "d").exists()
    steps = ledger(t["id"])
    rb = steps[-1]
    assert rb["kind"] == "rollback" and rb["target"] == "step" and rb["target_step"] == "0001"
    assert rb["hard"] is False
    assert rb["snapshot"] != rb["snapshot_before"]
    assert rb["artifacts"]["patch"] == "artifacts/0003.patch"
    assert sorted(rb["diff_stat"]["file_list"]) == ["README.md", "a.txt", "d/y"]
    # undo the rollback: roll back to the step before it
    assert bar(capfd, "rollback", "--to", "2").code == 0
    assert tree_of_worktree(wt) == after_two


def test_rollback_to_base_and_hard(inited_clean: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo c > c.txt && git add c.txt && git commit -qm c")
    assert git(wt, "rev-parse", "HEAD").strip() != t["base_commit"]
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert not (wt / "c.txt").exists()
    # without --hard the branch keeps the agent's commit
    assert git(wt, "rev-parse", "HEAD").strip() != t["base_commit"]
    assert bar(capfd, "rollback", "--to", "base", "--hard").code == 0
    assert git(wt, "rev-parse", "HEAD").strip() == t["base_commit"]
    assert git(wt, "status", "--porcelain") == ""
    assert ledger(t["id"])[-1]["hard"] is True


def test_hand_edits_before_rollback_are_recorded_and_recoverable(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo agent > a.txt")
    (wt / "mine.txt").write_text("precious hand edit\n")
    assert bar(capfd, "rollback").code == 0
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["run", "manual", "rollback"]
    assert not (wt / "mine.txt").exists() and not (wt / "a.txt").exists()
    assert bar(capfd, "rollback", "--to", "2").code == 0
    assert (wt / "mine.txt").read_text() == "precious hand edit\n"


def test_rollback_leaves_ignored_files_alone(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo 'build/' > .gitignore; mkdir build; echo cache > build/out.bin")
    run(capfd, "echo v2 > src.txt; echo more > build/out.bin")
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert (wt / "build/out.bin").read_text() == "more\n"
    assert not (wt / ".gitignore").exists()


def test_rollback_removes_a_file_head_tracks_that_the_restored_rules_name(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A file the state of now holds and the target does not goes, also where the
    ``.gitignore`` the rollback restores names it, if the worktree's HEAD tracks it: git
    keeps a tracked file whatever the rules say, so it is no ignored file to leave."""
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "mkdir dir; echo c > dir/c.bin; git add dir/c.bin; git commit -qm c")
    run(capfd, "rm dir/c.bin; echo dir/ > .gitignore")
    target = ledger(t["id"])[-1]["step_id"]
    run(capfd, "rm .gitignore; echo again > dir/c.bin")
    res = bar(capfd, "rollback", "--to", target)
    assert res.code == 0, res.err
    assert not (wt / "dir" / "c.bin").exists()
    assert (wt / ".gitignore").read_text() == "dir/\n"
    assert recorded_tree(wt, t) == plain_git_tree(wt, tmp_path)
    assert not bar(capfd, "status", "--json").json()["unrecorded_changes"]
    assert bar(capfd, "undo").code == 0
    assert (wt / "dir" / "c.bin").read_text() == "again\n"


def test_rollback_dry_run_changes_nothing(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo one > a.txt; rm README.md")
    before = tree_of_worktree(wt)
    res = bar(capfd, "rollback", "--dry-run", "--json")
    assert res.code == 0
    plan = res.json()
    assert sorted((c["action"], c["path"]) for c in plan["changes"]) == [
        ("delete", "a.txt"),
        ("recreate", "README.md"),
    ]
    assert tree_of_worktree(wt) == before
    assert len(ledger(t["id"])) == 1
    assert "dry run" in bar(capfd, "rollback", "--dry-run").out


def test_rollback_binary_symlink_mode(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(
        capfd,
        "printf '\\000\\001\\002' > bin.dat; ln -s README.md link; "
        "printf '#!/bin/sh\\n' > x.sh; chmod +x x.sh; echo 'é' > 'name with space é.txt'",
    )
    first = tree_of_worktree(wt)
    run(capfd, "rm bin.dat; rm link; echo f > link; chmod -x x.sh; rm 'name with space é.txt'")
    assert bar(capfd, "rollback").code == 0
    assert tree_of_worktree(wt) == first
    assert (wt / "link").is_symlink()


def test_interrupted_rollback_is_finished_by_the_next_command(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import json

    from bar.store.files import write_json_atomic

    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo one > a.txt")
    run(capfd, "echo two > a.txt; echo b > b.txt")
    steps = ledger(t["id"])
    # simulate a crash after the journal and half the files were written
    write_json_atomic(
        task_dir(t["id"]) / "rollback.json",
        {
            "version": 1,
            "step_id": "0003",
            "target": "step",
            "target_step": "0001",
            "target_commit": steps[0]["snapshot"],
            "target_head": t["base_commit"],
            "hard": False,
            "snapshot_before": steps[1]["snapshot"],
            "started_at": "2024-01-01T00:00:00Z",
        },
    )
    (wt / "b.txt").unlink()
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    kinds = [s["kind"] for s in ledger(t["id"])]
    assert kinds == ["run", "run", "rollback", "run"]
    assert (wt / "a.txt").read_text() == "one\n" and not (wt / "b.txt").exists()
    assert not (task_dir(t["id"]) / "rollback.json").exists()
    assert (
        json.loads((task_dir(t["id"]) / "ledger.jsonl").read_text().splitlines()[2])["target_step"]
        == "0001"
    )


def test_a_hard_rollback_keeps_the_agents_commits_through_gc_and_undoes_fully(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo c > c.txt && git add c.txt && git commit -qm c")
    run(capfd, "echo d > d.txt && git add d.txt && git commit -qm d")
    agent_head = git(wt, "rev-parse", "HEAD").strip()
    res = bar(capfd, "rollback", "--to", "base", "--hard")
    assert res.code == 0, res.err
    assert "Undo with: bar rollback --hard --to 2" in res.out
    # the agent's commits are now on no branch; gc with every reflog expired keeps them
    git(wt, "reflog", "expire", "--expire=now", "--all")
    git(wt, "gc", "--quiet", "--prune=now")
    assert bar(capfd, "status").code == 0
    res = bar(capfd, "rollback", "--hard", "--to", "2")
    assert res.code == 0, res.err
    assert git(wt, "rev-parse", "HEAD").strip() == agent_head
    assert (wt / "d.txt").read_text() == "d\n"
    assert git(wt, "status", "--porcelain") == ""


def test_an_agent_reset_keeps_the_heads_the_ledger_recorded(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo c > c.txt && git add c.txt && git commit -qm c")
    recorded = ledger(t["id"])[-1]["head"]
    run(capfd, "git reset -q --hard HEAD~1")
    git(wt, "reflog", "expire", "--expire=now", "--all")
    git(wt, "gc", "--quiet", "--prune=now")
    assert git(wt, "cat-file", "-t", recorded).strip() == "commit"
    assert bar(capfd, "rollback", "--hard", "--to", "1").code == 0
    assert git(wt, "rev-parse", "HEAD").strip() == recorded


def test_a_save_after_the_rollback_wrote_is_said_by_its_path(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file saved after the rollback wrote it, before its snapshot looked (one that
    looks at the worktree: ``BAR_FAST=0``): the step records what is there, and the
    warning names the path and what likely happened."""
    from bar.base import faults

    monkeypatch.setenv("BAR_FAST", "0")
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo one > doc.txt")
    run_sh(capfd, "echo two > doc.txt")
    passed = faults.point

    def save_then_pass(label: str) -> None:
        if label == "after moving the target's files in":
            (wt / "doc.txt").write_text("saved by an editor\n")
        passed(label)

    monkeypatch.setattr(faults, "point", save_then_pass)
    res = bar(capfd, "rollback", "--to", "1")
    assert res.code == 0, res.err
    assert "1 path of the worktree differs from the state restored (doc.txt)" in res.err
    assert "by an editor?" in res.err
    assert (wt / "doc.txt").read_text() == "saved by an editor\n"
