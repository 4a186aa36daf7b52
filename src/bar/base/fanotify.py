"""Directory marks from fanotify: a second source of change events when inotify's run out.

inotify charges each watched directory to the user's ``fs.inotify.max_user_watches``;
fanotify charges each mark to ``fs.fanotify.max_user_marks``, a budget of its own. Since
Linux 5.13 a user without privileges may use fanotify too, within limits: marks on
inodes only (not a whole mount or file system), events that name a directory by its
*file handle* and the entry by its name (``FAN_REPORT_DFID_NAME``), a queue of at most
16,384 events. That is what ``Marks`` asks for, so it works the same with or without
privileges.

A ``Marks`` group marks directories (``add``) and reports, for each event, the marked
directory's key (its file handle, as events name it: ``AT_HANDLE_FID`` where the kernel
has it, Linux 6.5), the event's mask and the entry's name (empty for the directory
itself). The key leaves out the file system's id, which a subvolume may report otherwise
than ``statfs`` does: a handle that names two marked directories (of two file systems)
is found when the second is marked, and the caller then treats it as it treats a
directory watched under two names. Its masks use inotify's bit values (fanotify kept
them): ``bar.base.inotify.TreeWatch`` reads both sources with one code. Three things
differ from inotify, and the caller minds them:

- Events of one object are merged while queued (a file created, written and closed is
  one event with three bits); their order is lost, not the names.
- A marked directory's own attribute change (its mode, say) is reported to it, with no
  name; inotify tells its parent's watch, by name.
- A mark is removed by naming its directory, and a directory that moved away cannot be
  named any more: a mark the caller drops is forgotten, not removed. Its events still
  come (under a key the caller no longer knows: ignored), and it counts against the
  user's marks until the group is closed or the directory deleted.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct
import threading
from collections.abc import Iterator

_FAN_CLOEXEC = 0x1
_FAN_NONBLOCK = 0x2
_FAN_REPORT_DIR_FID = 0x400
_FAN_REPORT_NAME = 0x800
_INIT_FLAGS = _FAN_CLOEXEC | _FAN_NONBLOCK | _FAN_REPORT_DIR_FID | _FAN_REPORT_NAME
_FAN_MARK_ADD = 0x1
_FAN_MARK_DONT_FOLLOW = 0x4
_FAN_MARK_ONLYDIR = 0x8
_FAN_EVENT_ON_CHILD = 0x08000000
_FAN_ONDIR = 0x40000000
Q_OVERFLOW = 0x4000
_AT_EMPTY_PATH = 0x1000
_AT_HANDLE_FID = 0x200  # a handle that names the object as fanotify does (Linux 6.5)
_MAX_HANDLE = 128  # bytes (MAX_HANDLE_SZ)
_META = struct.Struct("=IBBHQii")  # fanotify_event_metadata
_INFO = struct.Struct("=BBH")  # fanotify_event_info_header
_HANDLE = struct.Struct("=Ii")  # file_handle: its size and type
_INFO_DFID_NAME = 2
_INFO_DFID = 3


class Marks:
    """A fanotify group marking directories; ``open`` makes one (None where the kernel
    or the user may not), ``adopt`` takes one another process handed over."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self._fd = fd
        self._libc = libc
        self._handle = _Handle(libc)

    @classmethod
    def open(cls) -> Marks | None:
        libc = _libc()
        if libc is None:
            return None
        fd = libc.fanotify_init(_INIT_FLAGS, os.O_RDONLY | os.O_CLOEXEC)
        return cls(fd, libc) if fd >= 0 else None

    @classmethod
    def adopt(cls, fd: int) -> Marks | None:
        libc = _libc()
        return cls(fd, libc) if libc is not None else None

    def add(self, path: str, mask: int) -> bytes:
        """Mark the directory ``path`` (never through a symbolic link) for the events in
        ``mask`` (inotify's bits) on itself and its entries; its key, as events name it.
        Raises OSError: ``ENOTDIR``/``ELOOP`` (not a directory), ``ENOENT`` (gone),
        ``ENOSPC`` (the user's marks ran out), ``EOPNOTSUPP``/``EXDEV``/``ENODEV`` (a file
        system that cannot name its directories by handle)."""
        # the mark and the key from one open directory: the same one, whatever is
        # renamed around it meanwhile
        dir_fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            flags = _FAN_MARK_ADD | _FAN_MARK_DONT_FOLLOW | _FAN_MARK_ONLYDIR
            if self._libc.fanotify_mark(self._fd, flags, _events(mask), dir_fd, b".") < 0:
                raise _error(path)
            return self._handle.of(dir_fd, path)
        finally:
            os.close(dir_fd)

    def read(self) -> Iterator[tuple[bytes, int, str]]:
        """The events queued since the last read: the marked directory's key, the mask
        (``Q_OVERFLOW`` with an empty key: events were lost), the entry's name ("" for
        the directory itself). Raises OSError if the group cannot be read."""
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            offset = 0
            while offset + _META.size <= len(data):
                length, _, _, meta_len, mask, fd, _ = _META.unpack_from(data, offset)
                if length < meta_len:  # (not an event this reader knows: say so)
                    yield b"", Q_OVERFLOW, ""
                    return
                if fd >= 0:  # (never asked for; closed all the same)
                    os.close(fd)
                end, at = offset + length, offset + meta_len
                if mask & Q_OVERFLOW:
                    yield b"", mask, ""
                while at + _INFO.size <= end:
                    kind, _, size = _INFO.unpack_from(data, at)
                    if size == 0:
                        break
                    if kind in (_INFO_DFID_NAME, _INFO_DFID):
                        key, name = _record(data, at + _INFO.size, at + size)
                        yield key, mask, "" if name in ("", ".") else name
                    at += size
                offset = end

    def fileno(self) -> int:
        return self._fd

    def give_up(self) -> int:
        """The group's descriptor, no longer this object's (``close`` leaves it open)."""
        fd, self._fd = self._fd, -1
        return fd

    def close(self) -> None:
        """Let go of the group and every mark. Like inotify's, closing waits for the
        kernel's grace period: a thread does it."""
        if self._fd >= 0:
            threading.Thread(target=_close, args=(self._fd,), daemon=True).start()
            self._fd = -1


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fanotify_init.argtypes = (ctypes.c_uint, ctypes.c_uint)
        libc.fanotify_mark.argtypes = (
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint64,
            ctypes.c_int,
            ctypes.c_char_p,
        )
        libc.name_to_handle_at.argtypes = (
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
        )
    except (OSError, AttributeError):
        return None
    return libc


