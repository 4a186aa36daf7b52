"""``bar show [STEP] [--follow]``: one step (the latest, as ``git show`` shows HEAD: the
one running, if a step runs, else the last recorded) in full, with its patch and output.
A step not recorded yet is shown, and followed with ``--follow``, by
``bar.cli.commands.live``."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from bar import api
from bar.api import shapes
from bar.base.cmdline import line_of
from bar.cli.pager import paging
from bar.cli.render import (
    Painter,
    abandoned_text,
    byte_size,
    changes_text,
    checkpoint_columns,
    checkpoint_line,
    copy_file,
    describe,
    duration,
    fit,
    outcome,
    plural,
    print_json,
    session_text,
    short,
    stat_text,
    terminal_width,
    visible,
)
from bar.errors import NotFound, StepNotFound, UsageError
from bar.model.records import ApplyStep, RollbackStep, RunStep, Step, SyncStep
from bar.model.tasks import Task

if TYPE_CHECKING:
    from bar.cli.parser import Commands
    from bar.history.checkpoints import Checkpoint


_CHECKPOINT = re.compile(r"#?[0-9]+\.[0-9]+")


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar show``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "show",
        formatter_class=Formatter,
        description="Show one step in full: its command, how it ended, the policy rules and\n"
        "hooks that ran, its patch and what it printed (for a step a pre_run hook\n"
        "stopped, what the hook printed). STEP.N shows a checkpoint: the tool call and\n"
        "what it changed.\n\n"
        "--session shows what the agent of an agent step said and did instead: the\n"
        "prompts and replies, each tool call with what it acted on, the checkpoint it\n"
        "made (→ STEP.N) and how it ended (ok, exit N, interrupted, failed) with the\n"
        "first lines of what it printed and its last, its subagents and interruptions,\n"
        "and the model, turns, tokens and cost. With STEP.N, the conversation up to\n"
        "that checkpoint's tool call. With no STEP, the latest step (as git show shows HEAD):\n"
        "the one running, if a step runs (the last in bar log), else the last recorded\n"
        "(with --session: the last recorded one's conversation).\n\n"
        "A step that is running is shown too: its command, since when it runs, its output\n"
        "and checkpoints so far. --follow then streams the rest as it is written (stdout\n"
        "on stdout, stderr on stderr, each checkpoint on a line of its own) and ends when\n"
        "the step is recorded, with how it ended; or says so if the step's bar run died\n"
        "(exit 1). Following only reads: the step's input stays with the terminal that\n"
        "ran it, and Ctrl-C stops following, never the step. Without STEP it follows the\n"
        "step running now, or waits for the next one. A step already recorded is shown as\n"
        "it is.",
        epilog="examples:\n"
        "  bar show              the latest step (the running one, if a step runs)\n"
        "  bar show --session    the agent's conversation in the last recorded step\n"
        "  bar show 3            step 0003: command, result, policy, patch, output\n"
        "  bar show --follow     the running step's output as it comes, to its end\n"
        "  bar show 7 -f --json  the same as JSON lines: output, checkpoint, then step\n"
        "  bar show 3.2          its second checkpoint: the tool call and what it changed\n"
        "  bar show 3 --session  the agent's conversation in step 0003\n"
        "  bar show 3.2 --session --json   the session's events up to that tool call",
    )
    task_opt(p)
    p.add_argument(
        "step",
        nargs="?",
        metavar="STEP|STEP.N",
        help="a step (3, 0003) or a checkpoint (3.2); default: the latest step (the one "
        "running, if any); with --follow, the step running, else the next to start",
    )
    p.add_argument(
        "--session",
        action="store_true",
        help="the agent's conversation in the step (to the checkpoint's tool call, with STEP.N)",
    )
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="follow a running step: its output as it is written and its checkpoints as "
        "they are taken, until it is recorded (--json: one JSON object a line)",
    )
    json_opt(p)
    p.set_defaults(_run=show)


# --- the command -----------------------------------------------------------------------


def show(
    *,
    task: str | None,
    step: str | None,
    as_json: bool,
    session: bool = False,
    follow: bool = False,
) -> int:
    the_task = api.get_task(api.open_project(), task)
    if follow:
        from bar.cli.commands import live  # (a step not recorded yet)

        if session or (step is not None and _CHECKPOINT.fullmatch(step.strip())):
            raise UsageError(
                "--follow follows a step's output, not a session or a checkpoint",
                hint="`bar show STEP --follow`; `bar log --follow` lists each tool call as it comes",
            )
        code = live.follow(the_task, step, as_json)
        if code is not None:
            return code
    if session:
        return _show_session(the_task, step, as_json)
    if step is not None and _CHECKPOINT.fullmatch(step.strip()):
        return _show_checkpoint(the_task, step, as_json)
    if step is None:  # the latest step: the one running, if one is (it comes last in the log)
        live_now = api.live_step(the_task)
        if live_now is not None:
            step = live_now.step_id
    try:
        record = api.show(the_task, step)
    except StepNotFound:
        if step is None:
            raise
        from bar.cli.commands import live

        running = live.show_live(the_task, step, as_json)  # (a step not recorded yet)
        if running is None:
            raise
        if isinstance(running, int):
            return running
        record = running
    taken = api.checkpoints(the_task, record.step_id) if isinstance(record, RunStep) else []
    if as_json:
        print_json(shapes.step_entry(the_task, record, taken))
        return 0
    with paging():
        _show_step(the_task, record, taken)
    return 0


def _show_step(the_task: Task, record: Step, taken: list[Checkpoint]) -> None:
    paint = Painter(the_task.project.config.output.color)
    print(f"{paint('step ' + record.step_id, 'bold')}  {record.kind}  {describe(record, the_task)}")
    rows: list[tuple[str, object]] = [
        ("started", record.started_at),
        ("duration", duration(record.duration_ms)),
    ]
    if isinstance(record, RunStep):
        rows += [("command", line_of(record.cmd)), ("cwd", record.cwd)]
        ending = record.ending
        detail = f" ({ending.detail})" if ending.detail else ""
        rows.append(("result", outcome(record, paint) + detail))
        if record.extra.get("stopped_by"):
            rows.append(("stopped", "the command did not run"))
        if record.env:
            rows.append(("env", " ".join(f"{k}={v}" for k, v in record.env.items())))
        if record.pty:
            rows.append(("terminal", "interactive (pty)"))
        if record.extra.get("output_cut"):
            rows.append(("output", "cut at run.output_limit: the rest was shown, not kept"))
        sandbox = record.extra.get("sandbox")
        if isinstance(sandbox, dict):
            rows.append(("sandbox", _sandbox_text(sandbox)))
        connections = record.extra.get("network")
        if isinstance(connections, list) and connections:
            rows += _network_rows(connections)
        if record.extra.get("stopped") == "budget":
            rows.append(
                (
                    "stopped",
                    "by bar: the agent's session passed its budget (--max-tokens, --max-cost)",
                )
            )
        elif record.extra.get("stopped"):
            rows.append(("stopped", f"by bar: {record.extra['stopped']}"))
        agent = record.extra.get("agent")
        if isinstance(agent, dict):
            rows.append(("agent", _agent_text(agent)))
        summary = record.extra.get("session")
        if isinstance(summary, dict):
            rows.append(
                (
                    "session",
                    f"{session_text(summary, calls=True)} (bar show {record.step_id} --session)",
                )
            )
    if isinstance(record, ApplyStep):
        rows += [
            ("mode", record.mode),
            ("target", record.target_branch),
            ("commit", record.commit_sha),
        ]
    if isinstance(record, SyncStep):
        rows.append(("onto", record.onto))
        if record.conflicts:
            rows.append(("conflicts", ", ".join(record.conflicts) + " (conflict markers)"))
    if isinstance(record, SyncStep | RollbackStep) and record.base_after:
        rows.append(("base", f"{short(record.base_before)} -> {short(record.base_after)}"))
    rows.append(("changes", changes_text(record.diff_stat, record.extra)))
    if record.diff_stat.file_list:
        rows.append(("files", _files_text(record.diff_stat.file_list, record.step_id)))
    rows.append(("snapshot", f"{short(record.snapshot_before)} -> {short(record.snapshot)}"))
    if record.head:
        rows.append(("head", short(record.head)))
    if isinstance(record, RunStep):
        for event in record.policy_events:
            source = f" [{event.source}]" if event.source else ""
            rule = event.rule or "(no rule)"
            rows.append(
                (
                    "policy",
                    f"{event.action} {rule}: {event.matched}{source}"
                    f"{_fate(event.answer, event.outcome)}",
                )
            )
        for hook in record.hooks:
            rows.append(("hook", f"{hook.phase} {hook.cmd!r} -> exit {hook.exit_code}"))
    for key, value in rows:  # (what a step chose, shown: never its escape sequences)
        print(f"  {key:<9} {value if key in _PAINTED else visible(str(value))}")
    if taken:
        print(
            paint(
                f"\n--- checkpoints ({len(taken)}; `bar show {record.step_id}.N` for one)", "cyan"
            )
        )
        columns = checkpoint_columns(taken)
        for cp in taken:
            print(f"  {checkpoint_line(cp, paint, None, columns)}".rstrip())
    if record.artifacts.patch:
        print(paint(f"\n--- patch {record.artifacts.patch}", "cyan"))
        sys.stdout.flush()
        _print(the_task, record.artifacts.patch)
    output = api.output_of(the_task, record)
    if output is not None:
        where = record.artifacts.output or f"derived from {record.artifacts.cast}"
        print(paint(f"\n--- output {where}", "cyan"))
        _copy_out(output, str(where))
    if record.artifacts.cast:
        print(paint(f"\n(replay the session with: bar replay {record.step_id})", "dim"))


def _show_checkpoint(task: Task, name: str, as_json: bool) -> int:
    cp = api.checkpoint(task, name)
    if as_json:
        print_json(shapes.checkpoint_entry(task, cp))
        return 0
    with paging():
        _show_checkpoint_text(task, cp)
    return 0


def _show_checkpoint_text(task: Task, cp: Checkpoint) -> None:
    paint = Painter(task.project.config.output.color)
    kind = {"tool": "tool call", "residual": "residual", "rollback": "rollback"}.get(
        cp.kind, cp.kind
    )
    print(f"{paint('checkpoint ' + cp.name, 'bold')}  {kind}  {visible(cp.tool or '')}".rstrip())
    rows: list[tuple[str, object]] = []
    if cp.kind == "residual":
        rows.append(
            (
                "what",
                "changes no hook reported (a subagent, a background process, "
                "a hand edit) until the step ended",
            )
        )
    if cp.command is not None:
        rows.append(("command", cp.command))
    if cp.paths:
        rows.append(("paths", ", ".join(cp.paths)))
    if cp.target is not None:
        rows.append(("target", cp.target))
    if cp.session_id:
        rows.append(("session", cp.session_id))
    if cp.call_id:
        rows.append(("call", cp.call_id))
    if cp.decision is not None:
        rows.append(("policy", f"{cp.decision}{_fate(cp.answer, cp.outcome)}"))
    elif cp.outcome is not None:
        rows.append(("result", cp.outcome))
    rows.append(("ended", cp.ended_at))
    rows.append(("changes", stat_text(cp.diff_stat)))
    if cp.diff_stat.file_list:
        rows.append(("files", _files_text(cp.diff_stat.file_list, cp.name)))
    rows.append(("snapshot", f"{short(cp.snapshot_before)} -> {short(cp.snapshot)}"))
    if cp.head:
        rows.append(("head", short(cp.head)))
    for key, value in rows:  # (what a step chose, shown: never its escape sequences)
        print(f"  {key:<9} {value if key in _PAINTED else visible(str(value))}")
    if cp.patch:
        print(paint(f"\n--- patch {cp.patch}", "cyan"))
        sys.stdout.flush()
        _print(task, cp.patch)


# --- the agent's session (docs/sessions.md) --------------------------------------------

_LABEL = 10  # the width of the column of labels (user, assistant, tool, ...)
_WRAP = 100  # columns of a conversation not shown straight on a terminal
# the lines of a tool result that only frame it (Codex's and Gemini CLI's), passed over
# for its first line of substance
_FRAMING = re.compile(r"^</?untrusted_context>$")  # (a wrapper an agent puts around an answer)


def _show_session(task: Task, ref: str | None, as_json: bool) -> int:
    """``bar show STEP --session``: the agent's conversation (to a checkpoint's call);
    ``ref`` None: the latest step's."""
    upto = None
    if ref is not None and _CHECKPOINT.fullmatch(ref.strip()):
        cp = api.checkpoint(task, ref)
        step_id, upto = cp.step_id, cp.name
    else:
        step_id = api.show(task, ref).step_id
    summary, events = api.session(task, upto or step_id)
    if as_json:
        out: dict[str, object] = {"step": step_id, "session": summary, "events": events}
        if upto is not None:
            out["checkpoint"] = upto
        print_json(out)
        return 0
    if summary is None and not events:
        print(
            f"Step {step_id} kept no agent session: it ran no agent, or its agent wrote "
            "no transcript bar reads (see `bar show --help`)."
        )
        return 0
    with paging():
        _print_session(task, step_id, upto, summary or {}, events)
    return 0


