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
from bar.mcp.board import RUN_TIMEOUT, Board
from bar.mcp.tools import DEFAULT_MAX_BYTES, LOG_DEFAULT, SESSION_DEFAULT, OwnTask

State = Annotated[
    str, Field(description="a recorded state: base, a step (3) or a checkpoint (3.2)")
]
LastState = Annotated[str | None, Field(description="a recorded state (default: the last)")]
MaxBytes = Annotated[
    int, Field(ge=1, le=2_000_000, description="cut patches and output after this many bytes")
]
TaskRef = Annotated[str, Field(description="a task: its name, its id, or the id's start")]
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


BOARD_INSTRUCTIONS = (
    "The task board: plan tasks for others (task_create makes a pending task with no "
    "worktree; with queue, bar workers on other machines take it), list them (task_list), take one (task_claim with your name), start it "
    "(task_start makes its worktree), run a command as a recorded step of it (task_run, "
    "outside a step), and close out: worktree_keep, or worktree_remove with "
    "complete_task to finish the task; worktree_list and events show what happened."
)


def build(own: OwnTask | None, board: Board) -> MCPServer[Any]:
    """The server: the task tools bound to ``own`` (none without a task), and the board's."""
    if own is not None:
        task = own.task
        about = (
            f"bar records this task ({task.name}, {task.id}) step by step. Read its "
            "record (status, log, show, diff, and session: what an agent said and did in a "
            "step), label the current state (checkpoint), return "
            "to an earlier state (rollback), ask the developer to decide (decide_submit, "
            "then decide_result), and move through the task's flow (flow, flow_status). "
        )
    else:
        about = "bar serves no task here (none is active); only the board's tools. "
    server: MCPServer[Any] = MCPServer(
        "bar", version=__version__, instructions=about + BOARD_INSTRUCTIONS
    )

    def add(fn: Callable[..., dict[str, Any]], read: bool) -> None:
        server.add_tool(
            _bar_errors(fn),
            description=" ".join((fn.__doc__ or "").split()),
            annotations=_READ if read else _WRITE,
            structured_output=True,
        )

    add_board(add, board)
    if own is not None:
        add_task(add, own)
    return server


Add = Callable[[Callable[..., dict[str, Any]], bool], None]


