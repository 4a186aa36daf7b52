"""Rollback and apply on real repositories (SPEC §4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import git
from helpers import bar, ledger, new_task, project_dir, task_dir, worktree


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    # the developer commits the policy file bar init wrote, so the checkout is clean
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "add bar policy")
    return repo


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


def snapshot_files(repo: Path, commit: str) -> dict[str, bytes]:
    out = git(repo, "ls-tree", "-r", "-z", commit)
    files = {}
    for item in out.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        mode, _type, sha = meta.split()
        data = subprocess_bytes(repo, "cat-file", "blob", sha)
        if mode == "120000":
            files[path] = b"-> " + data
        else:
            files[path] = (b"x" if mode == "100755" else b"") + data
    return files


def subprocess_bytes(repo: Path, *args: str) -> bytes:
    import subprocess

    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def run(capfd: pytest.CaptureFixture[str], script: str) -> None:
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err


def test_rollback_one_step_and_undo(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
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


def test_rollback_to_base_and_hard(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
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
    inited: Path, capfd: pytest.CaptureFixture[str]
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
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo 'build/' > .gitignore; mkdir build; echo cache > build/out.bin")
    run(capfd, "echo v2 > src.txt; echo more > build/out.bin")
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert (wt / "build/out.bin").read_text() == "more\n"
    assert not (wt / ".gitignore").exists()


def test_rollback_dry_run_changes_nothing(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo one > a.txt; rm README.md")
    before = tree_of_worktree(wt)
    res = bar(capfd, "rollback", "--dry-run", "--json")
    assert res.code == 0
    plan = res.json()
    assert sorted((c["action"], c["path"]) for c in plan["changes"]) == [
        ("delete", "a.txt"), ("recreate", "README.md"),
    ]  # fmt: skip
    assert tree_of_worktree(wt) == before
    assert len(ledger(t["id"])) == 1
    assert "dry run" in bar(capfd, "rollback", "--dry-run").out


def test_rollback_binary_symlink_mode(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "printf '\\000\\001\\002' > bin.dat; ln -s README.md link; "
               "printf '#!/bin/sh\\n' > x.sh; chmod +x x.sh; echo 'é' > 'name with space é.txt'")  # fmt: skip
    first = tree_of_worktree(wt)
    run(capfd, "rm bin.dat; rm link; echo f > link; chmod -x x.sh; rm 'name with space é.txt'")
    assert bar(capfd, "rollback").code == 0
    assert tree_of_worktree(wt) == first
    assert (wt / "link").is_symlink()


def test_apply_commit_onto_checked_out_main(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "add-feature", "-d", "Adds the feature")
    run(capfd, "echo feature > feature.txt; echo changed > README.md")
    main_before = git(inited, "rev-parse", "main").strip()
    res = bar(capfd, "apply")
    assert res.code == 0, res.err
    main_after = git(inited, "rev-parse", "main").strip()
    assert git(inited, "rev-parse", f"{main_after}^").strip() == main_before
    msg = git(inited, "log", "-1", "--format=%B", "main")
    assert msg.startswith("Add feature\n\nAdds the feature")
    assert f"Bar-Task: {t['id']}" in msg and "Bar-Step: 0001" in msg
    assert (inited / "feature.txt").read_text() == "feature\n"
    assert git(inited, "status", "--porcelain") == ""
    changed = git(inited, "diff", "--name-only", main_before, main_after).split()
    assert sorted(changed) == ["README.md", "feature.txt"]
    step = ledger(t["id"])[-1]
    assert step["kind"] == "apply" and step["mode"] == "commit"
    assert step["commit_sha"] == main_after and step["target_branch"] == "main"
    assert step["commit_message"].startswith("Add feature")


def test_apply_to_branch_not_checked_out_moves_only_the_ref(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    git(inited, "branch", "release")
    new_task(capfd)
    run(capfd, "echo r > r.txt")
    head_before = git(inited, "rev-parse", "HEAD").strip()
    res = bar(capfd, "apply", "--target", "release", "-m", "Release change")
    assert res.code == 0, res.err
    assert git(inited, "show", "release:r.txt") == "r\n"
    assert git(inited, "rev-parse", "HEAD").strip() == head_before
    assert not (inited / "r.txt").exists()


def test_conflicting_apply_changes_nothing(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    run(capfd, "echo task > README.md")
    (inited / "README.md").write_text("main\n")
    git(inited, "commit", "-qam", "main edit")
    main_before = git(inited, "rev-parse", "main").strip()
    index_before = (inited / ".git/index").read_bytes()
    res = bar(capfd, "apply")
    assert res.code == 6
    assert "README.md" in res.err and "nothing was changed" in res.err
    assert git(inited, "rev-parse", "main").strip() == main_before
    assert (inited / ".git/index").read_bytes() == index_before
    assert (inited / "README.md").read_text() == "main\n"
    assert ledger(t["id"])[-1]["kind"] == "run"
    dry = bar(capfd, "apply", "--dry-run", "--json")
    assert dry.code == 6 and dry.json()["conflicts"] == ["README.md"]


def test_apply_refuses_dirty_checkout_paths(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run(capfd, "echo task > README.md; echo new > new.txt")
    (inited / "README.md").write_text("uncommitted dev work\n")
    res = bar(capfd, "apply")
    assert res.code == 5 and "README.md" in res.err
    git(inited, "checkout", "README.md")
    (inited / "new.txt").write_text("untracked in the way\n")
    res = bar(capfd, "apply")
    assert res.code == 5 and "new.txt" in res.err
    (inited / "new.txt").unlink()
    (inited / "unrelated.txt").write_text("dev scratch\n")
    assert bar(capfd, "apply").code == 0
    assert (inited / "unrelated.txt").exists()


def test_apply_merge_mode_keeps_agent_commits(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run(capfd, "echo a > a.txt && git add a.txt && git commit -qm 'agent commit'")
    run(capfd, "echo b > b.txt")
    res = bar(capfd, "apply", "--mode", "merge")
    assert res.code == 0, res.err
    parents = git(inited, "rev-list", "--parents", "-1", "main").split()
    assert len(parents) == 3
    log = git(inited, "log", "--format=%s", "main")
    assert "agent commit" in log and "Uncommitted changes of task" in log
    assert (inited / "a.txt").exists() and (inited / "b.txt").exists()
    assert git(inited, "status", "--porcelain") == ""
    wt = worktree(t)
    assert git(wt, "status", "--porcelain") == ""


def test_apply_dry_run(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    run(capfd, "echo d > d.txt")
    before = git(inited, "rev-parse", "main").strip()
    res = bar(capfd, "apply", "--dry-run")
    assert res.code == 0 and "d.txt" in res.out and "dry run" in res.out
    assert git(inited, "rev-parse", "main").strip() == before
    assert bar(capfd, "apply").code == 0
    again = bar(capfd, "apply")
    assert again.code == 0 and "Nothing to apply" in again.out


def test_interrupted_rollback_is_finished_by_the_next_command(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import json

    from bar.store.files import write_json_atomic

    t = new_task(capfd)
    wt = worktree(t)
    run(capfd, "echo one > a.txt")
    run(capfd, "echo two > a.txt; echo b > b.txt")
    steps = ledger(t["id"])
    # simulate a crash after the journal and half the files were written
    write_json_atomic(task_dir(t["id"]) / "rollback.json", {
        "version": 1, "step_id": "0003", "target": "step", "target_step": "0001",
        "target_commit": steps[0]["snapshot"], "target_head": t["base_commit"], "hard": False,
        "snapshot_before": steps[1]["snapshot"], "started_at": "2024-01-01T00:00:00Z",
    })  # fmt: skip
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
