"""``bar blame FILE [--at STATE]``: each line with the step or tool call that last changed it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from bar import api
from bar.cli.pager import paging
from bar.cli.render import Painter, one_line, print_json
from bar.task.tasks import Task

if TYPE_CHECKING:
    from bar.history.blame import Blame


def blame(*, task: str | None, file: str, at: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    result = api.blame(the_task, _in_worktree(the_task, file), at)
    if as_json:
        print_json(result.to_json())
        return 0
    with paging():
        _print_lines(the_task, result)
    return 0


def _print_lines(the_task: Task, result: Blame) -> None:
    paint = Painter(the_task.project.config.output.color)
    width = len(str(len(result.lines)))
    for line in result.lines:
        o = line.origin
        what = one_line(o.command or "")
        what = what if len(what) <= 28 else what[:25] + "..."
        session = (o.session_id or "")[:8]
        tool = o.tool or ("" if o.kind == "base" else o.kind)
        head = f"{o.state:<9} {tool:<12.12} {session:<8} {what:<28}"
        print(f"{paint(head, 'dim')} {line.number:>{width}}) {line.text}")


def _in_worktree(task: Task, file: str) -> str:
    """FILE as a path relative to the task's worktree: from where the developer stands
    when that is inside the worktree, else as given."""
    path = Path(file)
    root = os.path.realpath(task.worktree)
    here = os.path.realpath(Path.cwd())
    if path.is_absolute():
        full = os.path.realpath(path)
    elif here == root or here.startswith(root + os.sep):
        full = os.path.realpath(Path(here) / path)
    else:
        return path.as_posix()
    if full == root or not full.startswith(root + os.sep):
        return path.as_posix()  # not in the worktree: said so by the lookup
    return Path(full).relative_to(root).as_posix()
