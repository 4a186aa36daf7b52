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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar mcp``: its options and help."""
    from bar.cli.parser import Formatter, task_opt

    p = sub.add_parser(
        "mcp",
        formatter_class=Formatter,
        description="A Model Context Protocol server on stdin/stdout through which an agent\n"
        "inside a task sees and steers its own work. Tools: status, log, show, diff\n"
        "(what `bar status/log/show/diff --json` print; long patches are cut at max_bytes\n"
        "and marked), checkpoint (label the state now), rollback (to a state of this task:\n"
        "base, 3 or 3.2; never --hard), decide_submit / decide_result (ask the developer),\n"
        "flow / flow_status (the task's phases). A failing call is a tool error with bar's\n"
        "sentence and hint; the server keeps running.\n\n"
        "The task: --task, else the step's (BAR_TASK_ID, set by bar run), else the task of\n"
        "the current directory. Inside a step only that step's task is served, and every\n"
        "change is done by the step's `bar run` (the server is confined with the agent).\n"
        "`bar run --agent claude|codex|gemini` registers the server for the run by itself;\n"
        "`bar agent setup AGENT` prints the entry for an agent started another way.\n"
        "See docs/mcp.md.",
        epilog="examples:\n"
        "  bar run --agent claude -- claude      registered for the run: nothing to do\n"
        "  bar mcp --task fix-login              serve a task (a client starts this)\n"
        '  claude mcp add bar -- "$(command -v bar)" mcp --task fix-login\n'
        "                                        register it by hand with Claude Code\n"
        "  bar agent setup gemini                the settings entry, with bar's hooks",
    )
    task_opt(p)
    p.set_defaults(_run=mcp)


# --- the command -----------------------------------------------------------------------


def mcp(*, task: str | None) -> int:
    from bar.mcp.board import Board
    from bar.mcp.tools import OwnTask, serving  # (the SDK's types: not for `bar --help`)

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
