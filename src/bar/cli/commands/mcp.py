"""``bar mcp [--task ID|NAME]``: serve the task, and the task board, to an agent over
MCP (stdio).

stdout is the protocol's: nothing else may be printed there once the server runs. An
error before it starts (no such task) is printed to stderr as usual. With no task to
serve (none named, none active, not inside a task's worktree) it serves the board alone:
a lead agent plans and hands out work.
"""

from __future__ import annotations

import os

from bar import api
from bar.errors import TaskNotFound
from bar.mcp.board import Board
from bar.mcp.tools import OwnTask, serving


def mcp(*, task: str | None) -> int:
    loc = api.open_project()
    try:
        served = serving(loc, task)
    except TaskNotFound:
        if task is not None or os.environ.get("BAR_TASK_ID") or loc.task_id is not None:
            raise
        served = None  # no active task: the board alone
    own = OwnTask(loc, served) if served is not None else None
    from bar.mcp.server import serve  # the SDK, only now

    serve(own, Board(loc, served))
    return 0
