"""Nothing a step starts outlives the ``bar`` that supervises it (docs/sandbox.md, "What a
step may do"), not even a ``bar run`` killed by SIGKILL: every process of the step dies with
it, and what the step left running never writes a hand edit afterwards
(``bar.sandbox.holder``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import BAR_EXE, bar_exe, host_pids, process_alive, seen_alive_after, set_config
from test_recovery import check_consistent, setup_task
from test_sandbox import confined

from conftest import git

# a step that writes work.txt, leaves a detached writer behind (its own session, its
# parent gone) that writes late.txt a second later, and waits
_STEP = (
    "echo partial > work.txt; "
    '(setsid sh -c \'echo $$ > "$0/late.pid"; sleep 1.5; echo late > late.txt\' "$1" '
    "</dev/null >/dev/null 2>&1 &); "
    "sleep 60"
)


def _wait_for(what: Path) -> None:
    deadline = time.monotonic() + 60
    while not (what.exists() and what.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert what.exists(), f"{what.name} never appeared"


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("confined", marks=confined),
        "unconfined",
        pytest.param("served", marks=confined),
    ],
)
def test_a_step_dies_with_a_bar_killed_by_sigkill(how: str, repo: Path, tmp_path: Path) -> None:
    task = setup_task(repo)
    wt = Path(task["worktree"])
    spot = tmp_path / "spot"
    spot.mkdir()
    sandbox = ["--no-sandbox"] if how == "unconfined" else []
    env = {**os.environ, "BAR_RESIDENT_IDLE": "60" if how == "served" else "0"}
    set_config(sandbox={"allow_write": [str(spot)]})  # (where the step says who it left)
    # in a session of its own, and only bar is killed: not what it started
    proc = subprocess.Popen(
        [BAR_EXE, "run", *sandbox, "--no-pty", "--", "sh", "-c", _STEP, "step", str(spot)],
        cwd=repo,
        start_new_session=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for(spot / "late.pid")
    _wait_for(wt / "work.txt")
    seen_alive_after(task["id"], wt / "work.txt")  # (else it would be no step's)
    # (``setsid`` forks before it runs the writer, and its first copy may linger a moment)
    deadline = time.monotonic() + 30
    while len(found := host_pids(b"-c\0echo $$ >", str(spot).encode())) > 1:
        assert time.monotonic() < deadline, found
        time.sleep(0.01)
    (late,) = found
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while process_alive(late) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(late), "the step's detached process outlived bar"
    # (it writes late.txt itself, with a builtin: dead, it never will; nothing to wait out)
    assert not (wt / "late.txt").exists()

    # the step is recorded as interrupted with what it wrote; nothing is anyone's hand edit
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0 and "interrupted" in res.err, res.err
    steps = check_consistent(repo, task, tmp_path / "replay")
    assert [s.get("interrupted", False) for s in steps[2:]] == [True, False]
    assert steps[2]["diff_stat"]["file_list"] == ["work.txt"]  # type: ignore[index]
    assert git(repo, "fsck", "--no-progress").strip() == ""


@pytest.mark.parametrize("how", [pytest.param("confined", marks=confined), "unconfined"])
def test_a_signal_bar_passes_on_reaches_the_command_once(
    how: str, repo: Path, tmp_path: Path
) -> None:
    """Between bar and the command sits the holder: a signal bar passes on is neither lost
    there nor delivered twice (to the command's group and again by the holder)."""
    task = setup_task(repo)
    wt = Path(task["worktree"])
    sandbox = ["--no-sandbox"] if how == "unconfined" else []
    script = (
        "trap 'echo TERM >> got; exit 0' TERM; trap 'echo HUP >> got' HUP; "
        "echo up > up; while :; do sleep 0.05; done"
    )
    proc = subprocess.Popen(
        [BAR_EXE, "run", *sandbox, "--no-pty", "--", "sh", "-c", script],
        cwd=repo,
        start_new_session=True,
        env={**os.environ, "BAR_RESIDENT_IDLE": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_for(wt / "up")
    proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
    while not (wt / "got").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert (wt / "got").read_text() == "HUP\nTERM\n", err
    steps = check_consistent(repo, task, tmp_path / "replay")
    assert steps[-1]["exit_code"] != 0  # (stopped from outside: never a success)


@pytest.mark.parametrize("how", [pytest.param("confined", marks=confined), "unconfined"])
def test_the_command_s_own_outcome_is_recorded_through_its_holder(how: str, repo: Path) -> None:
    setup_task(repo)
    sandbox = ["--no-sandbox"] if how == "unconfined" else []
    res = bar_exe("run", *sandbox, "--json", "--", "sh", "-c", "exit 7", cwd=repo)
    assert res.json()["exit_code"] == 7
    for sig in (signal.SIGUSR1, signal.SIGKILL):
        res = bar_exe(
            "run", *sandbox, "--json", "--", "sh", "-c", f"kill -{sig.name[3:]} $$", cwd=repo
        )
        assert (res.json()["exit_code"], res.json()["signal"]) == (128 + sig, sig)
    res = bar_exe("run", *sandbox, "--json", "--", "no-such-program-here", cwd=repo)
    assert res.json()["exit_code"] == 127 and "command not found" in res.err


def test_the_children_the_kernel_lists_are_those_proc_shows() -> None:
    """``leftovers.child_pids`` reads the kernel's lists of this process's children (one
    for each of its threads) rather than every process of the machine: the same
    children, a running one and one that ended and was not reaped, and nothing else."""
    from bar.sandbox import leftovers

    def by_proc() -> set[str]:
        return {
            name
            for name in os.listdir("/proc")
            if name.isdigit()
            and (leftovers.stat_fields(name) or [b"", b""])[1] == str(os.getpid()).encode()
        }

    listed = leftovers.child_pids()
    if listed is None:
        pytest.skip("this kernel keeps no list of a process's children")
    running = subprocess.Popen(["sleep", "60"])
    ended = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while (leftovers.stat_fields(ended.pid) or [b""])[0] != b"Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        listed = leftovers.child_pids()
        assert listed is not None
        assert {str(running.pid), str(ended.pid)} <= set(listed)
        assert set(listed) == by_proc()
    finally:
        running.kill()
        running.wait()
        ended.wait()
