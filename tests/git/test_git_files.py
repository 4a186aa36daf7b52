"""What bar reads from git's files instead of starting git (a task's HEAD, where a
directory's repository is): always what git itself answers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, worktree

from bar import api, git
from bar.model.project import discover
from conftest import git as run_git


def _git_head(wt: Path) -> str:
    return run_git(wt, "rev-parse", "HEAD").strip()


def test_a_steps_head_is_the_head_git_names(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert bar(capfd, "init").code == 0
    task = new_task(capfd)
    wt = worktree(task)
    fresh = api.get_task(api.open_project(), "t1")  # pins the task's git directories
    assert git.head(fresh.worktree) == _git_head(wt)  # a loose branch ref
    (wt / "a.txt").write_text("a\n")
    run_git(wt, "add", "a.txt")
    run_git(wt, "commit", "-q", "-m", "a")
    run_git(wt, "pack-refs", "--all")  # the branch now only in packed-refs
    assert git.head(fresh.worktree) == _git_head(wt)
    run_git(wt, "checkout", "-q", "--detach", "HEAD~1")
    assert git.head(fresh.worktree) == _git_head(wt)
    assert bar(capfd, "run", "--", "true").code == 0
    assert ledger(task["id"])[-1]["head"] == _git_head(wt)


def _git_says(here: Path) -> tuple[Path, Path] | None:
    res = subprocess.run(
        [
            "git",
            "-C",
            str(here),
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = res.stdout.split()
    return (Path(lines[0]), Path(lines[1])) if res.returncode == 0 and len(lines) == 2 else None


def test_the_repository_found_from_its_files_is_the_one_git_finds(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bar(capfd, "init").code == 0
    wt = worktree(new_task(capfd))
    (repo / "sub" / "deep").mkdir(parents=True)
    (wt / "inner").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    for here in (repo, repo / "sub" / "deep", wt, wt / "inner"):
        found = discover(here)
        assert found is not None and found == _git_says(here), here
    assert discover(plain) is None and _git_says(plain) is None  # git is asked, and fails
    # a worktree's own configuration (a step makes one: empty) counts only where the
    # repository turns it on, and then git is asked
    assert bar(capfd, "run", "--", "true").code == 0
    own = repo / ".git" / "worktrees" / wt.name / "config.worktree"
    assert own.is_file()
    own.write_text("[core]\n\tbare = true\n")
    assert discover(wt) == _git_says(wt) == (wt, repo / ".git")
    run_git(repo, "config", "extensions.worktreeConfig", "true")
    assert discover(wt) is None and _git_says(wt) is None  # git is asked, and fails
    run_git(repo, "config", "--unset", "extensions.worktreeConfig")
    assert discover(repo / ".git" / "refs") is None  # a git directory: git is asked
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + "[core]\n\tworktree = /elsewhere\n")
    assert discover(repo) is None  # git decides where that worktree is
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert discover(wt) is None
