"""Closing out a task: ``bar task close``, and keeping or removing its worktree.

As in reference 002, keep and remove are decisions made and recorded, never a silent
clean-up. Closing a task moves it to ``completed`` on the board; its worktree is removed
unless it is kept (``--keep-worktree``, or marked earlier with ``bar worktree keep``).
Removing a worktree without completing its task (``bar worktree remove`` without
``--complete``) puts the task back to ``pending``: its next start makes the worktree
again at the last recorded state. Either way, changes no step recorded are never thrown
away: the command refuses while there are any, unless ``force``, which records them as a
``manual`` step first. The branch and every snapshot stay.

Events: ``worktree.remove.before`` / ``.after`` / ``.failed``, ``worktree.keep``,
``task.completed``; the registry says ``removed`` or ``kept``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bar.base.record import field, record
from bar.errors import DirtyWorktree, NotFound, UsageError
from bar.history import steps
from bar.model import board
from bar.model.records import Step
from bar.model.tasks import Task, load_task
from bar.step import transaction
from bar.task import registry, removal

if TYPE_CHECKING:
    from bar.changes.unapplied import Unapplied


@record(frozen=True)
class Closed:
    task: Task
    worktree_removed: bool
    recorded: list[Step] = field(default_factory=list)  # what was recorded first
    # of a task closed: its work no branch has yet (``bar.changes.unapplied``), if any
    unapplied: Unapplied | None = None


def close(
    task: Task, *, keep_worktree: bool = False, force: bool = False, remove: bool = False
) -> Closed:
    """Close the task (``completed``); its worktree is removed unless kept (now, or
    marked earlier; ``remove``: even then). Refuses while the worktree holds changes no
    step recorded, unless ``force``, which records them as a manual step first."""
    from bar.base.progress import Progress

    project = task.project
    with transaction.holding(task, "bar task close") as task, Progress("task close:") as shown:
        if removal.resume(task):  # a close (or a removal) a stopped bar left: finished
            task = load_task(project, task.id)
            if not task.active:
                return Closed(task, True, [])
        if not task.active:
            raise UsageError(f"task {task.name} ({task.id}) is already closed")
        recorded: list[Step] = []
        removed = False
        if task.worktree.is_dir() and not task.pending:
            shown.update(detail="looking for changes no step recorded")
            keeping = keep_worktree or (registry.kept(task) and not remove)
            recorded = _record_first(task, force, None if keeping else "worktree.remove")
            if keeping:
                _keep(task)
            else:
                shown.update(detail=f"removing the worktree {task.worktree}")
                removal.remove(task, then=removal.COMPLETED, command="bar task close")
                return Closed(load_task(project, task.id), True, recorded)
        elif not task.pending and _registered_as_present(task):
            # gone before this close removed it (a hand rm): the registry says so now
            removal.finished_events(task, board.COMPLETED)
        removal.conclude(task, removal.COMPLETED)
    return Closed(task, removed, recorded)


def keep(task: Task) -> Task:
    """Mark the task's worktree to be kept when the task closes (a closed task's kept
    worktree stays kept); the task as it is now."""
    with transaction.holding(task, "bar worktree keep") as task:
        _require_worktree(task)
        _keep(task)
    return task


def remove_worktree(task: Task, *, complete: bool = False, force: bool = False) -> Closed:
    """Remove the task's worktree. ``complete``: close the task too (``completed``);
    else an open task goes back to ``pending``, its record whole, and a closed one keeps
    its record alone."""
    project = task.project
    if complete and task.active:
        return close(task, force=force, remove=True)
    with transaction.holding(task, "bar worktree remove") as task:
        if removal.resume(task):  # one a stopped bar left: finished, and that was it
            return Closed(load_task(project, task.id), True, [])
        _require_worktree(task)
        recorded = _record_first(task, force, "worktree.remove") if task.active else []
        then = removal.PENDING if task.active else removal.UNCHANGED
        removal.remove(task, then=then, command="bar worktree remove")
    return Closed(load_task(project, task.id), True, recorded)


def _require_worktree(task: Task) -> None:
    if task.pending or not task.worktree.is_dir():
        raise NotFound(
            f"task {task.name} ({task.id}) has no worktree",
            hint="`bar worktree list` shows the worktrees there are",
        )


def _record_first(task: Task, force: bool, op: str | None) -> list[Step]:
    """What a crash left finished, and hand edits recorded with ``force`` (else refused,
    and the refusal of ``op`` logged)."""
    from bar.step import transaction

    recorded = transaction.finish_pending(task)
    if steps.has_unrecorded_changes(task):
        if not force:
            refusal = DirtyWorktree(
                f"task {task.name} has changes no step recorded",
                hint="record them with `bar run`, roll them back, or add --force "
                "(which records them as a manual step first)",
            )
            if op is not None:
                board.refused(task, op, refusal)
            raise refusal
        manual = steps.record_hand_edits(task)
        recorded += [manual] if manual else []
    return recorded


def _keep(task: Task) -> None:
    entry = registry.entry_of(task.project, task.id)
    if entry is not None and entry["status"] == registry.KEPT:
        return
    registry.mark(task, registry.KEPT)
    task.project.log_event(
        "worktree.keep",
        task=board.task_view(task),
        worktree=board.worktree_view(task, registry.KEPT),
    )


def _registered_as_present(task: Task) -> bool:
    entry = registry.entry_of(task.project, task.id)
    return entry is not None and entry["status"] != registry.REMOVED
