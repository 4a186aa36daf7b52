"""``bar task new|list|show|switch|close``."""

from __future__ import annotations

import argparse
from typing import Any

from bar import git, recorder, worktree
from bar.events import append_event
from bar.project import Project, find_project
from bar.render import Painter, plural, print_json, short
from bar.store import now_iso
from bar.tasks import Task, create_task, list_tasks, load_task, resolve_task


def _summary(task: Task, active_id: str | None) -> dict[str, Any]:
    last = task.ledger.last()
    snap = task.ledger.last_snapshot() or task.base_commit
    stat = git.numstat(task.project.root, task.base_commit, snap).to_record()
    rec = task.to_record()
    rec.pop("version", None)
    rec.update(
        {
            "active": task.id == active_id,
            "steps": last.number if last else 0,
            "last_step": last.step_id if last else None,
            "diff_stat": stat,
            "worktree": str(task.worktree),
        }
    )
    return rec


def new(args: argparse.Namespace) -> int:
    project = find_project().project
    task = create_task(
        project, args.name, base=args.base, description=args.description, tags=args.tag
    )
    if args.json:
        print_json(_summary(task, task.id))
        return 0
    paint = Painter(project.config.output.color)
    print(f"Created task {paint(task.name, 'bold')} ({task.id}), now active")
    print(f"  branch    {task.branch}  (from {task.base_ref} at {short(task.base_commit)})")
    print(f"  worktree  {task.worktree}")
    print("Next: bar run -- <command>")
    return 0


def list_(args: argparse.Namespace) -> int:
    project = find_project().project
    active_id = project.active_task_id()
    tasks = [t for t in list_tasks(project) if args.all or t.active]
    rows = [_summary(t, active_id) for t in tasks]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("No tasks." + ("" if args.all else " (closed tasks: bar task list --all)"))
        print("Create one with: bar task new NAME")
        return 0
    paint = Painter(project.config.output.color)
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        mark = paint("*", "green") if r["active"] else " "
        stat = r["diff_stat"]
        changes = f"{plural(stat['files'], 'file')} +{stat['additions']} -{stat['deletions']}"
        status = r["status"] if r["status"] == "active" else paint(r["status"], "dim")
        print(
            f"{mark} {r['id']}  {r['name']:<{width}}  {status:<6}  "
            f"{plural(r['steps'], 'step'):>9}  {changes}"
        )
    return 0


def _pick(project: Project, ref: str | None, cwd_task: str | None) -> Task:
    return resolve_task(project, ref, from_cwd=cwd_task)


def show(args: argparse.Namespace) -> int:
    loc = find_project()
    task = _pick(loc.project, args.task_ref, loc.task_id)
    rec = _summary(task, loc.project.active_task_id())
    if args.json:
        print_json(rec)
        return 0
    paint = Painter(loc.project.config.output.color)
    print(f"{paint(task.name, 'bold')} ({task.id})" + ("  [active]" if rec["active"] else ""))
    desc = task.metadata.get("description")
    if desc:
        print(f"  {desc}")
    tags = task.metadata.get("tags")
    print(
        f"  status      {task.status}" + (f" (closed {task.closed_at})" if task.closed_at else "")
    )
    print(f"  base        {task.base_ref} at {short(task.base_commit)}")
    print(f"  branch      {task.branch}")
    print(f"  worktree    {task.worktree}" + ("" if task.worktree.exists() else " (removed)"))
    print(f"  snapshots   {task.snapshot_ref}")
    if tags:
        print(f"  tags        {', '.join(map(str, tags))}")
    stat = rec["diff_stat"]
    print(f"  steps       {rec['steps']}")
    print(
        f"  changes     {plural(stat['files'], 'file')}, "
        f"+{stat['additions']} -{stat['deletions']} since base"
    )
    print(f"  created     {task.created_at}")
    return 0


def switch(args: argparse.Namespace) -> int:
    project = find_project().project
    task = resolve_task(project, args.task_ref)
    if not task.active:
        from bar.errors import UsageError

        raise UsageError(f"task {task.name} ({task.id}) is closed and cannot be made active")
    project.set_active_task(task.id)
    if args.json:
        print_json(_summary(task, task.id))
    else:
        print(f"Active task: {task.name} ({task.id})")
        print(f"  worktree  {task.worktree}")
    return 0


def close(args: argparse.Namespace) -> int:
    loc = find_project()
    project = loc.project
    task = _pick(project, args.task_ref, loc.task_id)
    with task.lock("bar task close"):
        task = load_task(project, task.id)
        if not task.active:
            from bar.errors import UsageError

            raise UsageError(f"task {task.name} ({task.id}) is already closed")
        removed = False
        if task.worktree.is_dir():
            recorder.recover(task)
            recorder.ensure_clean_or_record(task, force=args.force)
            if not args.keep_worktree:
                try:
                    # `worktree prune` must not see a worktree another process is adding
                    with project.lock("bar task close"):
                        worktree.remove(project.root, task.worktree)
                except Exception as exc:
                    append_event(project, "worktree.remove.failed", task_id=task.id,
                                 error=str(exc))  # fmt: skip
                    raise
                removed = True
                append_event(project, "worktree.removed", task_id=task.id,
                             path=str(task.worktree))  # fmt: skip
        task.status = "closed"
        task.closed_at = now_iso()
        task.save()
        append_event(project, "task.closed", task_id=task.id, name=task.name)
    if project.active_task_id() == task.id:
        project.set_active_task(None)
    if args.json:
        print_json(_summary(task, project.active_task_id()))
        return 0
    print(f"Closed task {task.name} ({task.id})")
    if removed:
        print(f"  worktree removed; branch {task.branch} and the ledger are kept")
    elif task.worktree.exists():
        print(f"  worktree kept at {task.worktree}")
    return 0
