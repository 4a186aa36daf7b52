"""A fake agent that reads its settings and calls its hooks as the real ones do."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DATA, FAKE_AGENT_PATH, load_fake_agent

from bar.agents import AGENTS
from bar.agents.settings import (
    install_hook,
    settings_path,
)

EVENTS = DATA / "agent_events"
fake_agent = load_fake_agent()


def event_bytes(name: str) -> bytes:
    return (EVENTS / name).read_bytes()


# --- reading events -------------------------------------------------------------------


HOOK_SCRIPT = """\
import sys
from bar.agents.protocol import parse_event, render_input_error, render_reply
from bar.errors import HookInputError

agent, ask = sys.argv[1], sys.argv[2:] == ["ask"]
try:
    event = parse_event(agent, sys.stdin.buffer.read())
except HookInputError as exc:
    reply = render_input_error(agent, str(exc))
else:
    command = event.command or ""
    if "rm -rf" in command:
        reply = render_reply(agent, "block", "recursive deletes are not allowed here")
    elif command.startswith("chmod"):
        reply = render_reply(agent, "warn", "permission changes need a human", ask=ask)
    else:
        reply = render_reply(agent, "allow", "")
sys.stdout.write(reply.stdout)
sys.stderr.write(reply.stderr)
sys.exit(reply.exit_code)
"""


def run_fake_agent(agent: str, cwd: Path, *commands: str, ask: str = "deny") -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(FAKE_AGENT_PATH), "--agent", agent, "--ask-answer", ask, *commands],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in proc.stdout.splitlines() if not line.startswith("  | ")]


@pytest.fixture
def hook_script(tmp_path: Path) -> Path:
    script = tmp_path / "policy_hook.py"
    script.write_text(HOOK_SCRIPT)
    return script


def hook_command(script: Path, agent: str, ask: bool = True) -> str:
    """The test hook; ``ask``: a person is at the prompt, so a warning may be a question."""
    mode = " ask" if ask else ""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {agent}{mode}"


EXPECTED_RUN = {
    "claude": [
        "RAN: touch allowed.txt",
        "DENIED: rm -rf victim: recursive deletes are not allowed here",
        "ASKED: chmod 600 allowed.txt: permission changes need a human",
        "DENIED: chmod 600 allowed.txt: declined at the permission prompt",
    ],
    "codex": [
        "RAN: touch allowed.txt",
        "DENIED: rm -rf victim: recursive deletes are not allowed here",
        "WARNING: chmod 600 allowed.txt: warning: permission changes need a human",
        "RAN: chmod 600 allowed.txt",
    ],
    "gemini": [
        "RAN: touch allowed.txt",
        "DENIED: rm -rf victim: recursive deletes are not allowed here",
        "WARNING: chmod 600 allowed.txt: permission changes need a human",
        "ASKED: chmod 600 allowed.txt: permission changes need a human",
        "DENIED: chmod 600 allowed.txt: declined at the permission prompt",
    ],
}


@pytest.mark.parametrize("agent", AGENTS)
def test_the_fake_agent_obeys_an_installed_hook(
    tmp_path: Path, hook_script: Path, agent: str
) -> None:
    worktree = tmp_path / "wt"
    (worktree / "victim").mkdir(parents=True)
    (worktree / "victim" / "data.txt").write_text("precious\n")
    # The developer's own hook in the same file must keep running next to bar's.
    settings_file = worktree / settings_path(agent)
    settings_file.parent.mkdir()
    audit = tmp_path / "audit.log"
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    matcher = "run_shell_command" if agent == "gemini" else "Bash"
    own = {
        "hooks": {
            event: [
                {
                    "matcher": matcher,
                    "hooks": [
                        {
                            "type": "command",
                            "command": f"cat >> {shlex.quote(str(audit))}; echo >> {shlex.quote(str(audit))}",
                        }
                    ],
                }
            ]
        }
    }
    original = json.dumps(own, indent=4).encode()
    settings_file.write_bytes(original)

    with install_hook(agent, worktree, hook_command(hook_script, agent)):
        lines = run_fake_agent(
            agent, worktree, "touch allowed.txt", "rm -rf victim", "chmod 600 allowed.txt"
        )

    assert lines == EXPECTED_RUN[agent]
    assert (worktree / "allowed.txt").exists()
    assert (worktree / "victim" / "data.txt").read_text() == "precious\n"
    logged = [json.loads(line) for line in audit.read_text().splitlines() if line]
    assert [e["tool_input"]["command"] for e in logged] == [
        "touch allowed.txt",
        "rm -rf victim",
        "chmod 600 allowed.txt",
    ]
    assert settings_file.read_bytes() == original


@pytest.mark.parametrize("agent", AGENTS)
def test_with_nobody_to_ask_a_warning_is_shown_and_the_command_runs(
    tmp_path: Path, hook_script: Path, agent: str
) -> None:
    (tmp_path / "f").write_text("x")
    with install_hook(agent, tmp_path, hook_command(hook_script, agent, ask=False)):
        lines = run_fake_agent(agent, tmp_path, "chmod 600 f")
    assert lines == [
        "WARNING: chmod 600 f: warning: permission changes need a human",
        "RAN: chmod 600 f",
    ]
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_an_approved_question_lets_the_command_run(
    tmp_path: Path, hook_script: Path, agent: str
) -> None:
    (tmp_path / "f").write_text("x")
    with install_hook(agent, tmp_path, hook_command(hook_script, agent)):
        lines = run_fake_agent(agent, tmp_path, "chmod 600 f", ask="approve")
    assert lines[-1] == "RAN: chmod 600 f"
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("agent", AGENTS)
def test_the_fake_agent_reads_exit_code_two_and_fails_open_on_crashes(
    tmp_path: Path, agent: str
) -> None:
    event = "BeforeTool" if agent == "gemini" else "PreToolUse"
    path = tmp_path / settings_path(agent)
    path.parent.mkdir()

    def configure(command: str) -> None:
        path.write_text(
            json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]}})
        )

    configure("echo 'not today' >&2; exit 2")
    assert run_fake_agent(agent, tmp_path, "touch a") == ["DENIED: touch a: not today"]
    assert not (tmp_path / "a").exists()

    # A hook that crashes does not stop the command: why bar answers every error with a block.
    configure("echo 'Traceback: boom' >&2; exit 1")
    lines = run_fake_agent(agent, tmp_path, "touch b")
    assert lines[-1] == "RAN: touch b"
    assert (tmp_path / "b").exists()


@pytest.mark.parametrize("agent", AGENTS)
def test_the_hook_script_blocks_an_unreadable_event(hook_script: Path, agent: str) -> None:
    proc = subprocess.run(
        shlex.split(hook_command(hook_script, agent)),
        input=event_bytes("truncated.json"),
        capture_output=True,
        check=False,
        env={**os.environ},
    )
    assert proc.returncode == 2
    verdict = fake_agent.interpret(
        agent, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )
    assert verdict.decision == "deny"
    assert "not valid JSON" in verdict.reason
