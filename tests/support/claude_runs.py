"""Real Claude Code sessions that rewind, or stop in the middle of a turn, run by ``bar
run --agent claude`` against the mock model (``mock_models``).

- ``rewinding``: one step runs three prompts in one session; the third resumes it at the
  first prompt's answer (``--resume-session-at``, what a rewind in the terminal does), so
  the second prompt and its answer stay in the transcript as a dead branch;
- ``stop_hook_once``: the developer's own Stop hook refuses the first end of a turn, so
  Claude Code writes what the hook said (a meta prompt, then an ``attachment``) and asks
  the model again; with the mock stalling there, ``stopped`` kills the agent and the
  transcript ends in the attachment.

The step names the message to resume at with ``claude_answer.py``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import BAR_EXE, host_pids
from mock_models import MockServer
from real_agents import AgentSetup

ANSWER = Path(__file__).resolve().with_name("claude_answer.py")
PERMISSIONS = ("--permission-mode", "bypassPermissions")


def rewinding(claude: str, session: str, first: str, dropped: str, again: str, at: str) -> str:
    """A shell script: ``first`` in a new session ``session``, ``dropped`` after it, then
    ``again`` resumed at the answer holding ``at`` (``dropped`` and its answer are given
    up)."""
    perm = shlex.join(PERMISSIONS)
    c = shlex.quote(claude)
    find = f"{shlex.quote(sys.executable)} {shlex.quote(str(ANSWER))} {session} {shlex.quote(at)}"
    return (
        f"set -e\n"
        f"{c} -p {shlex.quote(first)} --session-id {session} {perm}\n"
        f"{c} -p {shlex.quote(dropped)} --resume {session} {perm}\n"
        f'at="$({find})"\n'
        f'{c} -p {shlex.quote(again)} --resume {session} --resume-session-at "$at" {perm}\n'
    )


def run_script(cwd: Path, setup: AgentSetup, script: str) -> subprocess.CompletedProcess[str]:
    """``bar run --agent claude -- sh -c SCRIPT``."""
    return subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", "claude", "--", "sh", "-c", script],
        cwd=cwd,
        env={**os.environ, **setup.env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def stop_hook_once(setup: AgentSetup, reason: str) -> None:
    """The developer's settings get a Stop hook that refuses the first end of a turn with
    ``reason`` (a mark in the step's temporary directory: once a step)."""
    mark = '"${TMPDIR:-/tmp}/bar-test-stop-once"'
    answer = shlex.quote(json.dumps({"decision": "block", "reason": reason}))
    hook = f"if [ ! -e {mark} ]; then touch {mark}; echo {answer}; fi"
    setup.own_settings(
        {
            "env": {"MY_OWN": "1"},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": hook}]}]},
        }
    )


def stopped(
    cwd: Path,
    setup: AgentSetup,
    argv: list[str],
    server: MockServer,
    requests: int,
    agent_word: bytes | None = None,
) -> str:
    """``bar run --agent claude -- ARGV``, stopped once the mock model has heard
    ``requests`` turns of the conversation (the last one stalls): by Ctrl-C to bar, or,
    with ``agent_word`` (a word of the agent's command line), by SIGKILL to the agent
    alone (killed for memory, say), which then writes no word of it. bar's stderr."""
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--agent", "claude", "--", *argv],
        cwd=cwd,
        env={**os.environ, **setup.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while sum(r.main for r in server.model.requests) < requests:
            assert time.monotonic() < deadline, "the agent never asked the model again"
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.1)
        time.sleep(0.5)
        if agent_word is None:
            proc.send_signal(signal.SIGINT)
        else:
            # (this run's agent only, which talks to this run's model: another copy of
            # the suite may run the same test)
            pids = [
                pid
                for pid in host_pids(agent_word)
                if _program(pid).startswith("claude") and _talks_to(pid, server.url)
            ]
            assert pids, "the agent is not running"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return err


def _talks_to(pid: int, url: str) -> bool:
    """Whether ``pid``'s environment names the model at ``url``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return url.encode() in f.read()
    except OSError:
        return False


def _program(pid: int) -> str:
    """The name of the program ``pid`` runs (its first word), "" once it ended."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0", 1)[0].decode(errors="replace"))
    except OSError:
        return ""
