"""What a step committed is part of the step (docs/internals/record.md, "Nothing is
destroyed that was not recorded").

A step that commits, even a file it force-added past the ignore rules, or that moves
HEAD, has changes: the record is what ``git add -A`` gives in a fresh index holding the
worktree's HEAD (a file HEAD holds is kept, ignored or not), and ``bar apply`` carries
it. Moving HEAD by hand between steps is found by the next look. Both speed modes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    init_clean,
    ledger,
    new_task,
    plain_git_tree,
    recorded_tree,
    task_dir,
    worktree,
)

from bar.history import side_index
from conftest import git


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


@pytest.fixture
def task(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, speed: str
) -> tuple[dict[str, Any], Path]:
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")
    init_clean(repo, capfd)
    made = new_task(capfd)
    wt = worktree(made)
    monkeypatch.chdir(wt)
    for _ in range(2):  # (the stamps settle; with the speed layer, a watcher watches)
        assert bar(capfd, "run", "--", "true").code == 0
    return made, wt


def _sh(capfd: pytest.CaptureFixture[str], script: str) -> dict[str, Any]:
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    return dict(res.__dict__)


COMMIT = "git -c user.name=a -c user.email=a@b commit -qm x"


@pytest.mark.parametrize(
    "script",
    [
        f"echo log > x.log && git add -f x.log && {COMMIT}",
        f"mkdir -p d/e && echo log > d/e/y.log && git add -f d/e/y.log && {COMMIT}",
    ],
)
def test_a_step_that_commits_a_force_added_ignored_file_has_changes(
    script: str,
    task: tuple[dict[str, Any], Path],
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    made, wt = task
    _sh(capfd, script)
    step = ledger(str(made["id"]))[-1]
    assert step["diff_stat"]["files"] == 1, step
    assert step["head"] == git(wt, "rev-parse", "HEAD").strip()
    assert recorded_tree(repo, made) == plain_git_tree(wt, tmp_path)
    res = bar(capfd, "apply", "--dry-run")
    assert res.code == 0, res.err
    assert "Nothing to apply" not in res.out + res.err


@pytest.mark.parametrize(
    "by_hand",
    [
        f"echo log > x.log && git add -f x.log && {COMMIT}",
        f"echo log > x.log && git add -f x.log && {COMMIT} && git reset -q --hard HEAD~1",
        f"echo new > n.txt && git add n.txt && {COMMIT} --amend",
    ],
)
def test_head_moved_by_hand_is_found_by_the_next_look(
    by_hand: str,
    task: tuple[dict[str, Any], Path],
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    made, wt = task
    subprocess.run(["sh", "-c", by_hand], cwd=wt, check=True, capture_output=True)
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, made) == plain_git_tree(wt, tmp_path)


def test_head_moved_by_hand_before_the_tasks_first_look_is_found(
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
    tmp_path: Path,
) -> None:
    """HEAD is noted when the side index is made: a commit of an ignored file by hand
    before any look of bar's is found by the first."""
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")
    init_clean(repo, capfd)
    made = new_task(capfd)
    wt = worktree(made)
    monkeypatch.chdir(wt)
    subprocess.run(
        ["sh", "-c", f"echo log > x.log && git add -f x.log && {COMMIT}"],
        cwd=wt,
        check=True,
        capture_output=True,
    )
    assert side_index.head_moved(wt, task_dir(str(made["id"])) / "index")
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, made) == plain_git_tree(wt, tmp_path)
    assert "x.log" in git(repo, "ls-tree", "--name-only", recorded_tree(repo, made)).split()


def test_a_reset_to_an_older_commit_inside_a_step(
    task: tuple[dict[str, Any], Path],
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    made, wt = task
    _sh(capfd, f"echo log > x.log && git add -f x.log && {COMMIT}")
    _sh(capfd, "git reset -q --hard HEAD~1 && echo again > x.log")
    assert recorded_tree(repo, made) == plain_git_tree(wt, tmp_path)
    listed = git(repo, "ls-tree", "--name-only", recorded_tree(repo, made)).split()
    assert "x.log" not in listed  # (ignored again: HEAD no longer holds it)


def test_a_step_that_moved_head_says_so(
    task: tuple[dict[str, Any], Path],
    repo: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """``bar log`` and ``bar show`` say a step moved the worktree's HEAD (a commit, a
    reset, or one by hand, recorded as a manual step), and ``--json`` carries
    ``head_moved``; a step that did not move it says nothing of it. (A HEAD moved with
    no change of the record, as a soft reset, makes no step: nothing to say it on.)"""
    made, wt = task
    _sh(capfd, f"echo one > a.txt && echo two > b.txt && git add a.txt b.txt && {COMMIT}")
    _sh(capfd, "echo plain > c.txt")
    subprocess.run(
        ["sh", "-c", f"echo log > h.log && git add -f h.log && {COMMIT}"], cwd=wt, check=True
    )
    assert bar(capfd, "run", "--", "true").code == 0
    steps = ledger(str(made["id"]))
    committed, plain, by_hand = steps[-4], steps[-3], steps[-2]
    assert by_hand["kind"] == "manual"
    assert committed.get("head_moved") is True and by_hand.get("head_moved") is True
    assert "head_moved" not in plain and "head_moved" not in steps[-1]
    log = bar(capfd, "log")
    assert log.code == 0, log.err
    lines = {line.split()[0]: line for line in log.out.splitlines() if line[:4].isdigit()}
    assert "2 files +2 -0 (HEAD moved)" in lines[committed["step_id"]]
    assert "(HEAD moved)" in lines[by_hand["step_id"]]
    assert "HEAD moved" not in lines[plain["step_id"]]
    shown = bar(capfd, "show", committed["step_id"])
    assert shown.code == 0, shown.err
    assert "2 files +2 -0 (HEAD moved)" in shown.out
    said = bar(capfd, "show", committed["step_id"], "--json")
    assert said.code == 0, said.err
    assert said.json()["head_moved"] is True


def test_a_file_head_tracks_made_again_where_an_ignore_rule_now_reads_is_recorded(
    task: tuple[dict[str, Any], Path],
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A file the worktree's HEAD holds, recorded gone, then made again where a rule
    now ignores it: git keeps a file its index holds whatever the rules say, and the
    record's index starts from HEAD, so the file is recorded (it was left out: the side
    index no longer held it, and ``git add -A`` passes over an ignored file it lacks)."""
    made, wt = task
    _sh(capfd, f"echo one > k.txt && git add k.txt && {COMMIT}")
    _sh(capfd, "rm k.txt")
    _sh(capfd, "echo k.txt >> .gitignore && echo again > k.txt")
    assert recorded_tree(repo, made) == plain_git_tree(wt, tmp_path)
    tree = recorded_tree(repo, made)
    assert git(repo, "show", f"{tree}:k.txt") == "again\n"
    # the same made by hand between steps, found by the next look
    subprocess.run(["sh", "-c", "rm k.txt"], cwd=wt, check=True)
    assert bar(capfd, "run", "--", "true").code == 0
    subprocess.run(["sh", "-c", "echo by hand > k.txt"], cwd=wt, check=True)
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, made) == plain_git_tree(wt, tmp_path)
