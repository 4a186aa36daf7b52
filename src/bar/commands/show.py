"""``bar show STEP``: one step in full, with its patch and output."""

from __future__ import annotations

import shlex
import sys

from bar import api
from bar.records import ApplyStep, RunStep
from bar.render import (
    Painter,
    copy_file,
    describe,
    duration,
    outcome,
    print_json,
    short,
    stat_text,
)
from bar.tasks import Task


def show(*, task: str | None, step: str, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    record = api.show(the_task, step)
    if as_json:
        rec = record.to_record()
        rec["patch_text"] = _text(api.read_artifact(the_task, record.artifacts.patch))
        rec["output_text"] = _text(api.read_artifact(the_task, record.artifacts.output))
        print_json(rec)
        return 0
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
        rows += [("mode", record.mode), ("target", record.target_branch),
                 ("commit", record.commit_sha)]  # fmt: skip
    rows.append(("changes", stat_text(record.diff_stat)))
    if record.diff_stat.file_list:
        rows.append(("files", ", ".join(record.diff_stat.file_list)))
    rows.append(("snapshot", f"{short(record.snapshot_before)} -> {short(record.snapshot)}"))
    if record.head:
        rows.append(("head", short(record.head)))
    if isinstance(record, RunStep):
        for event in record.policy_events:
            source = f" [{event.source}]" if event.source else ""
            rule = event.rule or "no rule matched"
            rows.append(("policy", f"{event.action} {rule}: {event.matched}{source}"
                                   f"{_fate(event.answer, event.outcome)}"))  # fmt: skip
        for hook in record.hooks:
            rows.append(("hook", f"{hook.phase} {hook.cmd!r} -> exit {hook.exit_code}"))
    for key, value in rows:
        print(f"  {key:<9} {value}")
    for label, rel in (("patch", record.artifacts.patch), ("output", record.artifacts.output)):
        if rel:
            print(paint(f"\n--- {label} {rel}", "cyan"))
            sys.stdout.flush()
            _print(the_task, rel)
    if record.artifacts.cast:
        print(paint(f"\n(replay the session with: bar replay {record.step_id})", "dim"))
    return 0


_ANSWERED = {"deny": "denied", "ask": "asked", "warning": "warned"}


def _fate(answer: str | None, outcome: str | None) -> str:
    """What bar answered an agent's inner command and what the agent then did."""
    if answer is None and outcome is None:
        return ""
    said = _ANSWERED.get(answer or "", "")
    did = outcome or "outcome unknown"
    return f" -> {said}, {did}" if said else f" -> {did}"


def _agent_text(rec: dict[str, object]) -> str:
    how = {"settings": "hooks in its settings file", "arguments": "hooks on its command line",
           "none": "no hooks: commands unchecked"}.get(str(rec.get("hooks")), "hooks")  # fmt: skip
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


def _text(data: bytes | None) -> str | None:
    return data.decode("utf-8", "replace") if data is not None else None
