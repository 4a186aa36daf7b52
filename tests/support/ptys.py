"""The installed ``bar`` run on a real pseudo-terminal, as a developer's shell runs it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers import BAR_EXE

# A prompt that catches Ctrl-C as a shell's does, and goes on: it prints ``answer?``, then
# ``caught`` for each Ctrl-C, then ``got LINE`` for the line typed. Python runs a
# handler only between its own steps: a Ctrl-C typed after the prompt shows but before a
# plain ``input()`` reaches its read would be handled only once a line came. So it waits
# in ``select`` on its terminal and on a wake-up pipe the signal writes to, as a shell
# waits, and no Ctrl-C is held back, however soon it comes.
CATCHING_PROMPT = """\
import os, select, signal, sys
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGINT, lambda *_: print("caught", flush=True))
print("answer?", flush=True)
while True:
    ready = select.select([0, wake_r], [], [])[0]
    if wake_r in ready:
        os.read(wake_r, 64)
    if 0 in ready:
        print("got", sys.stdin.readline().strip(), flush=True)
        break
"""


@dataclass
class Shown:
    code: int
    screen: bytes  # what reached the terminal
    piped: bytes  # what went to the stream that was not the terminal (if one was piped)

    @property
    def text(self) -> str:
        return self.screen.decode(errors="replace").replace("\r\n", "\n")


def on_terminal(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    columns: int = 100,
    pipe: str | None = None,
    timeout: float = 120,
    keys: Sequence[tuple[bytes | Path | Callable[[], bool], bytes]] = (),
) -> Shown:
    """Run ``bar ARGS`` with stdin, stdout and stderr on a pty of ``columns`` columns;
    ``pipe``: "stdout" or "stderr" goes to a pipe instead. With ``keys``, (when, typed)
    pairs, the pty is bar's controlling terminal, as a developer's is, and each ``typed``
    is typed once ``when`` holds: text on the screen, a file that exists, or a check
    (``b"\\x03"``: Ctrl-C, which the terminal makes a SIGINT to the programs in front)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    full_env = {**os.environ, "TERM": "xterm", **(env or {})}
    full_env.pop("COLUMNS", None)
    streams = {"stdout": slave, "stderr": slave}
    if pipe is not None:
        streams[pipe] = subprocess.PIPE  # type: ignore[assignment]
    proc = subprocess.Popen(
        [BAR_EXE, *args],
        cwd=cwd,
        env=full_env,
        stdin=slave,
        start_new_session=True,
        # (after setsid: the pty becomes the new session's terminal, bar in front)
        preexec_fn=(lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0)) if keys else None,
        **streams,
    )  # type: ignore[call-overload]
    os.close(slave)
    screen = bytearray()
    deadline = time.monotonic() + timeout
    piped = b""
    waiting = list(keys)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    break
                if not chunk:
                    break
                screen += chunk
            if waiting and _holds(waiting[0][0], bytes(screen)):
                os.write(master, waiting.pop(0)[1])
            elif proc.poll() is not None and not select.select([master], [], [], 0.2)[0]:
                break  # bar is gone and nothing is left to read (a child may hold the pty)
        if pipe is not None:
            out = proc.stdout if pipe == "stdout" else proc.stderr
            assert out is not None
            piped = out.read()
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Shown(code, bytes(screen), piped)


def _holds(when: bytes | Path | Callable[[], bool], screen: bytes) -> bool:
    if isinstance(when, bytes):
        return when in screen
    if isinstance(when, Path):
        return when.exists()
    return when()
