"""A step's patch: the replayable ``git diff`` between two states, streamed to its file
with its stat."""

from __future__ import annotations

import codecs
import mmap
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from bar import git
from bar.base import faults
from bar.base.proc import clean_env
from bar.errors import GitError, GitStateError
from bar.git import DiffStat

# a step changing 10,000 files of a 40,000-file repository had its diff map 85 MB of an
# 84 MB pack (counted in the process's resident memory). Small windows, and a bound on
# what stays mapped, keep that near 30 MB, the diff no slower.
_SMALL_PACK_WINDOWS = ("-c", "core.packedGitWindowSize=4m", "-c", "core.packedGitLimit=16m")


class PatchShort(GitStateError):
    """git wrote a patch with fewer (or more) lines than its own count of the change."""


def write_patch(
    repo: Path, a: str, b: str, path: Path, *, points: bool = True, split: bool = False
) -> DiffStat:
    """Write the replayable patch from ``a`` to ``b`` into ``path``; return its stat
    (``_counted``: renames count once). The patch is checked against git's count of the
    change (``_whole``) and written again once if it falls short; ``PatchShort`` if it
    still does. One
    ``git diff`` gives both: its numstat block comes first and ends with an empty entry
    (two NULs, which no path holds), the patch follows and is streamed to the file.
    ``split``: two diffs at once instead, one for the numstat, one for the patch. git
    reads every changed blob once for each of the two, one after the other, when asked
    for both; two processes read them side by side (a step adding 100,000 files: 2.7 s
    instead of 4.8 s on two cores), at the cost of a second git, which only a large change
    repays. The bytes written and the stat are the same either way.
    ``points``: pass the crash points around the write (not from a thread, whose points
    would fall in an order of the scheduler's: ``steps.PatchJob`` passes them itself)."""
    if points:
        faults.point(f"before writing {path.name}")
    head = _write(repo, a, b, path, split)
    short = _whole(path, head)
    if short:
        head = _write(repo, a, b, path, split)
        short = _whole(path, head)
        if short:
            raise PatchShort(
                f"git's patch from {a[:10]} to {b[:10]} does not hold the change git counted, "
                f"written twice ({short}); it is not kept",
                hint="run the command again; `bar doctor` checks the repository",
            )
    if points:
        faults.point(f"after writing {path.name}")
    return _counted(repo, a, b, head)


def _write(repo: Path, a: str, b: str, path: Path, split: bool) -> bytes:
    """Stream the patch into ``path``; its numstat block."""
    git_c = ["git", *git.NO_PROGRAMS, *_SMALL_PACK_WINDOWS, "-C", str(repo)]
    cmd = [*git_c, *git.diff_patch_args(a, b, with_numstat=not split, binary=not split)]
    env = clean_env(git.pinned_env(repo, git.TREES_ONLY))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    head = b""
    try:
        with _scratch_file() as err, _scratch_file() as numstat:
            stat_cmd = [*git_c, *git.diff_numstat_args(a, b)]
            counting = (
                subprocess.Popen(
                    stat_cmd, env=env, stdin=subprocess.DEVNULL, stdout=numstat, stderr=err
                )
                if split
                else None
            )
            try:
                proc = subprocess.Popen(
                    cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
                )
                assert proc.stdout is not None
                in_head = not split
                with proc.stdout:
                    while chunk := proc.stdout.read(1 << 16):
                        if in_head:
                            head += chunk
                            end = head.find(b"\0\0")
                            if end < 0:
                                continue
                            head, chunk, in_head = head[: end + 1], head[end + 2 :], False
                        _write_all(fd, chunk)
                if proc.wait() != 0:
                    err.seek(0)
                    raise GitError(cmd, proc.returncode, b"", err.read())
            finally:
                if counting is not None and counting.wait() != 0:
                    err.seek(0)
                    raise GitError(stat_cmd, counting.returncode, b"", err.read())
            if counting is not None:
                numstat.seek(0)
                head = numstat.read()
    finally:
        os.close(fd)
    binary = [f.path for f in git.file_stats(head)[0] if f.binary] if split else []
    if len(binary) > _BINARY_APART:
        return _write(repo, a, b, path, False)
    if binary:
        _splice_binary(path, git_c, env, a, b, binary)
    return head


# binary files whose patches a split diff writes by a third git, at most: more, and the
# patch is written again by one git, as an unsplit diff writes it
_BINARY_APART = 1000


def _splice_binary(
    path: Path, git_c: list[str], env: Mapping[str, str], a: str, b: str, binary: list[str]
) -> None:
    """Put the binary patches of ``binary`` (paths) in the split diff's patch at ``path``,
    where its sections say only that they differ: written by one more git that counts
    them too, so that git weighs each blob's size before its bytes (``git.TREES_ONLY``),
    as the unsplit diff does. The bytes are then those the unsplit diff writes."""
    cmd = [*git_c, *git.diff_patch_args(a, b, *binary, with_numstat=True)]
    with _scratch_file() as out, _scratch_file() as err:
        res = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        if res.returncode != 0:
            err.seek(0)
            raise GitError(cmd, res.returncode, b"", err.read())
        if not os.fstat(out.fileno()).st_size:
            return
        with mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ) as extra:
            first = extra.find(b"\0\0")  # (the numstat block's end)
            whole: dict[bytes, list[tuple[int, int]]] = {}
            for start, end in _sections(extra, first + 2 if first >= 0 else len(extra)):
                whole.setdefault(_named(extra, start), []).append((start, end))
            aside = path.with_name(path.name + ".binary")
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            fd = os.open(aside, flags, 0o600)
            try:
                with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                    if os.fstat(f.fileno()).st_size:
                        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                            spliced: set[bytes] = set()
                            for start, end in _sections(data, 0):
                                name = _named(data, start)
                                if name not in whole:
                                    _copy(fd, data, start, end)
                                elif name not in spliced:  # (all its sections, at its first)
                                    spliced.add(name)
                                    for s, e in whole[name]:
                                        _copy(fd, extra, s, e)
            finally:
                os.close(fd)
            os.replace(aside, path)


