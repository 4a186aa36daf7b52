"""Standard streams that fail while bar records.

A command that records (``bar run``, ``rollback``, ``apply``, ...) must finish its record
whatever happens to its reader: ``bar run -- make 2>&1 | head -1`` closes the pipe after
one line, and the next message bar prints would raise ``BrokenPipeError`` in the middle
of recording the step. ``keep_recording`` gives such a command standard streams that,
once their reader has gone, write to ``/dev/null`` instead (the descriptor itself is
moved there, so the command's own children and bar's later writes go there too).
Descriptors closed before bar started (``2>&-``) are opened on ``/dev/null`` by
``bar.cli.entry``, the first code bar runs, as git does for its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class _Steadfast:
    """A text stream that survives its reader: a write that finds the pipe broken moves
    the descriptor onto ``/dev/null`` and the text goes there. Everything else is the
    stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        try:
            return self._stream.write(s)
        except BrokenPipeError:
            _to_null(self._stream.fileno())
            return len(s)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _to_null(self._stream.fileno())
            with contextlib.suppress(OSError):
                self._stream.flush()  # (what was buffered goes to /dev/null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _to_null(fd: int) -> None:
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, fd, inheritable=True)
    finally:
        os.close(null)


@contextlib.contextmanager
def keep_recording() -> Iterator[None]:
    """While it lasts, ``sys.stdout`` and ``sys.stderr`` are steadfast."""
    saved = sys.stdout, sys.stderr
    for name, stream in zip(("stdout", "stderr"), saved, strict=True):
        if stream is not None and not isinstance(stream, _Steadfast):
            setattr(sys, name, _Steadfast(stream))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved
