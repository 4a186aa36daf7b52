"""Whether anything was mounted or unmounted over a directory tree, from the kernel.

Mounting a file system on a directory of a watched worktree, or unmounting one, makes no
inotify or fanotify event: the watch stays on the directory underneath, and what is
written in the mounted file system reaches no watch. ``MountWatch`` keeps the mount
points at, under or above a root (the mount's id with each, so that an unmount and a
mount at the same place differ), and says when they changed. It asks the kernel first:
``/proc/self/mountinfo`` reports any change of the mount table as a priority event
(``POLLPRI``), so the table is read again only when something was mounted somewhere.
"""

from __future__ import annotations

import contextlib
import os
import select

_MOUNTINFO = "/proc/self/mountinfo"

Points = frozenset[tuple[int, str]]  # (mount id, mount point)


class MountWatch:
    """``MountWatch(root)`` notes the mounts that bear on ``root``; ``moved()`` says
    whether they changed since (True where it cannot tell)."""

    def __init__(self, root: str, points: Points | None = None) -> None:
        self._root = os.path.realpath(root)
        self._fd = -1
        self._points: Points | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open(_MOUNTINFO, os.O_RDONLY | os.O_CLOEXEC)
            now = self._read()
            # (a table noted by another process, handed over: what changed since counts)
            self._points = now if points is None or now == points else None

    @property
    def points(self) -> Points | None:
        """The mount points noted (None: not known)."""
        return self._points

    def moved(self) -> bool:
        """Whether a mount point at, under or above the root came or went since the last
        call (or since it began)."""
        if self._fd < 0 or self._points is None:
            return True
        poll = select.poll()
        poll.register(self._fd, select.POLLPRI)
        if not poll.poll(0):
            return False
        try:
            now = self._read()
        except OSError:
            self._points = None
            return True
        if now == self._points:
            return False  # (a mount elsewhere)
        self._points = None  # (never sure again: the watch is on the wrong directories)
        return True

    def _read(self) -> Points:
        os.lseek(self._fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self._fd, 65536):
            chunks.append(chunk)
        root = self._root
        found = set()
        for line in b"".join(chunks).split(b"\n"):
            fields = line.split(b" ", 5)
            if len(fields) < 5 or not fields[0].isdigit():
                continue
            point = _unescape(fields[4])
            if (
                point == root
                or point.startswith(root + "/")
                or root.startswith(point.rstrip("/") + "/")
            ):
                found.add((int(fields[0]), point))
        return frozenset(found)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def _unescape(field: bytes) -> str:
    """A mount point as mountinfo writes it (space, tab, newline and backslash as octal
    escapes)."""
    if b"\\" in field:
        for code in (b"\\040", b"\\011", b"\\012", b"\\134"):
            field = field.replace(code, bytes((int(code[1:], 8),)))
    return os.fsdecode(field)
