"""bar.changes.fast.own_pages: a fork makes its own copies of the pages it shares with its parent
before it needs them, so that writing to them later costs no copy-on-write fault."""

from __future__ import annotations

import os
import resource

import pytest

from bar.changes.fast import own_pages

PAGES = 2048  # 8 MB of pages written by the parent before it forks


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _in_a_fork(prepare: bool) -> tuple[int, int]:
    """(pages asked for, faults taken writing to every page of a buffer the parent
    wrote), measured in a fork of this process."""
    buffer = bytearray(PAGES * 4096)
    for at in range(0, len(buffer), 4096):
        buffer[at] = 1  # (present in the parent: shared with the fork)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the fork reports through the pipe)
        try:
            asked = own_pages.copy_shared_pages() if prepare else 0
            before = _faults()
            for at in range(0, len(buffer), 4096):
                buffer[at] = 2
            os.write(write, f"{asked} {_faults() - before}".encode())
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 100).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    return int(said[0]), int(said[1])


def test_a_fork_that_copied_its_pages_takes_no_fault_writing_to_them() -> None:
    asked, faults = _in_a_fork(prepare=True)
    if asked == 0:
        pytest.skip("this kernel cannot populate pages for writing (Linux 5.14 or later)")
    assert asked >= PAGES
    assert faults < PAGES // 20
    # without it, every page written is a fault (the measure is sound)
    _, unprepared = _in_a_fork(prepare=False)
    assert unprepared >= PAGES * 9 // 10


def test_pages_already_its_own_are_not_asked_for_again() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover
        try:
            first = own_pages.copy_shared_pages()
            os.write(write, f"{first} {own_pages.copy_shared_pages()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    first, second = (int(n) for n in os.read(read, 100).split())
    os.close(read)
    os.waitpid(pid, 0)
    if first == 0:
        pytest.skip("this kernel cannot populate pages for writing (Linux 5.14 or later)")
    assert second < first // 10
