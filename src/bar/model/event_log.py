"""events.jsonl: the project's lifecycle log, in the shape of the task board it follows.

The control plane's record: what happened to tasks and worktrees, as the ledger records
what happened inside a task. Each line is one event::

    {"version": 2, "event": "worktree.remove.after", "ts": 1730000000.123,
     "task": {"id": "Ab3x_9Qz", "name": "auth", "status": "completed"},
     "worktree": {"name": "auth", "path": "/…/workspaces/Ab3x_9Qz", "status": "removed"},
     "error": "..."}

``ts`` is seconds since the epoch; ``task`` and ``worktree`` are ``{}`` when the event
has none; ``error`` is there only on a ``.failed`` event, ``project`` ({"root", …})
only on an event of the project itself, ``changed`` ({key: {"from", "to"}}) on a
``task.edited`` and a ``task.renamed``, ``by`` ({"task", "step"}) on one a running
step's agent asked for (through ``bar mcp``'s board tools). An operation that can fail
writes ``<op>.before``, then ``<op>.after`` or ``<op>.failed``
(``worktree.create``, ``worktree.remove``); the rest are single events (``task.created``,
``task.started``, ``task.claimed``, ``task.edited``, ``task.renamed``, ``task.completed``, ``task.reopened``,
``task.deleted``, ``worktree.keep``, ``project.initialized``, …). The full list is in
docs/board.md.

A line written by an older bar (version 1: ISO ``ts``, ``task_id`` and ``path`` at the
top level, ``worktree.created``) is read through the migration registry, so ``bar
events`` shows one shape whatever wrote the file. A line that does not parse is shown as
``{"event": "parse_error", "raw": ...}`` rather than hiding the rest.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bar.base.migrate import upgrade
from bar.errors import BarError
from bar.store.files import append_line

VERSION = 2
# who an event is done for when it is not the person at the terminal: set while a running
# step's order is carried out (``bar.api.board_orders``), written as ``"by"``
origin: dict[str, Any] | None = None
PARSE_ERROR = "parse_error"
# told of each event as it is logged, under the project lock (``Project.log_event``):
# ``bar.task.seed_board`` keeps the seed layout's copy of the board with it
after_logged: list[Callable[[Any, dict[str, Any]], None]] = []
_TAIL_CHUNK = 64 * 1024


def line_of(
    event: str,
    *,
    task: dict[str, Any] | None = None,
    worktree: dict[str, Any] | None = None,
    error: str | None = None,
    project: dict[str, Any] | None = None,
    changed: dict[str, Any] | None = None,
    ts: float | None = None,
) -> dict[str, Any]:
    """One event as it is written."""
    rec: dict[str, Any] = {
        "version": VERSION,
        "event": event,
        "ts": round(time.time() if ts is None else ts, 3),
        "task": dict(task or {}),
        "worktree": dict(worktree or {}),
    }
    if error:
        rec["error"] = error
    if project:
        rec["project"] = dict(project)
    if changed:
        rec["changed"] = dict(changed)
    if origin:
        rec["by"] = dict(origin)
    return rec


def append(log: Path, event: str, /, **fields: Any) -> dict[str, Any]:
    """Append ``event`` (``line_of``'s fields) to ``log``; the caller holds the project lock."""
    rec = line_of(event, **fields)
    line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
    append_line(log, line.encode("utf-8", "backslashreplace"))
    return rec


def parse(raw: bytes, log: Path) -> dict[str, Any]:
    """A line of ``log`` at the current version, or a ``parse_error`` event holding it."""
    text = raw.decode("utf-8", "replace")
    try:
        rec = json.loads(text)
        if not isinstance(rec, dict):
            raise ValueError("not an object")
        return upgrade("event", rec, log)
    except (ValueError, BarError):
        return {"event": PARSE_ERROR, "raw": text}


def end(log: Path) -> int:
    """Where ``log`` ends now (its size; 0 while there is none): what ``recent`` reads up
    to and ``follow`` reads from, so that an event appended in between is shown once."""
    try:
        return log.stat().st_size
    except FileNotFoundError:
        return 0


def recent(log: Path, n: int | None = 20, *, upto: int | None = None) -> list[dict[str, Any]]:
    """The last ``n`` events of ``log`` (all with None), oldest first, of those before
    the offset ``upto`` (None: all). Reads from the end: a long log costs no more than its
    tail."""
    if n is not None and n <= 0:
        return []
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BarError(f"cannot read {log}: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if upto is not None:
            size = min(size, upto)
        data = b""
        pos = size
        while pos > 0 and (n is None or data.count(b"\n") <= n):
            step = min(_TAIL_CHUNK, pos)
            pos -= step
            data = os.pread(fd, step, pos) + data
    finally:
        os.close(fd)
    lines = [line for line in data.split(b"\n") if line.strip()]
    if pos > 0:
        lines = lines[1:]  # the first may be cut
    if n is not None:
        lines = lines[-n:]
    return [parse(line, log) for line in lines]


def follow(
    log: Path, *, poll: float = 0.2, start_at_end: bool = True, start: int | None = None
) -> Iterator[dict[str, Any]]:
    """The events appended to ``log`` from now on (from its start, with ``start_at_end``
    false; from the offset ``start``, if given: ``end``), as they come; runs until the
    caller stops iterating."""
    offset = start if start is not None else end(log) if start_at_end else 0
    pending = b""
    while True:
        try:
            with log.open("rb") as handle:
                if os.fstat(handle.fileno()).st_size < offset:
                    offset = 0  # the file was replaced: read it anew
                handle.seek(offset)
                chunk = handle.read()
        except FileNotFoundError:
            chunk = b""
        if chunk:
            offset += len(chunk)
            pending += chunk
            *whole, pending = pending.split(b"\n")
            for line in whole:
                if line.strip():
                    yield parse(line, log)
        else:
            time.sleep(poll)
