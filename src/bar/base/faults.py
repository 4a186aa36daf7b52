"""Crash points for the fault-injection tests.

``BAR_FAULT_AT=N`` makes bar kill itself with SIGKILL at the Nth crash point it passes
(``BAR_FAULT_AT=LABEL``: at the first point of that label, ``LABEL@K``: at its Kth, for
a test whose earlier points vary with timing, such as a rescan's stamps);
``BAR_FAULT_TRACE=FILE`` appends the label of every point passed to FILE, so a test can
learn how many points a command has and then crash it at each one (a FIFO: act at each,
one line an open: ``_trace``). A crash point sits
before and after every write that matters (state files, ledger lines, artifacts, refs,
worktree restores). Unset, a point costs one comparison.
"""

from __future__ import annotations

import os
import signal
import stat

_AT = 0  # the Nth point passed; -1: at a label (``_LABEL``, its ``_NTH``th); 0: never
_LABEL = ""
_NTH = 1
_TRACE = ""
_passed = 0
_seen = 0  # points of the label passed


def configure() -> None:
    """Read ``BAR_FAULT_AT`` and ``BAR_FAULT_TRACE`` from the environment, no point passed
    yet: at import, and again in a fork of the resident once it took its caller's
    environment (``bar.changes.fast.resident_daemon``), so that a served command stops
    at the same points as one run in its own process."""
    global _AT, _LABEL, _NTH, _TRACE, _passed, _seen
    at = os.environ.get("BAR_FAULT_AT") or ""
    _AT = int(at) if at.isdigit() else -1 if at else 0
    label, _, nth = at.rpartition("@")
    _LABEL, _NTH = (label, int(nth)) if nth.isdigit() and label else (at, 1)
    _TRACE = os.environ.get("BAR_FAULT_TRACE") or ""
    _passed = _seen = 0


configure()


def point(label: str) -> None:
    global _passed, _seen
    if not _AT and not _TRACE:
        return
    _passed += 1
    if _TRACE:
        _trace(f"{_passed} {label}\n".encode())
    if _AT == -1 and label == _LABEL:
        _seen += 1
    if _passed == _AT or (_AT == -1 and label == _LABEL and _seen == _NTH):
        os.kill(os.getpid(), signal.SIGKILL)


def _trace(line: bytes) -> None:
    """Append ``line`` to the trace. A trace that is a FIFO (a test that acts at each
    point) holds bar at the point until its reader has read the line: bar waits in the
    open for a reader, writes, and keeps its end open until the pipe is empty. Had it
    closed at once, its next open could meet a reader that had seen the end of the last
    line's writer but not yet closed: the line then went with that pipe, and bar passed
    the point unheld (a warm bar, served by the resident, did so in one try of ten). A
    reader (the tests' ``drain``) takes one line an open. A reader gone
    between the open and the write: opened again, for the next."""
    while True:
        fd = os.open(_TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                until_read(fd)
            return
        except BrokenPipeError:
            continue
        finally:
            os.close(fd)


def until_read(fd: int) -> None:
    """Wait until the pipe ``fd`` writes to holds nothing unread (a reader that comes
    later takes what its writer left while it stays open)."""
    import array
    import fcntl
    import termios
    import time

    unread = array.array("i", [0])
    while True:
        fcntl.ioctl(fd, termios.FIONREAD, unread)
        if unread[0] == 0:
            return
        time.sleep(0.0005)
