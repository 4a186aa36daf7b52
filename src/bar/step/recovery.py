"""Finishing what a crashed bar left, and recording what nobody recorded.

Every command that changes a task first takes the task lock and calls ``prepare``:
intents left by a bar that died (``bar.model.journals``) are completed by the same
``complete`` the verb itself would have called, then hand edits made since the last
step are recorded as a ``manual`` step, so nothing is lost or mis-attributed.
``finish_pending`` is the first half alone, for ``bar doctor --repair`` and ``task close``.

A bar killed while git moved the task's snapshot ref leaves git's ``<ref>.lock`` behind,
and every later move of the ref would fail on it. bar is the only writer of
``refs/bar/tasks/<id>`` and writes it only under the task lock, so the caller, holding
that lock, knows such a lock file is stale: ``clear_stale_ref_lock`` removes it first
(and ``clear_stale_index_lock`` the side index's, which only bar writes). The locks of
the worktree's own git (``HEAD.lock``, ``index.lock``, the branch's) are removed once no
live git holds them (``clear_stale_git_locks``, ``bar.worktree.git_locks``).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from bar import git
from bar.base.notices import note, plural
from bar.base.record import replace
from bar.git import BAR_IDENTITY, exact
from bar.history import bases, steps
from bar.history import queued as queued_steps
from bar.model import journals
from bar.model.records import Step
from bar.model.tasks import Task, load_task
from bar.worktree import git_locks as git_locks
from bar.worktree import guard

# git itself may lock the ref for a moment (``git gc`` packing refs from another task's
# worktree): a lock file younger than this gets the time to go away before it is removed.
_LIVE_REF_LOCK_S = 1.0


def clear_stale_ref_lock(task: Task) -> bool:
    """Remove a ``<snapshot ref>.lock`` left by a killed ``git update-ref`` (the caller
    holds the task lock). True if there was one."""
    path = git.ref_lock_path(task.project.root, task.snapshot_ref)
    deadline = time.monotonic() + _LIVE_REF_LOCK_S
    while True:
        try:
            age = time.time() - path.lstat().st_mtime
        except FileNotFoundError:
            return False
        if age >= _LIVE_REF_LOCK_S or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    path.unlink(missing_ok=True)
    note(f"removed {path}: a git lock on {task.snapshot_ref} left by a bar that was stopped")
    return True


def clear_stale_index_lock(task: Task) -> bool:
    """Remove the side index's ``index.lock`` left by a git that died or failed mid-write
    (a full disk): only bar writes the side index, under the task lock the caller holds."""
    path = task.index.with_name(task.index.name + ".lock")
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    note(f"removed {path}: a git lock on the side index left by a git that was stopped")
    return True


def clear_stale_git_locks(task: Task) -> list[Path]:
    """Remove the lock files a killed git left in the task's worktree's git directory
    and on its branch (``bar.worktree.git_locks``); those removed."""
    removed = git_locks.clear(task)
    for lock in removed:
        note(
            f"removed {lock}: a git lock in task {task.name}'s worktree left by a git "
            "that was stopped"
        )
    return removed


def finish_pending(task: Task) -> list[Step]:
    """Complete every intent a dead bar left (the caller holds the task lock)."""
    clear_stale_ref_lock(task)
    clear_stale_index_lock(task)
    clear_stale_git_locks(task)
    done: list[Step] = []
    last = task.ledger.last()
    run_intent = journals.RUN.read(task.paths)
    if run_intent is not None:
        if last is not None and last.number >= int(run_intent.step_id):
            journals.RUN.clear(task.paths)  # the step was recorded before the crash
        else:
            from bar.step.complete import complete

            done.append(complete(task, run_intent, None))
            what = f"recorded step {run_intent.step_id} ({shlex.join(run_intent.cmd)})"
            if run_intent.exit_code is not None:
                note(
                    f"{what}: it exited {run_intent.exit_code}; bar stopped (or failed) "
                    "before it was recorded"
                )
            else:
                note(f"{what} as interrupted: bar stopped before it finished")
    rollback_intent = journals.ROLLBACK.read(task.paths)
    sync_intent = journals.SYNC.read(task.paths)
    if rollback_intent is not None or sync_intent is not None:
        from bar.changes import rollback

        # (before any look: a file the restore had taken out is the worktree's)
        if rollback_intent is not None:
            rollback.hand_back(task, rollback.command_of(rollback_intent), rollback_intent.step_id)
        elif sync_intent is not None:
            rollback.hand_back(task, "bar sync", sync_intent.step_id)
    if rollback_intent is not None:
        rollback_intent = _hand_edits_first(
            task, rollback_intent, rollback_intent.restores_to, done, "rollback"
        )
        last = task.ledger.last()
        if last is not None and last.number >= int(rollback_intent.step_id):
            bases.settle(task, bases.base_at(task, last.number))  # task.json may lag the ledger
            journals.ROLLBACK.clear(task.paths)
        else:
            note(f"finishing rollback step {rollback_intent.step_id}, which was interrupted")
            done.append(rollback.complete(task, rollback_intent))
    if sync_intent is not None:
        from bar.changes import sync

        sync_intent = _hand_edits_first(task, sync_intent, sync_intent.merged, done, "sync")
        last = task.ledger.last()
        if last is not None and last.number >= int(sync_intent.step_id):
            bases.settle(task, bases.base_at(task, last.number))
            journals.SYNC.clear(task.paths)
        else:
            note(f"finishing sync step {sync_intent.step_id}, which was interrupted")
            done.append(sync.complete(task, sync_intent))
    apply_intent = journals.APPLY.read(task.paths)
    if apply_intent is not None:
        from bar.changes import apply

        last = task.ledger.last()
        recorded = last is not None and last.number >= apply_intent.step.number
        landed = apply.complete(task, apply_intent)
        if landed is not None and not recorded:
            note(
                f"recorded apply step {landed.step_id} ({landed.commit_sha[:10]} on "
                f"{landed.target_branch}), which bar stopped before recording"
            )
            done.append(landed)
        elif landed is None:
            step = apply_intent.step
            note(
                f"apply step {step.step_id} ({step.commit_sha[:10]} onto {step.target_branch}) "
                f"was interrupted before {step.target_branch} moved; nothing was applied"
            )
    done += queued_steps.flush(task)  # orders a step answered while it ran
    done += _answer_taken(task)
    return done


def _answer_taken(task: Task) -> list[Step]:
    """The person's answer to the latest decision, written where aide's clients look (by
    aide's web server) while no bar was there to take it, recorded as its ``decision``
    step before anything else changes the task (``bar.aide.answers``); left as it is,
    silently, when it cannot be the person's or is no answer (``bar decide result`` and
    ``bar doctor`` say why)."""
    from bar.aide import place

    if place.waiting(task) is None:
        return []
    from bar.aide import answers
    from bar.errors import BarError

    try:
        step = answers.take_waiting(task)
    except BarError:
        return []
    if step is None:
        return []
    note(
        f"recorded step {step.step_id} (decision {step.session_id}): the answer written in "
        f"{place.decisions(task)}"
    )
    return [step]


_Restoring = TypeVar("_Restoring", journals.RollbackIntent, journals.SyncIntent)


def _hand_edits_first(
    task: Task, intent: _Restoring, target: str, done: list[Step], verb: str
) -> _Restoring:
    """Before an interrupted restore (a rollback, a sync) is finished over the worktree,
    record what it cannot account for: the restore may write only the paths that differ
    between its two states, and only where what is there is what one of them holds.
    Anything else (a new file, an edit of a file equal in both states, an edit of a path
    the restore writes that matches neither state) was made by hand after bar was
    killed. That state is recorded as a ``manual`` step first; the restore then goes on
    from it, as the step after, writing only its own paths and leaving the hand edits
    as they are (a rollback's ``finish``: ``_kept_hand_edits``). (A ``manual`` step
    already in the restore's place is one such, recorded by a recovery that was itself
    stopped before it rewrote the intent.)"""
    last = task.ledger.last()
    if (
        last is not None
        and last.number == int(intent.step_id)
        and last.kind == "manual"
        and last.snapshot is not None
    ):
        # (then edits made by hand since that step are looked for as any others)
        intent = _moved_after(task, intent, target, last.snapshot)
        target = intent.restores_to if isinstance(intent, journals.RollbackIntent) else target
    if last is not None and last.number >= int(intent.step_id):
        return intent  # the restore was recorded: nothing to finish
    before_tree = steps.tree_of(task, intent.snapshot_before)
    target_tree = steps.tree_of(task, target)
    now_tree = steps.current_tree(task)
    if now_tree in (before_tree, target_tree):
        return intent
    edited = sorted(hand_edited(task.worktree, before_tree, target_tree, now_tree))
    if not edited:
        return intent  # only the restore's own writes: it goes on from there
    manual = steps.record_hand_edits(task)
    if manual is None or manual.snapshot is None:
        return intent
    done.append(manual)
    note(
        f"{verb} step {intent.step_id} was interrupted and {plural(len(edited), 'file')} "
        f"changed since ({', '.join(edited[:5])}{', ...' if len(edited) > 5 else ''}): "
        f"recorded as step {manual.step_id} before the {verb} goes on"
    )
    return _moved_after(task, intent, target, manual.snapshot)


def hand_edited(worktree: Path, before_tree: str, target_tree: str, now_tree: str) -> set[str]:
    """The paths of ``now_tree`` a restore from ``before_tree`` to ``target_tree`` cannot
    have written: those it does not write that differ from both states (one state, there),
    and those it writes that hold neither state's entry. A path it writes that is gone
    is its own: it removes each old file before it places the new one (a deletion by
    hand there is undone by the restore's file, whose bytes a state holds either way)."""
    own = _entries_of(worktree, before_tree, target_tree)
    changed = {c.path: c for c in git.diff_tree_raw(worktree, before_tree, now_tree)}
    edited: set[str] = set()
    for path, change in changed.items():
        if path not in own:
            edited.add(path)  # the restore does not write it
            continue
        was, will = own[path]
        if change.status == "D":
            continue  # (a restore removes the old file before it places the new one)
        now = (change.dst_mode, change.dst_blob)
        if now != was and now != will:
            edited.add(path)
    return edited


def _entries_of(worktree: Path, before_tree: str, target_tree: str) -> dict[str, _Entries]:
    """Each path a restore from ``before_tree`` to ``target_tree`` writes: its entry
    (mode, blob) in each state (None: absent)."""
    own: dict[str, _Entries] = {}
    for c in git.diff_tree_raw(worktree, before_tree, target_tree):
        was = None if c.status == "A" else _entry(worktree, before_tree, c.path)
        will = None if c.status == "D" else (c.dst_mode, c.dst_blob)
        own[c.path] = (was, will)
    return own


_Entry = tuple[str, str]
_Entries = tuple[_Entry | None, _Entry | None]


def _entry(worktree: Path, tree: str, path: str) -> _Entry | None:
    listed = git.git(worktree, "ls-tree", "-z", tree, "--", f":(top,literal){path}", check=False)
    meta = listed.stdout.split(b"\t", 1)[0].split(b" ")
    return (meta[0].decode(), meta[2].decode()) if len(meta) == 3 else None


def _kept_hand_edits(task: Task, before: str, target: str, now: str) -> str | None:
    """The commit a restore from ``before`` to ``target`` (its intent's states) finishes
    at from ``now`` (the manual step of hand edits made after the crash): ``now``'s
    files, with the restore's own paths set to the target's entries where ``now`` holds
    one of the two states' (a hand edit of such a path, or one in the way of it, is
    kept). None when that is the target itself."""
    wt = task.worktree
    before_tree, target_tree = steps.tree_of(task, before), steps.tree_of(task, target)
    now_tree = steps.tree_of(task, now)
    own = _entries_of(wt, before_tree, target_tree)
    edited = hand_edited(wt, before_tree, target_tree, now_tree)
    entries = _listing(wt, now_tree)
    for path, (_was, will) in own.items():
        if path in edited:
            continue
        entries.pop(path, None)
        if will is not None:
            entries[path] = will
    # a file the restore writes where a hand-made file or directory is kept, and the
    # other way round: the hand's wins (nothing it made is removed)
    kept = set(entries) - set(own)
    for path in [p for p in own if p in entries and p not in edited]:
        parts = path.split("/")
        in_way = any("/".join(parts[:i]) in kept for i in range(1, len(parts)))
        in_way = in_way or any(k.startswith(path + "/") for k in kept)
        if in_way:
            del entries[path]
    lines = b"".join(
        f"{mode} {oid}\t".encode() + path.encode("utf-8", "surrogateescape") + b"\0"
        for path, (mode, oid) in sorted(entries.items())
    )
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bar-finish-", dir=task.dir) as tmp:
        env = git.index_env(Path(tmp) / "index")
        git.git(wt, "update-index", "-z", "--index-info", env=env, input=lines)
        tree = git.out(wt, "write-tree", env=env)
    if tree == target_tree:
        return None
    # where git converts, the bytes on disk: the target's where it writes, the hand's else
    raw = exact.raw_parent_made_of(wt, tree, [target, now])
    return git.commit_tree(
        wt,
        tree,
        [now] if raw is None else [now, raw],
        "bar: a restore finished around hand edits",
        identity=BAR_IDENTITY,
    )


def _listing(worktree: Path, tree: str) -> dict[str, _Entry]:
    """Every file of ``tree``: path to (mode, blob)."""
    listed = git.git(worktree, "ls-tree", "-r", "-z", "--full-tree", tree).stdout
    entries: dict[str, _Entry] = {}
    for item in listed.split(b"\0"):
        meta, _, path = item.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) == 3:
            entries[path.decode("utf-8", "surrogateescape")] = (
                fields[0].decode(),
                fields[2].decode(),
            )
    return entries


