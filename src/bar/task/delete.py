"""``bar task delete`` and ``bar task prune``: the end of a closed task's life.

Deleting a task removes everything bar made for it: its worktree (and git's entry for
it), its branch, every ref of it under ``refs/bar/`` (its snapshot ref
``refs/bar/tasks/<id>``, the refs that keep its branch's old commits
``refs/bar/kept/<id>/`` and its old bases ``refs/bar/bases/<id>/``, and any other kind
a newer bar keeps as ``refs/bar/<kind>/<id>``), and its directory under ``$BAR_HOME``.
``orphaned_refs`` finds such refs of a task that no project has (``bar doctor``).
An open task is never touched. A closed one is deleted only when nothing would be
lost (``bar.task.risk``): its work was landed by an ``apply`` that still stands, no
commit of its branch is left that no step recorded and no other ref keeps, and a
worktree kept on closing holds nothing made since. ``force`` deletes it anyway. A prune
judges each task against the refs the tasks it deleted before (dry run: would have
deleted) leave standing, so that two tasks never each count on the other for a commit.

Like every verb: the intent first (``deleting.json``, naming the branch and where it
pointed when the deletion was decided), then the removals, each of which can run again,
in an order where the task directory, which holds the intent, goes last and the intent
last within it. A bar stopped partway leaves a task that reads as being deleted: the
next ``bar task delete`` of it, ``bar task prune`` or ``bar doctor --repair`` finish it
through the same ``complete`` (the decision was taken: nothing is checked again). A
branch that moved since the decision holds commits nobody decided to drop, and is kept.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bar import git
from bar.base import faults
from bar.base.clock import now_iso
from bar.base.record import field, record
from bar.changes import fast
from bar.errors import BarError, CorruptFile, DirtyWorktree, TaskNotFound
from bar.git import worktrees
from bar.model import board, journals
from bar.model.journals import DeleteIntent
from bar.model.project import Project
from bar.model.tasks import Task, list_tasks, resolve_task
from bar.step import transaction
from bar.store.files import remove_tree
from bar.store.layout import TASK_ID_RE, TaskPaths, projects_dir
from bar.task import registry
from bar.task.risk import at_risk, owner


@record(frozen=True)
class Deletion:
    """One task deleted, or (``dry_run``, or refused) what deleting it would do."""

    task_id: str
    name: str
    removed: list[str]  # what was (would be) removed, one phrase each
    lost: list[str] = field(default_factory=list)  # work nothing else holds
    kept: list[str] = field(default_factory=list)  # found moved since, so kept
    deleted: bool = False
    dry_run: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "deleted": self.deleted,
            "dry_run": self.dry_run,
            "removed": self.removed,
            "lost": self.lost,
            "kept": self.kept,
        }


@record(frozen=True)
class Pruned:
    deleted: list[Deletion]  # deleted (dry run: would be)
    skipped: list[Deletion]  # closed tasks kept, with what deleting them would lose
    dry_run: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "deleted": [d.to_json() for d in self.deleted],
            "skipped": [d.to_json() for d in self.skipped],
        }


def delete(project: Project, ref: str, *, force: bool = False, dry_run: bool = False) -> Deletion:
    """Delete the closed task ``ref`` (id or name; of several of one name, the closed
    one). Refuses (``DirtyWorktree``) when work would be lost, unless ``force``."""
    if is_being_deleted(project, ref):
        return _resume(project, ref, dry_run=dry_run)
    task = resolve_task(project, ref, closed=True)
    done = _delete(task, force=force, dry_run=dry_run, wait=True)
    if done.lost and not done.deleted and not dry_run:
        raise DirtyWorktree(
            f"deleting task {task.name} ({task.id}) would lose work: " + "; ".join(done.lost),
            hint=f"land it first (`bar apply --task {task.id}`), or delete it anyway with --force",
        )
    return done


def prune(project: Project, *, force: bool = False, dry_run: bool = False) -> Pruned:
    """Delete every closed task that loses nothing (``force``: every closed task), and
    finish deletions a stopped bar left. A busy or broken task is skipped, and said."""
    deleted: list[Deletion] = []
    skipped: list[Deletion] = []
    gone: set[str] = set()  # dry run: the refs of the tasks it would have deleted
    for task_id in being_deleted(project):
        deleted.append(_resume(project, task_id, dry_run=dry_run))
        if dry_run:
            intent = journals.DELETE.read(project.paths.task(task_id))
            gone.update(_refs_going(project, task_id, intent.branch if intent else None))
    for task in list_tasks(project):
        if task.active or any(d.task_id == task.id for d in deleted):
            continue
        try:
            done = _delete(task, force=force, dry_run=dry_run, wait=False, gone=gone)
        except BarError as exc:
            skipped.append(Deletion(task.id, task.name, [], lost=[str(exc)], dry_run=dry_run))
            continue
        if done.deleted or (dry_run and (force or not done.lost)):
            deleted.append(done)
            gone.update(_refs_going(project, task.id, task.branch) if dry_run else ())
        else:
            skipped.append(done)
    return Pruned(deleted, skipped, dry_run)


def _refs_going(project: Project, task_id: str, branch: str | None = None) -> list[str]:
    """The refs a deletion of the task removes."""
    return [*refs_of(project.root, task_id), *([f"refs/heads/{branch}"] if branch else [])]


def being_deleted(project: Project) -> list[str]:
    """The ids of tasks a stopped bar left half-deleted."""
    if not project.paths.tasks.is_dir():
        return []
    return [
        entry.name
        for entry in sorted(project.paths.tasks.iterdir())
        if is_being_deleted(project, entry.name)
    ]


def is_being_deleted(project: Project, task_id: str) -> bool:
    return (
        bool(TASK_ID_RE.match(task_id))
        and journals.DELETE.path(project.paths.task(task_id)).exists()
    )


def finish(project: Project, task_id: str) -> str:
    """Finish the deletion a stopped bar left (``bar doctor --repair``); say what it did."""
    done = _resume(project, task_id, dry_run=False)
    kept = f"; kept {', '.join(done.kept)}" if done.kept else ""
    return f"finished deleting task {done.name} ({task_id}){kept}"


# --- deleting ------------------------------------------------------------------------


def _delete(
    task: Task, *, force: bool, dry_run: bool, wait: bool, gone: set[str] | None = None
) -> Deletion:
    project = task.project
    if task.active and not task.read_only:  # (said at once: no wait for a running step)
        raise _open(task)
    with transaction.holding(task, "bar task delete", wait=wait, copy_ok=True) as task:
        if journals.DELETE.path(task.paths).exists():  # begun by another bar meanwhile
            return _resume(project, task.id, dry_run=dry_run)
        if task.active and not task.read_only:  # (a fetched copy: the remote keeps it)
            raise _open(task)
        repo = project.root
        where = worktrees.holding(repo, task.branch, task.worktree)
        if where is not None:
            raise BarError(
                f"the branch {task.branch} of task {task.name} is checked out in {where}",
                hint="switch that checkout to another branch, then delete the task",
            )
        lost = [] if task.read_only else at_risk(task, gone or ())
        lost += _trash_held(task)
        removed = inventory(project, task.id, task.branch)
        if dry_run or (lost and not force):
            return Deletion(task.id, task.name, removed, lost, dry_run=dry_run)
        intent = DeleteIntent(
            task.id,
            task.name,
            task.branch,
            # a copy made no branch here: one of that name is someone else's, and stays
            None if task.read_only else git.rev_parse(repo, f"refs/heads/{task.branch}"),
            bool(lost),
            now_iso(),
        )
        journals.DELETE.write(task.paths, intent)
        project.log_event("task.delete.before", task={**board.task_view(task), "lost": lost})
        kept = complete(project, intent)
    return Deletion(task.id, task.name, removed, lost, kept, deleted=True)


def _trash_held(task: Task) -> list[str]:
    """What the task's trash holds (``bar.changes.trash``): bytes no recorded state has,
    which the deletion empties with the task directory."""
    from bar.base.notices import byte_size, plural
    from bar.changes import trash

    held = trash.entries(task)
    if not held:
        return []
    paths = sum(len(e.items) for e in held)
    return [
        f"its trash holds {plural(paths, 'path')} ({byte_size(sum(e.size for e in held))}) "
        f"bar moved aside, which no recorded state has (`bar trash --task {task.id}` lists "
        "them, `bar trash restore` puts them back)"
    ]


def _open(task: Task) -> BarError:
    return BarError(
        f"task {task.name} ({task.id}) is open; only a closed task can be deleted",
        hint=f"close it first: `bar task close {task.id}`",
    )


def _resume(project: Project, task_id: str, *, dry_run: bool) -> Deletion:
    """Finish (``dry_run``: describe) the deletion a stopped bar left of ``task_id``."""
    paths = project.paths.task(task_id)
    gone = TaskNotFound(f"task {task_id} was deleted by another bar meanwhile")
    if not paths.dir.is_dir():
        raise gone
    with transaction.id_lock(project, task_id, "bar task delete"):
        intent = journals.DELETE.read(paths)
        if intent is None:
            raise gone
        removed = inventory(project, task_id, intent.branch)
        if dry_run:
            return Deletion(task_id, intent.name, removed, dry_run=True)
        kept = complete(project, intent)
    return Deletion(task_id, intent.name, removed, kept=kept, deleted=True)


def inventory(project: Project, task_id: str, branch: str) -> list[str]:
    """What of the task is there to remove, as a deletion would name it."""
    repo = project.root
    found: list[str] = []
    path = project.paths.workspace(task_id)
    if os.path.lexists(path) or worktrees.is_registered(repo, path):
        found.append(f"worktree {path}")
    tip = git.rev_parse(repo, f"refs/heads/{branch}")
    if tip is not None:
        found.append(f"branch {branch} (at {git.short(tip)})")
    refs = refs_of(repo, task_id)
    if refs:
        found.append(f"snapshot refs {', '.join(refs)}")
    if project.paths.task(task_id).dir.is_dir():
        found.append(f"task directory {project.paths.task(task_id).dir} (ledger, artifacts)")
    return found


def complete(project: Project, intent: DeleteIntent) -> list[str]:
    """Remove what ``intent`` names, the task directory last (the caller holds the task
    lock). Every part can run again. Returns what was kept, and why."""
    repo, task_id = project.root, intent.task_id
    kept: list[str] = []
    fast.stop_watching(project.paths.task(task_id).index)
    # `worktree prune` must not see a worktree another process is adding
    with project.lock(f"bar task delete {task_id}"):
        worktrees.discard(repo, project.paths.workspace(task_id))
    faults.point("delete: after removing the worktree")
    branch_ref = f"refs/heads/{intent.branch}"
    tip = git.rev_parse(repo, branch_ref)
    if tip is not None:
        where = worktrees.holding(repo, intent.branch, project.paths.workspace(task_id))
        # compare-and-delete: a branch that moved since the decision holds new commits
        if (
            where is not None
            or tip != intent.branch_tip
            or git.git(repo, "update-ref", "-d", branch_ref, tip, check=False).returncode != 0
        ):
            why = f"it is checked out in {where}" if where else "it moved since"
            kept.append(f"branch {intent.branch}: {why}")
    faults.point("delete: after deleting the branch")
    for ref in refs_of(repo, task_id):  # the snapshot ref last: `inventory` finds it
        git.git(repo, "update-ref", "-d", ref)
    faults.point("delete: after deleting the snapshot refs")
    if project.active_task_id() == task_id:
        project.set_active_task(None)
    with contextlib.suppress(CorruptFile):
        registry.forget(project, task_id)
    project.log_event(
        "task.delete.after",
        task={"id": task_id, "name": intent.name, "forced": intent.forced, "kept": kept},
    )
    _remove_task_dir(project.paths.task(task_id))
    from bar.task import seed_board

    seed_board.refresh(project)  # its file goes with it (the event came first)
    return kept


def _remove_task_dir(paths: TaskPaths) -> None:
    """task.json goes after everything but the intent and the lock, and the intent after
    it: a stop at any point leaves a directory that still reads as being deleted."""
    journal = journals.DELETE.path(paths)
    for entry in paths.dir.iterdir():
        if entry in (journal, paths.lock, paths.task_json):
            continue
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink()
    faults.point("delete: after emptying the task directory")
    paths.task_json.unlink(missing_ok=True)
    journals.DELETE.clear(paths)
    with contextlib.suppress(OSError):
        remove_tree(paths.dir)


def refs_of(repo: Path, task_id: str) -> list[str]:
    """Every ref of the task under ``refs/bar/``, its snapshot ref last."""
    found = _bar_refs(repo).get(task_id, [])
    return sorted(found, key=lambda ref: (ref == f"{_SNAPSHOTS}{task_id}", ref))


def orphaned_refs(project: Project) -> dict[str, list[str]]:
    """The refs under ``refs/bar/`` of tasks that have no directory, here or in any other
    project under ``$BAR_HOME`` (a repository that moved keeps its tasks' refs for
    ``bar init --adopt``), by task id: left by a deletion older bars did not finish, or
    by hand."""
    home = projects_dir()
    projects = [project.dir, *(home.iterdir() if home.is_dir() else [])]
    return {
        task_id: refs
        for task_id, refs in _bar_refs(project.root).items()
        if not any(os.path.lexists(d / "tasks" / task_id) for d in projects)
    }


_SNAPSHOTS = "refs/bar/tasks/"


def _bar_refs(repo: Path) -> dict[str, list[str]]:
    """The refs ``refs/bar/<kind>/<task id>[/...]``, by task id."""
    res = git.git(repo, "for-each-ref", "--format=%(refname)", "refs/bar/")
    found: dict[str, list[str]] = {}
    for ref in res.out.splitlines():
        task_id = owner(ref)
        if task_id is not None:
            found.setdefault(task_id, []).append(ref)
    return found
