"""Snapshots: the full state of a task worktree as a git commit, fast.

Each task has a persistent side index (``tasks/<id>/index``, used as ``GIT_INDEX_FILE``),
never the worktree's own index, so the agent's staging area is left alone. ``git add -A``
against it re-hashes only files whose stat changed, so a snapshot costs about one
``git status``. The resulting tree is wrapped in a commit whose parent is the previous
snapshot, and ``refs/bar/tasks/<id>`` is moved to it with a compare-and-swap; the chain
starts at the task's base commit, so ``git log <base>..refs/bar/tasks/<id>`` is the task's
history and git's gc never drops a step.

The side index itself (seeding it, writing the worktree into it) is ``bar.history.side_index``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bar import git
from bar.base import file_clock, speed
from bar.base.notices import warn
from bar.base.proc import Started
from bar.changes import fast
from bar.errors import GitError
from bar.git import BAR_IDENTITY, conversions, exact, object_writer
from bar.git.tree_shape import Ahead, Listing, Shape, list_tree
from bar.history import side_index

if TYPE_CHECKING:
    from bar.base.inotify import Seen

_env = git.index_env


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
    ``ready``: the patch to it the task's watcher wrote, if it staged that tree."""

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
    changed: Seen | None = None,
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
    watcher cannot see is looked for too (``bar.changes.fast.watcher``), every so often.
    ``on_tree``: called with the new tree once it is written, if it differs from the
    recorded one, before the commit is made (the caller's patch is written meanwhile:
    ``steps.PatchJob``). ``hold_stamps``: the new stamps are kept in memory, not written
    (``stamps._HELD``): a checkpoint's, which the step's own snapshot writes.
    """
    started_ns = file_clock.floor()
    stamped = stamped_at or recorded  # the state the side index was last noted at
    sight = None  # what the task's watcher saw since ``stamped``, if it was asked
    asked: Started | None = None
    ready: dict[str, Any] | None = None  # the patch to the tree the watcher staged, if taken
    ahead: Ahead | None = None
    renormalize = False
    if restored_tree is not None:
        scope: list[str] | None = []
        known = None
        tree = restored_tree
    else:
        # git's conversions changed (no file need have): every file is hashed anew
        # or HEAD moved: the side index starts over from it (``side_index.reseed``)
        renormalize = conversions.moved(worktree, index) or side_index.head_moved(worktree, index)
        if changed is None and fast.watching(index) and not renormalize:
            # (a staging is made only while no command holds the task: never during a
            # step, so only a command's look for hand edits may find one)
            sight = fast.look(
                index, stamped, stale_ok=not hand_edits, staged=hand_edits and not excludes
            )
            changed = sight.seen() if sight is not None else None
            if sight is not None and sight.staged is not None and "config" not in sight.staged:
                asked = exact.ask(worktree)  # (below) there is a tree to record: begun now
        found = None if renormalize else fast.scan(worktree, index, stamped, changed, before_look)
        scope, known = found if found is not None else (None, None)
        scope = side_index.with_left_out(worktree, index, scope)
        if scope is None:
            known = None
        if before_look is not None:
            before_look()  # (a full rescan follows: before it)
        if (
            scope == []
            and stamped == recorded
            and not side_index.became_repositories(worktree, index, known)
        ):
            # nothing changed since the last stamps, which therefore still hold
            if sight is not None and sight.paths != set():
                fast.settle(sight, recorded, full=sight.paths is None)
            if not hold_stamps:
                fast.flush(index)  # (a checkpoint's, held until now)
            if asked is not None:
                asked.result()  # (reaped)
            return Snapshot(recorded, recorded_tree, False, worktree)
        own = git.own_git_dir(index)
        if own is not None:
            side_index.make_git_dir(own, recorded)  # (a task from before there was one)
        # the watcher may have added these very paths already (``bar.changes.fast.staging``)
        adopted = (
            fast.adopt_staged(index, sight.staged, scope)
            if sight is not None and sight.staged is not None and not excludes
            else None
        )
        if adopted is not None and sight is not None and sight.staged is not None:
            # with the configuration read as its tree was written
            asked = asked or exact.answered(sight.staged.get("config"))
        # whether git converts here, and how the commit may be written (``bar.git.object_writer``),
        # read while git adds (asked after the tree is known)
        asked = asked or exact.ask(worktree)
        if adopted is not None:
            (tree, started_ns), whole = adopted, True
            patch = sight.staged.get("patch") if sight is not None and sight.staged else None
            ready = patch if isinstance(patch, dict) else None
        else:
            # a full look: what its stamps need of the recorded tree is read meanwhile
            if scope is None and speed.fast():
                ahead = Ahead(worktree, recorded)
            tree, whole, scope = side_index.write_whole(
                worktree,
                index,
                scope,
                excludes,
                renormalize=renormalize,
                left_out=side_index.left_out_file(index),
                unchanged=known,
            )
        if not renormalize and conversions.may_touch_attributes(
            worktree, scope, fast.stamped_attributes(index)
        ):
            recorded_tree = (
                recorded_tree or fast.tree_of(index, recorded) or git.tree_of(worktree, recorded)
            )
            renormalize = conversions.touches_attributes(worktree, recorded_tree, tree)
            if renormalize:  # a .gitattributes changed: what it covers is hashed anew
                tree, whole, scope = side_index.write_whole(
                    worktree,
                    index,
                    None,
                    excludes,
                    renormalize=True,
                    left_out=side_index.left_out_file(index),
                )
                ready = None
    snap = _record(
        worktree,
        index,
        ref,
        recorded,
        message,
        tree,
        recorded_tree,
        scope,
        known,
        started_ns,
        restored_tree,
        asked,
        on_tree,
        excludes,
        hold_stamps,
        ready,
        ahead,
    )
    if renormalize:
        conversions.note(worktree, index)
        side_index.note_head(worktree, index)
    if sight is not None:
        # what it named and this snapshot left out is named again next time
        left_out = (
            (sight.paths or set()) if not whole else side_index.excluded(sight.paths, excludes)
        )
        fast.settle(sight, snap.commit, full=sight.paths is None, keep=sorted(left_out))
    elif restored_tree is not None:
        fast.rebase(index, recorded, snap.commit)
    return snap


def _record(
    worktree: Path,
    index: Path,
    ref: str,
    recorded: str,
    message: str,
    tree: str,
    recorded_tree: str | None,
    scope: list[str] | None,
    known: dict[str, int] | None,
    started_ns: int,
    restored_tree: str | None,
    asked: Started | None,
    on_tree: OnTree | None,
    excludes: Sequence[str],
    hold: bool,
    ready: dict[str, Any] | None = None,
    ahead: Ahead | None = None,
) -> Snapshot:
    """``take``, once the worktree's tree is written: the commit and the stamps.
    ``asked``: ``exact.ask``, begun before; ``on_tree``: as for ``take``; ``ahead``:
    what a full look read of the recorded tree while git added."""
    recorded_tree = (
        recorded_tree or fast.tree_of(index, recorded) or git.tree_of(worktree, recorded)
    )
    same = tree == recorded_tree
    if not same and on_tree is not None:
        on_tree(tree, ready)
    kept = (
        None
        if scope is None
        else [p for p in scope if not side_index.only_excluded(worktree, p, excludes)]
    )
    shape = None if same else fast.shape_of(worktree, index, tree, scope=kept)
    if shape is None and ahead is not None:
        shape = ahead.listing(tree, recorded_tree)  # (no stamps to keep the shape from)
    converts, raw_changed, raw, listed = _raw_parent(
        worktree, index, tree, recorded, recorded_tree, shape, scope, asked
    )
    shape = shape or listed  # (a tree walked once is not walked again for the stamps)
    rules = exact.ignore_sources(worktree, asked) if asked is not None else None
    if same and not raw_changed:
        if restored_tree is None or not fast.recommit(index, tree, recorded):
            fast.stamp(
                worktree,
                index,
                tree,
                recorded,
                started_ns,
                scope,
                shape,
                known=known,
                converts=converts,
                hold=hold,
                ignore_sources=rules,
                ahead=ahead,
            )
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
                warn(
                    f"{ref} was moved off the task's snapshots (to {now[:10]}); bar chains "
                    "the new snapshot onto the last one the ledger names"
                )
        if parent != recorded:
            commit = git.commit_tree(
                worktree,
                tree,
                [parent] if raw is None else [parent, raw],
                message,
                identity=BAR_IDENTITY,
            )
        git.update_ref(worktree, ref, commit, now, reason)
    if restored_tree is None or not fast.recommit(index, tree, commit):
        fast.stamp(
            worktree,
            index,
            tree,
            commit,
            started_ns,
            scope,
            shape,
            known,
            converts,
            hold=hold,
            ignore_sources=rules,
            ahead=ahead,
        )
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


def _raw_parent(
    worktree: Path,
    index: Path,
    tree: str,
    recorded: str,
    recorded_tree: str,
    shape: Shape | None,
    scope: Sequence[str] | None,
    asked: Started | None,
) -> tuple[bool, bool, str | None, Listing | None]:
    """The raw-bytes parent of a new snapshot (``bar.git.exact``) where git converts: whether
    git converts here, whether the raw bytes differ from ``recorded``'s (a line-ending
    change alone leaves the tree as it was, yet must be kept), the parent (None: git
    converts nothing here), and the walk of ``tree`` it made, if it made one."""
    attributes = shape.has_attributes if shape else fast.stamped_attributes(index)
    listed = None
    if attributes is None:
        shape = listed = list_tree(worktree, tree)
        attributes = shape.has_attributes
    if not exact.converts(worktree, attributes, asked):
        return False, False, None, listed  # git stores the bytes as they are
    listing = shape if isinstance(shape, Listing) else list_tree(worktree, tree, modes=True)
    before = exact.raw_entries(worktree, exact.raw_tree_of(worktree, recorded))
    changed = (
        []
        if tree == recorded_tree
        else [c.path for c in git.diff_tree_raw(worktree, recorded_tree, tree)]
    )
    # a full rescan (no scope) may hide a change of line endings alone anywhere: git
    # found the file's converted contents unchanged, so every file is a candidate
    rescanned = listing.modes if scope is None else (p for p in scope if p in listing.modes)
    candidates = [*changed, *rescanned]
    entries = exact.next_entries(worktree, index, listing.modes, before, candidates, changed)
    # (every snapshot recorded where git converts has a raw parent: it names the
    # configuration git's checkout of the other files writes their bytes by)
    checkout = exact.checkout_config(worktree, asked)
    if entries == before and exact.recorded_checkout(worktree, recorded) == checkout:
        return True, False, git.rev_parse(worktree, f"{recorded}^2"), listed
    return True, entries != before, exact.raw_parent(worktree, entries, checkout), listed


# git reads blobs through maps of the pack file, by default as much of it as it touches:
