"""Steps an order asked for while another step was running, appended when it ends.

A ledger's step ids are sequential and a step cannot be appended while another runs:
an order handled by the running step's ``bar run`` (``bar.step.order_server``: a person
answering the agent's questions, say) that wants a step of its own writes it here, one
JSON line each, in the task directory. The line is appended to the ledger right after
the running step's own line (``flush``, called by ``api.run``), or, if bar died first, by
the next command that changes the task (``transaction.finish_pending``). Each line carries
an ``order_id``, written into the step, so a line of a flush cut short is never
appended twice.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from bar import git
from bar.base.clock import now_iso
from bar.history import steps
from bar.model.records import Step, step_from_record
from bar.model.tasks import Task
from bar.store.files import read_json_lines, write_bytes_atomic

FILE = "queued-steps.jsonl"


def path(task: Task) -> Path:
    return task.dir / FILE


def queue(task: Task, rec: dict[str, Any]) -> None:
    """Keep ``rec`` (a step's record, without ``step_id`` and snapshots) for ``flush``."""
    line = {**rec, "order_id": f"{time.time_ns():x}-{os.getpid()}"}
    data = json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode()
    fd = os.open(path(task), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data + b"\n")
    finally:
        os.close(fd)


def flush(task: Task) -> list[Step]:
    """Append every queued step to the ledger (the caller holds the task lock and no step
    is running); each takes the state the task is in then."""
    file = path(task)
    if not file.exists():
        return []
    lines = read_json_lines(file)
    # appended before bar stopped (any of them, not only the last: a crash after the
    # second of two lines is appended leaves the first one behind the last)
    appended = {step.extra.get("order_id") for step in task.ledger.iter_reverse()} - {None}
    done: list[Step] = []
    for i, rec in enumerate(lines):
        if rec.get("order_id") in appended:
            continue
        state = task.recorded_snapshot()
        rec = {
            **rec,
            "step_id": task.ledger.next_step_id(),
            "snapshot_before": state,
            "snapshot": state,
            "head": git.rev_parse(task.worktree, "HEAD"),
        }
        rec.setdefault("ended_at", now_iso())
        step = step_from_record(rec, f"queued step {i + 1} in {file}")
        done.append(steps.append(task, step))  # type: ignore[type-var]
    write_bytes_atomic(file, b"")
    file.unlink(missing_ok=True)
    return done
