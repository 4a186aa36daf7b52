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

from bar.base.clock import now_iso
from bar.base.record import field, record
from bar.errors import BarError, DirtyWorktree, NotFound, UsageError
from bar.ledger import steps
from bar.ledger.records import Step
from bar.task import board, registry
from bar.task import worktree as worktrees
from bar.task.tasks import Task, load_task

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
    from bar.changes.fast import watcher
    from bar.sandbox import plan as sandbox_plan

    project = task.project
    with task.lock("bar task close"), Progress("task close:") as shown:
        task = load_task(project, task.id)
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
                _remove(task, status=board.COMPLETED, command="bar task close")
                removed = True
        elif not task.pending and _registered_as_present(task):
            # gone before this close removed it (a close that was stopped, a hand rm):
            # the registry says so now
            _remove_finished(task, board.COMPLETED)
        task.status = "closed"
        task.closed_at = now_iso()
        task.board.status = board.COMPLETED
        task.board.worktree = board.worktree_name(task) if task.worktree.is_dir() else ""
        task.save()
        watcher.stop(task.index)  # no step will ask it again
        project.log_event(
            "task.completed",
            task=board.task_view(task),
            worktree={"name": board.worktree_name(task)},
        )
        sandbox_plan.remove_temp_dir(task)
    if project.active_task_id() == task.id:
        project.set_active_task(None)
    return Closed(task, removed, recorded)


def keep(task: Task) -> Task:
    """Mark the task's worktree to be kept when the task closes (a closed task's kept
    worktree stays kept); the task as it is now."""
    with task.lock("bar worktree keep"):
        task = load_task(task.project, task.id)
        _require_worktree(task)
        _keep(task)
    return task


def remove_worktree(task: Task, *, complete: bool = False, force: bool = False) -> Closed:
    """Remove the task's worktree. ``complete``: close the task too (``completed``);
    else an open task goes back to ``pending``, its record whole, and a closed one keeps
    its record alone."""
    project = task.project
    from bar.changes.fast import watcher

    if complete and task.active:
        return close(task, force=force, remove=True)
    with task.lock("bar worktree remove"):
        task = load_task(project, task.id)
        _require_worktree(task)
        recorded = _record_first(task, force, "worktree.remove") if task.active else []
        if task.active:
            task.board.status = board.PENDING
        _remove(task, status=task.board.status, command="bar worktree remove")
        from bar.task.start import starting_mark

        starting_mark(task).unlink(missing_ok=True)  # a start's own, if one was stopped
        task.board.worktree = ""
        task.save()
        watcher.stop(task.index)  # nothing left to watch until it starts again
        from bar.task import seed_board

        seed_board.refresh(project)  # the board changed after its last event
    if task.active and project.active_task_id() == task.id:
        project.set_active_task(None)
    return Closed(task, True, recorded)


def _require_worktree(task: Task) -> None:
    if task.pending or not task.worktree.is_dir():
        raise NotFound(
            f"task {task.name} ({task.id}) has no worktree",
            hint="`bar worktree list` shows the worktrees there are",
        )


def _record_first(task: Task, force: bool, op: str | None) -> list[Step]:
    """What a crash left finished, and hand edits recorded with ``force`` (else refused,
    and the refusal of ``op`` logged)."""
    from bar.changes import recovery

    recorded = recovery.finish_pending(task)
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


def _remove(task: Task, *, status: str, command: str) -> None:
    """``git worktree remove``, with its events and the registry (the caller holds the
    task lock and recorded what was in it). What no recorded state holds (nested
    repositories, ignored files) goes to the task's trash first (``bar.changes.trash``):
    a reopen or a start puts it back."""
    from bar.changes import trash

    project = task.project
    trash.before_removal(task, command)
    view = dict(board.task_view(task), status=status)
    project.log_event("worktree.remove.before", task=view, worktree=board.worktree_view(task))
    try:
        # `worktree prune` must not see a worktree another process is adding
        with project.lock("bar: remove a worktree"):
            worktrees.remove(project.root, task.worktree)
    except Exception as exc:
        project.log_event(
            "worktree.remove.failed",
            task=view,
            worktree=board.worktree_view(task),
            error=str(exc) or type(exc).__name__,
        )
        raise BarError(f"could not remove the worktree {task.worktree}: {exc}") from exc
    _remove_finished(task, status)


def _registered_as_present(task: Task) -> bool:
    entry = registry.entry_of(task.project, task.id)
    return entry is not None and entry["status"] != registry.REMOVED


def _remove_finished(task: Task, status: str) -> None:
    """The registry and the log say the worktree is removed."""
    registry.mark(task, registry.REMOVED)
    task.project.log_event(
        "worktree.remove.after",
        task=dict(board.task_view(task), status=status),
        worktree=board.worktree_view(task, registry.REMOVED),
    )
