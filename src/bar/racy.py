"""Keeping the side index's stat cache honest where git counts time in seconds.

git says a file is unchanged when its size, inode and times match those it noted in the
index, the times counted in whole seconds (git as the distributions build it has no
``USE_NSEC``). Against an edit made in the same second as the note it guards itself
("racily clean" entries), but only by the modification time, which any program can set
back (``touch -r``). So a file whose change time (ctime, which no program can set) falls
in the second the index was written, while its modification time is older, can be
rewritten with as many bytes in that same second, its mtime set back, and git would
see nothing: bar would record "no changes" and a rollback would overwrite the edit.

After every write of a side index that refreshed entries (``git add``, a staging's add,
a restore), ``smudge`` reads the entries the write left in the index file (the written
part of a split index is small; a new shared part is read only when git wrote one) and,
for every entry whose ctime falls at or after ``since`` while its mtime is older, clears
the stat data git noted (``git update-index --index-info`` with the same mode and object,
as ``read-tree`` leaves an entry): the next look re-hashes that file. Files written the
ordinary way (mtime and ctime in the same second) are left to git's own rule, so a step
pays this only after a chmod, a rename or a ``touch -r`` in the second of its snapshot.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from bar import git

_env = git.index_env
_HEADER = struct.Struct(">4sII")
_TIMES = struct.Struct(">IIII")  # ctime s, ns, mtime s, ns
_EXTENDED = 0x4000


def _suspects(data: bytes, since_s: int, oid_size: int) -> bool | None:
    """Whether the index file ``data`` holds an entry whose ctime second is at or after
    ``since_s`` and whose mtime second is older; None if it cannot be read as one."""
    if len(data) < _HEADER.size:
        return None
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        return None
    pos = _HEADER.size
    fixed = 40 + oid_size + 2
    end = len(data)
    find = data.find
    for _ in range(count):
        if pos + fixed > end:
            return None
        ctime_s, _cns, mtime_s, _mns = _TIMES.unpack_from(data, pos)
        if ctime_s >= since_s and mtime_s < ctime_s:
            return True
        flags = int.from_bytes(data[pos + fixed - 2 : pos + fixed], "big")
        start = pos + fixed + (2 if version >= 3 and flags & _EXTENDED else 0)
        if version == 4:  # a varint (bytes the name shares with the last), then the rest
            while start < end and data[start] & 0x80:
                start += 1
            nul = find(b"\0", start + 1)
            if nul < 0:
                return None
            pos = nul + 1
        else:  # the name, then one to eight NULs up to a multiple of eight
            nul = find(b"\0", start)
            if nul < 0:
                return None
            length = nul - pos
            pos += (length + 8) & ~7
    return False


def _shared_part(data: bytes, own: Path | None, oid_size: int) -> Path | None:
    """The shared part a split index's ``link`` extension names, if it is in ``own``."""
    at = data.rfind(b"link", 0, max(0, len(data) - oid_size))
    if at < 0 or own is None:
        return None
    oid = data[at + 8 : at + 8 + oid_size].hex()
    path = own / f"sharedindex.{oid}"
    return path if path.is_file() else None


def needed(index: Path, since_ns: int, oid_size: int = 20) -> bool:
    """Whether ``smudge`` would have anything to do for ``index`` (read only)."""
    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError:
        return False
    since_s = since_ns // 1_000_000_000
    found = _suspects(data, since_s, oid_size)
    if found is None:
        return True  # not read: ask git
    if found:
        return True
    shared = _shared_part(data, git.own_git_dir(index), oid_size)
    if shared is not None:
        try:
            if shared.stat().st_mtime_ns >= since_ns:  # written by this very write
                return _suspects(shared.read_bytes(), since_s, oid_size) is not False
        except OSError:
            return True
    return False


def smudge(worktree: Path, index: Path, since_ns: int, digits: int = 40) -> list[str]:
    """Clear the noted stat data of every entry of ``index`` whose ctime second is at or
    after ``since_ns`` while its mtime second is older: those files are re-hashed at the
    next look. ``digits``: how long the repository's object ids are (40, or 64 for
    SHA-256). Returns the paths smudged."""
    if not needed(index, since_ns, digits // 2):
        return []
    res = git.git(worktree, "ls-files", "-s", "--debug", "-z", env=_env(index), check=False)
    if res.returncode != 0:
        return []
    since_s = since_ns // 1_000_000_000
    lines: list[bytes] = []
    chunks = res.stdout.split(b"\0")
    # "<mode> <oid> <stage>\t<path>" NUL, then its stat lines, the next entry right after
    head = chunks[0]
    for chunk in chunks[1:]:
        block_end = chunk.find(b"\n", chunk.find(b"\tflags: "))
        block, following = chunk[: block_end + 1], chunk[block_end + 1 :]
        times = _debug_times(block)
        if times is not None and times[0] >= since_s and times[1] < times[0]:
            meta, _, path = head.partition(b"\t")
            mode, oid, stage = meta.split(b" ")
            if stage == b"0":
                lines.append(mode + b" " + oid + b"\t" + path)
        head = following
    if not lines:
        return []
    git.git(worktree, "update-index", "-z", "--index-info", env=_env(index),
            input=b"\0".join(lines) + b"\0")  # fmt: skip
    return [line.partition(b"\t")[2].decode("utf-8", "surrogateescape") for line in lines]


def _debug_times(block: bytes) -> tuple[int, int] | None:
    """(ctime second, mtime second) from ``git ls-files --debug``'s lines of an entry."""
    try:
        ctime = block.split(b"ctime: ", 1)[1].split(b":", 1)[0]
        mtime = block.split(b"mtime: ", 1)[1].split(b":", 1)[0]
        return int(ctime), int(mtime)
    except (IndexError, ValueError):
        return None


def keep_time(source: Path, copy: Path) -> None:
    """Give ``copy`` of an index the modification time of ``source``: git judges which
    entries are racily clean by the index file's mtime, and a copy made a second later
    would let an edit made in the second of the original pass as clean."""
    st = os.stat(source)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
