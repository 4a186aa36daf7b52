"""``bar diff [--from STATE] [--to STATE | --unrecorded] [--stat]``: any two recorded
states, or what the worktree holds that no step recorded yet."""

from __future__ import annotations

import sys
from typing import Any

from bar import api
from bar.errors import UsageError
from bar.pager import paging
from bar.render import Painter, print_json


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
        rec: dict[str, Any] = {"from": between.from_commit, "to": between.to_commit,
                               "diff_stat": between.stat().to_record()}  # fmt: skip
        if unrecorded:
            rec["unrecorded"] = True  # "to" is the tree of the worktree, not a snapshot
        if not stat:
            rec["patch"] = between.patch()
        print_json(rec)
        return 0
    with paging():
        color = Painter(the_task.project.config.output.color).enabled
        sys.stdout.write(between.text(stat_only=stat, color=color))
    return 0
