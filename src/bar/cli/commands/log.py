"""``bar log [-n N] [-p] [--tools] [--grep P] [--kind K] [--agent A] [--since WHEN]
[--follow]``: the task's steps, newest last (those the filters let through:
``bar.ledger.select``).

A step not recorded yet comes last, marked ``running`` (or ``recording``, or
``interrupted`` when its bar died), with a line under it saying how to follow it; the
filters hold it as they hold a recorded step (its command, its agent, when it started,
its output so far). ``--follow`` goes on printing as the task goes: a step's line when
it starts, a line for each tool call its agent makes, its line again once recorded
(``bar.step.live``), each only if the filters let its step through.

Each column is as wide as its widest cell in the steps shown, measured without colour
codes, so the columns line up whatever the outcomes. The command takes the rest of the
line: cut with "..." at the terminal's width when printed straight to a terminal, whole
through the pager (which wraps or scrolls) or into a file or pipe. A run that ran
anywhere but the worktree's root says where after its command, never cut:
``(in src/pkg)``. Under an agent step, a line of its session: model, turns, tokens and,
when known, cost (``--json`` has the ledger line's ``session`` as it is).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from bar import api
from bar.aide import flow
from bar.api import shapes
from bar.base.cmdline import line_of
from bar.cli.pager import paging
from bar.cli.render import (
    Painter,
    changes_text,
    checkpoint_columns,
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
    terminal_width,
)
from bar.errors import UsageError
from bar.model.records import RunStep, Step
from bar.model.tasks import Task

if TYPE_CHECKING:
    from bar.cli.parser import Commands
    from bar.ledger.select import Selection
    from bar.step.live import LiveStep


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar log``: its options and help."""
    from bar.agents import AGENTS
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "log",
        formatter_class=Formatter,
        description="List the task's steps, newest last. A step run with --agent holds a\n"
        "checkpoint after each tool call that could change files (STEP.N); they are\n"
        "counted under their step, and listed one per line with --tools.\n\n"
        "Columns: step, kind, outcome (exit N, blocked by policy, stopped by a pre_run\n"
        "hook, stopped: budget, interrupted by Ctrl-C or as bar died, terminated, killed),\n"
        "changes, duration, command. Printed straight to a terminal, the command is cut\n"
        "at its width; through the pager or into a file, it is whole. Under an agent\n"
        "step: its model, turns and tokens (and cost, when agents.prices prices its\n"
        "model); `bar show STEP --session` has the conversation.\n\n"
        "--grep, --kind, --agent and --since list only the steps that match every one\n"
        "given; -n then takes the last N of those. --grep searches the command (what the\n"
        "log says of any other step: 'rollback to step 0003') and the step's output.\n\n"
        "A step that is running comes last, marked running (with how long it has run and\n"
        "how to follow its output: bar show --follow); one whose bar run died before it\n"
        "was recorded is marked interrupted. The filters hold it too (--grep: its command\n"
        "and its output so far). --follow keeps the list going as the task goes: a step's\n"
        "line when it starts, a line for each tool call its agent makes as it is\n"
        "checkpointed, the step's line again when it is recorded (with filters: only the\n"
        "steps they let through; a running step whose command --grep does not match is\n"
        "shown once recorded, if its output does); Ctrl-C stops.",
        epilog="examples:\n"
        "  bar log                    every step\n"
        "  bar log -f                 ... and each step and tool call as it comes\n"
        "  bar log -n 5 -p            the last five, each with its patch\n"
        "  bar log --tools            each tool call of an agent's steps\n"
        "  bar log --grep 'FAILED|Error' -i    steps whose command or output says so\n"
        "  bar log --kind run --agent claude --since 2h   Claude's steps of the last 2 hours\n"
        "  bar log --kind rollback --since 2026-11-27     rollbacks, undos, redos since then\n"
        "  bar log -p --json          records with patch_text; task_dir is where the\n"
        "                             artifacts' relative paths point",
    )
    task_opt(p)
    p.add_argument("-n", type=int, metavar="N", help="only the last N steps (0: none)")
    p.add_argument(
        "-p", "--patch", action="store_true", help="show each step's patch (--json: as patch_text)"
    )
    p.add_argument("--tools", action="store_true", help="list each step's checkpoints")
    from bar.model.records import KINDS

    p.add_argument(
        "--grep",
        metavar="PATTERN",
        help="only steps whose command or output matches PATTERN (a Python regular expression)",
    )
    p.add_argument("-i", "--ignore-case", action="store_true", help="--grep without regard to case")
    p.add_argument(
        "--kind",
        action="append",
        default=[],
        choices=KINDS,
        help="only steps of this kind (repeatable: any of them); undo and redo are rollbacks",
    )
    p.add_argument(
        "--agent", choices=AGENTS, help="only steps that ran this agent (bar run --agent)"
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only steps started since WHEN: a length of time back from now (90s, 30min,\n"
        "2h, 1d, 2w) or a moment (2026-11-27, '2026-11-27 14:00'; local time unless it\n"
        "ends in Z or +HH:MM)",
    )
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing: each step as it starts and is recorded, each tool call as it "
        "is checkpointed (--json: one JSON object a line)",
    )
    json_opt(p)
    p.set_defaults(_run=log)


