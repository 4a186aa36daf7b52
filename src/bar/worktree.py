"""Task worktrees: created from the base commit on the task branch, removed on close.

The developer's checkout is never written: ``git worktree add`` only adds a branch and an
entry under ``.git/worktrees``, and checks out into the project directory under BAR_HOME.
"""

from __future__ import annotations

from pathlib import Path

from bar import git


def create(repo: Path, path: Path, branch: str, commit: str) -> None:
    git.git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), commit)


def remove(repo: Path, path: Path) -> None:
    """Remove the worktree (its files are already recorded); the branch stays."""
    if path.exists():
        git.git(repo, "worktree", "remove", "--force", "--force", str(path))
    git.git(repo, "worktree", "prune", check=False)


def is_registered(repo: Path, path: Path) -> bool:
    target = path.resolve()
    for entry in git.worktree_list(repo):
        wt = entry.get("worktree")
        if wt and Path(wt).resolve() == target:
            return True
    return False
