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

import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bar import faults, git
from bar.errors import BarError
from bar.git import BAR_IDENTITY, DiffStat
from bar.proc import run_to_file
from bar.store import write_bytes_atomic

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
    started_ns = time.time_ns()
    tree = write_tree(worktree, index, excludes)
    recorded_tree = git.tree_of(worktree, recorded)
    if tree == recorded_tree:
        _stamp(worktree, index, tree, recorded, started_ns)
        return Snapshot(recorded, tree, False)
    parent = git.rev_parse(worktree, ref) or recorded
    commit = git.commit_tree(worktree, tree, [parent], message, identity=BAR_IDENTITY)
    git.update_ref(worktree, ref, commit, parent, f"bar: {message.splitlines()[0]}")
    _stamp(worktree, index, tree, commit, started_ns)
    return Snapshot(commit, tree, True)


# --- knowing cheaply that nothing changed ----------------------------------------------
#
# Before every step bar must know whether someone edited the worktree since the last
# snapshot. A full `git add -A` answers that but pays git's untracked-file scan, the
# largest part of a snapshot. Cheaper, and conservative: after each snapshot we note the
# mtime of every directory of the snapshot's tree. Creating, deleting or renaming a file
# changes its directory's mtime, and `git diff-files` on the side index (stat of every
# recorded file) sees any edit of a recorded file. If both say "nothing", nothing
# changed; anything else, including a directory touched within the racy window of the
# snapshot (file-system clocks are coarse), falls back to the full scan.

_RACY_NS = 2_000_000_000


def _stamps_path(index: Path) -> Path:
    return index.with_name(index.name + ".stamps")


def _stamp(worktree: Path, index: Path, tree: str, commit: str, started_ns: int) -> None:
    path = _stamps_path(index)
    dirs: list[str] | None = None
    try:
        old = json.loads(path.read_bytes())
        if old.get("tree") == tree and isinstance(old.get("dirs"), list):
            dirs = [str(d) for d in old["dirs"]]
    except (OSError, ValueError, AttributeError):
        pass
    if dirs is None:
        raw = git.git(worktree, "ls-tree", "-r", "-d", "-z", "--name-only", tree).stdout
        dirs = [""] + [d.decode("utf-8", "surrogateescape") for d in raw.split(b"\0") if d]
    mtimes: list[int] = []
    racy = False
    root = str(worktree)  # plain string joins: pathlib costs more than the lstat here
    for rel in dirs:
        try:
            mtime = os.lstat(os.path.join(root, rel)).st_mtime_ns
        except OSError:
            racy = True
            break
        if mtime >= started_ns - _RACY_NS:
            racy = True
            break
        mtimes.append(mtime)
    record = {"version": 1, "tree": tree, "commit": commit, "racy": racy, "dirs": dirs,
              "mtimes": [] if racy else mtimes}  # fmt: skip
    try:
        write_bytes_atomic(path, json.dumps(record).encode())
    except BarError:
        path.unlink(missing_ok=True)


def unchanged_since(worktree: Path, index: Path, recorded: str) -> bool:
    """True only when the worktree certainly still equals the snapshot ``recorded``."""
    try:
        stamps = json.loads(_stamps_path(index).read_bytes())
    except (OSError, ValueError):
        return False
    if not isinstance(stamps, dict) or stamps.get("commit") != recorded or stamps.get("racy"):
        return False
    dirs, mtimes = stamps.get("dirs"), stamps.get("mtimes")
    if not isinstance(dirs, list) or not isinstance(mtimes, list) or len(dirs) != len(mtimes):
        return False
    root = str(worktree)
    for rel, mtime in zip(dirs, mtimes, strict=True):
        try:
            if os.lstat(os.path.join(root, str(rel))).st_mtime_ns != mtime:
                return False
        except OSError:
            return False
    res = git.git(worktree, "diff-files", "--quiet", env=_env(index), check=False)
    return res.returncode == 0


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
