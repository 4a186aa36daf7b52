"""Time as bar records it: ISO 8601 UTC with a ``Z``, to the millisecond."""

from __future__ import annotations

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


def seconds_of(iso: str) -> float:
    """Seconds since the epoch of a time bar wrote (``ValueError`` if it is not one)."""
    return _seconds(iso)


def _seconds(iso: str) -> float:
    """Seconds since the epoch of ``YYYY-MM-DDTHH:MM:SS[.fff]Z`` (UTC). Read by hand:
    ``time.strptime`` imports ``_strptime``, ``calendar``, ``datetime`` and ``locale``,
    which cost ``bar run`` more than the rest of its clock."""
    main, _, fraction = iso.rstrip("Z").partition(".")
    parts = (main[0:4], main[5:7], main[8:10], main[11:13], main[14:16], main[17:19])
    if (
        len(main) != 19
        or main[4::3] != "--T::"
        or not all(p.isascii() and p.isdigit() for p in parts)
    ):
        raise ValueError(f"not a time bar wrote: {iso!r}")
    year, month, day, hour, minute, second = map(int, parts)
    if not (
        1 <= month <= 12
        and 1 <= day <= _month_days(year, month)
        and hour < 24
        and minute < 60
        and second < 62
    ):
        raise ValueError(f"not a time bar wrote: {iso!r}")
    whole = _days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return whole + (float("0." + fraction) if fraction.isdigit() else 0.0)


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_since_epoch(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the civil
    calendar counted from March, so that the leap day ends the year)."""
    year -= month <= 2
    era, year_of_era = divmod(year, 400)
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def duration_text(ms: int) -> str:
    """A length of time as a person says it, the one way every face shows one: "45 ms"
    below a tenth of a second, then "0.6 s", "12.3 s", "1 min 12 s", "2 h 3 min" (each
    to the nearest unit it shows, carried up: 59,960 ms is "1 min", never "60.0 s")."""
    ms = max(0, ms)
    if ms < 100:
        return f"{ms} ms"
    tenths = (ms + 50) // 100
    if tenths < 600:
        return f"{tenths // 10}.{tenths % 10} s"
    seconds = (ms + 500) // 1000
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod((ms + 30_000) // 60_000, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"
