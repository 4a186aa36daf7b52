"""``bar task start|claim``, ``bar worktree list|keep|remove`` and ``bar events``: the task
board (docs/board.md)."""

from __future__ import annotations

import time
from typing import Any

from bar import api
from bar.cli.commands.task import print_unapplied, ref
from bar.cli.render import Painter, print_json, short
from bar.errors import TaskNotFound, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def task_options(tsub: Commands) -> None:
    """The command line of ``bar task start|claim|bind|unclaim``: their options and help
    (``tsub``: the actions of ``bar task``)."""
    from bar.cli.parser import Formatter, json_opt, task_ref_opts

    p = tsub.add_parser(
        "start",
        help="make a planned task's worktree and begin it",
        formatter_class=Formatter,
        description="Start a planned task (bar task new NAME --plan): its worktree is made on\n"
        "its branch and it moves from pending to in_progress; it becomes the active task\n"
        "unless --no-switch. A task planned on a branch that has moved since starts from\n"
        "where the branch is now, as long as nothing was recorded in it. Its first\n"
        "`bar run` starts it too. Starting a task that is in progress changes nothing.",
        epilog="examples:\n"
        "  bar task new auth-refactor --plan -d 'Move auth to the new API'\n"
        "  bar task start auth-refactor\n"
        "  bar task start auth-refactor --no-switch --json",
    )
    task_ref_opts(p)
    p.add_argument(
        "--no-switch",
        dest="switch",
        action="store_false",
        help="leave the active task as it is",
    )
    json_opt(p)
    p.set_defaults(_run=start)

    p = tsub.add_parser(
        "claim",
        help="take a task for an owner (an agent, a person, a worker)",
        formatter_class=Formatter,
        description="Claim a task for OWNER: the board records who took it. Of two claims of\n"
        "one task, one wins; the other fails (exit 1) naming the owner. Claiming again\n"
        "under the same name is no error. --start starts it too (see bar task start)\n"
        "without making it the active task. A task a step is running in cannot be\n"
        "claimed until the step ends (exit 7).",
        epilog="examples:\n"
        "  bar task list --pending --json          what nobody has started\n"
        "  bar task claim ui-login --owner agent-b\n"
        "  bar task claim ui-login --owner agent-b --start",
    )
    task_ref_opts(p)
    p.add_argument("--owner", required=True, metavar="NAME", help="who takes it")
    p.add_argument("--start", action="store_true", help="start it too (make its worktree)")
    p.add_argument(
        "--reassign",
        action="store_true",
        help="take it even from another owner (the event names who had it)",
    )
    json_opt(p)
    p.set_defaults(_run=claim)

    p = tsub.add_parser(
        "bind",
        help="make a worktree made with no task the task's worktree",
        formatter_class=Formatter,
        description="Bind the task to WORKTREE, a worktree made by `bar worktree create` with\n"
        "no task: it becomes the task's worktree (moved under the task, on its branch,\n"
        "its files untouched) and keeps its name; a pending task is in_progress. What\n"
        "its files hold beyond the task's recorded state is recorded at once as a manual\n"
        "step. A task with recorded work takes a clean worktree only. To move a task\n"
        "that has a worktree, remove that one first (bar worktree remove: its record\n"
        "stays).",
        epilog="examples:\n"
        "  bar worktree create ui-login\n"
        "  bar task bind ui-task ui-login\n"
        "  bar task bind 2 ui-login --json      (a number: board.layout: seed)",
    )
    p.add_argument("task_ref", metavar="ID|NAME", help="the task's id, name (or number)")
    p.add_argument("worktree", metavar="WORKTREE", help="the worktree's name")
    json_opt(p)
    p.set_defaults(_run=bind)

    p = tsub.add_parser(
        "unclaim",
        help="put a claimed task back with no owner",
        formatter_class=Formatter,
        description="Clear the task's owner: it is back on the board for anyone to claim\n"
        "(task.unclaimed in the event log, with who had it). --owner NAME: only if NAME\n"
        "holds it (exit 1 naming the owner otherwise). A task with no owner is no error.",
        epilog="examples:\n"
        "  bar task unclaim ui-login\n"
        "  bar task unclaim ui-login --owner agent-b --json",
    )
    task_ref_opts(p)
    p.add_argument("--owner", metavar="NAME", help="only if NAME holds it")
    json_opt(p)
    p.set_defaults(_run=unclaim)


