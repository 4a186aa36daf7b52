"""``bar task new|list|show|switch|close|path|reopen|delete|prune``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from bar import api
from bar.cli.render import Painter, plural, print_json, short
from bar.errors import BarError

if TYPE_CHECKING:
    from bar.project.project import Location
    from bar.task.delete import Deletion
    from bar.task.tasks import Task


def _note_where_you_are(loc: Location, active: Task) -> None:
    """Inside a task's worktree, that task wins over the active one (``--task`` aside):
    a task just made active elsewhere is not the one the next command here acts on."""
    if loc.task_id is None or loc.task_id == active.id:
        return
    try:
        here = api.get_task(loc)
        name = f"{here.name} ({here.id})"
    except BarError:
        name = loc.task_id
    print(
        f"note: you are in the worktree of task {name}; commands here act on it, "
        f"not on {active.name} (cd elsewhere, or pass --task {active.name})",
        file=sys.stderr,
    )


def new(
    *, name: str, base: str | None, description: str | None, tag: list[str], as_json: bool
) -> int:
    loc = api.open_project()
    project = loc.project
    task = api.new_task(project, name, base=base, description=description, tags=tag)
    _note_where_you_are(loc, task)
    if as_json:
        print_json(api.summarize(task, task.id).to_json())
        return 0
    paint = Painter(project.config.output.color)
    print(f"Created task {paint(task.name, 'bold')} ({task.id}), now active")
    print(f"  branch    {task.branch}  (from {task.base_ref} at {short(task.base_commit)})")
    print(f"  worktree  {task.worktree}")
    print("Next: bar run -- <command>")
    return 0


def list_(*, all: bool, as_json: bool) -> int:
    project = api.open_project().project
    rows = api.tasks(project, include_closed=all)
    if as_json:
        print_json([r.to_json() for r in rows])
        return 0
    if not rows:
        print("No tasks." + ("" if all else " (closed tasks: bar task list --all)"))
        print("Create one with: bar task new NAME")
        return 0
    paint = Painter(project.config.output.color)
    width = max(len(r.task.name) for r in rows)
    state_width = max(len(r.state.label) for r in rows)
    for r in rows:
        mark = paint("*", "green") if r.active else " "
        stat = r.diff_stat
        changes = f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"
        label = f"{r.state.label:<{state_width}}"
        state = paint(label, _STATE_COLOURS[r.state.state]) if r.state.state != "active" else label
        print(
            f"{mark} {r.task.id}  {r.task.name:<{width}}  {state}  "
            f"{plural(r.steps, 'step'):>9}  {changes}"
        )
    if any(r.state.worktree_missing for r in rows):
        print("A missing worktree is recreated at its last recorded state by: bar doctor --repair")
    return 0


_STATE_COLOURS = {
    "running": "yellow",
    "applied": "green",
    "closed": "dim",
    "missing-worktree": "red",
}


def show(*, task_ref: str | None, as_json: bool) -> int:
    loc = api.open_project()
    task = api.get_task(loc, task_ref)
    summary = api.summarize(task, loc.project.active_task_id())
    if as_json:
        print_json(summary.to_json())
        return 0
    paint = Painter(loc.project.config.output.color)
    print(f"{paint(task.name, 'bold')} ({task.id})" + ("  [active]" if summary.active else ""))
    desc = task.metadata.get("description")
    if desc:
        print(f"  {desc}")
    closed = f" (closed {task.closed_at})" if task.closed_at else ""
    print(f"  status      {task.status}{closed}")
    print(f"  state       {summary.state.label}")
    print(f"  base        {task.base_ref} at {short(task.base_commit)}")
    print(f"  branch      {task.branch}")
    gone = " (missing: `bar doctor --repair` recreates it)" if task.active else " (removed)"
    print(f"  worktree    {task.worktree}" + ("" if task.worktree.exists() else gone))
    print(f"  snapshots   {task.snapshot_ref}")
    tags = task.metadata.get("tags")
    if tags:
        print(f"  tags        {', '.join(map(str, tags))}")
    stat = summary.diff_stat
    print(f"  steps       {summary.steps}")
    print(
        f"  changes     {plural(stat.files, 'file')}, +{stat.additions} -{stat.deletions} since base"
    )
    print(f"  created     {task.created_at}")
    return 0


def switch(*, task_ref: str, as_json: bool) -> int:
    loc = api.open_project()
    task = api.switch_task(api.get_task(loc, task_ref))
    _note_where_you_are(loc, task)
    if as_json:
        print_json(api.summarize(task, task.id).to_json())
    else:
        print(f"Active task: {task.name} ({task.id})")
        print(f"  worktree  {task.worktree}")
    return 0


def close(*, task_ref: str | None, keep_worktree: bool, force: bool, as_json: bool) -> int:
    loc = api.open_project()
    closed = api.close_task(api.get_task(loc, task_ref), keep_worktree=keep_worktree, force=force)
    task = closed.task
    if as_json:
        print_json(api.summarize(task, loc.project.active_task_id()).to_json())
        return 0
    print(f"Closed task {task.name} ({task.id})")
    if closed.worktree_removed:
        print(f"  worktree removed; branch {task.branch} and the ledger are kept")
    elif task.worktree.exists():
        print(f"  worktree kept at {task.worktree}")
    return 0


def path(*, task_ref: str | None, as_json: bool) -> int:
    task = api.get_task(api.open_project(), task_ref)
    exists = task.worktree.is_dir()
    if as_json:
        print_json(
            {
                "task_id": task.id,
                "name": task.name,
                "worktree": str(task.worktree),
                "exists": exists,
            }
        )
    else:
        print(task.worktree)
    if exists:
        return 0
    hint = (
        "`bar doctor --repair` recreates it at the last recorded state"
        if task.active
        else f"`bar task reopen {task.id}` recreates it and makes the task active again"
    )
    raise BarError(f"the worktree of task {task.name} ({task.id}) is gone", hint=hint)


def reopen(*, task_ref: str, as_json: bool) -> int:
    loc = api.open_project()
    reopened = api.reopen_task(loc.project, task_ref)
    task = reopened.task
    _note_where_you_are(loc, task)
    if as_json:
        print_json({**api.summarize(task, task.id).to_json(), "recreated": reopened.recreated})
        return 0
    print(f"Reopened task {task.name} ({task.id}), now active")
    how = "recreated at the last recorded state" if reopened.recreated else "kept since closing"
    print(f"  worktree  {task.worktree}  ({how})")
    print(f"  branch    {task.branch}")
    return 0


def delete(*, task_ref: str, force: bool, dry_run: bool, as_json: bool) -> int:
    loc = api.open_project()
    done = api.delete_task(loc.project, task_ref, force=force, dry_run=dry_run)
    if as_json:
        print_json(done.to_json())
        return 0
    paint = Painter(loc.project.config.output.color)
    _print_deletion(done, paint)
    if dry_run:
        if done.lost and not force:
            print("It would refuse without --force.")
        print(paint("(dry run: nothing was deleted)", "dim"))
    return 0


def prune(*, force: bool, dry_run: bool, as_json: bool) -> int:
    loc = api.open_project()
    pruned = api.prune_tasks(loc.project, force=force, dry_run=dry_run)
    if as_json:
        print_json(pruned.to_json())
        return 0
    paint = Painter(loc.project.config.output.color)
    if not pruned.deleted:
        print("No closed task to delete." if not pruned.skipped else "Nothing deleted.")
    for done in pruned.deleted:
        _print_deletion(done, paint)
    for kept in pruned.skipped:
        print(f"Kept task {kept.name} ({kept.task_id}): " + "; ".join(kept.lost))
    if pruned.skipped and not force:
        print(paint("(--force deletes these too)", "dim"))
    if dry_run:
        print(paint("(dry run: nothing was deleted)", "dim"))
    return 0


def _print_deletion(done: Deletion, paint: Painter) -> None:
    verb = "Deleted" if done.deleted else "Would delete"
    print(f"{verb} task {paint(done.name, 'bold')} ({done.task_id})")
    for item in done.removed:
        print(f"  {item}")
    for item in done.kept:
        print(f"  kept {item}")
    if done.lost:
        lost = "lost" if done.deleted else "would be lost"
        print(f"  {lost}: " + "; ".join(done.lost))