def _print_session(
    task: Task,
    step_id: str,
    upto: str | None,
    summary: dict[str, object],
    events: list[dict[str, object]],
) -> None:
    paint = Painter(task.project.config.output.color)
    width = terminal_width() or _WRAP
    head = f"session of step {step_id}"
    agent = " ".join(str(summary[k]) for k in ("agent", "agent_version") if summary.get(k))
    rest = [agent] if agent else []
    if summary.get("session_id"):
        rest.append(f"session {summary['session_id']}")
    if summary.get("resumed_from"):
        rest.append(f"resumed from step {summary['resumed_from']}")
    print(paint(head, "bold") + ("  " + visible(", ".join(rest)) if rest else ""))
    if upto is not None:
        print(paint(f"(up to the tool call of checkpoint {upto})", "dim"))
    print()
    calls: dict[str, dict[str, object]] = {}
    previous: dict[str, object] | None = None
    # the tools' names are a column: what each call acted on starts at one place
    named = max(
        (len(visible(str(e.get("name")))) for e in events if e.get("type") == "tool_call"),
        default=0,
    )
    for event in events:
        kind = event.get("type")
        prefix = visible(f"  [{event['agent_id']}] ") if event.get("agent_id") else ""
        if kind == "message":
            role = str(event.get("role") or "?")
            style = "bold" if role == "user" else "green"
            _block(paint, prefix, role, visible(str(event.get("text") or "")), width, style)
        elif kind == "tool_call":
            calls[str(event.get("id"))] = event
            name = visible(str(event.get("name")))
            target = visible(api.call_target(task, event.get("input")))
            text = f"{name:<{named}}  {target}".rstrip()
            mark = f"  → {event['checkpoint']}" if event.get("checkpoint") else ""
            room = max(width - len(prefix) - _LABEL - 1 - len(mark), 20)
            print(
                f"{prefix}{_label(paint, 'tool', 'yellow')} {fit(text, room)}{paint(mark, 'cyan')}"
            )
        elif kind == "tool_result":
            status = api.result_status(event)
            style = "dim" if status == "ok" else "yellow" if status == "interrupted" else "red"
            word = _label(paint, "  " + status, style)
            call = calls.get(str(event.get("id")))
            of = ""
            if call is not None and not (
                previous is not None
                and previous.get("type") == "tool_call"
                and previous.get("id") == event.get("id")
            ):
                of = f"({call.get('name')}) "
            lines = _output_lines(str(event.get("summary") or ""))
            room = max(width - len(prefix) - _LABEL - 1, 20)
            indent = " " * (len(prefix) + _LABEL + 1)
            print(f"{prefix}{word} {fit(visible(of + lines[0]), room)}".rstrip())
            for line in lines[1:]:
                print(f"{indent}{fit(visible(line), room)}".rstrip())
        elif kind == "subagent":
            started = (
                f", started by call {event['parent_call']}" if event.get("parent_call") else ""
            )
            what = f" ({event['agent_type']})" if event.get("agent_type") else ""
            who = visible(f"{event.get('agent_id')}{what}{started}")
            print(f"{_label(paint, 'subagent', 'cyan')} {who}")
        elif kind == "interrupt":
            print(f"{prefix}{_label(paint, 'interrupt', 'red')} the agent was stopped mid-turn")
        else:
            continue  # usage: counted in the last line; unknown: counted there too
        previous = event
    print()
    tail = session_text(summary, calls=True)
    extra = [
        plural(n, word)
        for key, word in (
            ("subagents", "subagent"),
            ("interrupts", "interrupt"),
            ("unknown", "unknown line"),
        )
        if isinstance(n := summary.get(key), int) and n
    ]
    gone = abandoned_text(summary)
    if gone:
        extra.append(gone)
    print(paint(visible(" · ".join([tail, *extra])), "dim"))


def _block(paint: Painter, prefix: str, label: str, text: str, width: int, style: str) -> None:
    """A message under its label, wrapped to ``width`` (its own line breaks kept)."""
    indent = " " * (len(prefix) + _LABEL + 1)
    room = max(width - len(indent), 20)
    lines: list[str] = []
    for para in text.splitlines() or [""]:
        lines += textwrap.wrap(para, room, break_on_hyphens=False) or [""]
    first, *rest = lines
    print(f"{prefix}{_label(paint, label, style)} {first}".rstrip())
    for line in rest:
        print(f"{indent}{line}".rstrip())


def _label(paint: Painter, word: str, style: str) -> str:
    return paint(word.ljust(_LABEL), style)


def _output_lines(summary: str) -> list[str]:
    """A tool result's output in a few lines: its first ones of substance and its last
    (``api.output_preview``), without the framing an agent wraps around it."""
    text = "\n".join(line for line in summary.splitlines() if not _FRAMING.match(line.strip()))
    return api.output_preview(text) or ["(no output)"]


_ANSWERED = {"deny": "denied", "ask": "asked", "warning": "warned"}


_PAINTED = {"result"}  # the rows bar colours itself (the others are shown ``visible``)
_FILES_SHOWN = 20  # paths named on the files line; --json lists every one