def options(sub: Commands) -> None:
    """The command line of ``bar worktree`` and ``bar events``: their options and help."""
    from bar.cli.parser import Formatter, json_opt, task_ref_opts

    wt = sub.add_parser(
        "worktree",
        formatter_class=Formatter,
        description="The worktree registry ($BAR_HOME/projects/<p>/workspaces/index.json):\n"
        "each task's worktree, its branch, and whether it is active, kept or removed.\n"
        "A task's worktree is named by the task's name unless made or bound under another\n"
        "(bar worktree create NAME --task T, bar task bind); commands take either.",
    )
    wsub = wt.add_subparsers(dest="worktree_command", metavar="ACTION")
    wt.set_defaults(_help=wt)

    p = wsub.add_parser(
        "create",
        help="make a worktree, for a pending task or for none yet",
        formatter_class=Formatter,
        description="Make the worktree NAME. With --task, the pending task is started in it\n"
        "(as bar task start, its worktree called NAME). Without, it is made with no task\n"
        "at --base (default: git.default_base) on its own branch <prefix>wt/NAME, to look\n"
        "around in; bar run refuses there until a task is bound to it (bar task bind).",
        epilog="examples:\n"
        "  bar worktree create auth-refactor --task 1\n"
        "  bar worktree create ui-login --base main\n"
        "  bar task bind ui-task ui-login",
    )
    p.add_argument("name", metavar="NAME", help="1 to 40 letters, digits, '.', '_' or '-'")
    p.add_argument(
        "--task", dest="for_task", metavar="ID|NAME", help="a pending task to start in it"
    )
    p.add_argument("--base", metavar="REF", help="where a worktree of no task starts")
    json_opt(p)
    p.set_defaults(_run=worktree_create)

    p = wsub.add_parser(
        "list",
        help="list the worktrees with their state",
        formatter_class=Formatter,
        description="List the task worktrees: active (in use), kept (to stay when the task\n"
        "closes, or left after it closed) and, with --all, removed ones.",
        epilog="examples:\n  bar worktree list\n  bar worktree list --all --json",
    )
    p.add_argument("--all", "-a", action="store_true", help="include removed worktrees")
    json_opt(p)
    p.set_defaults(_run=worktree_list)

    p = wsub.add_parser(
        "keep",
        help="keep a worktree when its task closes",
        formatter_class=Formatter,
        description="Mark the task's worktree as kept: closing the task leaves it in place\n"
        "(as bar task close --keep-worktree does). The decision is recorded in the\n"
        "registry and the event log (worktree.keep).",
        epilog="examples:\n  bar worktree keep ui-login",
    )
    task_ref_opts(p)
    json_opt(p)
    p.set_defaults(_run=worktree_keep)

    p = wsub.add_parser(
        "remove",
        help="remove a worktree (--complete: and close its task)",
        formatter_class=Formatter,
        description="Remove the task's worktree. With --complete the task is closed too\n"
        "(completed; as bar task close). Without it an open task goes back to pending:\n"
        "its record stays whole and bar task start (or its next bar run) makes the\n"
        "worktree again at the last recorded state. Refuses while the worktree holds\n"
        "changes no step recorded, unless --force, which records them as a step first.",
        epilog="examples:\n"
        "  bar worktree remove auth-refactor --complete\n"
        "  bar worktree remove ui-login              back to pending",
    )
    task_ref_opts(p)
    p.add_argument("--complete", action="store_true", help="close the task too")
    p.add_argument("--force", action="store_true", help="record unrecorded changes first")
    json_opt(p)
    p.set_defaults(_run=worktree_remove)

    p = sub.add_parser(
        "events",
        formatter_class=Formatter,
        description="Print the project's lifecycle log (events.jsonl): tasks created,\n"
        "claimed, started, completed; worktrees created, kept, removed, each operation's\n"
        ".before, .after or .failed. --json prints the events as a list (with --follow,\n"
        "one JSON object per line as they come). The shapes are in docs/board.md.",
        epilog="examples:\n"
        "  bar events\n"
        "  bar events -n 100 --json\n"
        "  bar events --follow              new events as they happen (Ctrl-C ends)",
    )
    p.add_argument("-n", type=int, default=20, metavar="N", help="the last N events (default 20)")
    p.add_argument("--all", action="store_true", help="every event")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    json_opt(p)
    p.set_defaults(_run=events)


# --- the command -----------------------------------------------------------------------


def start(*, task_ref: str | None, task: str | None, switch: bool, as_json: bool) -> int:
    loc = api.open_project()
    before = api.get_task(loc, ref(task_ref, task))
    was_pending = before.pending
    started = api.start_task(before, activate=switch)
    if as_json:
        print_json(api.summarize(started, loc.project.active_task_id()).to_json())
        return 0
    verb = "Started" if was_pending else "Already started:"
    active = ", now active" if switch else ""
    print(f"{verb} task {started.name} ({started.id}){active}")
    print(
        f"  branch    {started.branch}  (from {started.base_ref} at {short(started.base_commit)})"
    )
    print(f"  worktree  {started.worktree}")
    return 0


