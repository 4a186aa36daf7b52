"""bar run in a pseudo-terminal: the cast and the cleaned text of an interactive step."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, ledger, new_task, task_dir

# --- policy in bar run --------------------------------------------------------------


def test_pty_step_records_cast_and_clean_text(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    code = "import sys; print(sys.stdout.isatty()); print('\\x1b[31mred\\x1b[0m done')"
    res = subprocess.run(
        [BAR_EXE, "run", "--pty", "--", sys.executable, "-c", code],
        cwd=inited,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stderr
    (step,) = ledger(t["id"])
    assert step["pty"] is True
    assert step["artifacts"]["cast"] == "artifacts/0001.cast"
    assert "output" not in step["artifacts"]  # stored once: in the recording
    assert sorted(p.name for p in (task_dir(t["id"]) / "artifacts").iterdir()) == ["0001.cast"]
    shown = subprocess.run(
        [BAR_EXE, "show", "1", "--json"], cwd=inited, capture_output=True, timeout=60
    )
    text = json.loads(shown.stdout)["output_text"]
    assert text == "=== STDOUT ===\nTrue\nred done\n=== STDERR ===\n"
    shown = subprocess.run([BAR_EXE, "show", "1"], cwd=inited, capture_output=True, timeout=60)
    assert b"--- output derived from artifacts/0001.cast\n=== STDOUT ===\nTrue\n" in shown.stdout
    lines = (task_dir(t["id"]) / "artifacts/0001.cast").read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert "\x1b[31m" in "".join(json.loads(x)[2] for x in lines[1:])
    replay = subprocess.run(
        [BAR_EXE, "replay", "1", "--instant"], cwd=inited, capture_output=True, timeout=60
    )
    assert replay.returncode == 0 and b"red" in replay.stdout
    (task_dir(t["id"]) / "artifacts/0001.cast").unlink()  # gone: said, nothing made up
    shown = subprocess.run([BAR_EXE, "show", "1"], cwd=inited, capture_output=True, timeout=60)
    assert shown.returncode == 0 and b"=== STDOUT ===" not in shown.stdout
    assert b"the output (derived from artifacts/0001.cast) is missing" in shown.stderr


def test_replay_of_a_step_run_without_a_terminal_says_so_and_exits_1(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo plain").code == 0
    res = bar(capfd, "replay", "1")
    assert res.code == 1 and res.out == ""  # the step is there: not "not found" (3)
    assert "step 0001 was not run on a terminal, so it has no terminal recording" in res.err
    assert "hint: `bar show 0001` prints its output" in res.err and "--pty" in res.err
    assert bar(capfd, "replay", "2").code == 3  # a step that is not there


# --- output reaches disk as it comes ------------------------------------------------


def cast_events(path: Path) -> list[list[Any]]:
    """The events of a cast being written: complete lines only."""
    if not path.exists():
        return []
    lines = path.read_text(errors="replace").split("\n")[1:-1]  # the last may be torn
    return [json.loads(line) for line in lines]


def wait_for_text(path: Path, text: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def test_cast_keeps_the_timing_of_the_output(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = subprocess.run(
        [BAR_EXE, "run", "--pty", "--", "sh", "-c", "echo a; sleep 1.5; echo b"],
        cwd=inited,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stderr
    events = [e for e in cast_events(task_dir(t["id"]) / "artifacts/0001.cast") if e[1] == "o"]
    (at_a,) = [e[0] for e in events if "a" in e[2]]
    (at_b,) = [e[0] for e in events if "b" in e[2]]
    assert at_b - at_a >= 1.0, events  # the pause is there to replay, not squeezed away


def test_output_is_on_disk_before_bar_is_killed(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # SIGKILL leaves bar no chance to flush anything: what the step printed must already
    # be in the cast (where its text is derived from) while the step goes on.
    t = new_task(capfd)
    artifacts = task_dir(t["id"]) / "artifacts"
    script = "echo printed-before-the-kill; exec sleep 60"
    bar_proc = subprocess.Popen(
        [BAR_EXE, "run", "--pty", "--", "sh", "-c", script],
        cwd=inited,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        in_cast = wait_for_text(artifacts / "0001.cast", "printed-before-the-kill")
    finally:
        bar_proc.send_signal(signal.SIGKILL)  # the step then loses its terminal: SIGHUP
        bar_proc.wait(timeout=60)
    assert in_cast
    assert any("printed-before-the-kill" in e[2] for e in cast_events(artifacts / "0001.cast"))
