"""Crash points for the fault-injection tests.

``BAR_FAULT_AT=N`` makes bar kill itself with SIGKILL at the Nth crash point it passes
(``BAR_FAULT_AT=LABEL``: at the first point of that label, ``LABEL@K``: at its Kth, for
a test whose earlier points vary with timing, such as a rescan's stamps);
``BAR_FAULT_TRACE=FILE`` appends the label of every point passed to FILE, so a test can
learn how many points a command has and then crash it at each one (a FIFO: act at each). A crash point sits
before and after every write that matters (state files, ledger lines, artifacts, refs,
worktree restores). Unset, a point costs one comparison.
"""

from __future__ import annotations

import os
import signal

_AT_TEXT = os.environ.get("BAR_FAULT_AT") or ""
_AT = int(_AT_TEXT) if _AT_TEXT.isdigit() else -1 if _AT_TEXT else 0  # -1: at a label
_LABEL, _, _NTH = _AT_TEXT.rpartition("@")
if not (_NTH.isdigit() and _LABEL):
    _LABEL, _NTH = _AT_TEXT, "1"
_TRACE = os.environ.get("BAR_FAULT_TRACE") or ""
_passed = 0
_seen = 0  # points of the label passed


def point(label: str) -> None:
    global _passed, _seen
    if not _AT and not _TRACE:
        return
    _passed += 1
    if _TRACE:
        _trace(f"{_passed} {label}\n".encode())
    if _AT == -1 and label == _LABEL:
        _seen += 1
    if _passed == _AT or (_AT == -1 and label == _LABEL and _seen == int(_NTH)):
        os.kill(os.getpid(), signal.SIGKILL)


def _trace(line: bytes) -> None:
    """Append ``line`` to the trace. A trace that is a FIFO (a test that acts at each
    point: bar waits in the open until it reads) may lose its reader between the open and
    the write: it is opened again, for the next reader."""
    while True:
        fd = os.open(_TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            return
        except BrokenPipeError:
            continue
        finally:
            os.close(fd)
