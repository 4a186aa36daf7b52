#!/usr/bin/env python3
"""Figure 20: what live OpenTelemetry export adds to a task's steps.

With an OTLP endpoint set, each recorded step leaves a file in the project's telemetry
queue and a sender in the background turns it into spans and sends them
(``bar.history.telemetry``, ``bar.formats.sender``). The target is that a task of
``STEPS`` steps takes at most 2% longer with it.

* 20: ``STEPS`` steps (``bar run -- sh -c 'echo N >> log.txt'``, each a real change),
  one after the other in one task, with ``OTEL_EXPORTER_OTLP_ENDPOINT`` naming a
  collector on loopback ÷ the same steps in the same task without it. The collector is a
  sink in this process that parses every request with ``opentelemetry-proto``; the
  figure fails when it did not receive a span for every step. Between rounds the sender
  is let go (its lock free) outside the timing, so one side's sender never runs during
  the other side's steps; during the live side it runs beside the steps, as it would.

    python bench/telemetry.py                       # the figure alone on the small repository
    python bench/telemetry.py --sizes small,medium  # any option of run.py (--only 20 implied)
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figures import Params, Row, ratio_row  # noqa: E402
from harness import BenchError, Fixture, interleave, log  # noqa: E402

NUMBER = 20
STEPS = 100
QUICK_STEPS = 5
TARGET = 1.02


class Sink:
    """An OTLP/HTTP collector that counts the step spans it received."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.steps = 0
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                found = sum(
                    1
                    for r in request.resource_spans
                    for s in r.scope_spans
                    for span in s.spans
                    if span.name.startswith("bar run ")
                )
                with sink.lock:
                    sink.steps += found
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _sender_gone(telemetry: Path, bound: float = 60.0) -> None:
    """Wait until no sender holds the project's lock and the queue is empty."""
    deadline = time.monotonic() + bound
    lock = telemetry / "sender.lock"
    while time.monotonic() < deadline:
        queue = telemetry / "queue"
        waiting = [n for n in os.listdir(queue) if not n.startswith(".")] if queue.is_dir() else []
        if not lock.exists() and not waiting:
            return
        if lock.exists() and not waiting:
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                pass
            finally:
                os.close(fd)
        time.sleep(0.05)
    raise BenchError(f"the telemetry sender did not finish in {bound:.0f} s")


def fig20(f: Fixture, p: Params) -> list[Row]:
    steps = QUICK_STEPS if p.quick else STEPS
    repo = f.clone()
    f.init(repo)
    task, wt = f.new_task(repo, "telemetry")
    sink = Sink()
    live_env = {**f.env, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url}
    telemetry = f.project_dir() / "telemetry"
    n = iter(range(10_000_000))

    def side(env: dict[str, str] | None) -> Callable[[], float]:
        def run() -> float:
            _sender_gone(telemetry)
            total = 0.0
            for _ in range(steps):
                script = f"echo {next(n)} >> log.txt"
                argv: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty"]
                argv += ["--", "sh", "-c", script]
                total += f.t(argv, wt, env=env)
            return total

        return run

    log(f"  {steps} steps a round, with and without live export")
    s = interleave({"live export": side(live_env), "no export": side(None)}, p.repeat, p.warmup)
    _sender_gone(telemetry)
    rounds = p.repeat + p.warmup
    if sink.steps < rounds * steps:
        raise BenchError(f"the collector received {sink.steps} step spans of {rounds * steps}")
    return [
        ratio_row(
            "20",
            f"a task of {steps} steps (`bar run -- sh -c 'echo N >> log.txt'`) sending each "
            "as spans to an OTLP collector on loopback ÷ the same steps without",
            s,
            "live export",
            "no export",
            TARGET,
        )
    ]


FIGURE = ("live OpenTelemetry export: its cost to a task", fig20)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
