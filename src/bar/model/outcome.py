"""How a step's command ended, kept beside its intent (``running.ended``) as soon as it
has.

A bar killed while it records the step (its snapshot, its patch, its ledger line) leaves
the intent journal (``bar.model.journals``) and this file: recovery then records the step with
the command's exit code rather than as interrupted, and credits it with what changed up
to this file's own time (``bar.step.interrupted``), since every process of the step was gone
when it was written. It names its step: one left by a bar killed between removing it and
the intent is never read for the next step. Not synced to disk (it is written at every
step): after a crash of the machine it may be lost or unreadable, and the step is then
recorded as interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path

from bar.base.record import record
from bar.store.files import write_bytes_atomic
from bar.store.layout import TaskPaths


@record(frozen=True)
class Outcome:
    exit_code: int
    signal: int | None
    ended_at: str | None
    # why ``bar run`` could not record the step (a named pipe git would wait on, a full
    # disk), said where the step is shown until the next command records it
    unrecorded: str | None = None


def path(paths: TaskPaths) -> Path:
    return paths.marker.with_name("running.ended")


def write(
    paths: TaskPaths, step_id: str, exit_code: int, signal: int | None, ended_at: str
) -> None:
    data = {"step_id": step_id, "exit_code": exit_code, "signal": signal, "ended_at": ended_at}
    write_bytes_atomic(path(paths), json.dumps(data).encode(), durable=False)


def unrecorded(paths: TaskPaths, step_id: str, why: str) -> None:
    """Note beside step ``step_id``'s outcome why ``bar run`` could not record it (best
    effort: the disk may be full)."""
    try:
        said = json.loads(path(paths).read_bytes())
        if not isinstance(said, dict) or said.get("step_id") != step_id:
            return
        said["unrecorded"] = why
        write_bytes_atomic(path(paths), json.dumps(said).encode(), durable=False)
    except (OSError, ValueError):
        return


def read(paths: TaskPaths, step_id: str) -> Outcome | None:
    """How step ``step_id``'s command ended, if that was kept and can be read."""
    try:
        said = json.loads(path(paths).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or said.get("step_id") != step_id:
        return None
    code, signal, ended = (
        _int(said.get("exit_code")),
        _int(said.get("signal")),
        said.get("ended_at"),
    )
    if code is None:
        return None
    why = said.get("unrecorded")
    return Outcome(
        code,
        signal,
        ended if isinstance(ended, str) else None,
        why if isinstance(why, str) else None,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def remove(paths: TaskPaths) -> None:
    path(paths).unlink(missing_ok=True)
