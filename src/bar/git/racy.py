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
a restore), ``note`` reads the entries the write left in the index file (the written
part of a split index is small; a new shared part is read only when git wrote one) and
keeps, beside the index (``<index>.racy``), the paths of those whose ctime falls at or
after the second the write began while their mtime is older, and of those whose mtime
falls in that second or later but before the second the index file was written.

That second is the other hole: git notes the stat it took before it read a file, and judges
an entry racily clean only when its mtime is at or after the index file's. A file git read
early in a long ``git add`` (a large file hashed after it) and rewritten with as many bytes
in that same second, the index written in a later second, keeps the stat git noted, seconds
and all: git would call the edit clean forever. So such an entry is a suspect too (a file
that changes while bar hashes it is hashed again: docs/internals/record.md, "The record
never lies"); one whose mtime is in the second the index was written is git's own racy case.
The next look at the worktree treats them as changed whatever their stat says
(``suspects``): it clears the stat git noted for them just before it adds (``force``: ``git
update-index --index-info`` with the same mode and object, as ``read-tree`` leaves an
entry), so git hashes them again, and notes the suspects of that write in turn. The entries
are never left without their stat between commands: git's own checkout, which a rollback
uses, refuses to touch an entry whose stat does not match its file. Files written the
ordinary way are left to git's own rule, so this costs a second hashing only where a write
lasted past the end of a second in which files changed, and after a chmod, a rename or a
``touch -r`` in the second of a record.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bar import git

_env = git.index_env
_HEADER = struct.Struct(">4sII")
_TIMES = struct.Struct(">IIII")  # ctime s, ns, mtime s, ns
_EXTENDED = 0x4000


def _has_racy(data: bytes, since_s: int, oid_size: int, written_s: int) -> bool | None:
    """Whether the index file ``data`` (written in the second ``written_s``) holds a
    suspect entry (``_suspect``); None if it cannot be read as one."""
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
        if _suspect(ctime_s, mtime_s, since_s, written_s):
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


def _suspect(ctime_s: int, mtime_s: int, since_s: int, written_s: int) -> bool:
    """An entry git may call clean wrongly: its ctime in or after the second the write
    began with an older mtime (set back), or its mtime in or after that second but
    before the second the index was written (git's own racy rule covers from there)."""
    return (ctime_s >= since_s and mtime_s < ctime_s) or since_s <= mtime_s < written_s


def _written_s(index: Path) -> int:
    try:
        return os.stat(index).st_mtime_ns // 1_000_000_000
    except OSError:
        return 1 << 62  # (not known: every entry changed since the write began)


def _shared_part(data: bytes, own: Path | None, oid_size: int) -> Path | None:
    """The shared part a split index's ``link`` extension names, if it is in ``own``."""
    at = data.rfind(b"link", 0, max(0, len(data) - oid_size))
    if at < 0 or own is None:
        return None
    oid = data[at + 8 : at + 8 + oid_size].hex()
    path = own / f"sharedindex.{oid}"
    return path if path.is_file() else None


def needed(index: Path, since_ns: int, oid_size: int = 20) -> bool:
    """Whether ``index`` may hold an entry ``note`` keeps (read only, no git)."""
    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError:
        return False
    since_s = since_ns // 1_000_000_000
    written_s = _written_s(index)
    found = _has_racy(data, since_s, oid_size, written_s)
    if found is None:
        return True  # not read: ask git
    if found:
        return True
    own = git.own_git_dir(index)
    shared = _shared_part(data, own, oid_size)
    if shared is not None and own is not None:
        try:
            # git sets the shared part's time to now at every write of the index that
            # keeps it (so it is not expired); one written anew is a new file, which moves
            # the time of its folder: a folder untouched since the write began holds none
            if own.stat().st_mtime_ns < since_ns:
                return False
            if shared.stat().st_mtime_ns >= since_ns:  # written by this very write
                return _has_racy(shared.read_bytes(), since_s, oid_size, written_s) is not False
        except OSError:
            return True
    return False


def _racy_file(index: Path) -> Path:
    return index.with_name(index.name + ".racy")


def suspects(index: Path) -> list[str]:
    """The paths the next look must hash again whatever their stat (see the module's
    text); empty when none."""
    try:
        with open(_racy_file(index), "rb") as f:
            said = json.loads(f.read())
    except (OSError, ValueError):
        return []
    paths = said.get("paths") if isinstance(said, dict) else None
    return [str(p) for p in paths] if isinstance(paths, list) else []


def add(index: Path, paths: Sequence[str]) -> None:
    """Add ``paths`` to the suspects of ``index``: files whose change no stat can show (a
    write through a shared memory map), found by reading them (``bar.history.verify``)."""
    if not paths:
        return
    from bar.store.files import write_bytes_atomic

    found = sorted({*suspects(index), *paths})
    write_bytes_atomic(_racy_file(index), json.dumps({"version": 1, "paths": found}).encode())


def force(worktree: Path, index: Path, paths: Sequence[str]) -> None:
    """Clear the stat git noted for the entries of ``index`` at ``paths`` (those it
    holds): the add that follows hashes those files again."""
    if not paths:
        return
    env = _env(index)
    listed = git.git(
        worktree,
        "ls-files",
        "-s",
        "-z",
        "--",
        *(f":(top,literal){p}" for p in paths),
        env=env,
        check=False,
    )
    lines = []
    for item in listed.stdout.split(b"\0"):
        meta, _, path = item.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) == 3 and fields[2] == b"0":
            lines.append(fields[0] + b" " + fields[1] + b"\t" + path)
    if lines:
        git.git(
            worktree, "update-index", "-z", "--index-info", env=env, input=b"\0".join(lines) + b"\0"
        )


