"""Files below a directory bar holds open: read, listed and emptied without following
a link anywhere on the way.

For directories a confined step can write (a step's quarantine, ``bar.sandbox.quarantine``):
whatever it left there, a link to the developer's files in place of a directory or a
file, bar neither reads nor removes anything through it. Each component is opened with
``O_NOFOLLOW`` relative to the directory above it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from bar.store.files import read_regular

READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
DIR = READ | os.O_DIRECTORY


def real_dir(path: Path) -> None:
    """``path`` is a directory (not a link to one): made, or what stood there moved away."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(mode=0o700, parents=True)
        return
    if not stat.S_ISDIR(st.st_mode):
        os.replace(path, path.with_name(f"{path.name}.bad-{os.getpid()}"))
        path.mkdir(mode=0o700)


def empty(path: Path) -> None:
    """Remove what ``path`` holds (links are removed, never followed)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, DIR)
        try:
            _empty_at(fd)
        finally:
            os.close(fd)


def _empty_at(fd: int) -> None:
    for name in os.listdir(fd):
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            sub = os.open(name, DIR, dir_fd=fd)
            try:
                _empty_at(sub)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=fd)
        except OSError:
            continue


def tree(folder: Path) -> Iterator[tuple[str, bytes]]:
    try:
        fd = os.open(folder, DIR)
    except OSError:
        return
    try:
        yield from tree_at(fd, "")
    finally:
        os.close(fd)


def tree_at(fd: int, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    for name in os.listdir(fd):
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, DIR, dir_fd=fd)
            try:
                yield from tree_at(sub, f"{prefix}{name}/")
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            data = read_at(fd, name)
            if data is not None:
                yield f"{prefix}{name}", data


def names(root: int, sub: str = "") -> list[str]:
    try:
        if not sub:
            return os.listdir(root)
        fd = os.open(sub, DIR, dir_fd=root)
    except OSError:
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def files(root: int, folder: str) -> Iterator[tuple[str, bytes]]:
    for name in names(root, folder):
        data = read_at(root, f"{folder}/{name}")
        if data is not None:
            yield name, data


def read_at(root: int, rel: str) -> bytes | None:
    """A regular file's bytes below the directory ``root``; None for anything else. No
    component is followed if it is a link (``O_NOFOLLOW`` on each)."""
    parts = rel.split("/")
    fd = root
    try:
        for part in parts[:-1]:
            nxt = os.open(part, DIR, dir_fd=fd)
            if fd != root:
                os.close(fd)
            fd = nxt
        return read_regular(parts[-1], dir_fd=fd)
    except OSError:
        return None
    finally:
        if fd != root:
            os.close(fd)
