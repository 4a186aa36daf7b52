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
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, pty_step, task_dir

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
    # the seed's output file, as every step has it; the recording beside it
    assert step["artifacts"] == {"output": "artifacts/0001.output", "cast": "artifacts/0001.cast"}
    artifacts = task_dir(t["id"]) / "artifacts"
    assert sorted(p.name for p in artifacts.iterdir()) == ["0001.cast", "0001.output"]
    text = "=== STDOUT ===\nTrue\nred done\n=== STDERR ===\n"
    assert (artifacts / "0001.output").read_text() == text
    shown = subprocess.run(
        [BAR_EXE, "show", "1", "--json"], cwd=inited, capture_output=True, timeout=60
    )
    assert json.loads(shown.stdout)["output_text"] == text
    shown = subprocess.run([BAR_EXE, "show", "1"], cwd=inited, capture_output=True, timeout=60)
    assert b"--- output artifacts/0001.output\n=== STDOUT ===\nTrue\n" in shown.stdout
    # the recording holds the escapes and refers to the text for the rest
    stored = (artifacts / "0001.cast").read_text()
    header = json.loads(stored.splitlines()[0])
    assert header["version"] == 2 and header["text_file"] == "0001.output"
    assert "\\u001b[31m" in stored and "red done" not in stored
    whole = subprocess.run(
        [BAR_EXE, "replay", "1", "--cast"], cwd=inited, capture_output=True, timeout=60
    )
    lines = whole.stdout.decode().splitlines()
    assert "text_file" not in json.loads(lines[0])
    printed = "".join(json.loads(x)[2] for x in lines[1:])
    assert printed == "True\r\n\x1b[31mred\x1b[0m done\r\n"
    replay = subprocess.run(
        [BAR_EXE, "replay", "1", "--instant"], cwd=inited, capture_output=True, timeout=60
    )
    assert replay.returncode == 0 and replay.stdout == printed.encode()
    (artifacts / "0001.output").unlink()  # gone: said, nothing made up
    shown = subprocess.run([BAR_EXE, "show", "1"], cwd=inited, capture_output=True, timeout=60)
    assert shown.returncode == 0 and b"=== STDOUT ===" not in shown.stdout
    assert b"the output (artifacts/0001.output) is missing" in shown.stderr
    replay = subprocess.run(
        [BAR_EXE, "replay", "1", "--instant"], cwd=inited, capture_output=True, timeout=60
    )
    assert replay.returncode == 3 and replay.stdout == b""
    assert b"refers to its text 0001.output, which does not exist" in replay.stderr


def test_pty_step_of_an_earlier_bar_has_its_text_derived_from_its_recording(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # before the text was kept in the output file, a pty step kept its recording alone
    t = new_task(capfd)
    res = subprocess.run(
        [BAR_EXE, "run", "--pty", "--", "sh", "-c", "printf '\\033[1mbold\\033[0m text\\n'"],
        cwd=inited,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stderr
    artifacts = task_dir(t["id"]) / "artifacts"
    whole = bar_exe("replay", "1", "--cast", cwd=inited)
    (artifacts / "0001.cast").write_text(whole.out)
    (artifacts / "0001.output").unlink()
    line = task_dir(t["id"]) / "ledger.jsonl"
    rec = json.loads(line.read_text())
    del rec["artifacts"]["output"]
    line.write_text(json.dumps(rec) + "\n")
    shown = bar_exe("show", "1", cwd=inited)
    assert "--- output derived from artifacts/0001.cast\n=== STDOUT ===\nbold text\n" in shown.out


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


def wait_for_text(path: Path, text: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def test_cast_keeps_the_timing_of_the_output(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = subprocess.run(
        [BAR_EXE, "run", "--pty", "--", "sh", "-c", "echo a; sleep 1.5; echo b"],
        cwd=inited,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stderr
    whole = bar_exe("replay", "1", "--cast", cwd=inited).out.splitlines()[1:]
    events = [e for e in map(json.loads, whole) if e[1] == "o"]
    (at_a,) = [e[0] for e in events if "a" in e[2]]
    (at_b,) = [e[0] for e in events if "b" in e[2]]
    assert at_b - at_a >= 1.0, events  # the pause is there to replay, not squeezed away


def test_output_is_on_disk_before_bar_is_killed(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # SIGKILL leaves bar no chance to flush anything: what the step printed must already
    # be in its output file, and its recording refer to it, while the step goes on; a
    # prompt with no newline yet reaches the recording within a second.
    t = new_task(capfd)
    artifacts = task_dir(t["id"]) / "artifacts"
    script = "echo printed-before-the-kill; printf 'answer? '; exec sleep 60"
    bar_proc = pty_step(inited, script)
    try:
        in_text = wait_for_text(artifacts / "0001.output", "printed-before-the-kill")
        # the prompt's event, its line whole (the recording holds it within a second)
        deadline = time.monotonic() + 60
        while not (
            prompted := any("answer? " in e[2] for e in cast_events(artifacts / "0001.cast"))
        ):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        bar_proc.send_signal(signal.SIGKILL)  # the step then loses its terminal: SIGHUP
        bar_proc.wait(timeout=60)
    assert in_text and prompted
    events = cast_events(artifacts / "0001.cast")
    assert events and all(e[1] == "o" for e in events)
    # the next step records it as interrupted, with what it printed
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    step = ledger(t["id"])[0]
    assert step["interrupted"] is True and step["artifacts"]["output"] == "artifacts/0001.output"
    whole = bar_exe("replay", "1", "--cast", cwd=inited).out.splitlines()[1:]
    printed = "".join(json.loads(x)[2] for x in whole)
    assert printed == "printed-before-the-kill\r\nanswer? "
