"""Locks that cannot go stale.

A lock is an ``flock`` on a file: the kernel releases it when its holder dies, however it
dies, so a crashed bar never leaves a task locked. The holder writes its pid and what it is
doing into the file so that a waiting process can say whom it waits for. A waiter says so
on stderr after a moment and gives up with ``Locked`` after the timeout (``--no-wait``: at
once). What it is doing (``bar run`` and the command) is scrubbed of every secret the
process knows: the file outlives a killed holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from bar.errors import Locked
from bar.redact import known as known_secrets
from bar.store.files import FILE_MODE

DEFAULT_TIMEOUT = 600.0
_NOTICE_AFTER = 1.0
# how long even ``--no-wait`` waits for a lock whose holder has died: what it started
# (a step's holder, ``bar.sandbox.holder``) ends every process of the step and lets go
# once it sees its bar gone, which takes it some milliseconds
_RELEASE_GRACE = 2.0


def lock_timeout() -> float:
    value = os.environ.get("BAR_LOCK_TIMEOUT")
    try:
        return float(value) if value else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


def describe_holder(path: Path) -> str:
    """Who holds the lock at ``path``, as a waiter says it: the pid and command its
    holder wrote, and, where that bar has exited, the processes still holding it (a
    step's, which keep the lock of a killed bar until they end: ``held_descriptors``)."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    pid, what = (info.get("pid"), info.get("what")) if isinstance(info, dict) else (None, None)
    what = _printable(str(what)) if what else ""
    said = f"pid {pid}" + (f" ({what})" if what else "") if pid else "another bar process"
    if isinstance(pid, int) and _alive(pid):
        return said
    left = [p for p in _openers(path) if p != os.getpid()]
    if not left:
        return said
    shown = ", ".join(f"pid {p} ({_command(p)})" for p in left[:3])
    more = f" and {len(left) - 3} more" if len(left) > 3 else ""
    return f"{said}, which has exited; what it started still holds it: {shown}{more}"


def _holder_died(path: Path) -> bool:
    """Whether the bar that wrote its pid into the lock at ``path`` has exited."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return False
    pid = info.get("pid") if isinstance(info, dict) else None
    return isinstance(pid, int) and pid > 0 and not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # (another user's: alive)
    return True


def _openers(path: Path) -> list[int]:
    """The processes that have the file at ``path`` open (read from ``/proc``, of the
    processes this user may look into); only asked when a lock's holder is gone."""
    try:
        want = os.stat(path)
        pids = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return []
    found = []
    for pid in pids:
        try:
            fds = os.scandir(f"/proc/{pid}/fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    st = os.stat(fd.path)
                except OSError:
                    continue
                if (st.st_ino, st.st_dev) == (want.st_ino, want.st_dev):
                    found.append(pid)
                    break
    return found


def _command(pid: int) -> str:
    """A process's command line, short and scrubbed of the secrets this process knows."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return "gone"
    text = _printable(known_secrets.scrub(" ".join(w.decode(errors="replace") for w in words)))
    return text if len(text) <= 60 else text[:57] + "..."


def _printable(text: str) -> str:
    """``text`` with what a terminal would act on (escapes, newlines) shown as ``?``: a
    step's process names itself as it likes, and a waiter prints it."""
    return "".join(c if c.isprintable() else "?" for c in text)


def is_locked(path: Path) -> bool:
    """True when some live process holds the lock at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def held_descriptors() -> tuple[int, ...]:
    """The descriptors of every lock this process holds: a step's holder keeps them
    open until the step's processes are gone (``bar.sandbox.holder``), so a lock of a
    bar that was killed passes to no one while what it started still runs."""
    return tuple(FileLock._held.values())


class FileLock:
    """``with FileLock(path, "task abc", what="bar run"):`` — exclusive, re-entrant per process."""

    _held: ClassVar[dict[str, int]] = {}

    def __init__(
        self,
        path: Path,
        label: str,
        *,
        what: str = "",
        wait: bool = True,
        timeout: float | None = None,
    ) -> None:
        self.path = path
        self.label = label
        self.what = what
        self.wait = wait
        self.timeout = lock_timeout() if timeout is None else timeout
        self._fd: int | None = None
        self._reentered = False

    def __enter__(self) -> FileLock:
        key = str(self.path)
        if key in FileLock._held:
            self._reentered = True
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        start = time.monotonic()
        noticed = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - start
                if not self.wait and waited < _RELEASE_GRACE and _holder_died(self.path):
                    time.sleep(0.01)  # (not busy: being let go)
                    continue
                if not self.wait or waited >= self.timeout:
                    holder = describe_holder(self.path)
                    os.close(fd)
                    raise Locked(
                        f"{self.label} is busy: locked by {holder}",
                        hint=(
                            "wait for it to finish, or run again without --no-wait"
                            if not self.wait
                            else f"gave up after {self.timeout:.0f} s; "
                            "set BAR_LOCK_TIMEOUT to wait longer"
                        ),
                    ) from None
                if not noticed and waited >= _NOTICE_AFTER:
                    noticed = True
                    print(
                        f"bar: waiting for {self.label} "
                        f"(locked by {describe_holder(self.path)})...",
                        file=sys.stderr,
                        flush=True,
                    )
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        what = known_secrets.scrub(self.what) if self.what else ""
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what}).encode(), 0)
        self._fd = fd
        FileLock._held[key] = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._reentered or self._fd is None:
            return
        FileLock._held.pop(str(self.path), None)
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
