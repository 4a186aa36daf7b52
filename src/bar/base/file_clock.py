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
# its tick (the kernel's, 1-10 ms); a close wait sleeps until this long before the next
# is due, then looks every ``_POLL_S``
_TICK_NS = max(int(time.clock_getres(_COARSE) * 1e9), 1)
_SOON_NS = 300_000
_POLL_S = 0.0001


def floor() -> int:
    """A time no file changed from now on is stamped earlier than (ns)."""
    return time.clock_gettime_ns(_COARSE)


def ceiling() -> int:
    """A time no file changed so far is stamped later than (ns)."""
    return time.time_ns()


def tick_after(after: int, *, close: bool = False, wait: float = 0.05) -> int:
    """The first tick of the coarse clock later than ``after`` (waited for, ``wait``
    seconds at most: else ``after``). ``close``: returned within a tenth of a millisecond
    or so of its coming: it sleeps until just before the tick is due (the coarse clock
    reads the time of the last one, the next is a tick later), then looks every 0.1 ms
    (a loop that never slept kept a core busy for most of a tick: ms of every step)."""
    deadline = time.monotonic() + wait
    tick = floor()
    while tick <= after and time.monotonic() < deadline:
        if not close:
            time.sleep(0.0005)
        else:
            early = tick + _TICK_NS - _SOON_NS - time.time_ns()
            time.sleep(min(early, _TICK_NS) / 1e9 if early > 0 else _POLL_S)
        tick = floor()
    return tick if tick > after else after
