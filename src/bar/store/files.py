"""How bar writes its files so that a crash never leaves half a file.

Directories are 0700 and files 0600 whatever the umask: outputs can hold secrets. JSON
state files are replaced atomically (temp file in the same directory, fsync, rename,
fsync of the directory); line logs are appended with one ``write()`` of a whole line
followed by fsync. Nothing here follows a symbolic link planted where bar writes: opens
are no-follow and temp files exclusive. A failed write (disk full, quota, read-only file
system) is a ``WriteFailed`` naming the file, whose hint says what to do.

Paths are anything ``os.fspath`` takes; only ``os`` is used, so ``bar hook`` can import
this module without pathlib.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import TYPE_CHECKING, Any

from bar.base import beneath, faults
from bar.errors import CorruptFile, WriteFailed

if TYPE_CHECKING:
    from os import PathLike

    StrPath = str | PathLike[str]

DIR_MODE = 0o700
FILE_MODE = 0o600


def _failed(verb: str, path: str, exc: OSError) -> WriteFailed:
    return WriteFailed(f"could not {verb} {path}: {exc.strerror or exc}")


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many ``write()`` calls that takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _open_own(name: str, flags: int, verb: str) -> int:
    """Open one of bar's files for writing, 0600, never through a link."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink(name) from None
        raise _failed(verb, name, exc) from exc
    try:
        os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode on open
    except OSError as exc:
        os.close(fd)
        raise _failed(verb, name, exc) from exc
    return fd


