"""Snapshots: the full state of a task worktree as a git commit, fast.

Each task has a persistent side index (``tasks/<id>/index``, used as ``GIT_INDEX_FILE``),
never the worktree's own index, so the agent's staging area is left alone. ``git add -A``
against it re-hashes only files whose stat changed, so a snapshot costs about one
``git status``. The resulting tree is wrapped in a commit whose parent is the previous
snapshot, and ``refs/bar/tasks/<id>`` is moved to it with a compare-and-swap; the chain
starts at the task's base commit, so ``git log <base>..refs/bar/tasks/<id>`` is the task's
history and git's gc never drops a step.

The side index is seeded from the index that ``git worktree add`` just wrote for the base
commit: it holds the same entries ``read-tree <base>`` would, plus valid stat data, so the
first snapshot does not re-hash every file of the repository.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bar import faults, git
from bar.git import BAR_IDENTITY, DiffStat
from bar.proc import run_to_file

# Paths bar writes into a worktree for its own use (agent hook settings while a run
# lasts): never part of what a step changed.
_ALWAYS_EXCLUDED: tuple[str, ...] = ()


def _env(index: Path) -> dict[str, str]:
    return {"GIT_INDEX_FILE": str(index)}


def seed_index(worktree: Path, index: Path, base_commit: str) -> None:
    """Create the side index for a new task worktree."""
    own = Path(git.out(worktree, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    tmp = index.with_name(index.name + ".seed")
    if own.is_file():
        shutil.copyfile(own, tmp)
    else:
        git.git(worktree, "read-tree", base_commit, env=_env(tmp))
    os.chmod(tmp, 0o600)
    os.replace(tmp, index)


def write_tree(worktree: Path, index: Path, excludes: Sequence[str] = ()) -> str:
    """Stage the worktree's full state (tracked + untracked, not ignored) and write a tree."""
    pathspec = ["--", "."]
    for path in (*_ALWAYS_EXCLUDED, *excludes):
        pathspec.append(f":(exclude,literal){path}")
    env = _env(index)
    res = git.git(
        worktree,
        "-c",
        "core.untrackedCache=true",
        "add",
        "-A",
        "--ignore-errors",
        *pathspec,
        env=env,
        check=False,
    )
    if res.returncode != 0:
        # Files that could not be read are left out of the snapshot rather than losing
        # the whole step; say which.
        message = res.err.strip() or f"git add exited with {res.returncode}"
        print(f"bar: warning: some files were not recorded: {message}", file=sys.stderr)
    os.chmod(index, 0o600)  # git rewrites the index with the umask's mode
    return git.out(worktree, "write-tree", env=env)


@dataclass(frozen=True)
class Snapshot:
    commit: str  # the snapshot commit (== previous when nothing changed)
    tree: str
    changed: bool


def take(
    worktree: Path,
    index: Path,
    ref: str,
    recorded: str,
    message: str,
    excludes: Sequence[str] = (),
) -> Snapshot:
    """Snapshot the worktree against ``recorded`` (the last snapshot the ledger knows).

    When the tree equals the recorded one nothing is written and ``recorded`` is returned.
    Otherwise a commit is chained onto the ref's current value (which may be ahead of the
    ledger after a crash: that orphan is kept in the chain, never dropped).
    """
    tree = write_tree(worktree, index, excludes)
    recorded_tree = git.tree_of(worktree, recorded)
    if tree == recorded_tree:
        return Snapshot(recorded, tree, False)
    parent = git.rev_parse(worktree, ref) or recorded
    commit = git.commit_tree(worktree, tree, [parent], message, identity=BAR_IDENTITY)
    git.update_ref(worktree, ref, commit, parent, f"bar: {message.splitlines()[0]}")
    return Snapshot(commit, tree, True)


def chain(worktree: Path, ref: str, tree: str, message: str) -> str:
    """Append a commit for ``tree`` to the ref's chain (used when a state is restored)."""
    parent = git.rev_parse(worktree, ref)
    parents = [parent] if parent else []
    commit = git.commit_tree(worktree, tree, parents, message, identity=BAR_IDENTITY)
    git.update_ref(worktree, ref, commit, parent, f"bar: {message.splitlines()[0]}")
    return commit


def write_patch(repo: Path, a: str, b: str, path: Path) -> DiffStat:
    """Write the replayable patch from ``a`` to ``b`` into ``path``; return its stat."""
    faults.point(f"before writing {path.name}")
    run_to_file(["git", "-C", str(repo), *git.diff_patch_args(a, b)], path)
    faults.point(f"after writing {path.name}")
    return git.numstat(repo, a, b)
