"""Recorded states of a task, and the names people give them.

A state is the worktree as a snapshot recorded it: ``base`` (the task's base commit), the
state after a step (``3``, ``0003``) or after one of its tool calls (a checkpoint:
``3.2``, ``0003.2``, ``bar.history.checkpoints``). Rollback targets, ``diff --from/--to``,
``apply --at``, ``blame --at`` and ``show`` all resolve names here, so every command
accepts the same ones. A state carries the base it was recorded against (``bar.history.bases``):
what its changes are measured from, and what a rollback to it makes the task's base again.
"""

from __future__ import annotations

from bar.errors import UsageError
from bar.history import bases, checkpoints
from bar.model.records import State, Step, format_step_id, parse_step_ref
from bar.model.tasks import Task


def base(task: Task) -> State:
    return State("base", None, task.base_commit, task.base_commit, task.base_commit)


def resolve(task: Task, name: str) -> State:
    """``base``, a step id (the state after that step) or a checkpoint (``3.2``)."""
    if name == "base":
        return base(task)
    if checkpoints.parse_name(name) is not None:
        found = checkpoints.lookup(task, name)
        return State(
            "step",
            found.name,
            found.snapshot,
            found.head or _head_before(task, found.step_id),
            bases.base_at(task, int(found.step_id)),
        )
    step = task.ledger.get(parse_step_ref(name))
    if not step.snapshot:
        raise UsageError(f"step {step.step_id} recorded no snapshot to return to")
    return State(
        "step", step.step_id, step.snapshot, _head_at(task, step), bases.base_at(task, step.number)
    )


def before(task: Task, step: Step) -> State:
    """The state just before ``step``: the last state recorded by a step before it that
    changed the worktree (an apply records the state it landed, not a new one)."""
    ledger = task.ledger
    if ledger.near_start(step.number):  # the last such step from the start
        found = None
        for earlier in ledger.iter_forward(warn=False, upto=step.number - 1):
            if earlier.number < step.number and earlier.kind != "apply" and earlier.snapshot:
                found = earlier
        if found is not None:
            return resolve(task, found.step_id)
    else:
        for earlier in ledger.iter_reverse(warn=False, below=step.number):
            if earlier.number < step.number and earlier.kind != "apply" and earlier.snapshot:
                return resolve(task, earlier.step_id)
    start = bases.first(task)
    return State("base", None, step.snapshot_before or start, start, start)


def before_last(task: Task) -> State:
    """The state before the last step: what a plain ``bar rollback`` returns to."""
    last = task.ledger.last()
    if last is None:
        raise UsageError("there are no steps to roll back", hint="the task is at its base")
    return base(task) if last.number == 1 else resolve(task, format_step_id(last.number - 1))


def _head_before(task: Task, step_id: str) -> str:
    """The task branch HEAD recorded before ``step_id``."""
    for earlier in task.ledger.iter_reverse(warn=False, below=int(step_id)):
        if earlier.number < int(step_id) and earlier.head:
            return earlier.head
    return task.base_commit


def _head_at(task: Task, step: Step) -> str:
    """The task branch HEAD at ``step``: its own record, or the nearest earlier one."""
    if step.head:
        return step.head
    for earlier in task.ledger.iter_reverse(warn=False):
        if earlier.number < step.number and earlier.head:
            return earlier.head
    return task.base_commit
