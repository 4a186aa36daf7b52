"""A restore (a rollback, a sync) that a stopped bar left half done, finished around the
hand edits made since.

The restore may write only the paths that differ between its two states, and only
where what is there is what one of them holds; anything else was made by hand after bar
was killed. That is recorded first, as a ``manual`` step, and the restore goes on from
it as the step after, leaving the hand edits as they are (``hand_edits_first``). The
rollback and sync verbs finish their interrupted intents with it
(``bar.changes.rollback``, ``bar.changes.sync``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bar import git
from bar.base.notices import note, plural
from bar.base.record import replace
from bar.git import BAR_IDENTITY, exact
from bar.history import bases, steps
from bar.model import journals
from bar.model.records import Step
from bar.model.tasks import Task

_Restoring = TypeVar("_Restoring", journals.RollbackIntent, journals.SyncIntent)


def finish(
    task: Task,
    intent: _Restoring,
    target: str,
    verb: str,
    journal: journals.Journal[_Restoring],
    complete: Callable[[Task, _Restoring], Step],
) -> list[Step]:
    """Finish the restore ``intent`` (to the commit ``target``) a stopped ``verb`` left in
    ``journal``, the caller holding the task lock and the files the restore had taken out
    handed back: the hand edits made since recorded first (``hand_edits_first``), then
    ``complete``, the verb's own; only settled if it was recorded. The steps recorded."""
    done: list[Step] = []
    intent = hand_edits_first(task, intent, target, done, verb)
    last = task.ledger.last()
    if last is not None and last.number >= int(intent.step_id):
        bases.settle(task, bases.base_at(task, last.number))  # task.json may lag the ledger
        journal.clear(task.paths)
    else:
        note(f"finishing {verb} step {intent.step_id}, which was interrupted")
        done.append(complete(task, intent))
    return done


def hand_edits_first(
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
