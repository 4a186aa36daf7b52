"""What an interrupted step made, told apart from what was made after it stopped.

When ``bar run`` is killed, its step is recorded by the next command that takes the
task (``bar.step.recovery``). By then the developer may have edited files by hand: those are
not the step's, and must not be recorded as its work. Every process of a step dies with
its ``bar run`` (``bar.sandbox.leftovers``), so nothing the step started writes after
bar's last sign of life: the supervisor touches the step's intent journal while the
command runs, and after the command and its hooks end (``alive_until``). A file the
kernel changed later than that (its ctime, which no program can set back) is not the
step's; a path that is gone is judged by the ctime of the nearest directory still
there. What cannot be attributed to the step is left to a ``manual`` step.

``split`` returns the tree of what the step made (the state before it, with its own
changes on top) when some change on disk is not the step's; the caller records the
step with that tree, and the look for hand edits that follows records the rest.

A step that ended is split the same way, by the ticks of the kernel's file clock its
``bar run`` saw (``bar.step.run``): the tick in which its first process was released
(a file edited by hand in the moments between the look for hand edits and then has an
earlier ctime) and the first tick after everything it started had ended. Its own
changes all lie between; what lies outside is recorded as a ``manual`` step after it.
The one thing ctime cannot tell is a removal in a directory the step changed too (the
directory's ctime is the step's): it is credited to the step. A directory the step
renames keeps its files' own ctimes; only the directory's moves. So a file under a
directory made or moved in within the step's ticks, where the state before had no such
directory (or that arrives with the bytes a path the change left had), is the step's:
where git converts, the same bytes under another ``.gitattributes`` are another blob.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from bar import git
from bar.base.clock import iso_of, now_iso
from bar.changes import fast
from bar.git import BAR_IDENTITY, exact
from bar.history import steps
from bar.history.snapshot import Snapshot
from bar.model import outcome
from bar.model.journals import RunIntent
from bar.model.records import Artifacts
from bar.model.tasks import Task
from bar.terminal.pipes import STDOUT_HEADER

_GITLINK = "160000"


def alive_until(task: Task, step_id: str) -> int:
    """When the step's ``bar run`` last showed it was alive (ns, the kernel's clock):
    the latest change of its intent journal (the supervisor touches it a hundred times
    a second, and bar once the command ended) and of the artifacts it was writing (not a patch: the recording's own)."""
    latest = 0
    signs = (
        task.paths.marker,
        outcome.path(task.paths),
        *task.paths.artifacts.glob(f"{step_id}.*"),
    )
    for path in signs:
        if path.suffix == ".patch":
            continue
        try:
            latest = max(latest, os.lstat(path).st_mtime_ns)
        except OSError:
            continue
    return latest


class Bound:
    """When a change on disk is the step's: made before ``until_ns``, or at it too when
    ``inclusive``; and not before ``from_ns``, the tick in which its first process was
    released (``bar.step.run``: what changed earlier was the developer's)."""

    __slots__ = ("from_ns", "inclusive", "until_ns")

    def __init__(self, until_ns: int, inclusive: bool, from_ns: int = 0) -> None:
        self.until_ns, self.inclusive, self.from_ns = until_ns, inclusive, from_ns

    def holds(self, ctime_ns: int) -> bool:
        if ctime_ns < self.from_ns:
            return False
        return ctime_ns <= self.until_ns if self.inclusive else ctime_ns < self.until_ns


def bound(task: Task, intent: RunIntent) -> Bound:
    """What the interrupted step ``step_id`` can have made. While its command ran, the
    last sign of life (``alive_until``) bounds it strictly: the kernel's clock ticks in
    milliseconds, and an edit in the tick of the last sign may have come after bar died.
    Once the command had ended, every process of the step was gone when bar kept how it
    ended (``bar.model.outcome``): what changed no later than that file's mtime is
    the step's, that tick included, if bar is seen alive in a later tick (a file it
    wrote while it recorded the step), since an edit made after bar died is later still.
    Nothing stamped before the step began is its own (``RunIntent.from_ns``)."""
    step_id, since = intent.step_id, intent.from_ns
    if intent.exit_code is None:  # (``journals.RUN.read`` found no outcome of this step)
        return Bound(alive_until(task, step_id), inclusive=False, from_ns=since)
    try:
        ended = os.lstat(outcome.path(task.paths)).st_mtime_ns
    except OSError:  # (kept in the intent itself, by an older bar)
        return Bound(alive_until(task, step_id), inclusive=False, from_ns=since)
    later = (task.paths.artifact(step_id, "patch")[0], task.index, fast.stamps_file(task.index))
    for path in later:
        try:
            if os.lstat(path).st_mtime_ns > ended:
                return Bound(ended, inclusive=True, from_ns=since)
        except OSError:
            continue
    return Bound(max(ended, alive_until(task, step_id)), inclusive=False, from_ns=since)


def last_sign_of_life(task: Task, step_id: str, intent: RunIntent) -> str:
    """When an interrupted step last ran (``alive_until``), not the time a later
    command found it."""
    latest = alive_until(task, step_id)
    ended = iso_of(latest) if latest else now_iso()
    return ended if ended >= intent.started_at else intent.started_at


def found_artifacts(task: Task, step_id: str) -> Artifacts:
    """What an interrupted step left in its artifacts directory."""
    artifacts = Artifacts()
    out_path, out_rel = steps.artifact(task, step_id, "output")
    for leftover in task.paths.artifacts.glob(f"{step_id}.output.*.tmp"):
        leftover.unlink(missing_ok=True)
    if out_path.exists() and out_path.stat().st_size > len(STDOUT_HEADER):
        artifacts.output = out_rel
    else:
        out_path.unlink(missing_ok=True)
    cast_path, cast_rel = steps.artifact(task, step_id, "cast")
    if cast_path.exists():
        artifacts.cast = cast_rel
    return artifacts


def take_tree(task: Task, recorded: str, message: str, tree: str) -> Snapshot:
    """Record ``tree`` (``split``'s, made rather than read from the worktree) as the
    snapshot after ``recorded``. The side index's stamps are dropped: the next look
    adds everything, and finds what the worktree holds besides."""
    worktree, ref = task.worktree, task.snapshot_ref
    fast.forget(task.index)
    if tree == steps.tree_of(task, recorded):
        return Snapshot(recorded, tree, False, worktree)
    now = git.rev_parse(worktree, ref)
    parent = recorded
    if now is not None and now != recorded and git.is_ancestor(worktree, recorded, now):
        parent = now  # a snapshot a crash left unrecorded: kept in the chain
    # (where git converts, the bytes on disk too: of the look's snapshot, else the last)
    raw = exact.raw_parent_made_of(worktree, tree, [c for c in (now, recorded) if c is not None])
    parents = [parent] if raw is None else [parent, raw]
    commit = git.commit_tree(worktree, tree, parents, message, identity=BAR_IDENTITY)
    git.update_ref(worktree, ref, commit, now, f"bar: {message.splitlines()[0]}")
    return Snapshot(commit, tree, True, worktree)


def _made_by_then(worktree: Path, rel: str, until: Bound) -> bool:
    """Whether the change at ``rel`` was made within ``until``: the path's own ctime,
    or for one that is gone, that of the nearest directory still there; where a file or
    a link stands in the way of its directories, that one's (never through a link)."""
    path = os.fsencode(worktree)
    try:
        ctime = os.lstat(path).st_ctime_ns
    except OSError:
        return False
    for part in os.fsencode(rel).split(b"/"):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            break  # (judged by the directory it was removed from)
        except OSError:
            return False
        ctime = st.st_ctime_ns
        if not stat.S_ISDIR(st.st_mode):
            break
    return until.holds(ctime)


def _moved_by_then(
    worktree: Path, rel: str, until: Bound, old_dirs: Callable[[], set[str]] | None = None
) -> bool:
    """Whether a directory above ``rel`` was made, or moved there, within ``until``: a
    renamed directory's files keep their own ctimes, and only the directory's moves.
    ``old_dirs``: the directories the state before held, where one does not count (an
    entry added to a directory moves its ctime too): for a file not known to be moved,
    only a directory new there tells, and only of a file untouched since before the step
    began (one changed after it, in place, was changed by a hand)."""
    path = os.fsencode(worktree)
    if old_dirs is not None:
        try:
            if os.lstat(os.path.join(path, os.fsencode(rel))).st_ctime_ns >= until.from_ns:
                return False
        except OSError:
            return False
    parts = os.fsencode(rel).split(b"/")[:-1]
    for n, part in enumerate(parts, 1):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            return False
        if until.holds(st.st_ctime_ns):
            if old_dirs is None:
                return True
            above = b"/".join(parts[:n]).decode("utf-8", "surrogateescape")
            if above not in old_dirs():
                return True
    return False


def _dirs_of(worktree: Path, tree: str) -> Callable[[], set[str]]:
    """The directories of ``tree``, listed once when first asked."""
    found: list[set[str]] = []

    def dirs() -> set[str]:
        if not found:
            res = git.git(worktree, "ls-tree", "-r", "-d", "-z", "--name-only", tree)
            found.append({os.fsdecode(p) for p in res.stdout.split(b"\0") if p})
        return found[0]

    return dirs


def _committed(task: Task) -> set[str]:
    """The paths the commits made since the task's last record changed (a step that
    committed a file, an ignored one too, moves no ctime of it: what the step committed
    is part of the step: docs/internals/record.md, "The record never lies")."""
    last = task.ledger.last()
    before = getattr(last, "head", None) or task.base_commit
    now = git.head(task.worktree)
    if now is None or now == before:
        return set()
    changed = git.diff_tree_raw(task.worktree, before, now)
    return {c.path for c in changed}


def split(task: Task, before: str, until: Bound, now_tree: str | None = None) -> str | None:
    """The tree of what the step made since the recorded state ``before``, if some of
    what changed on disk since was made outside ``until`` (None: all of it is the step's,
    or nothing changed). ``now_tree``: what is on disk, if just snapshotted."""
    worktree = task.worktree
    before_tree = steps.tree_of(task, before)
    now_tree = now_tree or steps.current_tree(task)
    if now_tree == before_tree or until.until_ns <= 0:
        return None
    changes = git.diff_tree_raw(worktree, before_tree, now_tree)
    committed = _committed(task)
    # what left a path in this change, by its mode and bytes: a file that arrives with
    # them elsewhere was moved (with its directory, its own ctime kept); where git
    # converts, the same bytes may be stored otherwise at the new place (another
    # directory's .gitattributes): a file in a directory new there, made or moved in
    # within ``until``, is the step's all the same
    left = {(c.src_mode, c.src_blob): c.path for c in changes if c.status in ("D", "M", "T")}
    old_dirs = _dirs_of(worktree, before_tree)
    # (a nested repository's commit changes nothing its directory's ctime shows: the step's)
    mine = [
        c
        for c in changes
        if _GITLINK in (c.src_mode, c.dst_mode)
        or c.path in committed
        or _made_by_then(worktree, c.path, until)
        or _moved_by_then(
            worktree,
            c.path,
            until,
            None if left.get((c.dst_mode, c.dst_blob), c.path) != c.path else old_dirs,
        )
    ]
    if len(mine) == len(changes):
        return None
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bar-interrupted-", dir=task.dir) as tmp:
        env = git.index_env(Path(tmp) / "index")  # (a copy's place: written whole)
        git.git(worktree, "read-tree", before_tree, env=env)
        if mine:
            null = "0" * len(before_tree)
            lines = [
                (f"0 {null}" if c.status == "D" else f"{c.dst_mode} {c.dst_blob}").encode()
                + b"\t"
                + c.path.encode("utf-8", "surrogateescape")
                for c in mine
            ]
            git.git(
                worktree,
                "update-index",
                "-z",
                "--replace",
                "--index-info",
                env=env,
                input=b"\0".join(lines) + b"\0",
            )
        return git.out(worktree, "write-tree", env=env)