def _moved_after(task: Task, intent: _Restoring, target: str, snapshot: str) -> _Restoring:
    """``intent`` as the step after the last one, from the state ``snapshot``: a
    rollback then writes only its own paths (``_kept_hand_edits``)."""
    if isinstance(intent, journals.RollbackIntent):
        finish = _kept_hand_edits(task, intent.snapshot_before, target, snapshot)
        moved = replace(
            intent,
            step_id=task.ledger.next_step_id(),
            snapshot_before=snapshot,
            finish=finish,
        )
        journals.ROLLBACK.write(task.paths, moved)
        return moved
    moved_sync = replace(intent, step_id=task.ledger.next_step_id(), snapshot_before=snapshot)
    journals.SYNC.write(task.paths, moved_sync)
    return moved_sync


def prepare(
    task: Task,
    meanwhile: Callable[[], object] | None = None,
    before_look: Callable[[], None] | None = None,
) -> None:
    """What every command that changes a task does first, under the task lock.
    ``meanwhile``: called once the intents are finished, before the worktree is looked
    at for hand edits (work that may overlap that look, such as apply's merge);
    ``before_look``: called when the look for hand edits begins (``snapshot.take``)."""
    task.require_worktree()
    guard.check_link(task)  # before any git operation in the worktree
    finish_pending(task)
    if meanwhile is not None:
        meanwhile()
    steps.record_hand_edits(task, before_look)


def prepare_apply(task: Task, meanwhile: Callable[[], object] | None = None) -> None:
    """What apply does first, under the task lock. An open task with its worktree is
    brought up to date as by every command (``prepare``: hand edits recorded first;
    ``meanwhile`` is called just before it looks for them). A task without one (closed,
    or its worktree removed: ``apply.from_record``) is applied from its record: only an
    apply a stopped bar left is finished."""
    from bar.changes import apply

    if not apply.from_record(task):
        prepare(task, meanwhile)
        return
    if task.active and not task.pending:
        note(
            f"the worktree of task {task.name} is missing ({task.worktree}): its record is "
            "applied; `bar doctor --repair` makes the worktree again"
        )
    intent = journals.APPLY.read(task.paths)
    if intent is not None:
        apply.complete(task, intent)


@contextmanager
def changing(task: Task, what: str, *, wait: bool) -> Iterator[Task]:
    """Hold the task's lock (``what``: who holds it, as a waiting command is told), reload
    the task (it may have changed while we waited), finish what a crashed bar left and
    record hand edits: then the caller acts on the task given."""
    with task.lock(what, wait=wait):
        fresh = load_task(task.project, task.id)
        prepare(fresh)
        yield fresh