def add_task(add: Add, own: OwnTask) -> None:
    """The tools over the one task ``own``."""

    def status() -> dict[str, Any]:
        """Where the task stands: its state, the running step, unrecorded changes (bar
        status --json)."""
        return own.status()

    def log(
        n: Annotated[int, Field(ge=0, description="the last N steps")] = LOG_DEFAULT,
    ) -> dict[str, Any]:
        """The task's last steps, oldest first, each with its checkpoints (bar log
        --json)."""
        return own.log(n)

    def show(
        step: Annotated[str, Field(description="a step (3) or a checkpoint (3.2)")],
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        """One step or checkpoint with its patch and output (bar show --json); long text
        is cut at max_bytes, said under 'truncated'."""
        return own.show(step, max_bytes)

    def diff(
        from_state: State = "base",
        to_state: LastState = None,
        stat_only: Annotated[bool, Field(description="only the diff stat")] = False,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        """The changes between two recorded states of the task (bar diff --json); the
        patch is cut at max_bytes, said under 'truncated'."""
        return own.diff(from_state, to_state, stat_only, max_bytes)

    def session(
        step: Annotated[str, Field(description="a step (3) that ran an agent")],
        start: Annotated[
            int,
            Field(description="index of the first event; negative counts from the end (-20)"),
        ] = 0,
        limit: Annotated[
            int, Field(ge=0, le=10_000, description="at most this many events")
        ] = SESSION_DEFAULT,
        max_bytes: MaxBytes = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        """What the agent said and did in a step: the session's model, turns, tokens and
        cost, and its events (prompts, replies, tool calls with their checkpoint STEP.N
        and results, subagents, interrupts) from index start (negative: from the end);
        'next' is the start of the following page; events past max_bytes are left out,
        said under 'truncated'."""
        return own.session(step, start, limit, max_bytes)

    def checkpoint(
        label: Annotated[str, Field(max_length=200, description="what this state is")] = "",
    ) -> dict[str, Any]:
        """Record the worktree's state now, with a label, as a state you can return to
        (a checkpoint of the running step)."""
        return own.checkpoint(label)

    def rollback(to: State) -> dict[str, Any]:
        """Return the task's files to a recorded state of this task (base, 3, 3.2);
        recorded, so it can be undone by rolling back again."""
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
        """Ask the developer to decide: submit questions with options; the answer comes
        later (decide_result)."""
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
        """The developer's answer to the latest submitted decision, or an error saying
        it is not answered yet; wait_seconds waits for the answer."""
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
        """Record a move in the task's flow of phases (start, next-step, back-step,
        next-part, back-part, issue, error) with a summary."""
        return own.flow(action, summary, rollback)

    def flow_status() -> dict[str, Any]:
        """The task's flow: current phase and step, and its history."""
        return own.flow_status()

    for fn, read in (
        (status, True),
        (log, True),
        (show, True),
        (diff, True),
        (session, True),
        (checkpoint, False),
        (rollback, False),
        (decide_submit, False),
        (decide_result, True),
        (flow, False),
        (flow_status, True),
    ):
        add(fn, read)


def add_board(add: Add, board: Board) -> None:
    """The task board's tools (``bar.mcp.board``)."""

    def task_create(
        name: Annotated[str, Field(description="the task's name: letters, digits, - _ .")],
        description: Annotated[str, Field(description="what the task is for")] = "",
        base: Annotated[str, Field(description="start from this ref (default: main)")] = "",
        queue: Annotated[
            str,
            Field(
                description="send it to this queue of bar workers, where a `bar worker "
                "--claim` takes it and runs its agent on it (default: none, it stays here)"
            ),
        ] = "",
    ) -> dict[str, Any]:
        """Plan a task for later: pending, with a branch but no worktree yet; someone
        (you, another agent, a worker) claims and starts it."""
        return board.task_create(name, description, base, queue)

    def task_list(
        status: Literal["open", "pending", "in_progress", "completed", "all"] = "open",
    ) -> dict[str, Any]:
        """The tasks with their board status, owner, steps and changes."""
        return board.task_list(status)

    def task_claim(
        task: TaskRef,
        owner: Annotated[str, Field(min_length=1, max_length=64, description="your name")],
        start: Annotated[bool, Field(description="start it too (make its worktree)")] = False,
        reassign: Annotated[
            bool, Field(description="take it even from another owner (as an owner update)")
        ] = False,
    ) -> dict[str, Any]:
        """Take a task under your name; fails naming the owner if someone else took it
        (reassign: take it anyway, as the board's owner update does)."""
        return board.task_claim(task, owner, start, reassign)

    def task_unclaim(
        task: TaskRef,
        owner: Annotated[
            str, Field(max_length=64, description="only if this owner holds it (default: any)")
        ] = "",
    ) -> dict[str, Any]:
        """Put a claimed task back on the board with no owner."""
        return board.task_unclaim(task, owner)

    def task_start(task: TaskRef) -> dict[str, Any]:
        """Start a pending task: make its worktree (in_progress)."""
        return board.task_start(task)

    def task_run(
        task: TaskRef,
        command: Annotated[str, Field(min_length=1, description="a shell command line")],
        timeout: Annotated[
            float, Field(gt=0, le=3600, description="stop it after this many seconds")
        ] = RUN_TIMEOUT,
    ) -> dict[str, Any]:
        """Run a shell command as a recorded step of a task, in its worktree (policy,
        hooks and confinement apply); returns the step and its output."""
        return board.task_run(task, command, timeout)

    def worktree_list(
        all: Annotated[bool, Field(description="include removed worktrees")] = False,
    ) -> dict[str, Any]:
        """The task worktrees: active, kept and (with all) removed."""
        return board.worktree_list(all)

    def worktree_create(
        name: Annotated[str, Field(description="the worktree's name: letters, digits, . _ -")],
        task: Annotated[
            str, Field(description="a pending task to start in it (default: no task yet)")
        ] = "",
        base: Annotated[str, Field(description="where a worktree of no task starts")] = "",
    ) -> dict[str, Any]:
        """Make a worktree: for a pending task (started in it), or with no task yet
        (bind one later with task_bind_worktree)."""
        return board.worktree_create(name, task, base)

    def task_bind_worktree(
        task: TaskRef,
        worktree: Annotated[str, Field(description="a worktree made with no task")],
    ) -> dict[str, Any]:
        """Bind a task to a worktree made with no task: it becomes the task's worktree;
        what it held beyond the task's record is recorded as a manual step."""
        return board.task_bind_worktree(task, worktree)

    def worktree_keep(task: TaskRef) -> dict[str, Any]:
        """Keep a task's worktree when the task closes."""
        return board.worktree_keep(task)

    def worktree_remove(
        task: TaskRef,
        complete_task: Annotated[
            bool, Field(description="close the task too (completed); else it is pending again")
        ] = False,
    ) -> dict[str, Any]:
        """Remove a task's worktree (changes no step recorded are refused); with
        complete_task the task is closed too."""
        return board.worktree_remove(task, complete_task)

    def events(
        limit: Annotated[int, Field(ge=1, le=200, description="the last N events")] = 20,
    ) -> dict[str, Any]:
        """The project's last task and worktree events, oldest first."""
        return board.events(limit)

    def worktree_events(
        limit: Annotated[int, Field(ge=1, le=200, description="the last N events")] = 20,
    ) -> dict[str, Any]:
        """The same as events (the task-board design's name for it)."""
        return board.events(limit)

    for fn, read in (
        (task_create, False),
        (task_list, True),
        (task_claim, False),
        (task_unclaim, False),
        (task_start, False),
        (task_run, False),
        (worktree_list, True),
        (worktree_create, False),
        (task_bind_worktree, False),
        (worktree_keep, False),
        (worktree_remove, False),
        (events, True),
        (worktree_events, True),
    ):
        add(fn, read)


def serve(own: OwnTask | None, board: Board) -> None:
    """Serve ``own`` and the board on stdin/stdout until the client closes the connection."""
    build(own, board).run("stdio")
