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
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from bar import git
from bar.base import faults
from bar.base.notices import warn
from bar.base.proc import Started, clean_env
from bar.changes.fast import object_writer, racy, rescan, speed, staging, stamps, watcher
from bar.changes.fast.stamps import keep_private
from bar.changes.fast.tree_shape import Listing, Shape, list_tree
from bar.errors import GitError, SnapshotFailed
from bar.git import BAR_IDENTITY, DiffStat, exact, ignored

_env = git.index_env


def seed_index(worktree: Path, index: Path, base_commit: str, git_dir: Path, common: Path,
               ) -> None:  # fmt: skip
    """Create the side index for a new task worktree, in git's index format 4 (paths
    prefix-compressed: about 40% smaller on a large tree) and split: its shared part, all
    the entries, lies in the task's own git directory ``git_dir`` (``make_git_dir``), and
    the index itself holds what changed since, so each snapshot's `git add` and
    `write-tree` write a small file, not the whole index (on a 40,000-file repository
    25 + 17 ms instead of 46 + 39)."""
    import shutil

    own = Path(git.out(worktree, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    make_git_dir(git_dir, base_commit)
    git.pin_own(index.parent, git_dir, common, worktree)
    tmp = index.with_name(index.name + ".seed")
    if own.is_file():
        shutil.copyfile(own, tmp)
        racy.keep_time(own, tmp)
    else:
        git.git(worktree, "read-tree", base_commit, env=_env(tmp))
    git.git(worktree, "update-index", "--index-version", "4", env=_env(tmp))
    # (apart: an index whose version changes is written whole, not split)
    git.git(worktree, "update-index", "--split-index", env=_env(tmp))
    keep_private(tmp)
    os.replace(tmp, index)


# entries the written part of a split side index may hold before its next write starts
# a new shared part (``crowded``)
CROWDED = 256


def crowded(index: Path) -> bool:
    """Whether the written part of the split index ``index`` holds ``CROWDED`` entries or
    more. Git starts a new shared part once a fifth of the entries are new, but never for
    entries that replace shared ones; and it writes in the split part, as replacements,
    the entries that are racily clean when it splits (a task's side index is seeded right
    after ``git reset --hard`` wrote every file; a rollback writes the worktree and the
    index together). Those stay there on every later write, which then writes the whole
    index on top of the shared part it reads: the next write starts a new shared part
    instead. (Its header only: 12 bytes read.)"""
    try:
        with open(index, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[:4] == b"DIRC" and int.from_bytes(head[8:], "big") >= CROWDED


def make_git_dir(git_dir: Path, head: str) -> None:
    """Make the task's own git directory (``store.layout.TaskPaths.git_dir``), if it is
    not there: a ``HEAD`` at the commit ``head`` is all git needs to take it for one,
    given the repository's common directory."""
    if (git_dir / "HEAD").is_file():
        return
    from bar.store.files import ensure_dir, write_text_atomic

    ensure_dir(git_dir)
    write_text_atomic(git_dir / "HEAD", head + "\n")


def write_tree(
    worktree: Path, index: Path, excludes: Sequence[str] = (), recorded: str | None = None
) -> str:
    """Stage the worktree's full state (tracked + untracked, not ignored) and write a tree.

    With ``recorded`` (the snapshot the side index was last stamped at), only what can
    have changed since is rescanned: see ``rescan.changed_since``.
    """
    return _write(
        worktree,
        index,
        excludes,
        rescan.changed_since(worktree, index, recorded) if recorded else None,
    )


def write_scope(worktree: Path, index: Path, scope: list[str] | None) -> str:
    """The tree of ``index`` once ``scope`` (None: everything) is rescanned into it."""
    return _write(worktree, index, (), scope)


def _write(worktree: Path, index: Path, excludes: Sequence[str], scope: list[str] | None) -> str:
    """Rescan ``scope`` (None: everything) into the side index and write its tree."""
    return write_whole(worktree, index, scope, excludes)[0]


def write_whole(worktree: Path, index: Path, scope: list[str] | None,
                excludes: Sequence[str] = (), suspects: Sequence[str] | None = None,
                ) -> tuple[str, bool, list[str] | None]:  # fmt: skip
    """``_write``, whether every file of the scope could be read (``_add``), and the
    scope rescanned (None: everything, also when the given one could not be added as
    such). ``suspects``: files to hash whatever their stat (``bar.changes.fast.racy``; default: those
    noted for ``index``), added to the scope."""
    suspects = racy.suspects(index) if suspects is None else suspects
    if suspects:
        racy.force(worktree, index, suspects)
        if scope is not None:
            scope = sorted({*scope, *suspects})
    since = time.time_ns()  # (before git looks at any file: see ``bar.changes.fast.racy``)
    added = True if scope == [] else _add(worktree, index, scope or ["."], excludes)
    if added is False and scope:
        speed.fallback("a scope git could not add as such")
        added, scope = _add(worktree, index, ["."], excludes), None
    if scope is None:
        ignored.drop_newly_ignored(worktree, index)
    tree = git.out(worktree, "write-tree", env=_env(index))  # may store its cache-tree
    if scope != []:
        racy.note(worktree, index, since, len(tree))
    keep_private(index)
    return tree, added is not None, scope


def _excluded(paths: set[str] | None, excludes: Sequence[str]) -> set[str]:
    """Of ``paths``, those at or under one of ``excludes``."""
    return {p for p in paths or () for e in excludes if p == e or p.startswith(e + "/")}


def _only_excluded(worktree: Path, path: str, excludes: Sequence[str]) -> bool:
    """Whether ``path`` holds nothing a snapshot takes: it is at or under one of
    ``excludes``, or a directory holding only such paths (the agent's settings bar
    installs for a step: rescanned, never in the tree)."""
    if _excluded({path}, excludes):
        return True
    inside = [e for e in excludes if e.startswith(path + "/")]
    if not inside:
        return False
    try:
        names = os.listdir(os.path.join(worktree, path))
    except OSError:
        return False
    return all(f"{path}/{name}" in inside for name in names)


# What `git add --ignore-errors` says about a file it could not read (and so left out);
# any other complaint means the snapshot itself could not be written.
_UNREADABLE = re.compile(
    rb"^(error: open\(.*\): .*|error: unable to index file .*|error: read error while indexing .*"
    rb"|error: .*: can only add regular files, symbolic links or git-directories"
    rb"|error: '.*' does not have a commit checked out"
    rb"|fatal: adding files failed|warning: .*)$"
)


def _add(worktree: Path, index: Path, paths: Sequence[str], excludes: Sequence[str]
         ) -> bool | None:  # fmt: skip
    """``git add -A`` the given paths ("." everything).

    Returns False when a partial scope cannot be added as such (a pathspec matching
    nothing, a path now beyond a symbolic link): the caller then scans everything. Files
    that cannot be read are left out with a warning naming them (None is returned); any
    other failure (a full disk, an object that cannot be written) raises, so a step is
    never recorded as "no changes" when its changes simply could not be stored.
    """
    specs = [":(top)" if p == "." else f":(top,literal){p}" for p in paths]
    specs += [f":(top,exclude,literal){p}" for p in excludes]
    res = git.git(
        worktree,
        "add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
        env=_env(index, reshare=crowded(index)),
        input=b"\0".join(s.encode("utf-8", "surrogateescape") for s in specs) + b"\0",
        check=False,
    )  # fmt: skip
    if res.returncode == 0:
        return True
    # a path of the scope that is ignored is not added (the rest is): git says so in a
    # closing block of path names and hints, which is no failure
    said = res.stderr.split(b"The following paths are ignored by one of your .gitignore")[0]
    said_lines = [line for line in said.splitlines() if line.strip()]
    if not said_lines and said != res.stderr and res.returncode == 1:
        return True
    if paths != ["."] and any(b"pathspec" in line or b"beyond a symbolic link" in line
                              for line in said_lines):  # fmt: skip
        return False
    if said_lines and all(_UNREADABLE.match(line) for line in said_lines):
        warn(f"some files were not recorded: {said.decode('utf-8', 'replace').strip()}")
        return None
    raise SnapshotFailed(
        "the worktree's state could not be stored in git: "
        + (res.err.strip() or f"git add exited with {res.returncode}"),
    )


class Snapshot:
    """A snapshot taken: its commit (the previous one when nothing changed) and tree,
    which is asked of git only if someone wants it."""

    __slots__ = ("_tree", "_worktree", "changed", "commit")

    def __init__(self, commit: str, tree: str | None, changed: bool, worktree: Path) -> None:
        self.commit, self.changed = commit, changed
        self._tree, self._worktree = tree, worktree

    @property
    def tree(self) -> str:
        if self._tree is None:
            self._tree = git.tree_of(self._worktree, self.commit)
        return self._tree


class OnTree(Protocol):
    """Called with a snapshot's new tree before its commit is written (``take``);
    ``ready``: the patch to it the task's lookout wrote, if it staged that tree."""

    def __call__(self, tree: str, ready: dict[str, Any] | None = None) -> None: ...


def take(
    worktree: Path,
    index: Path,
    ref: str,
    recorded: str,
    message: str,
    excludes: Sequence[str] = (),
    *,
    stamped_at: str | None = None,
    recorded_tree: str | None = None,
    changed: set[str] | None = None,
    restored_tree: str | None = None,
    before_look: Callable[[], None] | None = None,
    hand_edits: bool = False,
    on_tree: OnTree | None = None,
    hold_stamps: bool = False,
) -> Snapshot:
    """Snapshot the worktree against ``recorded`` (the last snapshot the ledger knows).

    When the tree equals the recorded one nothing is written and ``recorded`` is returned.
    Otherwise a commit is chained onto the ref's current value when that descends from
    ``recorded`` (ahead of the ledger after a crash: that orphan is kept in the chain, never
    dropped), and onto ``recorded`` itself when the ref was moved elsewhere (by a command
    run in the task): the chain always holds every snapshot the ledger names.
    ``recorded_tree``: the tree of ``recorded``, if the caller knows it; ``changed``: the
    paths changed since the stamps, if the kernel said (``rescan.scan``);
    ``restored_tree``: git just wrote the side index and the worktree to hold exactly
    this tree (of ``stamped_at``), so there is nothing to look at.
    ``before_look``: called once git has begun statting the recorded files, before any
    directory is looked at (``rescan.scan``): the step's watch begins there, so that it
    costs no time of its own (its kernel calls run while git stats).
    ``hand_edits``: this is a command's look for hand edits, where what the task's
    lookout cannot see is looked for too (``bar.changes.fast.watcher``), every so often.
    ``on_tree``: called with the new tree once it is written, if it differs from the
    recorded one, before the commit is made (the caller's patch is written meanwhile:
    ``steps.PatchJob``). ``hold_stamps``: the new stamps are kept in memory, not written
    (``stamps._HELD``): a checkpoint's, which the step's own snapshot writes.
    """
    started_ns = time.time_ns()
    stamped = stamped_at or recorded  # the state the side index was last noted at
    sight = None  # what the task's lookout saw since ``stamped``, if it was asked
    asked: Started | None = None
    ready: dict[str, Any] | None = None  # the patch to the tree the lookout staged, if taken
    if restored_tree is not None:
        scope: list[str] | None = []
        known = None
        tree = restored_tree
    else:
        if changed is None and watcher.running(index):
            # (a staging is made only while no command holds the task: never during a
            # step, so only a command's look for hand edits may find one)
            sight = watcher.look(
                index, stamped, stale_ok=not hand_edits, staged=hand_edits and not excludes
            )
            changed = sight.paths if sight is not None else None
            if sight is not None and sight.staged is not None and "config" not in sight.staged:
                asked = exact.ask(worktree)  # (below) there is a tree to record: begun now
        found = rescan.scan(worktree, index, stamped, changed, before_look)
        scope, known = found if found is not None else (None, None)
        if before_look is not None:
            before_look()  # (a full rescan follows: before it)
        if scope == [] and stamped == recorded:
            # nothing changed since the last stamps, which therefore still hold
            if sight is not None and sight.paths != set():
                watcher.settle(sight, recorded, full=sight.paths is None)
            if not hold_stamps:
                stamps.flush(index)  # (a checkpoint's, held until now)
            if asked is not None:
                asked.result()  # (reaped)
            return Snapshot(recorded, recorded_tree, False, worktree)
        own = git.own_git_dir(index)
        if own is not None:
            make_git_dir(own, recorded)  # (a task from before there was one)
        # the lookout may have added these very paths already (``bar.changes.fast.staging``)
        adopted = (staging.adopt(index, sight.staged, scope)
                   if sight is not None and sight.staged is not None and not excludes else None)  # fmt: skip
        if adopted is not None and sight is not None and sight.staged is not None:
            # with the configuration read as its tree was written
            asked = asked or exact.answered(sight.staged.get("config"))
        # whether git converts here, and how the commit may be written (``bar.changes.fast.object_writer``),
        # read while git adds (asked after the tree is known)
        asked = asked or exact.ask(worktree)
        if adopted is not None:
            (tree, started_ns), whole = adopted, True
            patch = sight.staged.get("patch") if sight is not None and sight.staged else None
            ready = patch if isinstance(patch, dict) else None
        else:
            tree, whole, scope = write_whole(worktree, index, scope, excludes)
    snap = _record(worktree, index, ref, recorded, message, tree, recorded_tree, scope, known,
                   started_ns, restored_tree, asked, on_tree, excludes, hold_stamps,
                   ready)  # fmt: skip
    if sight is not None:
        # what it named and this snapshot left out is named again next time
        left_out = (sight.paths or set()) if not whole else _excluded(sight.paths, excludes)
        watcher.settle(sight, snap.commit, full=sight.paths is None, keep=sorted(left_out))
    elif restored_tree is not None:
        watcher.rebase(index, recorded, snap.commit)
    return snap


def _record(worktree: Path, index: Path, ref: str, recorded: str, message: str, tree: str,
            recorded_tree: str | None, scope: list[str] | None, known: dict[str, int] | None,
            started_ns: int, restored_tree: str | None, asked: Started | None,
            on_tree: OnTree | None, excludes: Sequence[str], hold: bool,
            ready: dict[str, Any] | None = None) -> Snapshot:  # fmt: skip
    """``take``, once the worktree's tree is written: the commit and the stamps.
    ``asked``: ``exact.ask``, begun before; ``on_tree``: as for ``take``."""
    recorded_tree = (recorded_tree or stamps.tree_of(index, recorded)
                     or git.tree_of(worktree, recorded))  # fmt: skip
    same = tree == recorded_tree
    if not same and on_tree is not None:
        on_tree(tree, ready)
    kept = (
        None if scope is None else [p for p in scope if not _only_excluded(worktree, p, excludes)]
    )
    shape = None if same else stamps.shape_of(worktree, index, tree, scope=kept)
    converts, raw_changed, raw = _raw_parent(worktree, index, tree, recorded, recorded_tree,
                                             shape, scope, asked)  # fmt: skip
    rules = exact.ignore_sources(worktree, asked) if asked is not None else None
    if same and not raw_changed:
        if restored_tree is None or not stamps.recommit(index, tree, recorded):
            stamps.stamp(worktree, index, tree, recorded, started_ns, scope, known=known,
                         converts=converts, hold=hold, ignore_sources=rules)  # fmt: skip
        return Snapshot(recorded, tree, False, worktree)
    reason = f"bar: {message.splitlines()[0]}"
    writer = _writer(worktree, asked)
    parents = [recorded] if raw is None else [recorded, raw]
    commit = (writer.commit(tree, parents, message) if writer is not None else None) or (
        git.commit_tree(worktree, tree, parents, message, identity=BAR_IDENTITY)
    )
    try:
        if writer is None or not writer.move(ref, commit, recorded):
            git.update_ref(worktree, ref, commit, recorded, reason)  # the ref is at `recorded`
    except GitError:
        now = git.rev_parse(worktree, ref)
        parent = recorded
        if now is not None and now != recorded:
            if git.is_ancestor(worktree, recorded, now):
                parent = now  # a snapshot a crash left unrecorded: kept in the chain
            else:
                warn(f"{ref} was moved off the task's snapshots (to {now[:10]}); bar chains "
                     "the new snapshot onto the last one the ledger names")  # fmt: skip
        if parent != recorded:
            commit = git.commit_tree(worktree, tree, [parent] if raw is None else [parent, raw],
                                     message, identity=BAR_IDENTITY)  # fmt: skip
        git.update_ref(worktree, ref, commit, now, reason)
    if restored_tree is None or not stamps.recommit(index, tree, commit):
        stamps.stamp(worktree, index, tree, commit, started_ns, scope, shape, known, converts,
                     hold=hold, ignore_sources=rules)  # fmt: skip
    return Snapshot(commit, tree, True, worktree)


def _writer(worktree: Path, asked: Started | None) -> object_writer.Writer | None:
    """What writes the snapshot's commit and moves its ref without git, given the
    configuration read beside ``git add`` (None: git does)."""
    if asked is None or not speed.fast():
        return None
    said = asked.result()
    if said.returncode not in (0, 1):  # (1: none of the keys is set)
        return None
    return object_writer.Writer.for_repository(git.pinned_common_dir(worktree), said.out)


def _raw_parent(worktree: Path, index: Path, tree: str, recorded: str, recorded_tree: str,
                shape: Shape | None, scope: Sequence[str] | None, asked: Started | None,
                ) -> tuple[bool, bool, str | None]:  # fmt: skip
    """The raw-bytes parent of a new snapshot (``bar.git.exact``) where git converts: whether
    git converts here, whether the raw bytes differ from ``recorded``'s (a line-ending
    change alone leaves the tree as it was, yet must be kept), and the parent (None: no
    file needs raw bytes)."""
    attributes = shape.has_attributes if shape else stamps.stamped_attributes(index)
    if attributes is None:
        shape = list_tree(worktree, tree)
        attributes = shape.has_attributes
    if not exact.converts(worktree, attributes, asked):
        return False, False, None  # git stores the bytes as they are
    listing = shape if isinstance(shape, Listing) else list_tree(worktree, tree)
    before = exact.raw_entries(worktree, exact.raw_tree_of(worktree, recorded))
    changed = [] if tree == recorded_tree else [
        c.path for c in git.diff_tree_raw(worktree, recorded_tree, tree)]  # fmt: skip
    # a full rescan (no scope) may hide a change of line endings alone anywhere: git
    # found the file's converted contents unchanged, so every file is a candidate
    rescanned = listing.modes if scope is None else (p for p in scope if p in listing.modes)
    candidates = [*changed, *rescanned]
    entries = exact.next_entries(worktree, index, listing.modes, before, candidates)
    if entries == before:
        return True, False, git.rev_parse(worktree, f"{recorded}^2") if before else None
    return True, True, exact.raw_parent(worktree, entries)


# git reads blobs through maps of the pack file, by default as much of it as it touches:
# a step changing 10,000 files of a 40,000-file repository had its diff map 85 MB of an
# 84 MB pack (counted in the process's resident memory). Small windows, and a bound on
# what stays mapped, keep that near 30 MB, the diff no slower.
_SMALL_PACK_WINDOWS = ("-c", "core.packedGitWindowSize=4m", "-c", "core.packedGitLimit=16m")


def write_patch(repo: Path, a: str, b: str, path: Path, *, points: bool = True) -> DiffStat:
    """Write the replayable patch from ``a`` to ``b`` into ``path``; return its stat. One
    ``git diff`` gives both: its numstat block comes first and ends with an empty entry
    (two NULs, which no path holds), the patch follows and is streamed to the file.
    ``points``: pass the crash points around the write (not from a thread, whose points
    would fall in an order of the scheduler's: ``steps.PatchJob`` passes them itself)."""
    if points:
        faults.point(f"before writing {path.name}")
    cmd = ["git", *git.NO_PROGRAMS, *_SMALL_PACK_WINDOWS, "-C", str(repo),
           *git.diff_patch_args(a, b, with_numstat=True)]  # fmt: skip
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    head = b""
    try:
        with _scratch_file() as err:
            proc = subprocess.Popen(cmd, env=clean_env(git.pinned_env(repo)),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err)  # fmt: skip
            assert proc.stdout is not None
            in_head = True
            with proc.stdout:
                while chunk := proc.stdout.read(1 << 16):
                    if in_head:
                        head += chunk
                        end = head.find(b"\0\0")
                        if end < 0:
                            continue
                        head, chunk, in_head = head[: end + 1], head[end + 2 :], False
                    _write_all(fd, chunk)
            if proc.wait() != 0:
                err.seek(0)
                raise GitError(cmd, proc.returncode, b"", err.read())
    finally:
        os.close(fd)
    if points:
        faults.point(f"after writing {path.name}")
    return git.parse_numstat(head)


def _scratch_file() -> BinaryIO:
    """An unnamed file for a child's stderr (``tempfile`` costs more to import than the
    whole diff takes on a small change)."""
    try:
        return open(os.memfd_create("bar-stderr", os.MFD_CLOEXEC), "w+b")
    except (AttributeError, OSError):
        import tempfile

        return tempfile.TemporaryFile()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
