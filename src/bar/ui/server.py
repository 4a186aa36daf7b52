"""Start the page's server: bind, say the URL, open the browser, serve until a signal.

The socket is bound before anything is printed, so the URL printed is one that already
answers (``--port 0`` takes a free port, the one printed). Ctrl-C and SIGTERM stop the
server: open live timelines are given a moment to close, and the process exits 0 with
one line said, not with the signal re-raised as uvicorn would.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Iterator

import uvicorn

from bar.errors import BarError
from bar.ui import app as ui_app
from bar.ui import assets
from bar.ui.security import Secrets

_SIGNAL_NAMES = {2: "Ctrl-C", 15: "SIGTERM"}


class _Server(uvicorn.Server):
    """uvicorn's server, but a signal ends ``serve`` and nothing more."""

    stopped_by: int | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        import signal

        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(sig: int, _frame: object) -> None:
            if self.should_exit:
                self.force_exit = True
            self.stopped_by = sig
            self.should_exit = True

        handled = (signal.SIGINT, signal.SIGTERM)
        before = {sig: signal.signal(sig, stop) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BarError(
            f"bar ui cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another port with --port N (--port 0: any free one)",
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(*, host: str, port: int, open_browser: bool) -> int:
    sock = _bind(host, port)
    keys = Secrets(host, sock.getsockname()[1])
    if not assets.present():
        print(
            "bar ui: the diff, colour and terminal libraries are not installed, so diffs "
            "and outputs are shown as plain text; run `make ui-assets` in bar's source "
            "directory for the rich view",
            file=sys.stderr,
        )
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"bar ui: warning: listening on {host}, not only this machine's loopback "
            "address; the token is all that keeps others out",
            file=sys.stderr,
        )
    print(f"bar ui: {keys.url()}", flush=True)
    print(
        "bar ui: open that address (it holds this launch's key); Ctrl-C stops the server",
        file=sys.stderr,
        flush=True,
    )
    if open_browser:
        import webbrowser

        with contextlib.suppress(Exception):  # no browser here: the URL is printed anyway
            webbrowser.open(keys.url())
    config = uvicorn.Config(
        ui_app.build(keys),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
        server_header=False,
        date_header=False,
    )
    server = _Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    how = _SIGNAL_NAMES.get(server.stopped_by or 0, "a signal")
    print(f"bar ui: stopped ({how})", flush=True)
    return 0
