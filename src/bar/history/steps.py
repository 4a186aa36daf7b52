"""Writing step records: artifacts, patches, and the ledger line that commits a step.

Every verb ends the same way: a patch artifact from the snapshot before to the snapshot
after (``record_changes``), then one scrubbed ledger line (``append``), the commit point
of the operation. Hand edits found between steps become a ``manual`` step
(``record_hand_edits``) before anything else is recorded, so nothing is mis-attributed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bar import git
from bar.base import faults
from bar.base.clock import ms_since, now_iso
from bar.base.notices import note, plural
from bar.changes import fast
from bar.errors import CorruptFile
from bar.git import DiffStat, conversions, patches, racy
from bar.history import side_index, snapshot, telemetry
from bar.model.records import (
    ApplyStep,
    DecisionStep,
    ManualStep,
    RollbackStep,
    RunStep,
    SyncStep,
    step_from_record,
)
from bar.model.tasks import Task
from bar.redact import Scrubber
from bar.redact import known as known_secrets

# A snapshot taking this long or longer makes its patch be written by two gits at once
# (``patches.write_patch``'s ``split``); a small step's takes a few milliseconds.
SPLIT_AFTER_S = 0.25


def artifact(task: Task, step_id: str, suffix: str) -> tuple[Path, str]:
    """(path, the name the ledger records) of a step's artifact; never through a link."""
    if task.paths.artifacts.is_symlink():
        raise CorruptFile(
            f"the artifacts directory {task.paths.artifacts} is a symbolic link; "
            "bar does not follow links in its own files",
            hint="run `bar doctor` to check the task",
        )
    return task.paths.artifact(step_id, suffix)


# The artifacts a step writes under fixed names (``<step>.<suffix>``); its checkpoints'
# patches (``<step>.<n>.patch``) are each removed just before they are written.
WRITTEN = (
    "output",
    "output.stderr.tmp",
    "cast",
    "patch",
    "policy.jsonl",
    "checkpoints.jsonl",
    "network.jsonl",
)


def clear_leftovers(task: Task, step_id: str) -> None:
    """Remove files already named like a new step's artifacts before it writes them.

    No recorded step owns them (an interrupted one was recorded first), and one that is
    a link would make the step's write fail (each writer opens with ``O_NOFOLLOW``).
    Only the names a step writes are tried: listing the directory would read every
    earlier step's artifacts at each step (~23 ms at 20,000 files).
    """
    for suffix in WRITTEN:
        (task.paths.artifacts / f"{step_id}.{suffix}").unlink(missing_ok=True)


def record_changes(
    task: Task, step_id: str, before: str, after: str
) -> tuple[DiffStat, str | None]:
    """Write the step's patch from ``before`` to ``after``: (its stat, its artifact name)."""
    if before == after:
        return DiffStat.empty(), None
    path, rel = artifact(task, step_id, "patch")
    path.unlink(missing_ok=True)  # a leftover (or a planted link) is replaced, not written through
    return _kept(path, rel, patches.write_patch(task.worktree, before, after, path))


def _kept(path: Path, rel: str, stat: DiffStat) -> tuple[DiffStat, str | None]:
    """A patch just written: (its stat, its artifact name), or no artifact if empty."""
    if path.stat().st_size == 0:  # the same files (a change undone, or line endings only)
        path.unlink()
        return stat, None
    return stat, rel


class PatchJob:
    """A step's patch, written while its snapshot is committed: ``begin`` (given to
    ``snapshot.take`` as its ``on_tree``) starts the diff from ``before`` to the new tree
    in a thread, so that git writes the patch while other gits write the commit and move
    the ref; ``finish`` waits for it. When the snapshot found no new tree, ``finish``
    writes the patch as ``record_changes`` does."""

    __slots__ = (
        "_error",
        "_made",
        "_stat",
        "_thread",
        "before",
        "path",
        "rel",
        "step_id",
        "task",
        "tree",
    )

    def __init__(self, task: Task, step_id: str, before: str) -> None:
        self.task, self.step_id, self.before = task, step_id, before
        self._made = time.monotonic()  # (made just before the snapshot is taken)
        self.path: Path | None = None
        self.rel = ""
        self.tree = ""  # the tree its patch goes to
        self._thread: threading.Thread | None = None
        self._stat: DiffStat | None = None
        self._error: BaseException | None = None

    def begin(self, tree: str, ready: dict[str, Any] | None = None) -> None:
        """``ready``: the patch to ``tree`` the task's watcher wrote while it staged the
        hand edits (``bar.changes.fast.staging``), taken if it is the one this job would write."""
        self.tree = tree
        self.path, self.rel = artifact(self.task, self.step_id, "patch")
        self.path.unlink(missing_ok=True)  # a leftover (or a planted link) is replaced
        faults.point(f"before writing {self.path.name}")
        if ready is not None:
            self._stat = fast.take_patch(self.task.index, ready, self.before, tree, self.path)
            if self._stat is not None:
                return
        # a snapshot that took long hashed many files, or stat'ed a large tree: the patch
        # may be large too, and is then written by two gits at once (a second git costs
        # a small step more than it saves)
        split = time.monotonic() - self._made >= SPLIT_AFTER_S
        self._thread = threading.Thread(
            target=self._write, args=(tree, split), daemon=True, name="bar-patch"
        )
        self._thread.start()

    def _write(self, tree: str, split: bool) -> None:
        assert self.path is not None
        try:
            self._stat = patches.write_patch(
                self.task.worktree, self.before, tree, self.path, points=False, split=split
            )
        except BaseException as exc:  # (raised again by ``finish``, in the caller's thread)
            self._error = exc

    def finish(self, after: str, tree: str | None = None) -> tuple[DiffStat, str | None]:
        """(the patch's stat, its artifact name) from ``before`` to ``after``; ``tree``:
        ``after``'s, if the patch was begun towards a tree it may not be."""
        if self.path is None or (self._thread is None and self._stat is None):
            return record_changes(self.task, self.step_id, self.before, after)
        if self._thread is not None:
            self._thread.join()
        if tree is not None and tree != self.tree:  # (a restore that came out otherwise)
            return record_changes(self.task, self.step_id, self.before, after)
        if isinstance(self._error, patches.PatchShort):  # (written beside the restore)
            return record_changes(self.task, self.step_id, self.before, after)
        if self._error is not None:
            raise self._error
        assert self._stat is not None
        faults.point(f"after writing {self.path.name}")
        return _kept(self.path, self.rel, self._stat)


_S = TypeVar("_S", RunStep, ManualStep, RollbackStep, ApplyStep, SyncStep, DecisionStep)


def append(task: Task, step: _S, scrubber: Scrubber | None = None) -> _S:
    """Append ``step`` to the ledger with every string scrubbed of secrets; the caller
    holds the task lock. Returns the step as written."""
    scrub = scrubber or known_secrets.scrubber()
    last = task.ledger.last()
    if isinstance(step, RunStep | ManualStep) and step.head:
        # the step (a commit, a reset) or a hand moved the worktree's HEAD: said with its
        # changes (what the step committed is part of the step: docs/internals/record.md,
        # "The record never lies")
        before = last.head if last is not None and last.head else task.base_commit
        if before and before != step.head:
            step.extra["head_moved"] = True
    if last is not None and last.head and step.head and last.head != step.head:
        keep_head(task, last.head, step.head)  # (before the line names it: a kept ref is harmless)
    stat, patch = getattr(step, "diff_stat", None), getattr(step, "artifacts", None)
    if stat is not None and patch is not None and patch.patch:
        patches.mask_names(task.dir / patch.patch, stat.file_list, scrub.scrub_values)
    written = step_from_record(scrub.scrub_obj(step.to_record()), "step")
    assert isinstance(written, type(step))
    task.ledger.append(written)
    telemetry.enqueue(task, written)
    return written


def keep_head(task: Task, old: str, new: str) -> None:
    """Keep ``old`` (a HEAD the ledger recorded) reachable when the task branch moved to
    ``new`` by something other than new commits on top of it (a reset, a rebase, a hard
    rollback): git's gc would otherwise drop the agent's commits the ledger names, and
    rolling back to them would fail. The ref lives under ``refs/bar/kept/<task id>/``."""
    if git.is_ancestor(task.git_cwd, old, new):
        return
    ref = f"{KEPT_REFS}{task.id}/{old}"
    git.git(task.git_cwd, "update-ref", "-m", "bar: keep a recorded HEAD", ref, old, check=False)