def ensure_dir(path: StrPath) -> None:
    """Create ``path`` (and missing parents) with mode 0700."""
    name = os.fspath(path)
    if os.path.isdir(name):
        return
    parent = os.path.dirname(name)
    if parent and parent != name and not os.path.exists(parent):
        ensure_dir(parent)
    try:
        os.mkdir(name, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(name):
            raise WriteFailed(f"{name} exists and is not a directory") from None
        return
    except OSError as exc:
        raise _failed("create", name, exc) from exc
    os.chmod(name, DIR_MODE)  # mkdir's mode is filtered by the umask


def fsync_dir(path: StrPath, *, dir_fd: int | None = None) -> None:
    """Make a directory's entries durable (``path`` relative to ``dir_fd`` if given);
    where it cannot be opened or synced, nothing is done."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(
    path: StrPath, data: bytes, *, mode: int = FILE_MODE, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never a mix.
    ``durable``: on disk before this returns (else a crash of the machine may leave the
    old file, or an empty or unreadable one: for a cache its reader checks; ``_swap_in``)."""
    name = os.fspath(path)
    folder, base = os.path.split(name)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.tmp")
    try:
        # a leftover of a crashed process of the same pid, or a planted link: never
        # written through
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        faults.point(f"before replacing {base}")
        if durable:
            os.replace(tmp, name)
        else:
            _swap_in(tmp, name)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _failed("write", name, exc) from exc
    if durable:
        fsync_dir(folder or ".")
    faults.point(f"after replacing {base}")


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_exchange: list[Any] = []  # libc's renameat2, once looked up (None: there is none)


def _swap_in(tmp: str, name: str) -> None:
    """Put ``tmp`` at ``name`` as ``os.replace`` does (a reader sees the old file or the
    new one), for a file written without fsync: exchanged with the old file, which is
    then removed. Renaming over a file makes ext4 start writing the new one out at once
    (``auto_da_alloc``, its guard for programs that do not fsync: ~0.18 ms against
    ~0.02 here); a file whose reader checks what it finds needs no such guard. Where the
    kernel or the file system cannot exchange, or there is no old file: a rename."""
    if not _exchange:
        try:
            import ctypes

            function = ctypes.CDLL(None, use_errno=True).renameat2
            function.argtypes = [
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_uint,
            ]
            _exchange.append(function)
        except (OSError, AttributeError):
            _exchange.append(None)
    function = _exchange[0]
    if (
        function is not None
        and function(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(name), _RENAME_EXCHANGE)
        == 0
    ):
        try:
            os.unlink(tmp)  # (the old file, under the temporary name now)
        except OSError:
            pass  # (a leftover like a crashed writer's: the next write of this pid removes it)
        return
    os.replace(tmp, name)


def write_json_atomic(path: StrPath, obj: Any) -> None:
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    # names that are not UTF-8 (lone surrogates in Python) become \u escapes: same bytes back
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"))


def write_text_atomic(path: StrPath, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def append_line(path: StrPath, line: bytes) -> None:
    """Append one complete line with a single ``write()``, then fsync.

    If the file ends in a torn line (a crash mid-write), a newline is written first so the
    torn text stays a line of its own that readers skip, instead of corrupting this one.
    """
    if b"\n" in line:
        raise ValueError("a line must not contain a newline")
    name = os.fspath(path)
    fd = _open_own(name, os.O_RDWR | os.O_APPEND | os.O_CREAT, "open")
    try:
        size = os.fstat(fd).st_size
        prefix = b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""
        data = prefix + line + b"\n"
        faults.point(f"before appending to {os.path.basename(name)}")
        if os.write(fd, data) != len(data):
            raise OSError(errno.ENOSPC, "short write")
        os.fsync(fd)
    except OSError as exc:
        raise _failed("append to", name, exc) from exc
    finally:
        os.close(fd)
    faults.point(f"after appending to {os.path.basename(name)}")


def create_file(path: StrPath, data: bytes = b"") -> None:
    """Create or truncate ``path`` with mode 0600 (never through a link) and write ``data``."""
    name = os.fspath(path)
    fd = _open_own(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "create")
    try:
        write_all(fd, data)
    except OSError as exc:
        raise _failed("write", name, exc) from exc
    finally:
        os.close(fd)


def create_appending(path: StrPath, data: bytes = b"") -> int:
    """``create_file``, and a descriptor that appends to it (never through a link): for
    a file written as a stream, a ``write()`` at a time."""
    create_file(path, data)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)


def read_bytes(path: StrPath, what: str | None = None) -> bytes:
    """A file of bar's, read without following a link. FileNotFoundError passes through."""
    name = os.fspath(path)
    label = what or os.path.basename(name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink(name, label) from None
        raise CorruptFile(f"cannot read {label} at {name}: {exc.strerror or exc}") from exc
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(
    path: StrPath | bytes,
    *,
    follow: bool = False,
    dir_fd: int | None = None,
    same_as: os.stat_result | None = None,
) -> int:
    """A read-only descriptor of the regular file at ``path`` (relative to ``dir_fd`` if
    given; its last component a link only if ``follow``; the very file ``same_as`` is
    the stat of, if given), never blocking; ``OSError`` for anything else. Nothing but
    that file is ever opened: a step may put a link to ``/dev`` on the way (a directory
    swapped for one, a link named ``HEAD``), and opening a device acts on it (a
    watchdog armed, a tape rewound). So the name is first held unopened (``O_PATH``,
    which no driver sees), and the file opened for reading through the held
    descriptor's own name in ``/proc``, once it is known to be that regular file."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    reading = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not hasattr(os, "O_PATH"):  # (not Linux: no device is opened by a name checked after)
        fd = os.open(path, reading | nofollow, dir_fd=dir_fd)
        try:
            _is_regular(os.fstat(fd), same_as)
        except OSError:
            os.close(fd)
            raise
        return fd
    held = os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow, dir_fd=dir_fd)
    try:
        _is_regular(os.fstat(held), same_as)
        return os.open(f"/proc/self/fd/{held}", reading)
    finally:
        os.close(held)


def _is_regular(st: os.stat_result, same_as: os.stat_result | None) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    if same_as is not None and (st.st_dev, st.st_ino) != (same_as.st_dev, same_as.st_ino):
        raise OSError(errno.ESTALE, "not the file it was")


def read_regular(
    path: StrPath | bytes, tail: int | None = None, *, dir_fd: int | None = None
) -> bytes | None:
    """The bytes of ``path`` (relative to ``dir_fd`` if given) if it is a regular file (its
    last ``tail`` bytes, if given); None if it is missing, unreadable, a link (never
    followed), a FIFO or anything else: for files a step may have planted something in
    place of."""
    try:
        fd = open_regular(path, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        at = max(0, st.st_size - tail) if tail is not None else 0
        chunks = []
        while chunk := os.pread(fd, 1 << 20, at):
            chunks.append(chunk)
            at += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def open_beneath(root: StrPath, path: StrPath) -> int | None:
    """A read-only descriptor of the regular file ``path`` (absolute, under ``root``),
    reached from ``root`` without following any link (``bar.base.beneath``): in a
    directory a confined step writes, a link anywhere on the way (a directory swapped
    for one, even between a check and the open) must never make bar read something
    else. None if the path is not such a file."""
    rel = os.path.relpath(path, root)
    try:
        found = beneath.open_beneath(
            os.fspath(root), rel.replace(os.sep, "/"), os.O_RDONLY | os.O_NONBLOCK
        )
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(found).st_mode):
            return found
    except OSError:
        pass
    os.close(found)
    return None


def read_beneath(
    root: StrPath, path: StrPath, limit: int | None = None, *, tail: int | None = None
) -> bytes | None:
    """The bytes of the regular file ``path`` under ``root``, reached without following
    any link (``open_beneath``): at most ``limit`` of them, or its last ``tail``; None if
    it is not such a file."""
    fd = open_beneath(root, path)
    if fd is None:
        return None
    try:
        chunks: list[bytes] = []
        at = max(0, os.fstat(fd).st_size - tail) if tail is not None else 0
        if limit is not None:
            limit += at
        while limit is None or at < limit:
            chunk = os.pread(fd, 1 << 20 if limit is None else min(1 << 20, limit - at), at)
            if not chunk:
                break
            chunks.append(chunk)
            at += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_json(path: StrPath, what: str | None = None) -> dict[str, Any]:
    """Read a JSON object from ``path``; a broken file is a ``CorruptFile`` naming it."""
    name = os.fspath(path)
    label = what or os.path.basename(name)
    raw = read_bytes(name, label)
    if not raw.strip():
        raise CorruptFile(
            f"{label} at {name} is empty", hint="run `bar doctor` to check the project"
        )
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFile(
            f"{label} at {name} is not valid JSON ({exc})",
            hint="run `bar doctor` to check the project",
        ) from exc
    if not isinstance(data, dict):
        raise CorruptFile(f"{label} at {name} must hold a JSON object")
    return data


def _symlink(name: str, label: str | None = None) -> CorruptFile:
    what = f"{label} at {name}" if label else name
    return CorruptFile(
        f"{what} is a symbolic link; bar does not follow links in its own files",
        hint="run `bar doctor` to check the project",
    )


def read_json_lines(path: StrPath) -> list[dict[str, Any]]:
    """The objects of a file written a JSON line at a time (none if it is missing); a
    line torn by a crash, or one that is not an object, is skipped."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[dict[str, Any]] = []
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            found.append(rec)
    return found


def remove_tree(path: StrPath) -> None:
    """Remove the directory ``path`` and all it holds, links not followed; nothing if it
    is gone. What a step left there may be built to stop a removal: directories it made
    unreadable or unwritable (``chmod 000``), which an owner without root's rights can
    neither list nor empty, or nested thousands deep, past any recursion (Python's
    ``rmtree`` recurses). So the tree is flattened instead: each directory, opened by
    name in its parent's descriptor (``O_NOFOLLOW``), is given back read, write and
    search for its owner, its files are removed and its directories moved up into
    ``path``, and it is removed empty: one directory open at a time, at any depth."""
    try:
        top = _own_folder(os.fspath(path), None)
    except FileNotFoundError:
        return
    try:
        moved = 0
        while names := os.listdir(top):
            for name in names:
                moved = _flatten(top, name, moved)
    finally:
        os.close(top)
    os.rmdir(path)


_FLAGS = os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def _own_folder(name: str, parent: int | None) -> int:
    """The directory ``name`` (in ``parent``'s descriptor; None: a path) open for
    reading, its owner given read, write and search on it first; never through a link."""
    held = os.open(name, os.O_PATH | _FLAGS, dir_fd=parent)
    try:
        mode = os.fstat(held).st_mode
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            os.chmod(f"/proc/self/fd/{held}", stat.S_IMODE(mode) | stat.S_IRWXU)
        return os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        os.close(held)


def _flatten(top: int, name: str, moved: int) -> int:
    """Remove ``name`` of ``top``: a file at once; a directory once its files are removed
    and its directories moved up into ``top`` (to be taken in turn). Returns the count of
    names made for the moved ones."""
    try:
        if not stat.S_ISDIR(os.lstat(name, dir_fd=top).st_mode):
            os.unlink(name, dir_fd=top)
            return moved
        folder = _own_folder(name, top)
    except FileNotFoundError:
        return moved
    try:
        for entry in os.listdir(folder):
            if not stat.S_ISDIR(os.lstat(entry, dir_fd=folder).st_mode):
                os.unlink(entry, dir_fd=folder)
                continue
            os.close(_own_folder(entry, folder))  # (moving a directory writes its "..")
            while True:
                moved += 1
                up = f".bar-removed-{moved}"
                try:
                    os.lstat(up, dir_fd=top)
                except FileNotFoundError:
                    break
            os.rename(entry, up, src_dir_fd=folder, dst_dir_fd=top)
    finally:
        os.close(folder)
    os.rmdir(name, dir_fd=top)
    return moved
