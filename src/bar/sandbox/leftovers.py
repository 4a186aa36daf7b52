"""Processes a confined step leaves running are stopped when it ends.

A command can start a process that outlives it (``setsid cmd &``, a daemon). Left alone,
such a process keeps the step's rights after the step is recorded: it could edit the
worktree between steps (which would then read as the developer's hand edits) or race
bar's checks of the files it may write. So ``bar run`` makes itself a *child subreaper*
before a confined step: whatever the command leaves behind is re-parented to ``bar run``
rather than to init, and when the command ends, ``stop`` kills it (and what it started),
as a container's processes end with the container. Each command's holder
(``bar.sandbox.holder``) does so first, and also when bar dies; this is what is left when
the holder itself was killed.

Only the step's own processes are stopped: children of this process that started after
the step did and carry the confinement's ``no_new_privs`` mark. bar used as a library
may have children of its own; they are neither killed nor reaped here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 50  # a process that forks as fast as it is killed is stopped in time anyway
# seconds: /proc counts start times in clock ticks (10 ms), floored; a process that
# started earlier than that before the step (one another step left, in bar used as a
# library, a long-lived process) is not the step's
_SLACK = 0.05


def become_subreaper() -> float:
    """Adopt orphans from now on; returns the moment to pass to ``stop``."""
    from bar.sandbox import landlock

    with contextlib.suppress(OSError, AttributeError):
        landlock.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def stop(since: float) -> list[int]:
    """Kill the step's processes still running as children of this one (each round
    re-parents the next generation to us); returns their pids. With no child at all, the
    usual case, it costs one system call."""
    stopped: list[int] = []
    for _ in range(_ROUNDS):
        try:  # WNOWAIT: look, reap nothing that is not ours to reap
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return stopped
        children = _step_children(since)
        alive = [pid for pid, state in children if state != b"Z"]
        for pid in (p for p, state in children if state == b"Z"):  # ended already: reaped,
            with contextlib.suppress(ChildProcessError):  # not counted as stopped
                os.waitpid(pid, 0)
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


def _step_children(since: float) -> list[tuple[int, bytes]]:
    """The step's processes that are children of this one, with their state (``Z``: a
    zombie, ended and not reaped yet)."""
    me = os.getpid()
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    listed = child_pids()
    for name in listed if listed is not None else os.listdir("/proc"):
        fields = stat_fields(name) if name.isdigit() else None
        if fields is None or len(fields) < 20 or int(fields[1]) != me:
            continue
        if int(fields[19]) / ticks < since - _SLACK:  # started before the step
            continue
        if _confined(name) or fields[0] == b"Z":  # (a zombie's status is no longer read)
            found.append((int(name), fields[0]))
    return found


def child_pids() -> list[str] | None:
    """This process's children (their pids), as the kernel lists them for each of its
    threads (an orphan is re-parented to any thread of a subreaper): a few reads, where
    going through ``/proc`` reads one file for every process of the machine (hundreds on a
    developer's, each step). None where the kernel keeps no such list
    (``CONFIG_PROC_CHILDREN``): ``/proc`` is read whole. A process forked while the lists
    are read may be missing from them, as from a read of ``/proc``: ``stop`` looks again
    until a look finds none alive."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return None
    found: list[str] = []
    read = False
    for thread in threads:
        try:
            with open(f"/proc/self/task/{thread}/children", "rb") as f:
                found += [pid.decode() for pid in f.read().split()]
            read = True
        except (FileNotFoundError, ProcessLookupError):
            continue  # (a thread that ended meanwhile; or no list kept: none is read)
        except OSError:  # (a list the kernel would not let bar read: not known)
            return None
    return found if read else None


def stat_fields(pid: str | int) -> list[bytes] | None:
    """``/proc/PID/stat`` after the command name: state, ppid, ... (the 3rd field on)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()  # the name may hold spaces and parentheses


def _confined(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return b"\nNoNewPrivs:\t1" in f.read()
    except OSError:
        return False
