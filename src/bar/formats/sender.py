"""The telemetry sender: sends the steps ``bar.formats.telemetry`` queued, then leaves.

``python -m bar.formats.sender PROJECT_DIR/telemetry``, started by ``telemetry.enqueue``
in a session of its own. One runs per project at a time (``sender.lock``); it takes the
queue in batches of ``BATCH`` steps, sends each batch's spans with the SDK's OTLP/HTTP
exporter, and waits ``LINGER`` seconds for more before it leaves. A batch the endpoint
refuses is tried again, ``ATTEMPTS`` times in all, then dropped and counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bar.formats.telemetry import ATTEMPTS, BATCH, LINGER, TIMEOUT, drop, try_lock, waiting


def serve(where: Path, *, linger: float = LINGER) -> int:
    """Send what the queue holds until it stays empty for ``linger`` seconds. Returns how
    many steps were sent."""
    sent = 0
    while True:
        lock = try_lock(where)
        if lock is None:
            return sent  # another sender has it
        try:
            sent += _drain(where, linger)
        finally:
            os.close(lock)
        if waiting(where) == 0:  # (a step queued as the lock went: take it too)
            return sent


def _drain(where: Path, linger: float) -> int:
    sent = 0
    idle_since = time.monotonic()
    queue = where / "queue"
    while True:
        names = sorted(n for n in os.listdir(queue) if not n.startswith("."))
        if not names:
            if time.monotonic() - idle_since > linger:
                return sent
            time.sleep(0.1)
            continue
        batch = names[:BATCH]
        sent += _send(where, [queue / n for n in batch])
        idle_since = time.monotonic()


def _send(where: Path, files: list[Path]) -> int:
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
        ok = _export(target, spans) if spans else True
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
    from bar.errors import BarError
    from bar.formats import otel
    from bar.project.project import Project
    from bar.store.layout import ProjectPaths
    from bar.task.tasks import load_task

    out: list[Any] = []
    for entry in entries:
        try:
            project = Project(Path(str(entry["root"])), ProjectPaths(where.parent))
            task = load_task(project, str(entry["task"]))
            if entry.get("step") is None:  # the task's own span, at its close
                out.append(otel.task_span(task))
            else:
                step = task.ledger.get(str(entry["step"]))
                out += otel.task_spans(task, [step], with_task=False)
        except (BarError, KeyError, OSError, ValueError) as exc:
            print(f"bar telemetry: step {entry.get('step')} not sent: {exc}", file=sys.stderr)
    return out


def _export(target: str, spans: list[Any]) -> bool:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = OTLPSpanExporter(endpoint=target, timeout=TIMEOUT)
    try:
        return bool(exporter.export(spans) == SpanExportResult.SUCCESS)
    except Exception as exc:
        print(f"bar telemetry: sending to {target} failed: {exc}", file=sys.stderr)
        return False
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bar.formats.sender PROJECT_DIR/telemetry", file=sys.stderr)
        return 2
    serve(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