def _copy(fd: int, data: mmap.mmap, start: int, end: int) -> None:
    for at in range(start, end, 1 << 20):
        _write_all(fd, data[at : min(end, at + (1 << 20))])


def _sections(data: mmap.mmap, start: int) -> Iterator[tuple[int, int]]:
    """Where each file's section of the patch in ``data`` begins and ends, from ``start``."""
    size = len(data)
    while start < size:
        end = data.find(b"\ndiff --git ", start + 1)
        end = size if end < 0 else end + 1
        yield start, end
        start = end


def _whole(path: Path, numstat: bytes) -> str:
    """What the patch at ``path`` lacks of the lines git counted for it (``numstat``, the
    ``--numstat -z`` block of the same diff or of one of the same two states); "" if
    none. A rollback's patch once held a deletion without its file's lines, git having
    read the blob from a worktree file the rollback removed (``git.TREES_ONLY`` closes
    that way); whatever else could cut a patch short, it is caught here, before the
    ledger names the patch. Content lines are those after a file's first hunk header
    (``@@``): its ``---``/``+++`` lines come before it, and a binary file has none. A
    path git counts as binary is left out: its change of type (a link that became a
    binary file) is two sections, one of them text, under one uncounted entry."""
    files, _ = git.file_stats(numstat)
    binary = {os.fsencode(f.path) for f in files if f.binary}
    additions = sum(f.additions for f in files)
    deletions = sum(f.deletions for f in files)
    plus = minus = 0
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                start = 0
                while start < size:
                    end = data.find(b"\ndiff --git ", start + 1)
                    end = size if end < 0 else end
                    hunk = data.find(b"\n@@ ", start, end)
                    if hunk >= 0 and not (binary and _named(data, start) in binary):
                        body = data[hunk:end]
                        plus, minus = plus + body.count(b"\n+"), minus + body.count(b"\n-")
                    start = end
    if (plus, minus) == (additions, deletions):
        return ""
    return (
        f"the patch has {plus} lines added and {minus} removed where git counted "
        f"{additions} and {deletions}"
    )


def _named(data: mmap.mmap, start: int) -> bytes:
    """The path of the patch section at ``start`` (``diff --git a/P b/P``: the same path
    twice, renames being off), unquoted as git quotes names (C escapes)."""
    at = start + 1 if data[start : start + 1] == b"\n" else start
    line = data[at : data.find(b"\n", at)][len(b"diff --git ") :]
    if line.startswith(b'"'):
        quoted = line[1 : line.index(b'" "')]
        return codecs.escape_decode(quoted)[0][2:]
    return line[2 : (len(line) - 1) // 2]


def _counted(repo: Path, a: str, b: str, head: bytes) -> DiffStat:
    """The stat of the patch's numstat block ``head``, with files and lines counted as
    every other count of bar counts them (``git.numstat``: ``bar diff --stat``, ``bar
    apply``, ``bar task list``), renames detected: the patch replays a rename as a
    deletion and an addition, but a rename is one file changed, not two. Its file list
    names every path the patch touches. A second diff (of trees alone) runs only when
    the block could hold a rename."""
    stat = git.parse_numstat(head)
    if not git.may_rename(head):
        return stat
    counted = git.numstat(repo, a, b)
    return DiffStat(counted.files, counted.additions, counted.deletions, stat.file_list)


def _scratch_file() -> BinaryIO:
    """An unnamed file for a child's stderr (``tempfile`` costs more to import than the
    whole diff takes on a small change)."""
    try:
        return open(os.memfd_create("bar-stderr", os.MFD_CLOEXEC), "w+b")
    except (AttributeError, OSError):
        import tempfile

        return tempfile.TemporaryFile()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# the lines of a patch that name files (its "metadata": docs/internals/redact.md), not content
_NAMING = (
    b"diff --git ",
    b"--- ",
    b"+++ ",
    b"rename from ",
    b"rename to ",
    b"copy from ",
    b"copy to ",
    b"Binary files ",
)


def mask_names(path: Path, names: Sequence[str], scrub: Callable[[bytes], bytes]) -> bool:
    """Mask the known secret values in the file names of the patch at ``path``
    (``names``: the files it changes; ``scrub``: what masks those values). A file named
    by a secret (``touch "$API_KEY"``) would otherwise put it on disk in the patch; the
    patch of such a file no longer replays by name (its content does). A name that only
    has a token's shape is the step's work and is kept. Costs nothing when no name holds
    a secret. Whether the patch was rewritten."""
    if all(scrub(os.fsencode(name)) == os.fsencode(name) for name in names):
        return False
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return False
    lines = [scrub(line) if line.startswith(_NAMING) else line for line in lines]
    from bar.store.files import write_bytes_atomic

    write_bytes_atomic(path, b"\n".join(lines), mode=0o600)
    return True
