"""``bar diff [--from STEP|base] [--to STEP] [--stat]``: any two recorded states."""

from __future__ import annotations

import sys
from typing import Any

from bar import api
from bar.render import Painter, print_json


def diff(*, task: str | None, from_: str, to: str | None, stat: bool, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    between = api.diff(the_task, from_, to)
    if as_json:
        rec: dict[str, Any] = {"from": between.from_commit, "to": between.to_commit,
                               "diff_stat": between.stat().to_record()}  # fmt: skip
        if not stat:
            rec["patch"] = between.patch()
        print_json(rec)
        return 0
    color = Painter(the_task.project.config.output.color).enabled
    sys.stdout.write(between.text(stat_only=stat, color=color))
    return 0