def claim(
    *,
    task_ref: str | None,
    task: str | None,
    owner: str,
    start: bool,
    reassign: bool,
    as_json: bool,
) -> int:
    loc = api.open_project()
    taken = api.claim_task(
        api.get_task(loc, ref(task_ref, task)), owner, start=start, reassign=reassign
    )
    if as_json:
        print_json(api.summarize(taken, loc.project.active_task_id()).to_json())
        return 0
    print(f"Claimed task {taken.name} ({taken.id}) for {taken.board.owner}: {taken.board.status}")
    if start:
        print(f"  worktree  {taken.worktree}")
    else:
        print(f"Next: bar task start {taken.name}  (or bar run --task {taken.name} -- CMD)")
    return 0


def worktree_create(*, name: str, for_task: str | None, base: str | None, as_json: bool) -> int:
    loc = api.open_project()
    if for_task is not None:
        if base is not None:
            raise UsageError(
                "--base is for a worktree of no task: a task starts from its own base",
                hint="`bar task new NAME --plan --base REF` plans a task on another base",
            )
        started = api.create_task_worktree(api.get_task(loc, for_task), name)
        entry = _entry(loc, started.id)
        if as_json:
            print_json(entry)
            return 0
        print(f"Created worktree {name} for task {started.name} ({started.id}): in_progress")
        print(f"  {started.worktree}  ({started.branch})")
        return 0
    entry = api.create_worktree(loc.project, name, base=base)
    if as_json:
        print_json(entry)
        return 0
    print(f"Created worktree {name} with no task: {entry['path']}  ({entry['branch']})")
    print(f"Next: bar task bind TASK {name}  (bar run works there once a task is bound)")
    return 0


def bind(*, task_ref: str, worktree: str, as_json: bool) -> int:
    loc = api.open_project()
    bound, recorded = api.bind_task(api.get_task(loc, task_ref), worktree)
    if as_json:
        print_json(
            {
                "task": api.summarize(bound, loc.project.active_task_id()).to_json(),
                "worktree": _entry(loc, bound.id),
                "recorded": [s.step_id for s in recorded],
            }
        )
        return 0
    print(f"Bound task {bound.name} ({bound.id}) to worktree {worktree}: {bound.board.status}")
    print(f"  {bound.worktree}  ({bound.branch})")
    for step in recorded:
        print(f"  recorded step {step.step_id} ({step.kind}): what the worktree held")
    return 0


def unclaim(*, task_ref: str | None, task: str | None, owner: str | None, as_json: bool) -> int:
    loc = api.open_project()
    before = api.get_task(loc, ref(task_ref, task))
    freed = api.unclaim_task(before, owner=owner)
    if as_json:
        print_json(api.summarize(freed, loc.project.active_task_id()).to_json())
        return 0
    if before.board.owner:
        print(f"Unclaimed task {freed.name} ({freed.id}): {before.board.owner} no longer holds it")
    else:
        print(f"Task {freed.name} ({freed.id}) has no owner")
    return 0


def worktree_list(*, all: bool, as_json: bool) -> int:
    loc = api.open_project()
    entries = [e for e in api.worktrees(loc.project) if all or e["status"] != "removed"]
    if as_json:
        print_json(entries)
        return 0
    if not entries:
        print("No worktrees." + ("" if all else " (removed ones: bar worktree list --all)"))
        return 0
    paint = Painter(loc.project.config.output.color)
    width = max(len(e["name"]) for e in entries)
    colour = {"active": "green", "kept": "yellow", "removed": "dim"}
    for e in entries:
        status = paint(f"[{e['status']}]", colour[e["status"]])
        print(
            f"{status:<9} {e['name']:<{width}}  {e['path']}  ({e['branch']})  "
            f"task={e['task_id'] or '-'}"
        )
    return 0


def _worktree_task(loc: api.Location, task_ref: str | None, task: str | None) -> api.Task:
    """The task a worktree command names: by the worktree's name first (a worktree made
    or bound under a name of its own), else as any task reference."""
    chosen = ref(task_ref, task)
    if chosen is not None:
        entry = api.worktree_named(loc.project, chosen)
        if entry is not None and entry["task_id"]:
            return api.get_task(loc, entry["task_id"])
    try:
        return api.get_task(loc, chosen)
    except TaskNotFound:
        if chosen is None:
            raise
        raise TaskNotFound(
            f"no worktree or task is called {chosen!r}",
            hint="`bar worktree list` shows the worktrees (--all: removed ones too)",
        ) from None