# --- the command -----------------------------------------------------------------------


def log(
    *,
    task: str | None,
    n: int | None,
    patch: bool,
    as_json: bool,
    tools: bool = False,
    grep: str | None = None,
    ignore_case: bool = False,
    kind: list[str] | None = None,
    agent: str | None = None,
    since: str | None = None,
    follow: bool = False,
) -> int:
    if ignore_case and grep is None:
        raise UsageError("-i/--ignore-case goes with --grep", hint="bar log --grep PATTERN -i")
    chosen = api.log_selection(
        grep=grep, ignore_case=ignore_case, kinds=kind or (), agent=agent, since=since
    )
    the_task = api.get_task(api.open_project(), task)
    history = flow.history(the_task)
    # --follow: the newest step read before the steps so far are, then those up to it
    # shown, and the watch begins after it: a step recorded between the two readings is
    # shown once, by the watch (read after, it would be shown by neither)
    after = _newest(the_task) if follow else 0
    # (a step not recorded yet comes last, if the filters let it through)
    live = api.live_step(the_task, chosen) if n != 0 and not follow else None
    if as_json:
        steps = api.log(the_task, n, chosen)
        if follow:
            steps = [step for step in steps if step.number <= after]
        entries = [shapes.log_entry(the_task, s, patch, history) for s in steps]
        if follow:
            api.steps_run_here(the_task)
            return _follow_json(the_task, entries, after, patch, history, chosen)
        if live is not None:
            taken = api.checkpoints(the_task, live.step_id)
            entries.append(shapes.live_entry(the_task, live, taken))
        print_json(entries)
        return 0

    def cells(step: Step) -> list[Any]:
        return _cells(the_task, step)

    if n is None and chosen.everything:  # rows kept beside the ledger, made for new steps
        rows = [_Row._make(c) for c in api.log_rows(the_task, cells, _TAG, _fits)]
    else:
        rows = [_Row._make(cells(step)) for step in api.log(the_task, n, chosen)]
    if follow:
        rows = [row for row in rows if int(row.step_id) <= after]
        api.steps_run_here(the_task)
        matching = None if chosen.everything else _filters_text(grep, kind or [], agent, since)
        return _follow_text(
            the_task,
            rows,
            after,
            chosen,
            patch=patch,
            tools=tools,
            history=history,
            matching=matching,
        )
    note = None
    if live is not None:
        row, note = _live_row(the_task, live)
        rows.append(row)
    if not rows:
        if not chosen.everything and (n is None or n > 0):
            print(
                f"No step of task {the_task.name} ({the_task.id}) matches "
                f"{_filters_text(grep, kind or [], agent, since)}."
            )
        elif n != 0:
            print(
                f"Task {the_task.name} ({the_task.id}) has no steps yet. "
                "Record one with: bar run -- CMD"
            )
        return 0
    with paging():
        _print_rows(the_task, rows, patch=patch, tools=tools, history=history, note=note)
    return 0


