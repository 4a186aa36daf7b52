"""What the core tells the user while it works: warnings and notes, one line each.

The core never prints on its own: it calls ``warn``/``note`` here, which write
``bar: warning: …`` / ``bar: …`` to stderr. A face that is not a terminal (the web page,
the MCP server) installs its own sink with ``capture``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bar.base import progress

Sink = Callable[[str, str], None]  # (level, message); level is "warning" or "note"


# control characters but the line break and the tab: a message names files, branches and
# commands a step chose, whose escape sequences must not reach the terminal as such (a
# window title set, the screen cleared, the clipboard written)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _stderr(level: str, message: str) -> None:
    prefix = "bar: warning: " if level == "warning" else "bar: "
    progress.clear()  # a progress line is rewritten in place: not under this one
    shown = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", message)
    print(prefix + shown, file=sys.stderr, flush=True)


_sinks: list[Sink] = [_stderr]


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``, ``2 entries``: a count and its noun, for a message."""
    if n == 1:
        return f"{n} {word}"
    if len(word) > 1 and word[-1] == "y" and word[-2] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}s"


def byte_size(n: int) -> str:
    """``n`` bytes for a person: 512 B, 4.0 KiB, 1.5 MiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def exact_size(n: int) -> str:
    """``n`` bytes as a person would set them, exactly: 1 GiB, 2 KB, 1,500 bytes (a limit
    said back to whoever set it, where ``byte_size`` would round 2 KB to 2.0 KiB)."""
    for unit, name in ((1 << 30, "GiB"), (10**9, "GB"), (1 << 20, "MiB"), (10**6, "MB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    for unit, name in ((1 << 10, "KiB"), (10**3, "KB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit:,} {name}"
    return f"{n:,} byte" + ("s" if n != 1 else "")


def brief(text: str, *, lines: int = 10, width: int = 200) -> str:
    """What another program said, cut to what a terminal can show: at most ``lines``
    lines (then how many more there were), each at most ``width`` characters, its middle
    left out (a path thousands of directories deep said once per level)."""
    said = text.strip().splitlines()
    kept = [
        line if len(line) <= width else f"{line[: width // 2]}…{line[-(width // 2) :]}"
        for line in said[:lines]
    ]
    if len(said) > lines:
        kept.append(f"… and {plural(len(said) - lines, 'more line')}")
    return "\n".join(kept)


def warn(message: str) -> None:
    _sinks[-1]("warning", message)


def note(message: str) -> None:
    _sinks[-1]("note", message)


@contextmanager
def capture(sink: Sink) -> Iterator[None]:
    """Send notices to ``sink`` instead of stderr while the block runs."""
    _sinks.append(sink)
    try:
        yield
    finally:
        _sinks.remove(sink)


@contextmanager
def held(*prefixes: str) -> Iterator[list[tuple[str, str]]]:
    """Hold back the notices that begin with one of ``prefixes`` while the block runs
    (what the caller says itself, in its own words), in the list it is given (level,
    message: for ``say`` once the block is left, if the caller must say them after
    all); the others go where they went."""
    below = _sinks[-1]
    kept: list[tuple[str, str]] = []

    def sink(level: str, message: str) -> None:
        if message.startswith(prefixes):
            kept.append((level, message))
        else:
            below(level, message)

    with capture(sink):
        yield kept


def say(notices: list[tuple[str, str]]) -> None:
    """Say the notices ``held`` kept back."""
    for level, message in notices:
        _sinks[-1](level, message)
