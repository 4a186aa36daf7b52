"""``bar diff [--from STATE] [--to STATE | --unrecorded] [--stat]``: any two recorded
states, or what the worktree holds that no step recorded yet."""

from __future__ import annotations

import sys

from bar import api
from bar.api import shapes
from bar.cli.pager import paging
from bar.cli.render import Painter, print_json
from bar.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar diff``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "diff",
        formatter_class=Formatter,
        description="Diff two recorded states of the task. STEP means the state after that\n"
        "step, STEP.N after its Nth checkpoint, 'base' the task's base commit.\n"
        "Default: from base to the last step.\n\n"
        "--unrecorded shows what the worktree holds that no step recorded yet (hand edits,\n"
        "what `bar status` reports), from the last recorded state or --from STATE to the\n"
        "files as they are now. It records nothing; the next step records them.",
        epilog="examples:\n"
        "  bar diff --from 2 --to 3        what step 0003 changed\n"
        "  bar diff --from 3.1 --to 3.2    what the second tool call of step 0003 changed\n"
        "  bar diff --unrecorded           changes made since the last step, not recorded\n"
        "  bar diff --unrecorded --stat    ... only which files\n"
        "  bar diff --from base --unrecorded   everything since base, recorded or not",
    )
    task_opt(p)
    p.add_argument(
        "--from",
        dest="from_",
        metavar="STATE",
        help="base, STEP or STEP.N (default: base; with --unrecorded: the last recorded state)",
    )
    p.add_argument(
        "--to", metavar="STATE", help="STEP or STEP.N (default: the last recorded state)"
    )
    p.add_argument(
        "--unrecorded",
        action="store_true",
        help="to the worktree as it is now: changes no step recorded yet",
    )
    p.add_argument("--stat", action="store_true", help="only a summary of changed files")
    json_opt(p)
    p.set_defaults(_run=diff)


# --- the command -----------------------------------------------------------------------


def diff(
    *,
    task: str | None,
    from_: str | None,
    to: str | None,
    stat: bool,
    as_json: bool,
    unrecorded: bool = False,
) -> int:
    the_task = api.get_task(api.open_project(), task)
    if unrecorded:
        if to is not None:
            raise UsageError(
                "--unrecorded compares with the worktree as it is now; it takes no --to",
                hint="bar diff --unrecorded [--from STATE]",
            )
        between = api.unrecorded(the_task, from_)
    else:
        between = api.diff(the_task, from_ or "base", to)
    if as_json:
        print_json(shapes.diff_entry(between, stat=stat, unrecorded=unrecorded))
        return 0
    with paging():
        color = Painter(the_task.project.config.output.color).enabled
        sys.stdout.write(between.text(stat_only=stat, color=color))
    return 0