def _live_row(task: Task, live: LiveStep) -> tuple[_Row, tuple[str, str]]:
    """The row of a step not recorded yet, and the line said under it (its step id, the
    words)."""
    from bar.step.live import INTERRUPTED, RECORDING

    colour = "red" if live.state == INTERRUPTED else "yellow"
    number = int(live.step_id)
    if live.state == INTERRUPTED:
        said = (
            f"{live.left()}\nnot recorded yet: the next command that changes the task "
            "records it (bar doctor --repair does it now)"
        )
    elif live.state == RECORDING:
        said = f"the command ended (exit {live.exit_code}); bar is recording the step"
    else:
        said = f"not recorded yet: bar show {number} --follow streams its output"
    where = "" if live.cwd in ("", ".") else f"  (in {one_line(live.cwd)})"
    row = _Row(
        step_id=live.step_id,
        kind="run",
        outcome=live.state,
        colour=colour,
        stat="-",
        duration=duration(live.running_ms()),
        what=one_line(line_of(live.cmd)),
        where=where,
        session=None,
        checkpoints=len(api.checkpoints(task, live.step_id)),
        patch=None,
        started_at=live.started_at,
        refused="",
    )
    return row, (live.step_id, said)


def _newest(task: Task) -> int:
    """The number of the task's newest recorded step (0: none yet)."""
    newest = task.ledger.last()
    return newest.number if newest is not None else 0


def _follow_text(
    task: Task,
    rows: list[_Row],
    after: int,
    chosen: Selection,
    *,
    patch: bool,
    tools: bool,
    history: list[dict[str, Any]] | None,
    matching: str | None,
) -> int:
    """``bar log --follow``: the steps so far, then each step as it starts (marked running),
    each tool call of its agent as it is checkpointed, and its line once recorded; until
    Ctrl-C; the watch begins after step number ``after``. With filters (``chosen``;
    ``matching`` says them), only the steps they let through: a running step by its
    command, agent and start (its output is searched once it is recorded, and its line
    shown then if it matches)."""
    from bar.step.live import Lost, Recorded, Started, Taken

    paint = Painter(task.project.config.output.color)
    width = terminal_width()
    widths = _widths(rows)
    _print_rows(task, rows, patch=patch, tools=tools, history=history)
    if not rows:
        if matching is not None:
            print(
                f"bar: no step of task {task.name} matches {matching} yet; waiting for one",
                file=sys.stderr,
            )
        else:
            print(f"bar: task {task.name} has no steps yet; waiting for them", file=sys.stderr)
    print(paint("(following the task: Ctrl-C stops)", "dim"), file=sys.stderr, flush=True)
    sys.stdout.flush()
    followed: set[str] = set()  # (shown as it started: its tool calls are listed as they come)
    try:
        for event in api.watch_steps(task, after):
            out: list[str] = []
            if isinstance(event, Started):
                if not api.live_selected(task, event.live, chosen):
                    continue
                row, (_, said) = _live_row(task, event.live)
                followed.add(row.step_id)
                widths = _widths([row], widths)
                out += [_line(row, widths, paint, width)]
                out += [paint(f"      {line}", "dim") for line in said.splitlines()]
            elif isinstance(event, Taken):
                if event.checkpoint.step_id not in followed:
                    continue
                text = checkpoint_line(
                    event.checkpoint, paint, None if width is None else width - 2
                )
                out.append(f"  {text}".rstrip())
            elif isinstance(event, Recorded):
                if not api.step_selected(task, event.step, chosen):
                    continue
                row = _Row._make(_cells(task, event.step))
                widths = _widths([row], widths)
                out.append(_line(row, widths, paint, width))
                if row.session is not None:
                    out.append(paint(f"      {session_text(row.session)}", "dim"))
                if row.checkpoints and row.step_id not in followed:
                    out.append(
                        paint(
                            f"      {plural(row.checkpoints, 'checkpoint')} "
                            "(bar log --tools lists them)",
                            "dim",
                        )
                    )
                if patch and row.patch:
                    _flush(out)
                    copy_file(api.artifact_path(task, row.patch))
            elif isinstance(event, Lost):
                if event.step_id not in followed:
                    continue
                out.append(paint(f"      {event.reason}", "red"))
            _flush(out)
            sys.stdout.flush()
    except KeyboardInterrupt:  # (the only way it ends)
        return 0
    return 0


