"""Undo and redo: an editor's undo over the task's steps, kept in the ledger alone.

``bar undo`` returns the worktree to the state before the most recent step that is not
undone yet; again, and it walks further back. ``bar redo`` brings back the most recently
undone one. Each is a rollback step (``bar.changes.rollback``) marked ``undo_of`` / ``redo_of``
with the step it undid or redid, so nothing is lost and the chain is read back from the
ledger: replaying it, every step that changed the worktree (a run, hand edits, a
rollback, a sync) is pushed on the done stack and empties the redo stack; an undo moves
the top of the done stack to the redo stack; a redo moves it back. Steps that changed
nothing (a test run, an apply) are left out: undoing them would do nothing to undo.

An undo or redo of a sync moves the task's base with it (a state keeps its base,
``bar.history.bases``), and moves the task branch back too if it is still where the sync left it;
so does an undo or redo of a hard rollback (``--hard``), which moved the branch.

Like every command that changes a task, an undo first records the worktree's unrecorded
changes as a ``manual`` step, which is then the step it undoes: the hand edits go. A dry
run records nothing, so it looks for them itself and says so; a redo would end on them
(a new step ends what can be redone), and its dry run says that.
"""

from __future__ import annotations

from bar import git
from bar.base.clock import now_iso
from bar.base.notices import plural
from bar.base.record import field, record
from bar.changes import rollback
from bar.errors import NothingToUndo
from bar.history import states, steps
from bar.model.records import ManualStep, RollbackStep, RunStep, State, Step, SyncStep
from bar.model.tasks import Task


@record
class Chain:
    """The undo and redo stacks, each step named by its key (``_key``)."""

    done: list[str] = field(default_factory=list)  # undoable, oldest first
    undone: list[str] = field(default_factory=list)  # redoable, most recently undone last


# what ``_entry`` makes of a step (a change to it needs a new tag)
_TAG = "undo/1"


def chain(task: Task) -> Chain:
    """The undo and redo stacks, replayed from the ledger: from what is kept of each step
    beside it (``bar.ledger.rows``), so a long task's undo parses only its new lines."""
    from bar.ledger import rows

    result = Chain()
    by_id: dict[str, str] = {}  # a step id -> the key of the last step of that id so far
    kept = rows.rows(task.ledger, task.paths.kept_rows("undo"), _entry, _TAG, _fits)
    for key, action, named in kept:
        by_id[key.partition(":")[0]] = key
        if action in ("undo", "redo"):
            source, dest = (
                (result.done, result.undone) if action == "undo" else (result.undone, result.done)
            )
            moved = by_id.get(named or "")
            if moved is not None and moved in source:
                source.remove(moved)
                dest.append(moved)
        elif action == "changed":
            result.done.append(key)
            result.undone.clear()
    return result


def _entry(step: Step) -> list[str | None]:
    """What the chain needs of a step: its key, what it did (``undo``, ``redo``,
    ``changed``, or nothing to undo: ``""``) and the step an undo or redo names."""
    if isinstance(step, RollbackStep) and (step.undo_of or step.redo_of):
        return [_key(step), "undo" if step.undo_of else "redo", step.undo_of or step.redo_of]
    return [_key(step), "changed" if _changed(step) else "", None]


def _fits(entry: list[object]) -> bool:
    """Whether a kept entry is what ``_entry`` makes."""
    return (
        len(entry) == 3
        and type(entry[0]) is str
        and entry[1] in ("undo", "redo", "changed", "")
        and (entry[2] is None or type(entry[2]) is str)
    )


def _key(step: Step) -> str:
    """A step's id and a digest of its line: two lines of one id (a ledger written by
    hand) are two steps, as two steps that differ are."""
    import hashlib

    return f"{step.step_id}:{hashlib.blake2b(step.to_line(), digest_size=8).hexdigest()}"


def _step(task: Task, key: str) -> Step:
    """The step of ``key``: the ledger's step of its id, or (two lines of one id) the
    one whose line it is."""
    step_id = key.partition(":")[0]
    found = task.ledger.get(step_id)
    if _key(found) == key:
        return found
    for step in task.ledger.iter_forward(warn=False):
        if step.step_id == step_id and _key(step) == key:
            return step
    raise AssertionError(f"step {step_id} is in the undo chain but not in the ledger")


def _changed(step: Step) -> bool:
    moved_base = getattr(step, "base_after", None) is not None
    return step.kind != "apply" and (step.snapshot_before != step.snapshot or moved_base)


@record(frozen=True)
class Plan:
    """What an undo (or redo) would do, from the worktree as it is now."""

    redo: bool
    step: Step  # the step undone or redone (a dry run: maybe the hand edits, unrecorded yet)
    target: State
    hard: bool  # the task branch goes back too (a sync's or a hard rollback's move of it)
    changes: list[git.RawChange]
    # a dry run: the hand edits the undo would record first as ``step``, and then undo
    unrecorded: list[git.RawChange] = field(default_factory=list)

    @property
    def verb(self) -> str:
        return "redo" if self.redo else "undo"

    def to_json(self) -> dict[str, object]:
        return {
            "action": self.verb,
            "step_id": self.step.step_id,
            "kind": self.step.kind,
            "target": self.target.kind,
            "target_step": self.target.step_id,
            "snapshot": self.target.commit,
            "base": self.target.base,
            "changes": [{"status": c.status, "path": c.path} for c in self.changes],
            "unrecorded": [{"status": c.status, "path": c.path} for c in self.unrecorded],
        }


