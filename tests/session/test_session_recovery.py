"""A step whose ``bar`` was killed while its agent ran keeps the agent's session: the
command that records the interrupted step reads the transcript as ``bar run`` would have."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import BAR_EXE, ledger, new_task, seen_alive_after, task_dir, worktree

AGENT = r"""
import json, os, pathlib, sys, time, datetime
def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
path = pathlib.Path(os.environ["CLAUDE_CONFIG_DIR"], "projects", "k", "s-killed.jsonl")
path.parent.mkdir(parents=True, exist_ok=True)
with path.open("a") as f:
    for line in (
        {"type": "user", "message": {"role": "user", "content": "refactor the parser"}},
        {"type": "assistant", "message": {"id": "m1", "model": "claude-x", "role": "assistant",
         "content": [{"type": "text", "text": "Starting with the lexer."}],
         "usage": {"input_tokens": 50, "output_tokens": 6}}},
    ):
        f.write(json.dumps({**line, "timestamp": now(), "sessionId": "s-killed"}) + "\n")
pathlib.Path("work.txt").write_text("partial\n")
time.sleep(60)
"""


def test_a_killed_bar_leaves_the_session_to_the_command_that_records_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--agent", "claude", "--", sys.executable, "-c", AGENT],
        cwd=inited,
        start_new_session=True,
        env={**os.environ, "BAR_RESIDENT_IDLE": "0", "BAR_QUIET": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    # its content, not the file alone: a write after bar was killed is rightly no step's
    while not ((wt / "work.txt").exists() and (wt / "work.txt").read_text() == "partial\n"):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    seen_alive_after(t["id"], wt / "work.txt")  # (else it is no step's)
    os.killpg(proc.pid, signal.SIGKILL)  # bar and the agent
    proc.wait(timeout=30)
    res = subprocess.run(
        [BAR_EXE, "run", "--", "true"], cwd=inited, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and "interrupted" in res.stderr, res.stderr
    crashed = ledger(t["id"])[0]
    assert crashed["interrupted"] is True
    assert crashed["session"]["session_id"] == "s-killed"
    assert (crashed["session"]["input_tokens"], crashed["session"]["output_tokens"]) == (50, 6)
    lines = (task_dir(t["id"]) / crashed["artifacts"]["session"]).read_text().splitlines()
    events = [json.loads(x) for x in lines]
    assert [e.get("text") for e in events if e["type"] == "message"] == [
        "refactor the parser",
        "Starting with the lexer.",
    ]
