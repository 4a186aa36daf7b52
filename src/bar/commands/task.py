"""``bar task new|list|show|switch|close``."""

from __future__ import annotations

from bar import api
from bar.render import Painter, plural, print_json, short


def new(
    *, name: str, base: str | None, description: str | None, tag: list[str], as_json: bool
) -> int:
    project = api.open_project().project
    task = api.new_task(project, name, base=base, description=description, tags=tag)
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


_STATE_COLOURS = {"running": "yellow", "applied": "green", "closed": "dim",
                  "missing-worktree": "red"}  # fmt: skip


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