def note(
    worktree: Path,
    index: Path,
    since_ns: int,
    digits: int = 40,
    holds: Callable[[str], bool] | None = None,
) -> list[str]:
    """After a write of ``index`` that began at ``since_ns``: keep as suspects (see
    ``suspects``) the entries git may call clean wrongly (``_suspect``), or forget the
    suspects if there are none. ``digits``: how long the
    repository's object ids are (40, or 64 for SHA-256). ``holds``: whether the file at
    a path holds what the write put in the index there, asked (the file read) only once
    the second of the entry's times is over (``_cleared``). Returns the suspects."""
    found = _racy_entries(worktree, index, since_ns) if needed(index, since_ns, digits // 2) else []
    if found and holds is not None:
        found = _cleared(found, holds)
    path = _racy_file(index)
    if not found:
        path.unlink(missing_ok=True)
        return []
    from bar.store.files import write_bytes_atomic

    paths = [p for p, _c, _m in found]
    write_bytes_atomic(path, json.dumps({"version": 1, "paths": paths}).encode())
    return paths


def _cleared(found: list[_Entry], holds: Callable[[str], bool]) -> list[_Entry]:
    """The suspects left once those read now are found to hold what the index says.
    A file read after the second of its noted ctime and mtime is over, and found as
    noted, is safe from then on: a write after the read moves its ctime into a later
    second, which git compares. (A restore that wrote many files, and the index a
    second after the first of them, makes them all suspects: reading them here costs
    a fraction of the next look's hashing them again through git.) Kernel times come
    from the coarse clock, which is the one read."""
    now_s = _coarse_ns() // 1_000_000_000
    return [e for e in found if max(e[1], e[2]) >= now_s or not holds(e[0])]


def _coarse_ns() -> int:
    """The clock the kernel stamps files with (Linux: the coarse real-time clock, a
    tick behind the fine one at most); elsewhere a lower bound of it."""
    if sys.platform == "linux":
        return time.clock_gettime_ns(5)  # CLOCK_REALTIME_COARSE (not named by Python)
    return time.time_ns() - 50_000_000


_Entry = tuple[str, int, int]  # path, ctime second, mtime second


def _racy_entries(worktree: Path, index: Path, since_ns: int) -> list[_Entry]:
    """The suspect entries (``_suspect``) of ``index`` after a write that began at
    ``since_ns``, as git reads them (``ls-files --debug``): path, ctime and mtime seconds."""
    since_s = since_ns // 1_000_000_000
    written_s = _written_s(index)
    found: list[_Entry] = []
    for path, block in _debug_entries(worktree, index, []):
        times = _debug_times(block)
        if times is not None and _suspect(times[0], times[1], since_s, written_s):
            found.append((path.decode("utf-8", "surrogateescape"), times[0], times[1]))
    return found


def noted_stats(
    worktree: Path, index: Path, paths: Sequence[str] | None = None
) -> dict[str, tuple[int, ...]]:
    """The stat git noted for each entry of ``index`` (of ``paths``; None: all), as
    ``ls-files --debug`` shows it: path -> (ctime s, ns, mtime s, ns, inode, size)."""
    spec = [] if paths is None else ["--", *(f":(top,literal){p}" for p in paths)]
    found: dict[str, tuple[int, ...]] = {}
    for path, block in _debug_entries(worktree, index, spec):
        key = _debug_stat(block)
        if key is not None:
            found[path.decode("utf-8", "surrogateescape")] = key
    return found


def _debug_entries(
    worktree: Path, index: Path, spec: Sequence[str]
) -> Iterator[tuple[bytes, bytes]]:
    """Each entry of ``index`` (of the pathspec ``spec``) as ``ls-files -s --debug -z``
    gives it: (its path, the lines of its stat); none if git cannot read the index."""
    res = git.git(worktree, "ls-files", "-s", "--debug", "-z", *spec, env=_env(index), check=False)
    if res.returncode != 0:
        return
    chunks = res.stdout.split(b"\0")
    # "<mode> <oid> <stage>\t<path>" NUL, then its stat lines, the next entry right after
    head = chunks[0]
    for chunk in chunks[1:]:
        block_end = chunk.find(b"\n", chunk.find(b"\tflags: "))
        block, following = chunk[: block_end + 1], chunk[block_end + 1 :]
        yield head.partition(b"\t")[2], block
        head = following


def _debug_stat(block: bytes) -> tuple[int, ...] | None:
    """(ctime s, ns, mtime s, ns, inode, size) from ``ls-files --debug``'s lines."""
    try:
        fields = {}
        for line in block.decode().split("\n"):
            for part in line.strip().split("\t"):
                name, _, value = part.partition(": ")
                fields[name] = value
        ctime_s, ctime_ns = fields["ctime"].split(":")
        mtime_s, mtime_ns = fields["mtime"].split(":")
        return (
            int(ctime_s),
            int(ctime_ns),
            int(mtime_s),
            int(mtime_ns),
            int(fields["ino"]),
            int(fields["size"]),
        )
    except (KeyError, ValueError, UnicodeDecodeError):
        return None


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
