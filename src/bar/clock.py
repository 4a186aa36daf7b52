"""Time as bar records it: ISO 8601 UTC with a ``Z``, to the millisecond."""

from __future__ import annotations

import calendar
import time


def now_iso() -> str:
    """The current time, so that records made within one second still sort in order."""
    return iso_of(time.time_ns())


def iso_of(ns: int) -> str:
    """A ``time.time_ns()`` reading (or a file's ``st_mtime_ns``) as ``now_iso`` writes it."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1_000_000:03d}Z"


def ms_since(start: float) -> int:
    """Milliseconds since ``start``, a ``time.monotonic()`` reading."""
    return int((time.monotonic() - start) * 1000)


def ms_between(start_iso: str, end_iso: str) -> int:
    """Milliseconds from one ``now_iso()`` time to another (0 if either is unreadable)."""
    try:
        return max(0, round((_seconds(end_iso) - _seconds(start_iso)) * 1000))
    except ValueError:
        return 0


def _seconds(iso: str) -> float:
    main, _, fraction = iso.rstrip("Z").partition(".")
    whole = calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S"))
    return whole + (float("0." + fraction) if fraction.isdigit() else 0.0)
