"""Processes a confined step leaves running are stopped when it ends.

A command can start a process that outlives it (``setsid cmd &``, a daemon). Left alone,
such a process keeps the step's rights after the step is recorded: it could edit the
worktree between steps (which would then read as the developer's hand edits) or race
bar's checks of the files it may write. So ``bar run`` makes itself a *child subreaper*
before a confined step: whatever the command leaves behind is re-parented to ``bar run``
rather than to init, and when the command ends, ``stop`` kills it (and what it started),
as a container's processes end with the container.
"""

from __future__ import annotations

import contextlib
import os
import signal

_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 50  # a process that forks as fast as it is killed is stopped in time anyway


def become_subreaper() -> None:
    from bar.sandbox import landlock

    with contextlib.suppress(OSError, AttributeError):
        landlock.prctl(_PR_SET_CHILD_SUBREAPER, 1)


def stop() -> list[int]:
    """Kill every process still a child of this one (each round re-parents the next
    generation to us); returns their pids. Costs one ``waitpid`` when there are none."""
    stopped: list[int] = []
    for _ in range(_ROUNDS):
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return stopped  # no children at all: the usual case
        if pid:
            continue  # an orphan that had already ended, now reaped
        alive = _children()
        if not alive:
            return stopped
        for child in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        for child in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
        stopped += alive
    return stopped


def _children() -> list[int]:
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found