def _events(mask: int) -> int:
    """fanotify's mask for inotify's ``mask``: the same bits, for the directory's entries
    (directories among them) as well as for itself."""
    return (mask & 0x0FFF) | _FAN_EVENT_ON_CHILD | _FAN_ONDIR


def _error(path: str) -> OSError:
    err = ctypes.get_errno() or errno.EIO
    return OSError(err, os.strerror(err), path)


_handle_flags = [_AT_EMPTY_PATH | _AT_HANDLE_FID]  # (without the second before Linux 6.5)


class _Handle:
    """Reads directories' file handles into one buffer (one per group, used by one
    thread)."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._call = libc.name_to_handle_at
        self._buf = ctypes.create_string_buffer(_HANDLE.size + _MAX_HANDLE)
        self._mount = ctypes.c_int()
        self._mount_ref = ctypes.byref(self._mount)

    def of(self, fd: int, path: str) -> bytes:
        """The directory's file handle, as events carry it (its type, then its bytes)."""
        buf = self._buf
        while True:
            _HANDLE.pack_into(buf, 0, _MAX_HANDLE, 0)
            flags = _handle_flags[0]
            if self._call(fd, b"", buf, self._mount_ref, flags) >= 0:
                break
            if ctypes.get_errno() == errno.EINVAL and flags & _AT_HANDLE_FID:
                _handle_flags[0] = _AT_EMPTY_PATH
                continue
            raise _error(path)
        size, _ = _HANDLE.unpack_from(buf)
        return buf.raw[4 : _HANDLE.size + size]  # (its type, then its bytes)


def _record(data: bytes, at: int, end: int) -> tuple[bytes, str]:
    """A directory's key and an entry's name from an info record's body (after its
    header: the file system's id, the file handle, then the name, NUL-terminated)."""
    size, _ = _HANDLE.unpack_from(data, at + 8)
    end_of_handle = at + 8 + _HANDLE.size + size
    name = data[end_of_handle:end].split(b"\0", 1)[0]
    return data[at + 12 : end_of_handle], os.fsdecode(name)  # (its type, then its bytes)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
