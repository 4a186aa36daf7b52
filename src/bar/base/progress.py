"""What a long operation is doing, on one line of stderr that is rewritten in place.

``bar doctor`` over hundreds of tasks, an apply that writes thousands of files into the
checkout, closing a large worktree: each says what it is at (``doctor: checking task
37/200 fix-login``), overwriting the line with ``\\r``, and clears it when done, so
nothing is left behind on the screen. Only when stderr is a terminal, and never for a
command that prints JSON (``configure``): a script or a log file gets nothing of it.
A warning printed meanwhile (``bar.base.notices``) clears the line first.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType

_INTERVAL = 0.1  # seconds between redraws of a counter

_state: dict[str, bool] = {"enabled": True, "showing": False}


def configure(*, enabled: bool) -> None:
    """``enabled`` False: show no progress (``--json``). Set for each command line."""
    _state["enabled"] = enabled


def clear() -> None:
    """Remove the progress line, if one is shown (before other text goes to stderr)."""
    if _state["showing"]:
        _state["showing"] = False
        _write("\r\033[K")


def _write(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 80


def _terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, OSError, ValueError):
        return False


class Progress:
    """``with Progress("doctor: checking task", total) as p: p.update(i, name)``.

    ``update`` with a count is redrawn at most every 0.1 s; without one (a new phase:
    ``p.update(detail="removing the worktree")``) at once."""

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label = label
        self.total = total
        self.on = _state["enabled"] and _terminal()
        self._drawn = 0.0

    def update(self, done: int | None = None, detail: str = "") -> None:
        if not self.on:
            return
        now = time.monotonic()
        if done is not None and _state["showing"] and now - self._drawn < _INTERVAL:
            return
        self._drawn = now
        count = f" {done}/{self.total}" if done is not None and self.total else ""
        line = f"{self.label}{count} {detail}".rstrip()
        _write("\r" + line[: max(_width() - 1, 10)] + "\033[K")
        _state["showing"] = True

    def done(self) -> None:
        if self.on:
            clear()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.done()