def _files_text(files: Sequence[str], ref: str) -> str:
    """The files line: the first paths, and how many more (a step may change 100,000)."""
    shown = ", ".join(files[:_FILES_SHOWN])
    rest = len(files) - _FILES_SHOWN
    if rest <= 0:
        return shown
    return f"{shown}, and {rest:,} more (`bar show {ref} --json` lists them all)"


def _fate(answer: str | None, outcome: str | None) -> str:
    """What bar answered an agent's inner command and what the agent then did."""
    if answer is None and outcome is None:
        return ""
    said = _ANSWERED.get(answer or "", "")
    did = outcome or "outcome unknown"
    return f" -> {said}, {did}" if said else f" -> {did}"


def _agent_text(rec: dict[str, object]) -> str:
    how = {
        "settings": "hooks in its settings file",
        "arguments": "hooks on its command line",
        "none": "no hooks: commands unchecked",
    }.get(str(rec.get("hooks")), "hooks")
    sessions = rec.get("sessions")
    mode = "interactive" if rec.get("interactive") else "non-interactive"
    count = f", {sessions} session(s)" if isinstance(sessions, int) else ""
    return f"{rec.get('name')} ({how}, {mode}{count})"


def _sandbox_text(rec: dict[str, object]) -> str:
    if not rec.get("enabled"):
        return f"off ({rec.get('reason') or 'not confined'})"
    mode = rec.get("network_mode")
    if isinstance(mode, str):
        network = f", network: {mode}"
    else:
        network = "" if rec.get("network", True) else ", no network"
    return f"confined ({rec.get('mechanism')}{network})"


