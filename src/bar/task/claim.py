"""``bar task claim`` / ``unclaim``: an agent, a person or a worker takes a task off the
board, or puts it back.

Claiming sets the board's ``owner``; two claimers of one task never both win: the claim
is decided under the task's lock, on task.json read afresh, so the second finds the first
one's name and gets ``board.Claimed`` (exit code of "already exists"). Claiming again
under the same name is no error. A task a step is running in is not waited for: the claim
says it is busy. ``start``: the claimer starts it at once (``bar.task.start``).
``reassign`` gives a task someone holds to another owner, as the board's own update of
``owner`` does; ``unclaim`` clears the owner. Both are logged with who had it (``was``).
"""

from __future__ import annotations

from bar.errors import Locked, UsageError
from bar.model import board
from bar.model.tasks import Task
from bar.step import transaction
from bar.task import start as task_start
from bar.task.state import is_running


def claim(
    task: Task,
    owner: str,
    *,
    start: bool = False,
    activate: bool = False,
    reassign: bool = False,
) -> Task:
    """Take ``task`` for ``owner``; the task as it is now (started too, with ``start``).
    ``reassign``: even from another owner (the event names who had it, ``was``)."""
    owner = board.validate_owner(owner)
    project = task.project
    if is_running(task):
        raise Locked(
            f"task {task.name} ({task.id}) is running a step",
            hint="claim it when the step has ended",
        )
    with transaction.briefly(task, f"bar task claim --owner {owner}", busy=is_running) as task:
        if not task.active:
            raise UsageError(
                f"task {task.name} ({task.id}) is completed; there is nothing left to claim",
                hint=f"`bar task reopen {task.id}` makes it active again",
            )
        holder = task.board.owner
        if holder and holder != owner and not reassign:
            raise board.Claimed(task, holder)
        if holder != owner:
            task.board.owner = owner
            task.save()
            view = board.task_view(task)
            if holder:
                view["was"] = holder
            project.log_event("task.claimed", task=view)
        if start:
            task = task_start.start(task, activate=activate)
    return task


def unclaim(task: Task, *, owner: str | None = None) -> Task:
    """Put ``task`` back on the board with no owner (``owner``: only if that one holds
    it); the task as it is now. No owner is no error."""
    project = task.project
    with transaction.briefly(task, "bar task unclaim", busy=is_running) as task:
        holder = task.board.owner
        if owner is not None and holder and holder != board.validate_owner(owner):
            raise board.Claimed(task, holder)
        if holder:
            task.board.owner = ""
            task.save()
            project.log_event("task.unclaimed", task=dict(board.task_view(task), was=holder))
    return task