def plan(task: Task, *, redo: bool, dry_run: bool = False) -> Plan:
    """What ``undo`` (``redo``) would do; writes nothing. Raises ``NothingToUndo``.
    ``dry_run``: the worktree may hold hand edits the real one would record first."""
    stacks = chain(task)
    edits = _hand_edits(task) if dry_run else None
    if edits is not None:
        manual, now, changes = edits
        if redo:
            raise _ended_by_edits(task, stacks, manual, changes)
        target = states.before(task, manual)
        back = git.diff_tree_raw(task.worktree, now, git.tree_of(task.worktree, target.commit))
        return Plan(redo, manual, target, False, back, changes)
    stack = stacks.undone if redo else stacks.done
    if not stack:
        raise _nothing(task, redo)
    step = _step(task, stack[-1])
    target = states.resolve(task, step.step_id) if redo else states.before(task, step)
    hard = False
    moved = isinstance(step, SyncStep) or (isinstance(step, RollbackStep) and step.hard)
    if moved and step.head:  # the branch goes back (or forth) if nothing moved it since
        leaving = step.head if not redo else states.before(task, step).head
        hard = git.rev_parse(task.worktree, "HEAD") == leaving != target.head
    changes = git.diff_tree_raw(
        task.worktree,
        git.tree_of(task.worktree, task.recorded_snapshot()),
        git.tree_of(task.worktree, target.commit),
    )
    return Plan(redo, step, target, hard, changes)


def _hand_edits(task: Task) -> tuple[ManualStep, str, list[git.RawChange]] | None:
    """The manual step an undo or redo would record first, unrecorded yet, the tree it
    would record and its changes; None when there are none. A task a live bar holds is
    not looked at: what that bar changes, it records itself."""
    from bar.store.lock import is_locked

    if is_locked(task.paths.lock):
        return None
    task.require_worktree()
    recorded = task.recorded_snapshot()
    was = git.tree_of(task.worktree, recorded)
    now = steps.current_tree(task, recorded)
    if now == was:
        return None
    stamp = now_iso()
    manual = ManualStep(
        step_id=task.ledger.next_step_id(),
        started_at=stamp,
        ended_at=stamp,
        duration_ms=0,
        diff_stat=git.numstat(task.worktree, was, now),
        snapshot_before=recorded,
        head=git.rev_parse(task.worktree, "HEAD"),
    )
    return manual, now, git.diff_tree_raw(task.worktree, was, now)


def _ended_by_edits(
    task: Task, stacks: Chain, manual: ManualStep, changes: list[git.RawChange]
) -> NothingToUndo:
    """A redo records the hand edits first, and that new step ends what can be redone."""
    if not stacks.undone:
        return _nothing(task, True)
    return NothingToUndo(
        f"there would be nothing to redo: `bar redo` first records your unrecorded changes "
        f"({plural(len(changes), 'file')}) as step {manual.step_id}, and a new step ends what can be redone",
        hint="`bar diff --unrecorded` shows them; `bar redo` can redo while the worktree "
        "holds no change that no step recorded",
    )


def undo(task: Task, *, redo: bool) -> tuple[Plan, RollbackStep]:
    """Undo (redo) a step (caller holds the lock and ran ``transaction.prepare``)."""
    chosen = plan(task, redo=redo)
    mark = chosen.step.step_id
    done = rollback.rollback(
        task,
        chosen.target,
        hard=chosen.hard,
        undo_of=None if redo else mark,
        redo_of=mark if redo else None,
    )
    return chosen, done


def _nothing(task: Task, redo: bool) -> NothingToUndo:
    if not redo:
        return NothingToUndo(
            "there is nothing to undo: no step changed the worktree, or every one is undone",
            hint="`bar log` shows the steps; `bar redo` brings back what was undone",
        )
    later: Step | None = None
    for step in task.ledger.iter_reverse(warn=False):
        if _is_undo_or_redo(step):
            break
        later = step if _changed(step) else later
    else:
        return NothingToUndo(
            "there is nothing to redo: nothing was undone", hint="`bar undo` undoes the last step"
        )
    if later is not None:
        return NothingToUndo(
            f"there is nothing to redo: step {later.step_id} ({_what(later)}) came after "
            "the last undo, and a new step ends what can be redone",
            hint="every state is still recorded: `bar log` lists the steps, and "
            "`bar rollback --to STEP` returns to any of them",
        )
    return NothingToUndo(
        "there is nothing to redo: every undone step is redone",
        hint="`bar undo` undoes the last step",
    )


def _what(step: Step) -> str:
    if isinstance(step, RunStep):
        return "run " + " ".join(step.cmd)[:60]
    return {"manual": "changes made outside bar"}.get(step.kind, step.kind)


def _is_undo_or_redo(step: Step) -> bool:
    return isinstance(step, RollbackStep) and bool(step.undo_of or step.redo_of)
