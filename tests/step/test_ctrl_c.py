"""Ctrl-C typed at the developer's terminal during a step: ``bar run`` on a real pty that
is its controlling terminal, the key typed as a person types it (the terminal makes it
a SIGINT to the programs in front). The step is recorded as stopped by SIGINT whatever
code the command then chose (an agent catches it and exits 0), it reads
``interrupted`` in ``bar run``'s last line, ``bar log``, ``bar show`` and the JSON, and
the agent's call cut short is ``interrupted``. A program that goes on after Ctrl-C
(a prompt that catches it, then more typed) ends with its own code."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from helpers import FAKE_AGENT_PATH, bar, ledger, new_task, worktree
from mock_models import MockServer, Shell, Stall
from ptys import CATCHING_PROMPT, on_terminal
from real_agents import AgentSetup, agent_binary

CTRL_C = b"\x03"
# how the key reaches the command: through bar's pty; from the terminal, in bar's process
# group; passed on by bar, to a confined command in a session of its own
MODES = {"pty": ["--pty"], "pipes": ["--no-pty", "--no-sandbox"], "confined": ["--no-pty"]}


def shows(capfd: pytest.CaptureFixture[str], ending: str) -> None:
    """``bar log``, ``bar show`` and their JSON say the last step ended so."""
    (row,) = [line for line in bar(capfd, "log").out.splitlines() if line.startswith("0001")]
    assert row.split("  ")[2].strip() == ending.split(" (")[0], row
    shown = bar(capfd, "show", "1").out
    assert f"result    {ending}" in shown, shown
    (logged,) = bar(capfd, "log", "--json").json()
    assert logged["ending"] == ending.split(" (")[0]
    assert bar(capfd, "show", "1", "--json").json()["ending"] == logged["ending"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_ctrl_c_during_an_agent_step_is_never_a_success(
    mode: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The agent catches SIGINT, ends its session and exits 0 (as Claude Code -p does),
    while a command it asked for runs."""
    t = new_task(capfd)
    running = worktree(t) / "running.txt"
    agent = [sys.executable, str(FAKE_AGENT_PATH), "--agent", "claude", "--transcript"]
    shown = on_terminal(
        "run",
        *MODES[mode],
        "--agent",
        "claude",
        "--",
        *agent,
        "--interrupt-exit",
        "0",
        "echo first",
        "touch running.txt; sleep 60",
        cwd=inited,
        keys=[(running, CTRL_C)],
    )
    assert "INTERRUPTED" in shown.text, shown.text
    assert shown.code == 130, shown.text
    assert "recorded: interrupted (SIGINT, exit 130)" in shown.text
    (step,) = ledger(t["id"])
    assert (step["exit_code"], step["signal"]) == (130, 2)
    outcomes = {e["command"]: e.get("outcome") for e in step["policy_events"]}
    assert outcomes == {"echo first": "ran", "touch running.txt; sleep 60": "interrupted"}
    shows(capfd, "interrupted (SIGINT, exit 130)")
    shown_step = bar(capfd, "show", "1").out.splitlines()
    (policy,) = [line for line in shown_step if line.startswith("  policy") and "sleep" in line]
    assert policy.endswith("-> interrupted"), policy
    # the agent said so in its session too: the last word of its conversation
    talk = bar(capfd, "show", "1", "--session").out.splitlines()
    assert [line for line in talk if line.strip()][-2].startswith("interrupt ")


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_plain_command_killed_by_ctrl_c_reads_the_same_everywhere(
    mode: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The key is typed as soon as ``started`` shows, while the shell may be starting
    ``sleep`` (a signal that lands then is dropped in the child the shell made: bar gives
    it again): the command is stopped, never left to sleep its 60 s."""
    t = new_task(capfd)
    began = time.monotonic()
    shown = on_terminal(
        "run",
        *MODES[mode],
        "--",
        "sh",
        "-c",
        "echo started; sleep 60; echo slept",
        cwd=inited,
        keys=[(b"started", CTRL_C)],
    )
    assert time.monotonic() - began < 30 and "slept" not in shown.text, shown.text
    assert shown.code == 130, shown.text
    assert "recorded: interrupted (SIGINT, exit 130)" in shown.text
    (step,) = ledger(t["id"])
    assert (step["exit_code"], step["signal"]) == (130, 2)
    shows(capfd, "interrupted (SIGINT, exit 130)")


def test_a_program_that_goes_on_after_ctrl_c_ends_as_it_chooses(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    shown = on_terminal(
        "run",
        "--pty",
        "--",
        sys.executable,
        "-c",
        CATCHING_PROMPT,
        cwd=inited,
        keys=[(b"answer?", CTRL_C), (b"caught", b"yes\r")],
    )
    assert "got yes" in shown.text and shown.code == 0, shown.text
    (step,) = ledger(t["id"])
    assert step["exit_code"] == 0 and "signal" not in step
    shows(capfd, "exit 0")


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_ctrl_c_stops_a_released_agent_and_the_step_says_so(
    agent: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The released CLIs, non-interactive, on a terminal: Ctrl-C while a command they
    run sleeps. Claude Code exits 0, Codex 1, Gemini CLI 130 (it reads the key itself, in
    raw mode: its session, cut mid-turn, says it was stopped)."""
    agent_binary(agent)
    t = new_task(capfd)
    running = worktree(t) / "running.txt"
    with MockServer([Shell("touch running.txt; sleep 60"), Stall()]) as server:
        setup = AgentSetup(agent, server.url)
        shown = on_terminal(
            "run",
            "--agent",
            agent,
            "--",
            *setup.argv("run it"),
            cwd=inited,
            env=setup.env,
            keys=[(lambda: _settled(running), CTRL_C)],
            timeout=180,
        )
    (step,) = ledger(t["id"])
    assert step["signal"] == 2 and step["exit_code"] != 0, shown.text
    assert f"recorded: interrupted (SIGINT, exit {step['exit_code']})" in shown.text
    (event,) = [e for e in step["policy_events"] if "sleep 60" in e["command"]]
    assert event["outcome"] == "interrupted"
    shows(capfd, f"interrupted (SIGINT, exit {step['exit_code']})")


def _settled(path: Path) -> bool:
    """The agent's command has started, and a moment has passed (the agent is waiting on
    it, not still between its hook and the command)."""
    try:
        return time.time() - os.stat(path).st_mtime > 1.0
    except FileNotFoundError:
        return False
