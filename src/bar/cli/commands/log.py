"""``bar log [-n N] [-p] [--tools]``: the task's steps, newest last.

Each column is as wide as its widest cell in the steps shown, measured without colour
codes, so the columns line up whatever the outcomes. The command takes the rest of the
line: cut with "..." at the terminal's width when printed straight to a terminal, whole
through the pager (which wraps or scrolls) or into a file or pipe. A run that ran
anywhere but the worktree's root says where after its command, never cut:
``(in src/pkg)``. Under an agent step, a line of its session: model, turns, tokens and,
when known, cost (``--json`` has the ledger line's ``session`` as it is).
"""

from __future__ import annotations

from typing import Any

from bar import api
from bar.aide import flow
from bar.api import shapes
from bar.cli.pager import paging
from bar.cli.render import (
    Painter,
    checkpoint_line,
    copy_file,
    describe,
    duration,
    fit,
    one_line,
    outcome,
    plural,
    print_json,
    session_text,
    stat_text,
    terminal_width,
    visible_len,
)
from bar.ledger.records import RunStep, Step
from bar.task.tasks import Task


def log(*, task: str | None, n: int | None, patch: bool, as_json: bool, tools: bool = False) -> int:
    the_task = api.get_task(api.open_project(), task)
    steps = api.log(the_task, n)
    history = flow.history(the_task)
    if as_json:
        print_json([shapes.log_entry(the_task, s, patch, history) for s in steps])
        return 0
    if not steps:
        if n != 0:
            print(
                f"Task {the_task.name} ({the_task.id}) has no steps yet. "
                "Record one with: bar run -- CMD"
            )
        return 0
    with paging():
        _print_steps(the_task, steps, patch=patch, tools=tools, history=history)
    return 0


def _where(step: Step) -> str:
    """Where a run ran, after its command, when not at the worktree's root: a step runs in
    the directory you stand in inside the task's worktree, or ``--cwd``'s."""
    if not isinstance(step, RunStep) or step.cwd in ("", "."):
        return ""
    return f"  (in {one_line(step.cwd)})"


def _print_steps(
    task: Task,
    steps: list[Step],
    *,
    patch: bool,
    tools: bool,
    history: list[dict[str, Any]] | None = None,
) -> None:
    paint = Painter(task.project.config.output.color)
    rows = [
        (
            paint(s.step_id, "bold"),
            s.kind,
            outcome(s, paint),
            stat_text(s.diff_stat),
            duration(s.duration_ms),
        )
        for s in steps
    ]
    widths = [max(visible_len(row[i]) for row in rows) for i in range(5)]
    width = terminal_width()
    shown_phase: object = ""  # a header line each time the phase changes
    for step, row in zip(steps, rows, strict=True):
        if history is not None:
            phase = flow.phase_of(history, step.started_at)
            if phase != shown_phase:
                print(paint(f"phase {phase}" if phase else "before the flow started", "cyan"))
                shown_phase = phase
        cells = [paint.pad(cell, w) for cell, w in zip(row[:4], widths, strict=False)]
        head = "  ".join(cells) + "  " + row[4].rjust(widths[4]) + "  "
        where = _where(step)
        room = None if width is None else max(width - visible_len(head) - len(where), 10)
        print((head + fit(describe(step), room) + paint(where, "dim")).rstrip())
        summary = step.extra.get("session") if isinstance(step, RunStep) else None
        if isinstance(summary, dict):
            print(paint(f"      {session_text(summary)}", "dim"))
        if isinstance(step, RunStep) and step.checkpoints:
            if tools:
                for cp in api.checkpoints(task, step.step_id):
                    line = checkpoint_line(cp, paint, None if width is None else width - 2)
                    print(f"  {line}".rstrip())
            else:
                print(
                    paint(
                        f"      {plural(step.checkpoints, 'checkpoint')} "
                        "(bar log --tools lists them)",
                        "dim",
                    )
                )
        if patch and step.artifacts.patch:
            if not copy_file(api.artifact_path(task, step.artifacts.patch)):
                print(f"bar: warning: artifact {step.artifacts.patch} is missing")
            print()
