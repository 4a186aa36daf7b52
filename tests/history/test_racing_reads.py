"""A file rewritten while bar's ``git add`` hashes a large one: the record never keeps the
bytes git read with the stat of the bytes written after (bar.git.racy;
docs/internals/record.md, "The record never lies")."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import bar, bar_exe, new_task, plain_git_tree, recorded_tree, worktree

TRIALS = 3


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def rewriting(path: Path, stop: threading.Event) -> threading.Thread:
    """Rewrite ``path`` with as many bytes each time someone has read it since (its atime
    moved past its mtime: git's add hashing it), until ``stop``."""

    def loop() -> None:
        n = 1
        while not stop.is_set():
            st = os.stat(path)
            if st.st_atime_ns >= st.st_mtime_ns:  # read since the last write
                n += 1
                with open(path, "w") as f:
                    f.write(f"{n % 10000:04d}\n")
            time.sleep(0.0002)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # tens of MB hashed, a few times each way
def test_an_edit_racing_the_hash_of_a_large_file_is_recorded(
    speed: str, inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    task = new_task(capfd)
    wt = worktree(task)
    for n in range(TRIALS):
        (wt / "a.txt").write_text("0000\n")
        assert bar(capfd, "run", "--", "true").code == 0
        # a.txt rewritten all along while the step's snapshot hashes it, then a large
        # file after it (a < c): the index is written seconds after git read a.txt
        stop = threading.Event()
        thread = rewriting(wt / "a.txt", stop)
        res = bar_exe(
            "run", "--", "sh", "-c", f"head -c 60000000 /dev/zero > c{n}.bin; echo 0001 > a.txt"
        )
        stop.set()
        thread.join()
        assert res.code == 0, res.err
        assert bar(capfd, "run", "--", "true").code == 0  # the next look
        assert recorded_tree(inited, task) == plain_git_tree(wt, tmp_path), f"trial {n}"
        for big in wt.glob("*.bin"):
            big.unlink()


def test_a_file_that_changes_size_while_git_reads_it_is_read_again(
    inited: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path
) -> None:
    """An editor truncating and rewriting a file, larger and smaller, while bar's
    ``git add`` reads it: git stops with "short read while indexing"; bar reads again,
    never fails the step for it, and the record ends as plain git's of the file."""
    task = new_task(capfd)
    wt = worktree(task)
    target = wt / "saved.bin"
    target.write_bytes(b"x" * (1 << 20))
    stop = threading.Event()

    def save() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            with open(target, "wb") as f:  # (truncated first: a reader finds it short)
                f.write(bytes([65 + n % 26]) * ((1 << 20) + (n % 7) * 65536))

    _steps_beside(capfd, save, stop)
    assert recorded_tree(inited, task) == plain_git_tree(wt, tmp_path)


def test_a_file_rewritten_in_place_while_git_hashes_it_is_read_again(
    inited: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path
) -> None:
    """A program rewriting a file's bytes in place (a database, a memory-mapped file)
    just as bar's ``git add`` reads it, a few times a step: git hashes the bytes, then
    compresses other ones, and stops ("unstable object source data"); bar reads again,
    never fails the step for it, and the record ends as plain git's of the file."""
    task = new_task(capfd)
    wt = worktree(task)
    target = wt / "mapped.db"
    size = 4 << 20
    target.write_bytes(b"\0" * size)
    stop = threading.Event()
    left = [0]  # rewrites left for this step

    def rewrite() -> None:
        fd = os.open(target, os.O_WRONLY)
        try:
            n = 0
            while not stop.is_set():
                st = os.stat(target)
                if left[0] > 0 and st.st_atime_ns >= st.st_mtime_ns:  # read since written
                    left[0] -= 1
                    n += 1
                    os.pwrite(fd, bytes([n % 251]) * 65536, (n * 65536) % size)
                time.sleep(0.0002)
        finally:
            os.close(fd)

    _steps_beside(capfd, rewrite, stop, each=lambda: left.__setitem__(0, 3))
    assert recorded_tree(inited, task) == plain_git_tree(wt, tmp_path)


def _steps_beside(
    capfd: pytest.CaptureFixture[str],
    work: Callable[[], None],
    stop: threading.Event,
    *,
    each: Callable[[], None] = lambda: None,
) -> None:
    """Six steps while ``work`` runs in a thread (``each`` before every one), each
    recorded with exit 0; then ``work`` stopped and one more step, with nothing racing."""
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        for _ in range(6):
            each()
            res = bar(capfd, "run", "--", "true")
            assert res.code == 0, res.err
    finally:
        stop.set()
        worker.join(10)
    assert bar(capfd, "run", "--", "true").code == 0
