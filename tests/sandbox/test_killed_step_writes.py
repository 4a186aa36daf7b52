"""A step's processes write nothing once its bar is killed: the whole tree dies with bar at
once (its own PID namespace: docs/sandbox.md, "Processes, /tmp and privileges"), so recovery
credits no write of theirs to the developer (issue: nothing destroyed that was not recorded,
item 11)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import BAR_EXE, bar, ledger, new_task, set_config, worktree

from bar.sandbox import UNAVAILABLE_ENV, landlock, namespace

CONFINES = landlock.abi_version() >= 1 and not os.environ.get(UNAVAILABLE_ENV)
OWN_PIDS = CONFINES and namespace.pids_available("/") is None

# a grandchild of the step's command, detached from it, writing a file every 5 ms with
# the moment of each write
TICKING = """
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
while True:
    with open("tick.txt", "w") as f:
        f.write(f"{time.time_ns()}\\n")
    time.sleep(0.005)
"""


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


@pytest.mark.parametrize("served", [False, True], ids=["here", "served"])
@pytest.mark.parametrize("confined", [True, False], ids=["own-pids", "unconfined"])
def test_a_killed_step_s_grandchild_writes_nothing_after_the_kill(
    confined: bool,
    served: bool,
    speed: str,
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Run by bar itself, or served by the resident (``bar.changes.fast.resident``), whose
    fork dies with its killed caller: alone, so that the step's holder, its child, kills
    what left the command's session (it once went down with the fork, and an unconfined
    step's detached grandchild wrote on, read as the developer's)."""
    if confined and not OWN_PIDS:
        pytest.skip("no PID namespace for a step here")
    if served and speed == "slow":
        pytest.skip("no resident with the speed layer off")
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})
    task = new_task(capfd)
    wt = worktree(task)
    script = tmp_path / "tick.py"
    script.write_text(TICKING)
    env = dict(os.environ)
    if served:
        subprocess.run([BAR_EXE, "resident", "start"], capture_output=True, check=True)
    else:
        env["BAR_RESIDENT_IDLE"] = "0"
    argv = [BAR_EXE, "run", "--no-pty", *([] if confined else ["--no-sandbox"])]
    argv += ["--", "sh", "-c", f"{sys.executable} {script}; sleep 600"]
    proc = subprocess.Popen(
        argv,
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (wt / "tick.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # ticking
    holders = _holders(proc.pid)
    assert bool(holders) != served, holders  # (a served step's holder is the fork's child)
    killed_ns = time.time_ns()
    os.kill(proc.pid, signal.SIGKILL)  # bar alone: not its group
    proc.wait(timeout=30)
    _wait_gone(holders)
    time.sleep(0.3)  # what a grandchild left alive would write meanwhile
    last_write = (wt / "tick.txt").stat().st_mtime_ns
    after_ms = (last_write - killed_ns) / 1e6
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    steps = ledger(task["id"])
    manual = [s for s in steps if s["kind"] == "manual"]
    assert not [s for s in manual if "tick.txt" in s["diff_stat"]["file_list"]], steps
    interrupted = [s for s in steps if s.get("interrupted")]
    assert interrupted and "tick.txt" in interrupted[0]["diff_stat"]["file_list"]
    # the kernel wakes the holder as bar dies (it looks every 200 ms besides): on an idle
    # machine the last write comes a few ms after the kill; a loaded one may be slower
    assert after_ms < 1000, f"the step's grandchild wrote {after_ms:.0f} ms after bar was killed"


def _holders(bar_pid: int) -> list[int]:
    """The children of ``bar_pid`` that are copies of it (a step's holder is forked, never
    exec'd: its command line is bar's)."""
    with open(f"/proc/{bar_pid}/cmdline", "rb") as f:
        own = f.read()
    found = []
    for task in Path(f"/proc/{bar_pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() == own:
                    found.append(int(pid))
            except OSError:
                continue
    return found


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _wait_gone(pids: list[int]) -> None:
    """Until the processes ``pids`` have ended (a minute at most)."""
    deadline = time.monotonic() + 60
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("confined", [True, False], ids=["own-pids", "unconfined"])
def test_no_bar_records_a_killed_step_while_its_processes_still_run(
    confined: bool,
    speed: str,
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """However late the holder of a killed bar's step comes to kill it (stopped here), the
    task stays locked until it has: the next bar waits, and then records the step with
    every write of it, none as the developer's."""
    if confined and not OWN_PIDS:
        pytest.skip("no PID namespace for a step here")
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})
    task = new_task(capfd)
    wt = worktree(task)
    script = tmp_path / "tick.py"
    script.write_text(TICKING)
    argv = [BAR_EXE, "run", "--no-pty", *([] if confined else ["--no-sandbox"])]
    argv += ["--", "sh", "-c", f"{sys.executable} {script}; sleep 600"]
    proc = subprocess.Popen(
        argv,
        cwd=repo,
        env={**os.environ, "BAR_RESIDENT_IDLE": "0"},  # (its holder is bar's child: stopped)
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (wt / "tick.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    holders = _holders(proc.pid)
    assert len(holders) == 1, holders
    os.kill(holders[0], signal.SIGSTOP)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    nxt = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--", "true"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        time.sleep(1.0)
        assert nxt.poll() is None, "a bar took the task while the killed step still ran"
    finally:
        os.kill(holders[0], signal.SIGCONT)
    _, err = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, err.decode()
    written = (wt / "tick.txt").stat().st_mtime_ns
    time.sleep(0.3)
    assert (wt / "tick.txt").stat().st_mtime_ns == written, "the step's grandchild still writes"
    steps = ledger(task["id"])
    manual = [s for s in steps if s["kind"] == "manual"]
    assert not [s for s in manual if "tick.txt" in s["diff_stat"]["file_list"]], (
        err.decode(),
        steps,
    )
    interrupted = [s for s in steps if s.get("interrupted")]
    assert interrupted and "tick.txt" in interrupted[0]["diff_stat"]["file_list"]
