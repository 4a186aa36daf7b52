"""Live OpenTelemetry export: each recorded step sent as spans, in the background.

When an OTLP endpoint is set (``telemetry.otlp_endpoint`` in config.yaml, else the
standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``),
every step's ledger line, once written, also leaves a small file in the project's
``telemetry/queue/``: the task and the step, nothing more (and closing a task one for
the task's own span, which spans the task's life). That is all the step pays:
no span is built and nothing is sent in its process, so export never slows a step and
never fails one.

A sender (``bar.formats.sender``, started in a session of its
own when none is running) takes the queue in batches, builds each step's spans
(``bar.formats.otel``, ids derived from the task and step, so a later ``bar export
--format otel`` names the same spans) and sends them with the SDK's OTLP/HTTP exporter.
It stays a few seconds for more, then leaves. The queue is bounded (``MAX_QUEUE``
steps); a step that finds it full, or whose spans the endpoint refused ``ATTEMPTS``
times, is dropped and counted in ``telemetry/dropped`` (one line each), which ``bar
doctor`` reports. What went wrong last is in ``telemetry/sender.log``.

Only this module's ``enqueue`` runs in the step's process; it imports nothing of
OpenTelemetry.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bar.model.records import Step
    from bar.model.tasks import Task

MAX_QUEUE = 10_000  # steps waiting to be sent; past it a step is dropped, and counted
ATTEMPTS = 3  # sends of one batch the endpoint refused before its steps are dropped
BATCH = 64  # steps sent in one request
LINGER = 3.0  # seconds a sender waits for more steps before it leaves
TIMEOUT = 5.0  # seconds one request may take
_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def endpoint(configured: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """Where spans go (OTLP/HTTP): the setting, else the standard variables. A base URL
    (the setting, ``OTEL_EXPORTER_OTLP_ENDPOINT``) gets the traces path, as the SDK does;
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is."""
    if configured:
        return _traces_url(configured)
    if environ.get(_ENV[0]):
        return environ[_ENV[0]]
    if environ.get(_ENV[1]):
        return _traces_url(environ[_ENV[1]])
    return None


def _traces_url(base: str) -> str:
    return base if base.rstrip("/").endswith("/v1/traces") else base.rstrip("/") + "/v1/traces"


def enqueue(task: Task, step: Step | None) -> None:
    """Queue ``step`` (None: the task's own span, sent when it is closed) for the sender
    and make sure one runs; quietly nothing when no endpoint is set. Never raises:
    telemetry must not fail a step."""
    try:
        target = endpoint(task.project.config.telemetry.otlp_endpoint)
        if target is None:
            return
        where = task.project.paths.telemetry
        queue = where / "queue"
        where.mkdir(mode=0o700, exist_ok=True)
        queue.mkdir(mode=0o700, exist_ok=True)
        if _count(queue) >= MAX_QUEUE:
            drop(where, 1)
            return
        entry = {
            "root": str(task.project.root),
            "task": task.id,
            "step": step.step_id if step is not None else None,
            "endpoint": target,
            "tries": 0,
        }
        name = f"{time.time_ns():020d}-{task.id}-{step.step_id if step else 'task'}.json"
        part = queue / f".{name}.part"
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        part.replace(queue / name)
        start_sender(where)
    except Exception:
        return


def _count(queue: Path) -> int:
    with os.scandir(queue) as found:
        return sum(1 for e in found if not e.name.startswith("."))


def drop(where: Path, n: int) -> None:
    fd = os.open(where / "dropped", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"\n" * n)
    finally:
        os.close(fd)


def dropped(where: Path) -> int:
    """How many steps were never sent (queue full, or refused)."""
    try:
        return (where / "dropped").stat().st_size
    except OSError:
        return 0


def waiting(where: Path) -> int:
    """How many steps wait in the queue."""
    try:
        return _count(where / "queue")
    except OSError:
        return 0


def start_sender(where: Path) -> None:
    """Start a sender unless one holds the lock."""
    lock = try_lock(where)
    if lock is None:
        return  # one runs: it looks at the queue again before it leaves
    os.close(lock)
    import subprocess  # (only when a step is to be sent)

    log = os.open(where / "sender.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        subprocess.Popen(
            [sys.executable, "-m", "bar.formats.sender", str(where)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    finally:
        os.close(log)


def try_lock(where: Path) -> int | None:
    fd = os.open(where / "sender.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
