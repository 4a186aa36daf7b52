"""Sessions recorded from the released CLIs (Codex 0.169.0, Claude Code 2.1.197, Gemini
CLI 0.61.0), read through ``bar show --session``: what a tool printed, never the header
the agent puts around it for its model, and its exit code as the call's status.

The transcripts in ``tests/data/agent_sessions`` are the agents' own, written with
``make agents`` against the mock model (``tests/support/mock_models.py``) under ``bar
run --agent A``: the model runs a test suite that prints sixty passing tests, then ``2
failed, 117 passed in 0.42s``, and exits 1, then ``echo done``, then claims the tests
pass (``*_transcript``, ``*_rollout``, ``*_chat``); or it runs ``echo one > one.txt;
sleep 20`` and the person presses Ctrl-C during it (``*_interrupted``). Only the paths
were changed (``/home/dev/.bar/projects/click-3f2a``). A step plants one in the agent's
home, its times moved to now, as the agent would have written it during the step.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA, bar, ledger, new_task, task_dir

SESSIONS = DATA / "agent_sessions"
# where each agent keeps a session in its home (bar's variable names it)
PLACES = {
    "codex": "sessions/2026/11/27/rollout-2026-11-27T08-50-21-{id}.jsonl",
    "claude": "projects/-home-dev--bar-projects-click-3f2a-workspaces-x/{id}.jsonl",
    "gemini": ".gemini/tmp/click/chats/session-2026-11-27T08-51-{id}.jsonl",
}
HOME = {"codex": "CODEX_HOME", "claude": "CLAUDE_CONFIG_DIR", "gemini": "GEMINI_CLI_HOME"}
RECORDED = {
    "codex": "codex_rollout.jsonl",
    "claude": "claude_transcript.jsonl",
    "gemini": "gemini_chat.jsonl",
}
# the framing each agent writes around a command's output for its model
FRAMING = re.compile(
    r"Chunk ID:|Wall time:|Process exited with code|Original token count:|^\s*Output:"
    r"|Exit code \d|Exit Code:|Process Group PGID:|untrusted_context",
    re.M,
)

# run inside the step: the recorded lines, their times moved so the first is now
PLANT = """
import datetime, os, re, sys
src, home_var, place = sys.argv[1:]
text = open(src, encoding="utf-8").read()
stamp = re.compile(r"\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?Z")
def parse(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
first = parse(stamp.search(text).group(0))
shift = datetime.datetime.now(datetime.timezone.utc) - first
def moved(m):
    t = parse(m.group(0)) + shift
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
path = os.path.join(os.environ[home_var], place)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w", encoding="utf-8") as f:
    f.write(stamp.sub(moved, text))
"""


def plant(capfd: pytest.CaptureFixture[str], tmp_path: Path, agent: str, name: str) -> None:
    """``bar run --agent AGENT`` a step whose command writes the recorded session ``name``
    in the agent's home, as the agent itself would."""
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    place = PLACES[agent].format(id=name.split(".")[0])
    res = bar(
        capfd,
        "run",
        "--no-pty",
        "--agent",
        agent,
        "--",
        sys.executable,
        str(script),
        str(SESSIONS / name),
        HOME[agent],
        place,
    )
    assert res.code == 0, res.err


def conversation(capfd: pytest.CaptureFixture[str]) -> list[str]:
    res = bar(capfd, "show", "1", "--session")
    assert res.code == 0, res.err
    return res.out.splitlines()


def results_in(capfd: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    data = bar(capfd, "show", "1", "--session", "--json").json()
    return [e for e in data["events"] if e["type"] == "tool_result"]


@pytest.mark.parametrize("agent", sorted(RECORDED))
def test_a_failing_test_run_shows_its_output_and_exit_code_not_the_agents_header(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The model ran the tests (2 failed) and said they pass: the conversation shows the
    run's exit code and its last line, where the failures are counted."""
    new_task(capfd)
    plant(capfd, tmp_path, agent, RECORDED[agent])
    lines = conversation(capfd)
    calls = [n for n, line in enumerate(lines) if line.startswith("tool ")]
    assert len(calls) == 2, lines
    run = lines[calls[0] + 1 : calls[1]]
    assert run[0].split()[:2] == ["exit", "1"], run
    assert run[0].split(None, 2)[2] == "tests/test_cli.py::test_1 PASSED"
    assert run[-1].strip() == "2 failed, 117 passed in 0.42s"
    assert re.fullmatch(r"\s+… \(\d+\+? more lines\)", run[-2]), run
    done = lines[calls[1] + 1]
    assert done.split() == ["ok", "done"]
    assert not [line for line in lines if FRAMING.search(line)], lines
    assert "assistant  All tests pass." in lines

    failing, fine = results_in(capfd)
    assert (failing["ok"], failing["exit_code"]) == (False, 1)
    assert failing["summary"].startswith("tests/test_cli.py::test_1 PASSED\n")
    assert failing["summary"].rstrip().endswith("2 failed, 117 passed in 0.42s")
    assert not FRAMING.search(failing["summary"])
    assert fine["ok"] is True and fine["summary"].strip() == "done"
    assert len(failing["summary"]) <= 2000  # (cut in the middle: its end is kept)


INTERRUPTED = {
    "codex": "codex_interrupted.jsonl",
    "claude": "claude_interrupted.jsonl",
    "gemini": "gemini_interrupted.jsonl",
}


@pytest.mark.parametrize("agent", sorted(INTERRUPTED))
def test_a_call_the_person_stopped_reads_interrupted(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the agent's command ran: the call is ``interrupted`` (not ``ok``, as
    Codex's record read before, nor ``failed`` with the agent's words to its model)."""
    new_task(capfd)
    plant(capfd, tmp_path, agent, INTERRUPTED[agent])
    lines = conversation(capfd)
    (call,) = [n for n, line in enumerate(lines) if line.startswith("tool ")]
    assert lines[call + 1].split(None, 1) == ["interrupted", "(no output)"], lines
    assert lines[call + 2].startswith("interrupt ")
    (result,) = results_in(capfd)
    assert result["interrupted"] is True and result["ok"] is False


def test_a_session_an_older_bar_kept_with_the_header_reads_the_same(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A step recorded before tool results were read out of their framing: its stored
    result still holds Codex's header; ``bar show --session`` reads it the same way."""
    t = new_task(capfd)
    plant(capfd, tmp_path, "codex", RECORDED["codex"])
    (step,) = ledger(t["id"])
    path = task_dir(t["id"]) / step["artifacts"]["session"]
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for e in events:
        if e["type"] == "tool_result":  # as bar kept them before: the agent's text whole
            code = e.pop("exit_code")
            e["summary"] = (
                f"Chunk ID: 195b87\nWall time: 0.0000 seconds\nProcess exited with code {code}"
                f"\nOriginal token count: 4\nOutput:\n{e['summary']}"
            )
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    lines = conversation(capfd)
    statuses = [line.split()[:2] for line in lines if line.startswith("  ")]
    assert ["exit", "1"] in statuses and ["ok", "done"] in statuses
    assert not [line for line in lines if FRAMING.search(line)], lines
