"""The command line of ``bar mcp``. Part of ``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

from typing import Any

from bar.cli.parser import _cmd, _Formatter, _task_opt


def commands(sub: Any) -> None:
    """Add ``mcp`` to ``sub``, the commands of ``bar``."""
    p = sub.add_parser(
        "mcp",
        help="serve the task to an agent as a Model Context Protocol server (stdio)",
        formatter_class=_Formatter,
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
    _task_opt(p)
    _cmd(p, "mcp:mcp")
