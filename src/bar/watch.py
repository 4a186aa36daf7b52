"""Which files in a few directories changed while a step ran, from the kernel (inotify).

Statting every file after a step costs microseconds per file; asking the kernel to say
what changed costs nothing per file. A ``Watch`` over some directories (not their
subdirectories) collects the names of entries created, written, moved in or whose
attributes changed, until ``changes`` reads them. It answers None where it cannot be
sure (no inotify, a directory that could not be watched, the kernel's event queue
overflowed): the caller then looks at everything.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading
from collections.abc import Iterable

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_Q_OVERFLOW = 0x4000
_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE
_EVENT = struct.Struct("iIII")


class Watch:
    """``Watch(dirs)`` starts watching; ``changes()`` says what changed since (or None)."""

    def __init__(self, dirs: Iterable[str]) -> None:
        self._fd = -1
        self._dirs: dict[int, str] = {}
        self._complete = False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        self._fd = fd
        self._complete = True
        for path in dirs:
            wd = libc.inotify_add_watch(fd, os.fsencode(path), _MASK)
            if wd < 0:
                self._complete = False
                break
            self._dirs[wd] = path

    def changes(self) -> set[str] | None:
        """Paths (``dir/name``) changed since the watch began; None if not known."""
        if self._fd < 0:
            return None
        found: set[str] = set()
        try:
            while True:
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                offset = 0
                while offset + _EVENT.size <= len(data):
                    wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                    offset += _EVENT.size
                    name = data[offset : offset + size].rstrip(b"\0")
                    offset += size
                    if mask & _IN_Q_OVERFLOW:
                        self._complete = False
                    elif wd in self._dirs and name:
                        found.add(os.path.join(self._dirs[wd], os.fsdecode(name)))
        finally:
            self.close()
        return found if self._complete else None

    def close(self) -> None:
        """Let go of the kernel's watch. Closing an inotify descriptor waits for the
        kernel's read-side grace period (often over 10 ms here): a thread does it while
        bar goes on."""
        if self._fd >= 0:
            threading.Thread(target=_close, args=(self._fd,), daemon=True).start()
            self._fd = -1


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
