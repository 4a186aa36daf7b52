"""A developer's machine for one released agent CLI, pointed at a mock model server.

``make agents`` installs pinned versions of Claude Code, Codex CLI and Gemini CLI from npm
into ``.agents/``; without npm (and outside CI) the tests that need one are skipped, in
CI a missing agent is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, ROOT

AGENT_BIN = ROOT / ".agents" / "node_modules" / ".bin"
DIALECT = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}


def agent_binary(agent: str) -> str:
    path = AGENT_BIN / agent
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: `make agents` installs the agent CLIs")
        pytest.skip(f"{agent} CLI not installed (`make agents` installs it with npm)")
    return str(path)


class AgentSetup:
    """A developer's machine for one agent: its own settings in ~, pointed at the mock.

    Gemini CLI starts itself again in a child Node (a larger heap), which doubles its
    start (~1 CPU-second of ~2); the tests have it run in one process
    (``GEMINI_CLI_NO_RELAUNCH``) but where a test asks for the ``relaunch`` a user's
    Gemini makes (``test_a_real_agent_is_checked_and_recorded``)."""

    def __init__(self, agent: str, url: str, *, relaunch: bool = False) -> None:
        self.agent = agent
        home = Path(os.environ["HOME"])
        self.env: dict[str, str] = {}
        self.own: dict[Path, bytes] = {}
        if agent == "claude":
            self.env = {
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": "sk-ant-mock",
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "IS_SANDBOX": "1",  # bypassPermissions is refused to root otherwise
            }
            self._own(home / ".claude" / "settings.json", {"env": {"MY_OWN": "1"}})
        elif agent == "codex":
            self.env = {"OPENAI_API_KEY": "sk-mock"}
            config = (
                'model = "mock-model"\nmodel_provider = "mock"\n\n[model_providers.mock]\n'
                f'name = "mock"\nbase_url = "{url}/v1"\nwire_api = "responses"\n'
                'env_key = "OPENAI_API_KEY"\nsupports_websockets = false\n'
            )
            self._write(home / ".codex" / "config.toml", config.encode())
        else:
            self.env = {"GEMINI_API_KEY": "mock", "GOOGLE_GEMINI_BASE_URL": url}
            if not relaunch:
                self.env["GEMINI_CLI_NO_RELAUNCH"] = "true"
            settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
            self._own(home / ".gemini" / "settings.json", settings)

    def own_settings(self, settings: dict[str, Any]) -> None:
        """The developer's own settings of the agent (Claude Code's ``settings.json``, Gemini
        CLI's), in place of the ones set up: what bar merges its hooks into."""
        folder = {"claude": ".claude", "gemini": ".gemini"}[self.agent]
        self._own(Path(os.environ["HOME"]) / folder / "settings.json", settings)

    def _own(self, path: Path, settings: dict[str, Any]) -> None:
        self._write(path, (json.dumps(settings, indent=2) + "\n").encode())

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.own[path] = data

    def run_in_bar(
        self,
        cwd: Path,
        prompt: str,
        *,
        named: bool = True,
        options: tuple[str, ...] = (),
        extra: tuple[str, ...] = (),
        bar: str = BAR_EXE,
    ) -> subprocess.CompletedProcess[str]:
        """``bar run --agent A -- <the agent, non-interactive>`` with its environment
        (``named`` false: ``bar run -- env <the agent>``, which bar must recognise);
        ``options`` go to ``bar run``, ``extra`` to the agent; ``bar`` is the program run
        as bar (the one the agent's hooks and MCP entry then name)."""
        how = ["--agent", self.agent, "--"] if named else ["--", "env"]
        return subprocess.run(
            [bar, "run", "--no-pty", *options, *how, *self.argv(prompt), *extra],
            cwd=cwd,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def argv(self, prompt: str) -> list[str]:
        program = agent_binary(self.agent)
        if self.agent == "claude":
            return [program, "-p", prompt, "--permission-mode", "bypassPermissions"]
        if self.agent == "codex":
            # bar confines the step; Codex's own sandbox would nest inside it
            return [program, "exec", "--dangerously-bypass-approvals-and-sandbox", prompt]
        return [program, "-p", prompt, "--yolo"]
