"""Start the page's server: bind, say the URL, open the browser, serve until a signal.

The socket is bound before anything is printed, so the URL printed is one that already
answers (``--port 0`` takes a free port, the one printed). Ctrl-C and SIGTERM stop the
server: open live timelines are given a moment to close, and the process exits 0 with
one line said, not with the signal re-raised as uvicorn would.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from bar import api
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


def _launch_page(keys: Secrets) -> Path | None:
    """The page the browser is opened on (``Secrets.launch_page``): the token stays out of
    the browser's command line. None where it cannot be written."""
    folder = api.ui_launch_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        path = folder / f"launch-{keys.port}-{os.getpid()}.html"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(keys.launch_page())
    return path


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
    page = _launch_page(keys) if open_browser else None
    if open_browser and page is None:
        print(
            f"bar ui: no launch page in {api.ui_launch_dir()}; open the URL above", file=sys.stderr
        )
    if page is not None:
        import webbrowser

        keys.on_launch.append(lambda: page.unlink(missing_ok=True))
        with contextlib.suppress(Exception):  # no browser here: the URL is printed anyway
            webbrowser.open(page.as_uri())
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
        if page is not None:
            page.unlink(missing_ok=True)
    how = _SIGNAL_NAMES.get(server.stopped_by or 0, "a signal")
    print(f"bar ui: stopped ({how})", flush=True)
    return 0
