"""``bar show STEP``: one step in full, with its patch and output."""

from __future__ import annotations

import re
import shlex
import sys
from typing import TYPE_CHECKING

from bar import api
from bar.api import shapes
from bar.cli.pager import paging
from bar.cli.render import (
    Painter,
    checkpoint_line,
    copy_file,
    describe,
    duration,
    outcome,
    print_json,
    short,
    stat_text,
)
from bar.ledger.records import ApplyStep, RollbackStep, RunStep, Step, SyncStep
from bar.task.tasks import Task

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint


def show(*, task: str | None, step: str, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    if re.fullmatch(r"#?[0-9]+\.[0-9]+", step.strip()):
        return _show_checkpoint(the_task, step, as_json)
    record = api.show(the_task, step)
    taken = api.checkpoints(the_task, record.step_id) if isinstance(record, RunStep) else []
    if as_json:
        print_json(shapes.step_entry(the_task, record, taken))
        return 0
    with paging():
        _show_step(the_task, record, taken)
    return 0


def _show_step(the_task: Task, record: Step, taken: list[Checkpoint]) -> None:
    paint = Painter(the_task.project.config.output.color)
    print(f"{paint('step ' + record.step_id, 'bold')}  {record.kind}  {describe(record)}")
    rows: list[tuple[str, object]] = [
        ("started", record.started_at),
        ("duration", duration(record.duration_ms)),
    ]
    if isinstance(record, RunStep):
        rows += [("command", shlex.join(record.cmd)), ("cwd", record.cwd)]
        signal = f" (signal {record.signal})" if record.signal else ""
        rows.append(("result", outcome(record, paint) + signal))
        if record.extra.get("stopped_by"):
            rows.append(
                (
                    "stopped",
                    f"by a failing {record.extra['stopped_by']} hook; the command did not run",
                )
            )
        if record.env:
            rows.append(("env", " ".join(f"{k}={v}" for k, v in record.env.items())))
        if record.pty:
            rows.append(("terminal", "interactive (pty)"))
        sandbox = record.extra.get("sandbox")
        if isinstance(sandbox, dict):
            rows.append(("sandbox", _sandbox_text(sandbox)))
        agent = record.extra.get("agent")
        if isinstance(agent, dict):
            rows.append(("agent", _agent_text(agent)))
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
    rows.append(("changes", stat_text(record.diff_stat)))
    if record.diff_stat.file_list:
        rows.append(("files", ", ".join(record.diff_stat.file_list)))
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
    for key, value in rows:
        print(f"  {key:<9} {value}")
    if taken:
        print(
            paint(
                f"\n--- checkpoints ({len(taken)}; `bar show {record.step_id}.N` for one)", "cyan"
            )
        )
        for cp in taken:
            print(f"  {checkpoint_line(cp, paint)}".rstrip())
    for label, rel in (("patch", record.artifacts.patch), ("output", record.artifacts.output)):
        if rel:
            print(paint(f"\n--- {label} {rel}", "cyan"))
            sys.stdout.flush()
            _print(the_task, rel)
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
    print(f"{paint('checkpoint ' + cp.name, 'bold')}  {kind}  {cp.tool or ''}".rstrip())
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
        rows.append(("files", ", ".join(cp.diff_stat.file_list)))
    rows.append(("snapshot", f"{short(cp.snapshot_before)} -> {short(cp.snapshot)}"))
    if cp.head:
        rows.append(("head", short(cp.head)))
    for key, value in rows:
        print(f"  {key:<9} {value}")
    if cp.patch:
        print(paint(f"\n--- patch {cp.patch}", "cyan"))
        sys.stdout.flush()
        _print(task, cp.patch)


_ANSWERED = {"deny": "denied", "ask": "asked", "warning": "warned"}


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
    network = "" if rec.get("network", True) else ", no network"
    return f"confined ({rec.get('mechanism')}{network})"


def _print(task: Task, rel: str) -> None:
    if not copy_file(api.artifact_path(task, rel)):
        print(f"bar: warning: artifact {rel} is missing", file=sys.stderr)