_CONNECTIONS_SHOWN = 30


def _network_rows(connections: list[Any]) -> list[tuple[str, str]]:
    """The step's connections (``network``), refused first: a row each, up to a few."""
    entries = [c for c in connections if isinstance(c, dict)]
    refused = [c for c in entries if not c.get("allowed")]
    head = f"{len(entries)} connection(s)" + (f", {len(refused)} refused" if refused else "")
    rows = [("network", head)]
    for c in (refused + [c for c in entries if c.get("allowed")])[:_CONNECTIONS_SHOWN]:
        host = visible(str(c.get("host")))
        where = f"[{host}]:{c.get('port')}" if ":" in host else f"{host}:{c.get('port')}"
        if not c.get("allowed"):
            said = f"refused  {where}"
        elif c.get("error"):
            said = f"failed   {where}: {c.get('error')}"
        else:
            said = (
                f"allowed  {where}  {byte_size(int(c.get('bytes_out') or 0))} out, "
                f"{byte_size(int(c.get('bytes_in') or 0))} in"
            )
        rows.append(("", f"{said}  ({c.get('via', 'proxy')}, {c.get('started_at', '')})"))
    if len(entries) > _CONNECTIONS_SHOWN:
        rows.append(("", f"... {len(entries) - _CONNECTIONS_SHOWN} more (bar show --json)"))
    return rows


def _copy_out(pieces: Iterator[bytes], what: str) -> None:
    sys.stdout.flush()  # what was printed before it comes first
    out = sys.stdout.buffer
    try:
        for piece in pieces:
            out.write(piece)
    except NotFound:
        print(f"bar: warning: the output ({what}) is missing", file=sys.stderr)
    out.flush()


def _print(task: Task, rel: str) -> None:
    if not copy_file(api.artifact_path(task, rel)):
        print(f"bar: warning: artifact {rel} is missing", file=sys.stderr)
