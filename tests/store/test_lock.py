"""A waiter says whom it waits for: the holder's pid and command, and where that bar has
exited, the processes it started that still hold the lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bar.errors import Locked
from bar.store.lock import FileLock

# a bar that takes the lock, starts a process that keeps its descriptor (as a step's
# holder does), prints that process's pid and waits to be killed
HOLDER = """
import os, subprocess, sys, time
from pathlib import Path
from bar.store.lock import FileLock, held_descriptors
with FileLock(Path(sys.argv[1]), "task t", what="bar run -- sleep \x1b]0;title\x07"):
    fds = held_descriptors()
    child = subprocess.Popen(["sleep", "60"], pass_fds=fds, start_new_session=True)
    print(child.pid, flush=True)
    time.sleep(60)
"""


def test_a_waiter_names_the_processes_that_outlived_the_holder(tmp_path: Path) -> None:
    lock = tmp_path / "task.lock"
    bar = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE)
    assert bar.stdout is not None
    child = int(bar.stdout.readline())
    try:
        with pytest.raises(Locked) as alive:
            FileLock(lock, "task t", wait=False).__enter__()
        assert f"pid {bar.pid} (bar run -- sleep ?]0;title?)" in str(alive.value)
        assert "has exited" not in str(alive.value)
        bar.kill()
        bar.wait()
        # the flock is the open file's: the child's copy of the descriptor holds it
        with pytest.raises(Locked) as gone:
            FileLock(lock, "task t", wait=False).__enter__()
        said = str(gone.value)
        assert f"pid {bar.pid} (bar run -- sleep ?]0;title?), which has exited" in said
        assert f"pid {child} (sleep 60)" in said
    finally:
        os.kill(child, signal.SIGKILL)
        bar.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with FileLock(lock, "task t", wait=False):
                break
        except Locked:
            time.sleep(0.05)
    assert json.loads(lock.read_text() or "{}") == {}  # (taken, then let go)


def test_a_lock_whose_holder_died_is_taken_once_what_it_started_lets_go(
    tmp_path: Path,
) -> None:
    """Even with ``--no-wait``: a bar killed while a step runs leaves the lock with the
    step's holder, which ends the step and lets go within moments; the next command
    takes it then rather than saying the task is busy. What holds on for longer (above:
    a process that outlived its bar) is still named, after that moment."""
    lock = tmp_path / "task.lock"
    held = HOLDER.replace('["sleep", "60"]', '["sleep", "0.3"]')
    bar = subprocess.Popen([sys.executable, "-c", held, str(lock)], stdout=subprocess.PIPE)
    assert bar.stdout is not None
    int(bar.stdout.readline())
    bar.kill()
    bar.wait()
    with FileLock(lock, "task t", wait=False):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
