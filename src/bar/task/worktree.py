"""Task worktrees: created from the base commit on the task branch, removed on close.

The developer's checkout is never written: ``git worktree add`` only adds a branch and an
entry under ``.git/worktrees``, and checks out into the project directory under BAR_HOME.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bar import git


def is_registered(repo: Path, path: Path) -> bool:
    target = path.resolve()
    for entry in git.worktree_list(repo):
        wt = entry.get("worktree")
        if wt and Path(wt).resolve() == target:
            return True
    return False


def discard(repo: Path, path: Path) -> None:
    """Remove the worktree at ``path`` and its registration, whatever a stopped git or
    bar left: a checkout cut short, an entry ``worktree add`` left locked, a directory
    git no longer knows. Only for a worktree whose content is recorded or derived."""
    registered = is_registered(repo, path)
    if registered:
        git.git(repo, "worktree", "unlock", str(path), check=False)
        git.git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    git.git(repo, "worktree", "prune", check=False)


def holding(repo: Path, branch: str, other_than: Path) -> str | None:
    """Where ``branch`` is checked out in a worktree other than ``other_than``, if it is."""
    ref = f"refs/heads/{branch}"
    own = other_than.resolve()
    for entry in git.worktree_list(repo):
        path = entry.get("worktree")
        if entry.get("branch") == ref and path and Path(path).resolve() != own:
            return path
    return None
