"""A signal a command's process missed because it came while the process was being started.

A shell forks each command it runs, and the child runs the shell's own code until it
execs the program. A signal sent to the process group in that moment is taken by the
shell's handler, which in the child does nothing (dash, the usual ``/bin/sh``, forks with
``vfork`` and drops a signal caught in the child); the program then starts with the
signal's default action and never sees it. So a Ctrl-C typed as a script starts its next
command (``sh -c 'echo started; sleep 60'`` just after ``started``) is lost: the shell got
it, and waits for its command, which runs to its end. A terminal loses it the same way.

bar, which records the step as stopped by the signal, gives it again to those that
missed it: ``Sent`` notes which processes of the command were in the group when the
signal went, and ``resend`` sends it once more to each of them that is still alive a
moment later with the signal's default action (which would have ended it), the signal
neither blocked nor pending. A process that caught the signal (a shell, an agent) or
ignores it is never sent it twice.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable

_LOOK_FOR = 2.0  # seconds after the signal during which those that missed it are sought
_EVERY = 0.05  # seconds between two looks
_ENDED = ("Z", "X", "x")  # the states of a process that has ended


class Sent:
    """A signal sent to ``pids``: those of them that missed it are given it again."""

    def __init__(self, signum: int, pids: Iterable[int]) -> None:
        self.signum = signum
        self.at = time.monotonic()
        self._looked = 0.0
        self.members = {pid: start for pid in pids if (start := _started(pid)) is not None}
        self.resent: list[int] = []

    def resend(self) -> bool:
        """Send the signal to those that missed it; False once nothing is left to look at."""
        now = time.monotonic()
        if now - self.at > _LOOK_FOR:
            self.members.clear()
        if now - self._looked < _EVERY:
            return bool(self.members)
        self._looked = now
        for pid, start in list(self.members.items()):
            missed = _missed(pid, start, self.signum)
            if missed is None:  # gone (or its pid taken by another)
                del self.members[pid]
            elif missed:
                del self.members[pid]
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, self.signum)
                    self.resent.append(pid)
        return bool(self.members)


def members(group: int, under: int) -> list[int]:
    """The processes of the process group ``group`` that are ``under`` or below it."""
    parents: dict[int, int] = {}
    in_group: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat(int(name))
        if fields is None:
            continue
        parents[int(name)] = int(fields[1])
        if int(fields[2]) == group:
            in_group.append(int(name))
    found = []
    for pid in in_group:
        seen, at = 0, pid
        while at > 1 and at != under and seen < 1000:
            at, seen = parents.get(at, 0), seen + 1
        if at == under:
            found.append(pid)
    return found


def ended(pid: int) -> bool:
    """Whether ``pid``, a child not yet waited for, has ended: a signal sent to it now
    stops nothing. (False when ``/proc`` cannot tell.)"""
    fields = _stat(pid)
    return fields is not None and fields[0] in _ENDED


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].decode("ascii", "replace").split()


def _started(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields is not None else None


def _missed(pid: int, start: int, signum: int) -> bool | None:
    """Whether ``pid`` is alive with ``signum``'s default action (it would have ended it)
    and the signal neither blocked nor waiting; None if it is gone."""
    fields = _stat(pid)
    if fields is None or int(fields[19]) != start or fields[0] in _ENDED:
        return None
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read().decode("ascii", "replace")
    except OSError:
        return None
    bit = 1 << (signum - 1)
    masks = {"SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in masks and int(value.strip(), 16) & bit:
            return False
    return True
