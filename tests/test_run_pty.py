"""bar run in a pseudo-terminal: the cast and the cleaned text of an interactive step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import BAR_EXE, bar, ledger, new_task, task_dir


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    return repo


# --- policy in bar run --------------------------------------------------------------


def test_pty_step_records_cast_and_clean_text(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    code = "import sys; print(sys.stdout.isatty()); print('\\x1b[31mred\\x1b[0m done')"
    res = subprocess.run([BAR_EXE, "run", "--pty", "--", sys.executable, "-c", code],
                         cwd=inited, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert res.returncode == 0, res.stderr
    (step,) = ledger(t["id"])
    assert step["pty"] is True
    assert step["artifacts"]["cast"] == "artifacts/0001.cast"
    text = (task_dir(t["id"]) / step["artifacts"]["output"]).read_text()
    assert text == "=== STDOUT ===\nTrue\nred done\n=== STDERR ===\n"
    lines = (task_dir(t["id"]) / "artifacts/0001.cast").read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert "\x1b[31m" in "".join(json.loads(x)[2] for x in lines[1:])
    replay = subprocess.run([BAR_EXE, "replay", "1", "--instant"], cwd=inited,
                            capture_output=True, timeout=60)  # fmt: skip
    assert replay.returncode == 0 and b"red" in replay.stdout
