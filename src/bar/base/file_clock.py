"""The clock the kernel stamps a changed file with, and what its readings bound.

Linux gives a file it changes the time of its coarse real-time clock (a tick of a few
milliseconds), or a later one: a file whose times were read since it last changed gets
the real-time clock itself (multigrain timestamps, Linux 6.13), and every file changed
after it at least that time. Never a time later than the real-time clock. So:

- ``floor``: no file changed from now on gets an earlier time;
- ``ceiling``: no file changed so far has a later time;
- ``tick_after(ceiling())`` parts the two: a file changed before the ceiling was read
  has an earlier time than the tick it returns; one changed once it has returned, that
  tick or a later one.

A bound taken from the coarse clock alone is not one: a file changed a moment before it
was read may have a later time (a fine one), and be taken for a change made after.
"""

from __future__ import annotations

import sys
import time

# CLOCK_REALTIME_COARSE (not named by Python); elsewhere the real-time clock
_COARSE = 5 if sys.platform.startswith("linux") else time.CLOCK_REALTIME


def floor() -> int:
    """A time no file changed from now on is stamped earlier than (ns)."""
    return time.clock_gettime_ns(_COARSE)


def ceiling() -> int:
    """A time no file changed so far is stamped later than (ns)."""
    return time.time_ns()


def tick_after(after: int, *, spin: bool = False, wait: float = 0.05) -> int:
    """The first tick of the coarse clock later than ``after`` (waited for, ``wait``
    seconds at most: else ``after``). ``spin``: without sleeping, so that it is returned
    within microseconds of its coming."""
    deadline = time.monotonic() + wait
    tick = floor()
    while tick <= after and time.monotonic() < deadline:
        if not spin:
            time.sleep(0.0005)
        tick = floor()
    return tick if tick > after else after