def worktree_keep(*, task_ref: str | None, task: str | None, as_json: bool) -> int:
    loc = api.open_project()
    kept = api.keep_worktree(_worktree_task(loc, task_ref, task))
    if as_json:
        print_json(_entry(loc, kept.id))
        return 0
    name = kept.board.worktree or kept.name
    print(f"Kept worktree {name}: it stays when task {kept.name} ({kept.id}) closes")
    print(f"  {kept.worktree}")
    return 0


def worktree_remove(
    *, task_ref: str | None, task: str | None, complete: bool, force: bool, as_json: bool
) -> int:
    loc = api.open_project()
    chosen = ref(task_ref, task)
    lane = api.worktree_named(loc.project, chosen) if chosen is not None else None
    if lane is not None and not lane["task_id"]:
        if complete:
            raise UsageError(f"the worktree {chosen} has no task to complete")
        entry = api.remove_lane(loc.project, lane["name"])
        if as_json:
            print_json({"task": None, "worktree": entry, "recorded": [], "unapplied": None})
            return 0
        print(f"Removed worktree {entry['name']} ({entry['path']}); its branch stays")
        return 0
    done = api.remove_worktree(_worktree_task(loc, task_ref, task), complete=complete, force=force)
    removed = done.task
    if as_json:
        print_json(
            {
                "task": api.summarize(removed, loc.project.active_task_id()).to_json(),
                "worktree": _entry(loc, removed.id),
                "recorded": [s.step_id for s in done.recorded],
                "unapplied": done.unapplied.to_json() if done.unapplied else None,
            }
        )
        return 0
    for step in done.recorded:
        print(f"Recorded step {step.step_id} ({step.kind}) first: changes no step had recorded")
    gone = _entry(loc, removed.id)
    name = gone["name"] if gone is not None else removed.name
    print(f"Removed worktree {name} ({removed.worktree})")
    if not removed.active:
        print(f"  task {removed.name} ({removed.id}) is completed; its branch and record stay")
        if done.unapplied is not None:
            print_unapplied(done.unapplied, Painter(loc.project.config.output.color))
    else:
        print(f"  task {removed.name} ({removed.id}) is pending again: bar task start remakes it")
    return 0


def _entry(loc: api.Location, task_id: str) -> dict[str, Any] | None:
    return next((e for e in api.worktrees(loc.project) if e["task_id"] == task_id), None)


def events(*, n: int, all: bool, follow: bool, as_json: bool) -> int:
    if n < 0:
        raise UsageError(f"-n takes a number of events, 0 or more, not {n}")
    loc = api.open_project()
    end = api.events_end(loc.project) if follow else None  # (what follows comes after it)
    shown = api.events(loc.project, None if all else n, upto=end)
    if as_json and not follow:
        print_json(shown)
        return 0
    for rec in shown:
        _print_event(rec, as_json)
    if not follow:
        if not shown:
            print("No events yet.")
        return 0
    try:
        for rec in api.follow_events(loc.project, start=end):
            _print_event(rec, as_json)
    except KeyboardInterrupt:
        return 0
    return 0


def _print_event(rec: dict[str, Any], as_json: bool) -> None:
    import json

    if as_json:
        print(json.dumps(rec, ensure_ascii=False), flush=True)
        return
    print(event_line(rec), flush=True)


def event_line(rec: dict[str, Any]) -> str:
    """One event as people read it: time, name, the task and worktree it is about."""
    ts = rec.get("ts")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
        if isinstance(ts, (int, float)) and ts > 0
        else "????-??-?? ??:??:??"
    )
    if rec.get("event") == "parse_error":
        return f"{when}  (a line that does not parse: {str(rec.get('raw'))[:80]!r})"
    parts = [f"{when}  {rec.get('event', '?'):<24}"]
    task = rec.get("task") or {}
    if isinstance(task, dict) and task:
        name = task.get("name")
        label = f"{name} ({task.get('id')})" if name else str(task.get("id", ""))
        status = f" {task['status']}" if task.get("status") else ""
        owner = f" @{task['owner']}" if task.get("owner") else ""
        parts.append(f"task {label}{status}{owner}")
    about = rec.get("project") or {}
    if isinstance(about, dict) and about.get("root"):
        parts.append(f"project {about['root']}")
    wt = rec.get("worktree") or {}
    if isinstance(wt, dict) and not task and wt.get("name"):
        # a worktree of no task (bar worktree create): named, as no task names it
        parts.append(f"worktree {wt['name']}" + (f" {wt['status']}" if wt.get("status") else ""))
    elif isinstance(wt, dict) and wt.get("status"):
        parts.append(f"worktree {wt['status']}")
    changed = rec.get("changed")
    if isinstance(changed, dict) and changed:
        parts.append("changed " + ", ".join(map(str, changed)))
    if rec.get("error"):
        parts.append(f"error: {rec['error']}")
    return "  ".join(parts).rstrip()
