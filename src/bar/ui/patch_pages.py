"""A patch cut into its files, so that a page lists 5,000 files at once and fetches each
file's diff only when it is shown.

One pass over the patch (``git diff --binary --full-index`` output, as the artifacts hold)
finds where each ``diff --git`` section starts and ends, its names, whether it was added,
deleted, renamed, binary or only changed its mode, and its added and deleted lines. A
section is then a slice of the bytes, read again only when asked for. Indexes are kept
for the last few patches read: artifacts never change once written, and a comparison is
between two commits, which never change either.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from pathlib import Path

from bar.base.record import field, record

_QUOTED = {
    ord("a"): 7,
    ord("b"): 8,
    ord("t"): 9,
    ord("n"): 10,
    ord("v"): 11,
    ord("f"): 12,
    ord("r"): 13,
    ord('"'): 34,
    ord("\\"): 92,
}


@record
class FileDiff:
    path: str
    old_path: str | None = None  # a rename's or copy's former name
    status: str = "modified"  # added | deleted | modified | renamed | copied
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    additions: int = 0
    deletions: int = 0
    start: int = 0  # byte offsets of the section in the patch
    end: int = 0

    @property
    def mode_text(self) -> str | None:
        """``100644 -> 100755`` when the mode changed."""
        if self.old_mode and self.new_mode and self.old_mode != self.new_mode:
            return f"{self.old_mode} -> {self.new_mode}"
        return None


@record
class PatchIndex:
    data: bytes
    files: list[FileDiff] = field(default_factory=list)

    def section(self, i: int) -> bytes:
        f = self.files[i]
        return self.data[f.start : f.end]

    @property
    def additions(self) -> int:
        return sum(f.additions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)


def unquote(name: bytes) -> str:
    """A name as git prints it: C-quoted (``"a\\303\\251.txt"``) when it needs to be."""
    if not (len(name) >= 2 and name.startswith(b'"') and name.endswith(b'"')):
        return name.decode("utf-8", "replace")
    out = bytearray()
    raw = name[1:-1]
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 92 and i + 1 < len(raw):  # backslash
            nxt = raw[i + 1]
            if 48 <= nxt <= 55 and i + 3 < len(raw):
                out.append(int(raw[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_QUOTED.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out).decode("utf-8", "replace")


def _strip_prefix(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _header_names(line: bytes) -> tuple[str, str]:
    """The two names of ``diff --git a/X b/Y`` (X == Y unless renamed, which the rename
    lines tell anyway)."""
    rest = line[len(b"diff --git ") :].rstrip(b"\r\n")
    if rest.startswith(b'"'):
        end = rest.index(b'"', 1)
        while rest[end - 1] == 92:  # an escaped quote
            end = rest.index(b'"', end + 1)
        first, second = rest[: end + 1], rest[end + 2 :]
        return _strip_prefix(unquote(first)), _strip_prefix(unquote(second))
    if rest.endswith(b'"'):
        start = rest.rindex(b' "')
        return _strip_prefix(unquote(rest[:start])), _strip_prefix(unquote(rest[start + 1 :]))
    half = (len(rest) - 1) // 2  # "a/P b/P": the same name twice
    return _strip_prefix(rest[:half].decode("utf-8", "replace")), _strip_prefix(
        rest[half + 1 :].decode("utf-8", "replace")
    )


def index(data: bytes) -> PatchIndex:
    """Cut ``data`` into its files (see the module's docstring)."""
    result = PatchIndex(data)
    current: FileDiff | None = None
    in_hunk = False
    pos = 0
    size = len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        end = size if nl < 0 else nl + 1
        line = data[pos:end]
        if line.startswith(b"diff --git "):
            if current is not None:
                current.end = pos
            old, new = _header_names(line)
            current = FileDiff(path=new, start=pos, end=end)
            if old != new:
                current.old_path = old
            result.files.append(current)
            in_hunk = False
        elif current is None:
            pass
        elif in_hunk:
            first = line[:1]
            if first == b"+":
                current.additions += 1
            elif first == b"-":
                current.deletions += 1
        else:
            _header_line(current, line.rstrip(b"\r\n"))
            if line.startswith(b"@@"):
                in_hunk = True
        pos = end
    if current is not None:
        current.end = size
    return result


def _header_line(f: FileDiff, line: bytes) -> None:
    if line.startswith(b"new file mode "):
        f.status, f.new_mode = "added", line[14:].decode()
    elif line.startswith(b"deleted file mode "):
        f.status, f.old_mode = "deleted", line[18:].decode()
    elif line.startswith(b"old mode "):
        f.old_mode = line[9:].decode()
    elif line.startswith(b"new mode "):
        f.new_mode = line[9:].decode()
    elif line.startswith(b"rename from "):
        f.status, f.old_path = "renamed", unquote(line[12:])
    elif line.startswith(b"rename to "):
        f.path = unquote(line[10:])
    elif line.startswith(b"copy from "):
        f.status, f.old_path = "copied", unquote(line[10:])
    elif line.startswith(b"copy to "):
        f.path = unquote(line[8:])
    elif line.startswith(b"index ") and b" " in line[6:]:
        f.old_mode = f.new_mode = line.rsplit(b" ", 1)[1].decode()
    elif line.startswith((b"GIT binary patch", b"Binary files ")):
        f.binary = True
    elif line.startswith(b"+++ ") and line[4:] != b"/dev/null":
        f.path = _strip_prefix(unquote(line[4:]))


class _Cache:
    """The last few indexes, by what identifies their bytes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[tuple[object, ...], PatchIndex] = OrderedDict()

    def get(self, key: tuple[object, ...]) -> PatchIndex | None:
        found = self.items.get(key)
        if found is not None:
            self.items.move_to_end(key)
        return found

    def put(self, key: tuple[object, ...], value: PatchIndex) -> PatchIndex:
        self.items[key] = value
        while len(self.items) > self.size:
            self.items.popitem(last=False)
        return value


_CACHE = _Cache(16)


def of_file(path: Path) -> PatchIndex:
    """The index of the patch file at ``path`` (an artifact), cached by size and time."""
    info = os.stat(path)
    key: tuple[object, ...] = ("file", str(path), info.st_size, info.st_mtime_ns)
    found = _CACHE.get(key)
    if found is not None:
        return found
    return _CACHE.put(key, index(read_regular(path)))


def of_commits(key: tuple[str, str, str], make: bytes | None = None) -> PatchIndex | None:
    """The cached index of the diff between two commits (repository, from, to); with
    ``make``, those bytes indexed and kept."""
    found = _CACHE.get(("commits", *key))
    if found is not None or make is None:
        return found
    return _CACHE.put(("commits", *key), index(make))


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file itself, not a link to one."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(str(path))
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read() if limit is None else fh.read(limit)
    finally:
        os.close(fd)
