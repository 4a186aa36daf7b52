"""The task board as one order (``board``), for a lead agent to plan work for others.

``perform(project, op, args)`` does one board operation and returns JSON: what
``bar mcp``'s board tools answer (``task_create``, ``task_list``, ``task_claim``,
``task_start``, ``worktree_list``, ``worktree_keep``, ``worktree_remove``, ``events``).
Outside a step the server calls it directly; inside one it is confined and cannot write
bar's files, so it sends the order ``board`` {op, ...} to the step's ``bar run``
(``bar.changes.orders``), which calls it with the running task as ``caller``.

A step's agent may plan, claim, start, keep and remove other tasks' worktrees, but never
close or remove the worktree of the task it runs in (it would pull the floor from under
itself): that is the developer's decision, made outside the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bar.changes import orders
from bar.errors import Locked, UsageError
from bar.model.project import Project
from bar.model.tasks import Task, list_tasks, load_task, resolve_task
from bar.task import registry
from bar.task.state import is_running, summarize

OPS = (
    "create",
    "list",
    "claim",
    "unclaim",
    "start",
    "worktrees",
    "worktree_create",
    "bind",
    "keep",
    "remove",
    "events",
)
LIST_FILTERS = ("open", "pending", "in_progress", "completed", "all")
EVENTS_MAX = 200


def perform(
    project: Project, op: str, args: Mapping[str, object], *, caller: Task | None = None
) -> dict[str, Any]:
    """Do board operation ``op``; ``caller``: the task whose running step asked."""
    active = project.active_task_id()
    if op == "create":
        from bar.task.new import create_task

        name = _text(args, "name")
        created = create_task(
            project,
            name,
            base=_text(args, "base", required=False) or None,
            description=_text(args, "description", required=False) or None,
            plan=True,
        )
        queue = _text(args, "queue", required=False)
        if queue:
            # a lead's plan fans out: a `bar worker --claim` of that queue takes it
            from bar.workers import client, temporal

            server = temporal.server_of(project, None)
            client.send(project, created, queue, server, claim={"argv": []})
            created = load_task(project, created.id)
        return {"task": summarize(created, active).to_json()}
    if op == "list":
        which = _text(args, "status", required=False) or "open"
        if which not in LIST_FILTERS:
            raise UsageError(f"status must be one of {', '.join(LIST_FILTERS)}, not {which!r}")
        every = list_tasks(project)
        chosen = [
            t
            for t in every
            if which == "all" or (which == "open" and t.active) or t.board.status == which
        ]
        return {"tasks": [summarize(t, active).to_json() for t in chosen]}
    if op == "worktrees":
        entries, _wrong = registry.view(project)  # a lost registry: as the disk says
        if not args.get("all"):
            entries = [e for e in entries if e["status"] != registry.REMOVED]
        return {"worktrees": entries}
    if op == "events":
        from bar.model import event_log as events

        limit = args.get("limit", 20)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= EVENTS_MAX:
            raise UsageError(f"limit must be a number from 1 to {EVENTS_MAX}")
        return {"events": events.recent(project.paths.events, limit)}
    if op == "worktree_create" and not _text(args, "task", required=False):
        from bar.task import lanes

        base = _text(args, "base", required=False) or None
        return {"worktree": lanes.create(project, _text(args, "name"), base)}
    if op not in OPS:
        raise UsageError(f"{op!r} is not a board operation", hint="known: " + ", ".join(OPS))
    named = _text(args, "task")
    # keep and remove name a worktree: by the worktree's own name first
    entry = registry.named(project, named) if op in ("keep", "remove") else None
    if entry is not None and entry["task_id"]:
        named = entry["task_id"]
    task = resolve_task(project, named)
    if caller is not None and task.id != caller.id and is_running(task):
        # never wait from inside a step on another task's step (its lock is held for
        # as long as that step runs)
        raise Locked(
            f"task {task.name} ({task.id}) is running a step",
            hint="try again when its step has ended",
        )
    if (
        caller is not None
        and task.board.owner
        and (op == "unclaim" or (op == "claim" and args.get("reassign")))
    ):
        raise orders.NotInsideStep(
            f"a step's agent does not take task {task.name} from {task.board.owner}",
            hint="the developer changes owners, outside the step: `bar task claim --reassign` "
            "or `bar task unclaim`",
        )
    if op == "claim":
        from bar.task.claim import claim

        taken = claim(
            task,
            _text(args, "owner"),
            start=bool(args.get("start")),
            reassign=bool(args.get("reassign")),
        )
        return {"task": summarize(taken, active).to_json()}
    if op == "unclaim":
        from bar.task.claim import unclaim

        owner = _text(args, "owner", required=False) or None
        return {"task": summarize(unclaim(task, owner=owner), active).to_json()}
    if op in ("worktree_create", "bind") and caller is not None and caller.id == task.id:
        raise orders.NotInsideStep(
            f"a step of task {task.name} cannot move its own task to another worktree",
            hint="the developer does, outside the step",
        )
    if op == "worktree_create":
        from bar.task import lanes

        started = lanes.create_for(task, _text(args, "name"))
        return {"task": summarize(started, active).to_json(), "worktree": _entry(started)}
    if op == "bind":
        from bar.task import lanes

        bound, recorded = lanes.bind(task, _text(args, "worktree"))
        return {
            "task": summarize(bound, active).to_json(),
            "worktree": _entry(bound),
            "recorded": [s.step_id for s in recorded],
        }
    if op == "start":
        from bar.task.start import start

        return {"task": summarize(start(task, activate=False), active).to_json()}
    if op == "keep":
        from bar.task.close import keep

        kept = keep(task)
        return {"task": summarize(kept, active).to_json(), "worktree": _entry(kept)}
    # remove
    from bar.task.close import remove_worktree

    if caller is not None and caller.id == task.id:
        raise orders.NotInsideStep(
            f"a step of task {task.name} cannot remove its own worktree",
            hint="the developer does, outside the step: `bar worktree remove` or `bar task close`",
        )
    done = remove_worktree(task, complete=bool(args.get("complete_task")))
    return {
        "task": summarize(done.task, project.active_task_id()).to_json(),
        "worktree": _entry(done.task),
        "recorded": [s.step_id for s in done.recorded],
    }


def _entry(task: Task) -> dict[str, Any] | None:
    return registry.entry_of(task.project, task.id)


def _text(args: Mapping[str, object], key: str, *, required: bool = True) -> str:
    value = args.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise UsageError(f"the board needs {key!r} (text)")
    return value.strip()


@orders.register("board", "any")
def board_order(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    """The order a confined ``bar mcp`` sends: done by the step's ``bar run``."""
    op = args.get("op")
    if not isinstance(op, str):
        raise UsageError("the board order needs 'op'")
    from bar.model import event_log as events

    events.origin = {"task": ctx.task.id, "step": ctx.step_id} if ctx.running else None
    try:
        return perform(ctx.task.project, op, args, caller=ctx.task if ctx.running else None)
    finally:
        events.origin = None
