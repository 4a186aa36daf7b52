"""``bar diff [--from STATE] [--to STATE | --unrecorded] [--stat]``: any two recorded
states, or what the worktree holds that no step recorded yet."""

from __future__ import annotations

import sys

from bar import api
from bar.api import shapes
from bar.cli.pager import paging
from bar.cli.render import Painter, print_json
from bar.errors import UsageError


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
