"""``bar run -- claude`` (also through ``env``, ``npx`` or a path) is supervised as
``--agent`` would supervise it; ``--no-agent`` runs it as a plain command (docs/agents.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import BAR_EXE, ledger
from test_checkpoints import agent_program
from test_checkpoints import inited as inited  # (a fixture)

from bar.agents.detect import agent_of, locate


@pytest.mark.parametrize(
    "argv, agent",
    [
        (["claude"], "claude"),
        (["/home/me/.local/bin/codex", "exec", "fix it"], "codex"),
        (["env", "DEBUG=1", "gemini", "-p", "x"], "gemini"),
        (["CI=1", "nohup", "timeout", "600", "claude", "-p", "x"], "claude"),
        (["npx", "-y", "@anthropic-ai/claude-code@1.0.3", "-p", "x"], "claude"),
        (["npx", "--package", "@openai/codex", "codex"], "codex"),
        (["pnpm", "dlx", "@google/gemini-cli"], "gemini"),
        (["node", "/opt/node_modules/@openai/codex/bin/codex.js"], "codex"),
        (["make", "test"], None),
        (["python", "claude.py"], None),
        (["npx", "prettier", "--write", "."], None),
        (["grep", "-r", "claude", "."], None),
        (["claude", "--version"], None),  # no session to supervise
        (["npx", "@openai/codex", "--help"], None),
    ],
)
def test_the_agent_a_command_line_starts(argv: list[str], agent: str | None) -> None:
    assert agent_of(argv) == agent


@pytest.mark.parametrize(
    "argv, at",
    [
        (["env", "X=1", "codex", "exec", "p"], 2),
        (["timeout", "60", "/opt/bin/claude", "-p", "x"], 2),
        (["npx", "-y", "@openai/codex@0.5", "exec"], 2),
        (["npx", "-p", "@openai/codex", "codex", "exec"], 3),
        (["node", "--no-warnings", "/x/@openai/codex/bin/codex.js", "exec"], 2),
    ],
)
def test_where_the_agents_own_options_go(argv: list[str], at: int) -> None:
    """bar's hooks for Codex and its MCP server for Claude Code go on the agent's command
    line right after this word, whatever wraps it."""
    found = locate(argv)
    assert found is not None and found[1] == at


def _run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BAR_EXE, "run", "--no-pty", *argv], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_a_known_agent_is_supervised_without_being_named(
    inited: Path,
    tmp_path: Path,
) -> None:
    claude = agent_program(tmp_path, "claude")
    assert subprocess.run([BAR_EXE, "task", "new", "auto"], cwd=inited).returncode == 0
    res = _run(inited, "--", "env", "X=1", claude, "echo hi > a.txt", "rm -rf /")
    assert "supervising claude as --agent claude" in res.stderr
    assert "RAN: echo hi > a.txt" in res.stdout and "DENIED: rm -rf /" in res.stdout
    res = _run(inited, "--no-agent", "--", claude, "rm -rf ./b")
    assert "supervising" not in res.stderr and "RAN: rm -rf ./b" in res.stdout
    supervised, plain = ledger_of(inited)
    assert supervised["agent"]["name"] == "claude" and "agent" not in plain


def ledger_of(repo: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [BAR_EXE, "task", "show", "--json"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return ledger(json.loads(out)["id"])
