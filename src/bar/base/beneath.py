"""Files under a root, reached without following a link on the way.

bar runs unconfined, yet acts on what a confined step left in its worktree: a path that
was a directory when bar looked may be a link to ``$HOME`` a microsecond later (the step
can swap the two atomically with ``renameat2(RENAME_EXCHANGE)``, as often as it likes).
``open(worktree / path)`` would then write the developer's file. So bar opens a path of
a worktree only through this module, which never follows a link, on the way or at the
end, and never leaves the root:

- ``openat2`` (Linux 5.6) with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS``: the kernel resolves the whole path and refuses any link;
- elsewhere, component by component from the root's descriptor, each directory opened
  ``O_PATH | O_DIRECTORY | O_NOFOLLOW`` relative to the one before, and the last
  component ``O_NOFOLLOW``: a link swapped in between two components is refused all
  the same, since each step resolves one name in a directory already held.

A link on the way raises ``LinkOnTheWay`` (an ``OSError``): the caller leaves that path
alone. ``..``, an empty component or an absolute path are refused as links are.
(``bar.store.files.read_beneath`` reads a file this way.) A file bar puts in such a
folder is a new one of its own, renamed into place (``replace_at``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Any, NoReturn

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every architecture Linux gave it (5.6)
# a descriptor that only names a place (Linux); elsewhere one opened for reading
O_PATH: int = getattr(os, "O_PATH", os.O_RDONLY)
# set to make bar act as if the kernel had no openat2 (to try the fallback)
NO_OPENAT2_ENV = "BAR_NO_OPENAT2"


class LinkOnTheWay(OSError):
    """The path leads through a link, out of the root, or through something that is no
    directory where it names one (a link opened without being followed says so too)."""


_have_openat2: bool | None = None
_openat2: Any = None  # (made at the first use: ``bar hook`` loads this module, not ctypes)


def _openat2_call(top: int, path: bytes, flags: int, mode: int, resolve: int) -> int:
    """``openat2(top, path, {flags, mode, resolve})``: a descriptor, or -errno."""
    global _openat2
    if _openat2 is None:
        import ctypes

        class OpenHow(ctypes.Structure):
            _fields_ = (
                ("flags", ctypes.c_uint64),
                ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64),
            )

        libc = ctypes.CDLL(None, use_errno=True)

        def call(top: int, path: bytes, flags: int, mode: int, resolve: int) -> int:
            how = OpenHow(flags, mode, resolve)
            fd = int(
                libc.syscall(
                    _SYS_OPENAT2, top, ctypes.c_char_p(path), ctypes.byref(how), ctypes.sizeof(how)
                )
            )
            return fd if fd >= 0 else -ctypes.get_errno()

        _openat2 = call
    return int(_openat2(top, path, flags, mode, resolve))


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise LinkOnTheWay(errno.EXDEV, f"not a plain path beneath the root: {rel!r}")
    return parts


def open_beneath(root: Path | str | int, rel: str, flags: int, mode: int = 0o644) -> int:
    """A descriptor of ``root/rel`` opened with ``flags``, no link followed on the way or
    at its end (``LinkOnTheWay`` if there is one); other errors as ``os.open`` raises
    them. The caller closes it."""
    parts = _parts(rel)
    top = _root(root)
    try:
        return _at(top, parts, flags, mode)
    finally:
        os.close(top)


def hold(root: Path | str) -> int:
    """A descriptor of the directory ``root`` (the path followed, a link included: the
    root is the caller's to name) to give the functions here in place of the path, for
    many calls under one root: the root's path is not resolved again at each. The
    caller closes it."""
    return os.open(root, O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def _root(root: Path | str | int) -> int:
    """The root itself, which must be a directory and no link; or a descriptor of it
    the caller holds (``hold``), duplicated: each call closes its own."""
    if isinstance(root, int):
        return os.dup(root)
    try:
        return os.open(root, O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        _raise(exc.errno or errno.EIO, str(root))


def _at(top: int, parts: list[str], flags: int, mode: int) -> int:
    global _have_openat2
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if _have_openat2 is not False and not os.environ.get(NO_OPENAT2_ENV):
        creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE
        given = mode if creates else 0  # (a mode without them: EINVAL)
        path = "/".join(parts).encode("utf-8", "surrogateescape")
        resolve = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
        fd = _openat2_call(top, path, flags, given, resolve)
        if fd >= 0:
            _have_openat2 = True
            return fd
        err = -fd
        if err not in (errno.ENOSYS, errno.EPERM) or _have_openat2:
            _raise(err, "/".join(parts))
        _have_openat2 = False  # (no openat2 here, or a filter refuses it: walk)
    held = os.dup(top)
    try:
        for name in parts[:-1]:
            try:
                step = os.open(
                    name, O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=held
                )
            except OSError as exc:
                _raise(exc.errno or errno.EIO, "/".join(parts))
            os.close(held)
            held = step
        try:
            return os.open(parts[-1], flags, mode, dir_fd=held)
        except OSError as exc:
            _raise(exc.errno or errno.EIO, "/".join(parts))
    finally:
        os.close(held)


def _raise(err: int, rel: str) -> NoReturn:
    # ELOOP: a link (O_NOFOLLOW, RESOLVE_NO_SYMLINKS); ENOTDIR: a link where a directory
    # was asked for (O_DIRECTORY with O_NOFOLLOW); EXDEV: out of the root (RESOLVE_BENEATH)
    if err in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
        raise LinkOnTheWay(err, f"a link on the way to {rel}")
    raise OSError(err, f"{os.strerror(err)}: {rel}")


def unlink_beneath(root: Path | str | int, rel: str) -> None:
    """Remove the file ``root/rel`` (a link itself included), no link followed on the
    way to its directory."""
    parts = _parts(rel)
    if len(parts) == 1:
        parent = _root(root)
    else:
        parent = open_beneath(root, "/".join(parts[:-1]), O_PATH | os.O_DIRECTORY)
    try:
        os.unlink(parts[-1], dir_fd=parent)
    finally:
        os.close(parent)


_DIR = O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def parent_beneath(root: Path | str | int, rel: str) -> tuple[int, str]:
    """A descriptor (``O_PATH``) of the directory holding ``root/rel``, reached with no
    link followed on the way, and the last component's name: what the ``*at`` calls
    (``os.rename(name, ..., src_dir_fd=fd)``, ``os.link``, ``os.symlink``, ``os.rmdir``)
    act on, never through a link. The caller closes it."""
    parts = _parts(rel)
    top = _root(root)
    if len(parts) == 1:
        return top, parts[0]
    try:
        return _at(top, parts[:-1], _DIR, 0), parts[-1]
    finally:
        os.close(top)


def lstat_beneath(root: Path | str | int, rel: str) -> os.stat_result | None:
    """``lstat`` of ``root/rel`` reached without a link on the way (None: nothing
    there, or a link or a file on the way, where nothing of ``rel`` can be)."""
    try:
        fd, name = parent_beneath(root, rel)
    except (FileNotFoundError, NotADirectoryError, LinkOnTheWay):
        return None
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    finally:
        os.close(fd)


def makedirs_beneath(root: Path | str | int, rel: str, mode: int = 0o777) -> None:
    """Make the directory ``root/rel`` and those above it that are missing, as
    ``mkdir -p`` does, each made in the one before it, held: ``LinkOnTheWay`` where a
    link is on the way, ``NotADirectoryError`` where a file is."""
    parts = _parts(rel)
    held = _root(root)
    try:
        for name in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, mode, dir_fd=held)
            try:
                step = os.open(name, _DIR, dir_fd=held)
            except NotADirectoryError:
                st = os.stat(name, dir_fd=held, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise LinkOnTheWay(errno.ELOOP, f"a link on the way to {rel}") from None
                raise
            except OSError as exc:
                _raise(exc.errno or errno.EIO, rel)
            os.close(held)
            held = step
    finally:
        os.close(held)


def rmdir_beneath(root: Path | str | int, rel: str) -> None:
    """Remove the empty directory ``root/rel`` (never a link's target), no link
    followed on the way; ``OSError`` as ``os.rmdir`` raises it where it is not empty."""
    fd, name = parent_beneath(root, rel)
    try:
        os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


# a new file of bar's own: never through a link, never an open that waits (a FIFO's)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def replace_at(
    folder: int, name: str, data: bytes, mode: int = 0o644, *, sync: bool = False
) -> None:
    """Put ``data`` in place of ``name`` in the directory ``folder`` (held open) through a
    new file renamed over it (made durable first with ``sync``). What a step left at the
    new file's name is removed first: a FIFO there would hold the open, a hard link
    would carry the bytes into another file."""
    temporary = f".{name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=folder)
    fd = os.open(temporary, _NEW, mode, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
