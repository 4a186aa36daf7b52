"""A fork's own copies of the memory it shares with its parent, made before it is needed.

A fork shares its parent's pages until it writes to one; the first write to each costs a
page fault and a copy (copy-on-write). A spare of the resident (``bar.changes.fast.resident_daemon``)
writes to most of the interpreter's heap as soon as it runs a command: every object it
touches has its reference count changed. On the test machine a ``bar run`` fork took
~1,400 such faults, several milliseconds of a command that takes about fifty. So the spare,
while it waits for a command, asks the kernel for its own copy of every page it shares
(``MADV_POPULATE_WRITE``, Linux 5.14): the copies are made then, off the command's path.

Only the pages that need it: anonymous (not file-backed), present, and not yet the
spare's alone (``/proc/self/pagemap``). A spare therefore holds about as much memory of
its own as the resident has written (~10 MB), not its whole address space. Where the
kernel cannot do this (older, or ``/proc`` not mounted), nothing is done: the command
takes the faults as before.
"""

from __future__ import annotations

import array
import ctypes
import mmap
import os

_MADV_POPULATE_WRITE = 23  # (Linux 5.14; not named by Python 3.11's mmap module)
_PRESENT = 1 << 63
_FILE_OR_SHARED = 1 << 61
_EXCLUSIVE = 1 << 56  # mapped by this process alone: writing to it copies nothing
_CHUNK = 4096  # pagemap entries read at a time


def copy_shared_pages() -> int:
    """Make this process's own copy of every anonymous page it still shares; how many
    pages were asked for (0 where the kernel cannot)."""
    page = mmap.PAGESIZE
    try:
        with open("/proc/self/maps", "rb") as f:
            regions = [_writable_private(line) for line in f]
        pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    asked = 0
    try:
        for region in regions:
            if region is None:
                continue
            for start, count in _shared_runs(pagemap, region[0] // page, region[1] // page):
                if madvise(start * page, count * page, _MADV_POPULATE_WRITE) != 0:
                    if ctypes.get_errno() == 22:  # EINVAL: a kernel without it
                        return asked
                    continue  # (a region unmapped meanwhile, memory short: left as is)
                asked += count
    finally:
        os.close(pagemap)
    return asked


def _writable_private(line: bytes) -> tuple[int, int] | None:
    """The address range of a ``/proc/self/maps`` line if it is a private mapping this
    process may write to."""
    fields = line.split()
    if len(fields) < 2 or fields[1][1:2] != b"w" or fields[1][3:4] != b"p":
        return None
    low, _, high = fields[0].partition(b"-")
    return int(low, 16), int(high, 16)


def _shared_runs(pagemap: int, first: int, end: int) -> list[tuple[int, int]]:
    """The runs of pages in ``[first, end)`` that are anonymous, present and shared, as
    (first page, count)."""
    runs: list[tuple[int, int]] = []
    run_start = -1
    for chunk in range(first, end, _CHUNK):
        n = min(_CHUNK, end - chunk)
        try:
            data = os.pread(pagemap, n * 8, chunk * 8)
        except OSError:
            return runs
        entries = array.array("Q", data)  # (in the machine's byte order, as pagemap is)
        for i, entry in enumerate(entries):
            wanted = entry & (_PRESENT | _FILE_OR_SHARED | _EXCLUSIVE) == _PRESENT
            if wanted and run_start < 0:
                run_start = chunk + i
            elif not wanted and run_start >= 0:
                runs.append((run_start, chunk + i - run_start))
                run_start = -1
    if run_start >= 0:
        runs.append((run_start, end - run_start))
    return runs