def _follow_json(
    task: Task,
    entries: list[dict[str, Any]],
    after: int,
    patch: bool,
    history: list[dict[str, Any]] | None,
    chosen: Selection,
) -> int:
    """``bar log --follow --json``: one JSON object a line (``$follow-event``): each step
    so far, then as they come, after step number ``after`` (those the filters let through,
    as ``_follow_text``)."""
    from bar.step.live import Lost, Recorded, Started, Taken

    def emit(obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    for entry in entries:
        emit({"event": "step", "step": entry})
    followed: set[str] = set()  # (its running event was given: its checkpoints follow)
    try:
        for event in api.watch_steps(task, after):
            if isinstance(event, Started):
                if api.live_selected(task, event.live, chosen):
                    followed.add(event.live.step_id)
                    emit({"event": "running", "step": shapes.live_entry(task, event.live, None)})
            elif isinstance(event, Taken):
                if event.checkpoint.step_id in followed:
                    rec = event.checkpoint.to_record()
                    rec["task_dir"] = str(task.dir)
                    emit({"event": "checkpoint", "checkpoint": rec})
            elif isinstance(event, Recorded):
                if api.step_selected(task, event.step, chosen):
                    entry = shapes.log_entry(task, event.step, patch, history)
                    emit({"event": "step", "step": entry})
            elif isinstance(event, Lost) and event.step_id in followed:
                live = shapes.live_entry(task, event.live, None) if event.live else None
                emit(
                    {
                        "event": "lost",
                        "step_id": event.step_id,
                        "reason": event.reason,
                        "step": live,
                    }
                )
    except KeyboardInterrupt:
        return 0
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


def _filters_text(grep: str | None, kinds: list[str], agent: str | None, since: str | None) -> str:
    """The filters given, as the command line gave them."""
    said = [f"--grep {grep!r}"] if grep is not None else []
    said += [f"--kind {k}" for k in kinds]
    said += [f"--agent {agent}"] if agent is not None else []
    said += [f"--since {since!r}"] if since is not None else []
    return " ".join(said)


# names what ``_cells`` makes: a change to it (or to what it calls) needs a new tag, or
# the rows kept beside long ledgers would show the old words
_TAG = "log/5"


def _cells(task: Task, step: Step) -> list[Any]:
    text, colour = outcome_parts(step)
    session = step.extra.get("session") if isinstance(step, RunStep) else None
    return [
        step.step_id,
        step.kind,
        text,
        colour,
        changes_text(step.diff_stat, step.extra),
        duration(step.duration_ms),
        describe(step, task),
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


def _widths(rows: list[_Row], least: list[int] | None = None) -> list[int]:
    """The widths of the columns that line up (at least ``least``): the cells are plain
    text, their lengths are their widths on the terminal."""
    found = [
        max(map(len, column), default=0)
        for column in (
            [row.step_id for row in rows],
            [row.kind for row in rows],
            [row.outcome for row in rows],
            [row.stat for row in rows],
            [row.duration for row in rows],
        )
    ]
    return found if least is None else [max(a, b) for a, b in zip(found, least, strict=True)]


def _print_rows(
    task: Task,
    rows: list[_Row],
    *,
    patch: bool,
    tools: bool,
    history: list[dict[str, Any]] | None = None,
    note: tuple[str, str] | None = None,
) -> None:
    """The rows; ``note``: a line said under the row of that step id (a step running)."""
    paint = Painter(task.project.config.output.color)
    widths = _widths(rows)
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
        if note is not None and note[0] == row.step_id:
            out += [paint(f"      {line}", "dim") for line in note[1].splitlines()]
        if row.session is not None:
            out.append(paint(f"      {session_text(row.session)}", "dim"))
        if row.checkpoints:
            if tools:
                _flush(out)
                taken = api.checkpoints(task, row.step_id)
                columns = checkpoint_columns(taken)
                for cp in taken:
                    text = checkpoint_line(cp, paint, None if width is None else width - 2, columns)
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
