"""Recorded states of a task, and the names people give them.

A state is the worktree as a snapshot recorded it: ``base`` (the task's base commit) or
the state after a step (``3``, ``0003``). Rollback targets, ``diff --from/--to`` and
``show`` all resolve names here, so every command accepts the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from bar.errors import UsageError
from bar.records import Step, format_step_id, parse_step_ref
from bar.tasks import Task


@dataclass(frozen=True)
class State:
    kind: str  # "base" | "step"
    step_id: str | None
    commit: str  # the snapshot commit
    head: str  # the task branch's HEAD recorded at that state (what --hard resets to)

    def describe(self) -> str:
        return "base" if self.kind == "base" else f"step {self.step_id}"


def base(task: Task) -> State:
    return State("base", None, task.base_commit, task.base_commit)


def resolve(task: Task, name: str) -> State:
    """``base`` or a step id: the state after that step."""
    if name == "base":
        return base(task)
    step = task.ledger.get(parse_step_ref(name))
    if not step.snapshot:
        raise UsageError(f"step {step.step_id} recorded no snapshot to return to")
    return State("step", step.step_id, step.snapshot, _head_at(task, step))


def before_last(task: Task) -> State:
    """The state before the last step: what a plain ``bar rollback`` returns to."""
    last = task.ledger.last()
    if last is None:
        raise UsageError("there are no steps to roll back", hint="the task is at its base")
    return base(task) if last.number == 1 else resolve(task, format_step_id(last.number - 1))


def _head_at(task: Task, step: Step) -> str:
    """The task branch HEAD at ``step``: its own record, or the nearest earlier one."""
    if step.head:
        return step.head
    for earlier in task.ledger.iter_reverse(warn=False):
        if earlier.number < step.number and earlier.head:
            return earlier.head
    return task.base_commit
