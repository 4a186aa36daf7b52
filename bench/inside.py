"""Time commands from inside a running step, the way an agent runs bar's hook.

A running step's ``bar run`` answers only processes that descend from it (the socket's
path is readable by other tasks' steps), so a hook timed from the benchmark itself would
not be answered. ``Inside`` starts a step whose command is this file's driver; the driver
runs each command it is sent, times it from just before ``Popen`` to its exit, and sends
the time back. Every contender of a figure that uses it runs through the driver, so all
of them pay the same confinement and the same way of being timed.

    with Inside(f, task, wt, agent="claude") as inside:
        seconds = inside.t(["git", "status", "--porcelain"], stdin=None)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any


def drive(requests: str, replies: str) -> int:
    """The step's command: one JSON request per line ([argv, cwd, stdin path or null]),
    one reply per line (seconds, or an error)."""
    with open(requests) as inbox, open(replies, "w") as outbox:
        outbox.write("ready\n")
        outbox.flush()
        for line in inbox:
            argv, cwd, stdin = json.loads(line)
            if argv is None:
                break
            fh = open(stdin, "rb") if stdin else subprocess.DEVNULL  # noqa: SIM115
            t0 = time.perf_counter()
            proc = subprocess.run(argv, cwd=cwd, stdin=fh, capture_output=True)
            seconds = time.perf_counter() - t0
            if stdin:
                fh.close()  # type: ignore[union-attr]
            reply: Any = (
                seconds
                if proc.returncode == 0
                else {
                    "error": proc.returncode,
                    "stderr": proc.stderr.decode(errors="replace")[-2000:],
                }
            )
            outbox.write(json.dumps(reply) + "\n")
            outbox.flush()
    return 0


class Inside:
    """A running ``bar run [--agent A]`` step whose command times what it is sent."""

    def __init__(
        self,
        bar: Path,
        task: str,
        wt: Path,
        env: dict[str, str],
        agent: str | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bar-bench-inside-", dir="/tmp"))
        self.requests, self.replies = self.dir / "requests", self.dir / "replies"
        os.mkfifo(self.requests)
        os.mkfifo(self.replies)
        with_agent = ["--agent", agent] if agent else []
        self.step = subprocess.Popen(
            [
                str(bar),
                "run",
                "--task",
                task,
                "--no-pty",
                *options,
                *with_agent,
                "--",
                sys.executable,
                __file__,
                str(self.requests),
                str(self.replies),
            ],
            cwd=wt,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._out = os.fdopen(self._open_when_read(), "w")
        self._in = open(self.replies)  # noqa: SIM115
        if self._in.readline().strip() != "ready":
            raise RuntimeError("the step's driver did not start")

    def _open_when_read(self, timeout: float = 120) -> int:
        """The request pipe, once the step's driver opened it (a step that fails to
        start never does: say why instead of waiting for ever)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = os.open(self.requests, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody reads it yet
                if self.step.poll() is not None or time.monotonic() > deadline:
                    self.step.kill()
                    err = self.step.communicate()[1].decode(errors="replace")
                    raise RuntimeError(f"the step did not start its driver: {err}") from None
                time.sleep(0.02)
                continue
            os.set_blocking(fd, True)
            return fd

    def t(self, argv: list[str | Path], cwd: Path, stdin: Path | None = None) -> float:
        self._out.write(
            json.dumps([[str(a) for a in argv], str(cwd), str(stdin) if stdin else None]) + "\n"
        )
        self._out.flush()
        line = self._in.readline()
        if not line:  # the driver ended: say how the step did
            try:
                err = self.step.communicate(timeout=60)[1].decode(errors="replace")
            except subprocess.TimeoutExpired:
                self.step.kill()
                err = self.step.communicate()[1].decode(errors="replace")
            raise RuntimeError(f"the step ended (exit {self.step.returncode}): {err[-3000:]}")
        reply = json.loads(line)
        if isinstance(reply, dict):
            raise RuntimeError(f"{argv[0]} exited {reply['error']} in the step: {reply['stderr']}")
        return float(reply)

    def close(self) -> None:
        try:
            self._out.write(json.dumps([None, None, None]) + "\n")
            self._out.close()
        except OSError:
            pass
        self._in.close()
        try:
            self.step.wait(timeout=600)
        finally:
            for path in (self.requests, self.replies):
                path.unlink(missing_ok=True)
            self.dir.rmdir()

    def __enter__(self) -> Inside:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(drive(sys.argv[1], sys.argv[2]))
