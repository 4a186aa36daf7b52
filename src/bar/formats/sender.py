"""The telemetry sender: sends the steps ``bar.history.telemetry`` queued, then leaves.

``python -m bar.formats.sender PROJECT_DIR/telemetry``, started by ``telemetry.enqueue``
in a session of its own. One runs per project at a time (``sender.lock``), at the
lowest CPU priority: it is the steps' background, never their rival. It gathers what
the queue holds for ``FLUSH`` seconds (or until ``BATCH`` steps wait), sends the batch's
spans with the SDK's OTLP/HTTP exporter (one per endpoint, its connection kept), and
waits ``LINGER`` seconds for more before it leaves. A batch the endpoint refuses is
tried again, ``ATTEMPTS`` times in all, then dropped and counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bar.history.telemetry import ATTEMPTS, BATCH, LINGER, TIMEOUT, drop, try_lock, waiting

FLUSH = 1.0  # seconds a step may wait for others to go with it
_POLL = 0.1


def serve(where: Path, *, linger: float = LINGER) -> int:
    """Send what the queue holds until it stays empty for ``linger`` seconds. Returns how
    many steps were sent."""
    sent = 0
    exporters: dict[str, Any] = {}
    try:
        while True:
            lock = try_lock(where)
            if lock is None:
                return sent  # another sender has it
            try:
                sent += _drain(where, linger, exporters)
            finally:
                os.close(lock)
            if waiting(where) == 0:  # (a step queued as the lock went: take it too)
                return sent
    finally:
        for exporter in exporters.values():
            exporter.shutdown()


def _drain(where: Path, linger: float, exporters: dict[str, Any]) -> int:
    sent = 0
    idle_since = time.monotonic()
    first_seen: float | None = None
    queue = where / "queue"
    while True:
        names = sorted(n for n in os.listdir(queue) if not n.startswith("."))
        now = time.monotonic()
        if not names:
            if now - idle_since > linger:
                return sent
            time.sleep(_POLL)
            continue
        first_seen = first_seen if first_seen is not None else now
        if len(names) < BATCH and now - first_seen < FLUSH:
            time.sleep(_POLL)  # (more may come: one request for them all)
            continue
        sent += _send(where, [queue / n for n in names[:BATCH]], exporters)
        idle_since, first_seen = time.monotonic(), None


def _send(where: Path, files: list[Path], exporters: dict[str, Any]) -> int:
    """Send one batch; True when it went (or cannot ever go and was dropped)."""
    entries: list[tuple[Path, dict[str, Any]]] = []
    for path in files:
        try:
            entries.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            _remove(path)
            drop(where, 1)
    by_endpoint: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for path, entry in entries:
        by_endpoint.setdefault(str(entry.get("endpoint")), []).append((path, entry))
    sent = 0
    for target, group in by_endpoint.items():
        spans = _spans(where, [e for _, e in group])
        ok = _export(exporters, target, spans) if spans else True
        for path, entry in group:
            if ok:
                _remove(path)
                sent += 1
                continue
            entry["tries"] = int(entry.get("tries") or 0) + 1
            if entry["tries"] >= ATTEMPTS:
                _remove(path)
                drop(where, 1)
            else:
                path.write_text(json.dumps(entry))
        if not ok:
            time.sleep(0.5)  # (the endpoint is down: do not spin)
    return sent


def _spans(where: Path, entries: list[dict[str, Any]]) -> list[Any]:
    """The spans of a batch's entries: each task loaded once, its steps' spans made
    together."""
    from bar.errors import BarError
    from bar.formats import otel
    from bar.model.project import Project
    from bar.model.tasks import load_task
    from bar.store.layout import ProjectPaths

    by_task: dict[tuple[str, str], list[str | None]] = {}
    for entry in entries:
        key = (str(entry.get("root")), str(entry.get("task")))
        by_task.setdefault(key, []).append(entry.get("step"))
    out: list[Any] = []
    for (root, task_id), steps in by_task.items():
        try:
            task = load_task(Project(Path(root), ProjectPaths(where.parent)), task_id)
            listed = [task.ledger.get(str(n)) for n in steps if n is not None]
            out += otel.task_spans(task, listed, with_task=False)
            if None in steps:  # the task's own span, at its close
                out.append(otel.task_span(task))
        except (BarError, OSError, ValueError) as exc:
            print(f"bar telemetry: task {task_id}'s spans not made: {exc}", file=sys.stderr)
    return out


def _export(exporters: dict[str, Any], target: str, spans: list[Any]) -> bool:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    if target not in exporters:
        exporters[target] = OTLPSpanExporter(endpoint=target, timeout=TIMEOUT)
    try:
        return bool(exporters[target].export(spans) == SpanExportResult.SUCCESS)
    except Exception as exc:  # (a sender reports, it never crashes on a bad peer)
        print(f"bar telemetry: sending to {target} failed: {exc}", file=sys.stderr)
        return False


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bar.formats.sender PROJECT_DIR/telemetry", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError):
        os.nice(19)  # the steps' background: never their rival for the processor
    serve(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
