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

import sys
from typing import Any, NamedTuple

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
    outcome_parts,
    plural,
    print_json,
    session_text,
    stat_text,
    terminal_width,
)
from bar.ledger.records import RunStep, Step
from bar.task.tasks import Task


def log(*, task: str | None, n: int | None, patch: bool, as_json: bool, tools: bool = False) -> int:
    the_task = api.get_task(api.open_project(), task)
    history = flow.history(the_task)
    if as_json:
        steps = api.log(the_task, n)
        print_json([shapes.log_entry(the_task, s, patch, history) for s in steps])
        return 0
    if n is None:  # every step: rows kept beside the ledger, made for new steps only
        rows = [_Row._make(cells) for cells in api.log_rows(the_task, _cells, _TAG, _fits)]
    else:
        rows = [_Row._make(_cells(step)) for step in api.log(the_task, n)]
    if not rows:
        if n != 0:
            print(
                f"Task {the_task.name} ({the_task.id}) has no steps yet. "
                "Record one with: bar run -- CMD"
            )
        return 0
    with paging():
        _print_rows(the_task, rows, patch=patch, tools=tools, history=history)
    return 0


class _Row(NamedTuple):
    """What the log shows of a step, in plain words (no colour: painted when printed)."""

    step_id: str
    kind: str
    outcome: str
    colour: str | None  # the outcome's
    stat: str
    duration: str
    what: str
    where: str
    session: dict[str, Any] | None
    checkpoints: int
    patch: str | None
    started_at: str
    refused: str  # the hosts the step was refused (``network``), in words


# names what ``_cells`` makes: a change to it (or to what it calls) needs a new tag, or
# the rows kept beside long ledgers would show the old words
_TAG = "log/2"


def _cells(step: Step) -> list[Any]:
    text, colour = outcome_parts(step)
    session = step.extra.get("session") if isinstance(step, RunStep) else None
    return [
        step.step_id,
        step.kind,
        text,
        colour,
        stat_text(step.diff_stat),
        duration(step.duration_ms),
        describe(step),
        _where(step),
        session if isinstance(session, dict) else None,
        step.checkpoints if isinstance(step, RunStep) else 0,
        step.artifacts.patch,
        step.started_at,
        _refused(step),
    ]


def _refused(step: Step) -> str:
    """The hosts a run was refused by the network's allow-list, as the log marks them."""
    connections = step.extra.get("network") if isinstance(step, RunStep) else None
    if not isinstance(connections, list):
        return ""
    hosts = dict.fromkeys(
        f"{c.get('host')}:{c.get('port')}"
        for c in connections
        if isinstance(c, dict) and c.get("allowed") is False
    )
    if not hosts:
        return ""
    named = ", ".join(one_line(h) for h in list(hosts)[:3])
    more = f" and {len(hosts) - 3} more" if len(hosts) > 3 else ""
    return f"  network refused: {named}{more}"


_TEXT = (0, 1, 2, 4, 5, 6, 7, 11, 12)  # the cells that are always text


def _fits(cells: list[Any]) -> bool:
    """Whether kept cells are what ``_cells`` makes."""
    return (
        len(cells) == len(_Row._fields)
        and all(type(cells[i]) is str for i in _TEXT)
        and (cells[3] is None or type(cells[3]) is str)
        and (cells[8] is None or type(cells[8]) is dict)
        and type(cells[9]) is int
        and (cells[10] is None or type(cells[10]) is str)
    )


def _where(step: Step) -> str:
    """Where a run ran, after its command, when not at the worktree's root: a step runs in
    the directory you stand in inside the task's worktree, or ``--cwd``'s."""
    if not isinstance(step, RunStep) or step.cwd in ("", "."):
        return ""
    return f"  (in {one_line(step.cwd)})"


def _print_rows(
    task: Task,
    rows: list[_Row],
    *,
    patch: bool,
    tools: bool,
    history: list[dict[str, Any]] | None = None,
) -> None:
    paint = Painter(task.project.config.output.color)
    # the cells are plain text: their lengths are their widths on the terminal
    widths = [
        max(map(len, column))
        for column in (
            [row.step_id for row in rows],
            [row.kind for row in rows],
            [row.outcome for row in rows],
            [row.stat for row in rows],
            [row.duration for row in rows],
        )
    ]
    width = terminal_width()
    out: list[str] = []  # lines printed together (flushed before a file is copied)
    moved = api.base_moved_text(task)
    if moved and rows[0].step_id == "0001":  # (what the first step started from)
        out.append(paint(f"base  {task.base_ref}, {moved}", "yellow"))
    shown_phase: object = ""  # a header line each time the phase changes
    for row in rows:
        if history:
            phase = flow.phase_of(history, row.started_at)
            if phase != shown_phase:
                out.append(paint(f"phase {phase}" if phase else "before the flow started", "cyan"))
                shown_phase = phase
        out.append(_line(row, widths, paint, width))
        if row.session is not None:
            out.append(paint(f"      {session_text(row.session)}", "dim"))
        if row.checkpoints:
            if tools:
                _flush(out)
                for cp in api.checkpoints(task, row.step_id):
                    text = checkpoint_line(cp, paint, None if width is None else width - 2)
                    print(f"  {text}".rstrip())
            else:
                out.append(
                    paint(
                        f"      {plural(row.checkpoints, 'checkpoint')} (bar log --tools lists them)",
                        "dim",
                    )
                )
        if patch and row.patch:
            _flush(out)
            if not copy_file(api.artifact_path(task, row.patch)):
                print(f"bar: warning: artifact {row.patch} is missing")
            print()
    _flush(out)


def _line(row: _Row, widths: list[int], paint: Painter, width: int | None) -> str:
    """A step's line: its columns padded to ``widths``, then what it was, cut to the
    terminal's ``width`` (None: whole), then where it ran."""
    i, k, o, s, d = widths
    ended = paint(row.outcome, row.colour) if row.colour else row.outcome
    head = (
        f"{paint(row.step_id, 'bold')}{' ' * (i - len(row.step_id))}  {row.kind.ljust(k)}  "
        f"{ended}{' ' * (o - len(row.outcome))}  {row.stat.ljust(s)}  {row.duration.rjust(d)}  "
    )
    tail = len(row.where) + len(row.refused)
    room = None if width is None else max(width - (i + k + o + s + d + 10) - tail, 10)
    said = head + fit(row.what, room) + paint(row.where, "dim") + paint(row.refused, "red")
    return said.rstrip()


def _flush(out: list[str]) -> None:
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        out.clear()
