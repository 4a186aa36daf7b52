"""``bar flow ACTION SUMMARY`` and ``bar flow status``: the task's phases and steps."""

from __future__ import annotations

from bar import api
from bar.aide import flow
from bar.api import orders
from bar.cli.render import Painter, print_json, short

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar flow``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    flw = sub.add_parser(
        "flow",
        formatter_class=Formatter,
        description="Record the task's progress through its phases (flow.phases; default\n"
        "flow-design, impl, verify, docs, finish): each action is an entry of\n"
        "flow-status.json with a snapshot commit of the worktree ([bar] impl: SUMMARY).\n"
        "Inside a running step, the step's bar run records it, as a checkpoint.\n"
        "`bar log` groups the steps by phase. See docs/decide-flow.md.",
        epilog="examples:\n"
        + "\n".join(f"  {ex}" for _, ex in _FLOW_ACTIONS.values())
        + "\n  bar flow status",
    )
    fsub = flw.add_subparsers(dest="flow_command", metavar="ACTION")
    flw.set_defaults(_help=flw)
    for action, (helped, example) in _FLOW_ACTIONS.items():
        p = fsub.add_parser(
            action,
            help=helped,
            formatter_class=Formatter,
            description=helped[0].upper() + helped[1:] + ".",
            epilog=f"examples:\n  {example}",
        )
        p.add_argument("summary", metavar="SUMMARY", help="what was done, or why")
        if action in ("back-step", "back-part"):
            p.add_argument(
                "--rollback",
                action="store_true",
                help="also restore the files to the state of the entry it returns "
                "to (an undoable rollback)",
            )
        if action == "back-part":
            p.add_argument(
                "--to",
                dest="phase",
                metavar="PHASE",
                help="the phase to return to (default: the one before)",
            )
        task_opt(p)
        json_opt(p)
        p.set_defaults(action=action)
        p.set_defaults(_run=act)
    p = fsub.add_parser(
        "status",
        help="the current phase and step, and the history",
        formatter_class=Formatter,
        description="Print the task's flow: its phase and step now, and every entry.",
        epilog="examples:\n  bar flow status\n  bar flow status --json",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=status)


_FLOW_ACTIONS = {
    "start": (
        "start the task's flow in its first phase",
        'bar flow start "implement the user authentication module"',
    ),
    "next-step": (
        "record a step forward in the current phase",
        'bar flow next-step "finished the user model"',
    ),
    "back-step": (
        "go back a step in the current phase (--rollback: and its files)",
        'bar flow back-step --rollback "the field names break the convention"',
    ),
    "next-part": ("move on to the next phase", 'bar flow next-part "design done, implementing"'),
    "back-part": (
        "return to an earlier phase (default: the one before)",
        'bar flow back-part --to impl "verify found a missing case"',
    ),
    "issue": ("record a problem to come back to", 'bar flow issue "test coverage is low"'),
    "error": ("record an error", 'bar flow error "the migration fails on an empty table"'),
}


# --- the command -----------------------------------------------------------------------


def act(
    *,
    action: str,
    summary: str,
    task: str | None,
    as_json: bool,
    rollback: bool = False,
    phase: str | None = None,
) -> int:
    the_task = api.get_task(api.open_project(), task)
    done = orders.flow_act(the_task, action, summary, rollback=rollback, phase=phase)
    if as_json:
        print_json(done)
        return 0
    entry = done["entry"]
    assert isinstance(entry, dict)
    print(
        f"{entry['phase']}, step {entry['step']}: {action} {summary!r} "
        f"(snapshot {short(str(entry['git_commit']))}, state {entry['state']})"
    )
    rolled = done.get("rollback")
    if isinstance(rolled, dict):
        name = rolled.get("checkpoint") or rolled.get("step_id")
        # a rollback step names its state in target_step (its target is the kind, "step")
        state = rolled.get("target_step") or rolled.get("target")
        undo = "bar undo takes it back" if rolled.get("step_id") else "roll back again to undo it"
        print(f"  files restored to state {state} (rollback {name}; {undo})")
    return 0


def status(*, task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    current = flow.status(the_task)
    if as_json:
        print_json(current)
        return 0
    if current is None:
        print(f'Task {the_task.name} has no flow yet. Start one with: bar flow start "SUMMARY"')
        return 0
    paint = Painter(the_task.project.config.output.color)
    phases = flow.phases(the_task)
    print(
        paint(f"phase {current['current_phase']}, step {current['current_step']}", "bold")
        + f"  (phases: {' > '.join(phases)}; started {current['started_at']})"
    )
    for entry in current["history"]:
        commit = short(entry.get("git_commit"))
        print(
            f"  {entry['step']:>3}  {entry['action']:<9}  {entry['phase']:<12} {commit}  "
            f"{entry['summary']}"
        )
    return 0
