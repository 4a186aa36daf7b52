"""``bar task reopen``: a closed task becomes active again, its worktree back as recorded.

A worktree that closing removed is recreated by the code ``bar doctor --repair`` uses
for a missing one (``recreate_worktree``): ``git worktree add`` on the task
branch, then the last recorded snapshot restored over it, so the agent finds exactly
what the ledger says it left, uncommitted changes included. A worktree that was kept
is used as it is: what was changed in it after closing is recorded as a ``manual``
step by the next command, like any hand edit.

A stopped reopen must not leave a half-restored worktree that the next command would
take for hand edits, so ``reopening.json`` is written before the worktree is made and
removed once it is whole; a reopen that finds it throws the worktree away and makes it
again (it holds nothing but what the snapshots hold). It becomes the active task, and
then is marked active: a reopen stopped in between is run again.

A closed task's name may have been taken by a new task since; reopening it then would
leave two open tasks of one name, which the name finds neither of, so it is refused
until the other one is closed.
"""

from __future__ import annotations

from bar import git
from bar.base.clock import now_iso
from bar.base.record import record
from bar.changes import rollback
from bar.errors import AlreadyExists, BarError, NotFound
from bar.git import worktrees
from bar.history import side_index
from bar.model import board, journals
from bar.model.project import Project
from bar.model.tasks import Task, resolve_task
from bar.step import transaction
from bar.store.files import write_json_atomic
from bar.task import new as task_new
from bar.task import registry


@record(frozen=True)
class Reopened:
    task: Task
    recreated: bool  # the worktree was made again (else: it had been kept)


def reopen(project: Project, ref: str) -> Reopened:
    """Make the closed task ``ref`` (id or name; of several of one name, the closed one)
    active again, its worktree recreated at its last recorded state if it was removed."""
    task = resolve_task(project, ref, closed=True)
    with transaction.holding(task, "bar task reopen") as task:
        if task.active:
            raise BarError(
                f"task {task.name} ({task.id}) is open",
                hint=f"`bar task switch {task.id}` makes it the active task",
            )
        if journals.DELETE.path(task.paths).exists():
            raise BarError(
                f"task {task.name} ({task.id}) was being deleted",
                hint=f"`bar task delete {task.id}` finishes deleting it",
            )
        if git.rev_parse(project.root, f"refs/heads/{task.branch}") is None:
            raise NotFound(
                f"the branch {task.branch} of task {task.name} ({task.id}) was deleted, so "
                "the task cannot be reopened",
                hint=f"its record stays: `bar diff --task {task.id}` shows the work, "
                f"`bar apply --task {task.id}` lands it; or start anew with `bar task new`",
            )
        # the name is claimed under the project lock, as `bar task new` claims one
        with project.lock(f"bar task reopen {task.name}"):
            _refuse_taken(task)
            recreated = _make_worktree(task)
            # active task first: a reopen stopped before the save is simply run again
            project.set_active_task(task.id)
            task.status = "active"
            task.closed_at = None
            task.board.status = board.IN_PROGRESS
            task.board.worktree = registry.name_of(task)
            task.save()
            registry.mark(task, registry.ACTIVE)
        project.log_event("task.reopened", task=board.task_view(task))
    return Reopened(task, recreated)


def _refuse_taken(task: Task) -> None:
    """One open task per name, as ``bar task new`` keeps it: two open tasks of one name
    would leave the name finding neither (the caller holds the project lock)."""
    other = task_new.name_holder(task.project, task.name)
    if other is not None:
        raise AlreadyExists(
            f"an open task is already named {task.name!r} ({other}), so task "
            f"{task.id} cannot be reopened under that name",
            hint=f"close that task first (`bar task close {other}`), then run "
            f"`bar task reopen {task.id}` again",
        )


def _make_worktree(task: Task) -> bool:
    """Recreate the worktree unless it was kept whole; True if it was made."""
    marker = task.dir / "reopening.json"
    project = task.project
    if task.worktree.is_dir() and not marker.exists():
        return False  # kept on close (`--keep-worktree`)
    where = worktrees.holding(project.root, task.branch, task.worktree)
    if where is not None:
        raise BarError(
            f"the branch {task.branch} of task {task.name} is checked out in {where}, and git "
            "checks a branch out in one worktree at a time",
            hint=f"switch {where} to another branch, then run `bar task reopen {task.id}` again",
        )
    project.log_event(
        "worktree.create.before", task=board.task_view(task), worktree=board.worktree_view(task)
    )
    write_json_atomic(marker, {"version": 1, "task_id": task.id, "started_at": now_iso()})
    if task.worktree.exists():  # left half-made by a reopen that was stopped
        with project.lock("bar task reopen: remove a half-made worktree"):
            worktrees.discard(project.root, task.worktree)
    try:
        recreate_worktree(task)
    except Exception as exc:
        project.log_event(
            "worktree.create.failed",
            task=board.task_view(task),
            worktree=board.worktree_view(task),
            error=str(exc) or type(exc).__name__,
        )
        raise
    marker.unlink()
    from bar.changes import trash

    trash.put_back_after_close(task)  # what closing moved aside, where nothing is now
    project.log_event(
        "worktree.create.after",
        task=board.task_view(task),
        worktree=board.worktree_view(task, registry.ACTIVE),
    )
    return True


def recreate_worktree(task: Task) -> str:
    """Recreate a deleted worktree on its branch and restore the last recorded state."""
    repo = task.project.root
    with task.project.lock("bar doctor: recreate worktree"):  # worktree add is not concurrent-safe
        worktrees.prune(repo)
        worktrees.add(repo, task.worktree, task.branch)
    task.index.unlink(missing_ok=True)
    side_index.seed_index(
        task.worktree, task.index, task.base_commit, task.paths.git_dir, task.project.common_dir
    )
    rollback.restore(task, task.recorded_snapshot())
    registry.mark(task, registry.KEPT if registry.kept(task) else registry.ACTIVE)
    return f"recreated it on {task.branch} at the last recorded state"