KEPT_REFS = "refs/bar/kept/"


def record_hand_edits(
    task: Task, before_look: Callable[[], None] | None = None
) -> ManualStep | None:
    """Record changes made in the worktree since the last step (caller holds the lock).
    ``before_look``: see ``snapshot.take``."""
    before = task.recorded_snapshot()
    step_id = task.ledger.next_step_id()
    started = now_iso()
    t0 = time.monotonic()
    job = PatchJob(task, step_id, before)
    snap = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        before,
        f"step {step_id} manual: hand edits",
        before_look=before_look,
        hand_edits=True,
        on_tree=job.begin,
    )
    if not snap.changed:
        return None
    stat, patch = job.finish(snap.commit)
    step = ManualStep(
        step_id=step_id,
        started_at=started,
        ended_at=now_iso(),
        duration_ms=ms_since(t0),
        diff_stat=stat,
        snapshot_before=before,
        snapshot=snap.commit,
        head=git.head(task.worktree),
    )
    step.artifacts.patch = patch
    append(task, step)
    note(f"recorded step {step_id} (manual): {plural(stat.files, 'file')} changed outside bar")
    return step


def current_tree(task: Task, recorded: str | None = None) -> str:
    """The worktree's tree as a snapshot would see it, without touching the task's
    state. ``recorded``: the task's recorded snapshot, whose stamps say what to look at
    (nothing at all when nothing changed: its own tree). What changed is added to a copy
    of the side index, so it never races a running step."""
    return _look(task, recorded)[0]


def _look(task: Task, recorded: str | None) -> tuple[str, dict[str, str]]:
    """``current_tree``, and the files of the worktree the record leaves out, each with
    why (``side_index.LEFT_OUT``'s keys)."""
    renormalize = conversions.moved(task.worktree, task.index) or side_index.head_moved(
        task.worktree, task.index
    )
    scope = side_index.with_left_out(
        task.worktree,
        task.index,
        fast.changed_since(task.worktree, task.index, recorded)
        if recorded and not renormalize
        else None,
    )
    noted = side_index.left_out_file(task.index)
    if scope == [] and recorded is not None:
        # (``bar.git.racy``'s suspects count as changed there)
        return tree_of(task, recorded), side_index.still_left_out(task.worktree, noted)
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bar-peek-", dir=task.dir) as tmp:
        index = Path(tmp) / "index"
        try:
            shutil.copyfile(task.index, index)
            racy.keep_time(task.index, index)
        except FileNotFoundError:
            scope = None
        seen = side_index.left_out_file(index)
        try:
            shutil.copyfile(noted, seen)
        except FileNotFoundError:
            pass
        tree = side_index.write_whole(
            task.worktree,
            index,
            scope,
            suspects=racy.suspects(task.index),
            renormalize=renormalize,
            left_out=seen,
        )[0]
        return tree, side_index.still_left_out(task.worktree, seen)


def note_tree(task: Task, state: str) -> None:
    """Have ``git.tree_of`` answer for the recorded state ``state`` without git, if the
    stamps are of it."""
    known = fast.tree_of(task.index, state)
    if known is not None:
        git.note_tree(state, known)


def tree_of(task: Task, state: str) -> str:
    """The tree of the recorded state ``state`` (from the stamps when they are of it)."""
    return fast.tree_of(task.index, state) or git.tree_of(task.project.root, state)


def has_unrecorded_changes(task: Task) -> bool:
    """True when the worktree differs from the last recorded snapshot (read-only)."""
    return unrecorded(task)[0]


def unrecorded(task: Task) -> tuple[bool, dict[str, str]]:
    """Whether the worktree differs from the last recorded snapshot, and the files of it
    the record leaves out, each with why (``side_index.LEFT_OUT``'s keys; read-only)."""
    recorded = task.recorded_snapshot()
    tree, left_out = _look(task, recorded)
    return tree != tree_of(task, recorded), left_out
