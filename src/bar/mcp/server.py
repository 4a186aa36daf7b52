"""``bar mcp``: the tools of ``bar.mcp.tools`` served over stdio with the official MCP SDK.

The SDK's high-level server (``MCPServer``) makes each typed function a tool whose JSON
schema comes from its annotations; this module only names the tools, describes them for
the model, and turns a ``BarError`` into a tool error that carries bar's sentence and
hint (the agent reads it and carries on; the server does not stop). Only ``bar mcp``
imports this module, so nothing else in bar pays for the SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from bar import __version__
from bar.errors import BarError
from bar.mcp.tools import DEFAULT_MAX_BYTES, LOG_DEFAULT, OwnTask

State = Annotated[
    str, Field(description="a recorded state: base, a step (3) or a checkpoint (3.2)")
]
LastState = Annotated[str | None, Field(description="a recorded state (default: the last)")]
MaxBytes = Annotated[
    int, Field(ge=1, le=2_000_000, description="cut patches and output after this many bytes")
]
_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def _bar_errors(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``fn`` with a ``BarError`` turned into a tool error: bar's sentence and hint."""

    @wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except BarError as exc:
            text = f"bar: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else "")
            raise ToolError(text) from None

    return tool


def build(own: OwnTask) -> MCPServer[Any]:
    """The server, its tools bound to ``own``."""
    task = own.task
    server: MCPServer[Any] = MCPServer(
        "bar",
        version=__version__,
        instructions=f"bar records this task ({task.name}, {task.id}) step by step. Read its "
        "record (status, log, show, diff), label the current state (checkpoint), return to "
        "an earlier state (rollback), ask the developer to decide (decide_submit, then "
        "decide_result), and move through the task's flow (flow, flow_status).",
    )

    def add(fn: Callable[..., dict[str, Any]], description: str, read: bool) -> None:
        server.add_tool(
            _bar_errors(fn),
            description=description,
            annotations=_READ if read else _WRITE,
            structured_output=True,
        )

    def status() -> dict[str, Any]:
        return own.status()

    def log(
        n: Annotated[int, Field(ge=0, description="the last N steps")] = LOG_DEFAULT,
    ) -> dict[str, Any]:
        return own.log(n)

    def show(
        step: Annotated[str, Field(description="a step (3) or a checkpoint (3.2)")],
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        return own.show(step, max_bytes)

    def diff(
        from_state: State = "base",
        to_state: LastState = None,
        stat_only: Annotated[bool, Field(description="only the diff stat")] = False,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        return own.diff(from_state, to_state, stat_only, max_bytes)

    def checkpoint(
        label: Annotated[str, Field(max_length=200, description="what this state is")] = "",
    ) -> dict[str, Any]:
        return own.checkpoint(label)

    def rollback(to: State) -> dict[str, Any]:
        return own.rollback(to)

    def decide_submit(
        input: Annotated[
            dict[str, Any],
            Field(
                description=(
                    "a DecideInput: {task, source, items: [{id, title, location?, context?, "
                    "options: [{value, label, score?, pros?, cons?}] (2 or more), recommend?}]}"
                )
            ),
        ],
    ) -> dict[str, Any]:
        return own.decide_submit(input)

    def decide_result(
        wait_seconds: Annotated[
            float,
            Field(
                ge=0,
                le=3600,
                description="wait up to this many seconds for the answer (0: do not wait)",
            ),
        ] = 0,
    ) -> dict[str, Any]:
        return own.decide_result(wait_seconds)

    def flow(
        action: Literal[
            "start", "next-step", "back-step", "next-part", "back-part", "issue", "error"
        ],
        summary: Annotated[str, Field(min_length=1, description="what was done, or why")],
        rollback: Annotated[
            bool,
            Field(
                description="back-step/back-part: also return the "
                "files to the state of the entry returned to"
            ),
        ] = False,
    ) -> dict[str, Any]:
        return own.flow(action, summary, rollback)

    def flow_status() -> dict[str, Any]:
        return own.flow_status()

    add(
        status,
        "Where the task stands: its state, the running step, unrecorded changes "
        "(bar status --json).",
        True,
    )
    add(
        log,
        "The task's last steps, oldest first, each with its checkpoints (bar log --json).",
        True,
    )
    add(
        show,
        "One step or checkpoint with its patch and output (bar show --json); long "
        "text is cut at max_bytes, said under 'truncated'.",
        True,
    )
    add(
        diff,
        "The changes between two recorded states of the task (bar diff --json); the "
        "patch is cut at max_bytes, said under 'truncated'.",
        True,
    )
    add(
        checkpoint,
        "Record the worktree's state now, with a label, as a state you can "
        "return to (a checkpoint of the running step).",
        False,
    )
    add(
        rollback,
        "Return the task's files to a recorded state of this task (base, 3, "
        "3.2); recorded, so it can be undone by rolling back again.",
        False,
    )
    add(
        decide_submit,
        "Ask the developer to decide: submit questions with options; the "
        "answer comes later (decide_result).",
        False,
    )
    add(
        decide_result,
        "The developer's answer to the latest submitted decision, or an "
        "error saying it is not answered yet; wait_seconds waits for the answer.",
        True,
    )
    add(
        flow,
        "Record a move in the task's flow of phases (start, next-step, back-step, "
        "next-part, back-part, issue, error) with a summary.",
        False,
    )
    add(flow_status, "The task's flow: current phase and step, and its history.", True)
    return server


def serve(own: OwnTask) -> None:
    """Serve ``own`` on stdin/stdout until the client closes the connection."""
    build(own).run("stdio")
