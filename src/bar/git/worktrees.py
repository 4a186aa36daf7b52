"""The repository's worktrees: bar's one way to add, find and remove them.

A task's worktree and a board lane are added by ``git worktree add``, which writes only an
entry under ``.git/worktrees`` and the new checkout: the developer's own checkout is never
written. bar's git runs no hook (``bar.git``), so a ``post-checkout`` of the developer's
does not run for it. git does not guard ``.git/worktrees`` against two ``worktree add``
at once (the second reads the first's half-written entry), nor a ``worktree prune`` that
sees an entry being added: the callers hold the project's lock around each.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bar import git
from bar.errors import BarError


def add(repo: Path, path: Path, branch: str, commit: str | None = None) -> None:
    """Check ``branch`` out at ``path``: a new branch made at ``commit`` where one is
    given, else the existing branch."""
    where = ["-b", branch, str(path), commit] if commit is not None else [str(path), branch]
    git.git(repo, "worktree", "add", "--quiet", *where)


def is_registered(repo: Path, path: Path) -> bool:
    """Whether git lists a worktree at ``path``."""
    target = path.resolve()
    for entry in git.worktree_list(repo):
        wt = entry.get("worktree")
        if wt and Path(wt).resolve() == target:
            return True
    return False


def holding(repo: Path, branch: str, other_than: Path) -> str | None:
    """Where ``branch`` is checked out in a worktree other than ``other_than``, if it is."""
    ref = f"refs/heads/{branch}"
    own = other_than.resolve()
    for entry in git.worktree_list(repo):
        path = entry.get("worktree")
        if entry.get("branch") == ref and path and Path(path).resolve() != own:
            return path
    return None


def discard(repo: Path, path: Path, *, unless_work: bool = False) -> None:
    """Remove the worktree at ``path`` and its registration, whatever a stopped git or
    bar left: a checkout cut short, an entry ``worktree add`` left locked, a directory
    git no longer knows. Only for a worktree whose content is recorded or derived;
    ``unless_work``: refuse (``BarError``, nothing removed) where the checkout holds
    files it did not put there (``holds_work``)."""
    registered = is_registered(repo, path)
    checkout = registered and path.is_dir() and not path.is_symlink()
    if unless_work and checkout and holds_work(path):
        raise BarError(
            f"the worktree {path} of a half-made task holds files no checkout made; it was kept",
            hint="move what you need out of it, then run `bar doctor --repair` again",
        )
    if registered:
        git.git(repo, "worktree", "unlock", str(path), check=False)
        git.git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    prune(repo)


def remove(repo: Path, path: Path | str) -> None:
    """``git worktree remove``: git refuses a checkout with changes of its own."""
    git.git(repo, "worktree", "remove", str(path))


def forget(repo: Path, path: Path | str) -> None:
    """Drop the entry of a worktree whose directory is gone (unlocked first: a ``worktree
    add`` that was killed leaves it locked)."""
    git.git(repo, "worktree", "unlock", str(path), check=False)
    prune(repo)


def prune(repo: Path) -> None:
    """Drop the entries of worktrees whose directories are gone."""
    git.git(repo, "worktree", "prune", check=False)


def holds_work(path: Path) -> bool:
    """True if the worktree holds changed or new files (a checkout cut short only lacks
    files: nothing is lost by removing it)."""
    res = git.git(path, "status", "--porcelain", "-z", "--untracked-files=all", check=False)
    if res.returncode != 0:
        return False  # not a usable worktree: nothing of anyone's can be in it
    entries = [e for e in res.out.split("\0") if e]
    return any(not (len(e) > 2 and e[1] == "D" and e[0] in " D") for e in entries)
