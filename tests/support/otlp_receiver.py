"""A real OTLP/HTTP receiver on loopback, for the tests of live export.

It takes ``POST /v1/traces`` as a collector does: the body is an
``ExportTraceServiceRequest`` in protobuf (gzip when the exporter says so), parsed with
the OpenTelemetry project's own generated classes (``opentelemetry-proto``), so what it
accepts is what a collector would. ``answer`` sets the HTTP status it replies with
(200, or 400 to refuse every request). Waiting is for the event: ``wait_for`` returns
as soon as the spans asked for have arrived, or raises past its bound.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Receiver:
    def __init__(self, answer: int = 200) -> None:
        self.answer = answer
        self.requests: list[ExportTraceServiceRequest] = []
        self.refused = 0
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or receiver.answer != 200:
                    with receiver.changed:
                        receiver.refused += 1
                        receiver.changed.notify_all()
                    self.send_response(receiver.answer if receiver.answer != 200 else 404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)  # (a malformed body raises: the test fails)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                with receiver.changed:
                    receiver.requests.append(request)
                    receiver.changed.notify_all()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def wait_for(self, done: Callable[[Receiver], bool], bound: float = 60.0) -> None:
        """Return as soon as ``done`` holds: woken by each request, and looking again every
        few hundredths of a second for what no request signals (a file the sender writes)."""
        deadline = time.monotonic() + bound
        with self.changed:
            while not self.changed.wait_for(lambda: done(self), timeout=0.05):
                if time.monotonic() >= deadline:
                    raise AssertionError(
                        f"the receiver did not get what was expected in {bound:.0f} s: "
                        f"{len(self.requests)} requests, {self.refused} refused"
                    )


@contextmanager
def receiving(answer: int = 200) -> Iterator[Receiver]:
    receiver = Receiver(answer)
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
