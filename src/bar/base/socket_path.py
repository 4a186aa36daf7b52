"""A Unix socket's path, usable with bind and connect however long it is.

The kernel takes at most 107 bytes of a socket's path; a task's sockets live deep in
the bar home. A longer path is reached through the directory holding it, opened, as
``/proc/self/fd/N/name``.
"""

from __future__ import annotations

import os

_SHORT_ENOUGH = 100


class Address:
    """A socket path usable with bind/connect however long it is (close it after)."""

    def __init__(self, path: str) -> None:
        self._fd: int | None = None
        if len(path.encode()) < _SHORT_ENOUGH:
            self.name = path
            return
        folder, base = os.path.split(path)
        self._fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        self.name = f"/proc/self/fd/{self._fd}/{base}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
