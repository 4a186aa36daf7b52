"""Claude Code, as bar supervises it (docs/agents.md, "Claude Code")."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.agents.base import Agent, Home, HomeStep, Protocol
from bar.store.layout import home_dir

if TYPE_CHECKING:
    from bar.agents.protocol import HookEvent


class Claude(Agent):
    name = "claude"
    protocol = Protocol(
        display_name="Claude Code",
        event_name="PreToolUse",
        post_events=("PostToolUse", "PostToolUseFailure"),
        start_event="SessionStart",
        can_ask=True,
        shell_tool="Bash",
        edit_tools=("Edit", "Write", "MultiEdit", "NotebookEdit"),
        settings_path=".claude/settings.local.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
    )

    def outcome(self, event_name: str, tool_name: str | None, data: dict[str, Any]) -> str:
        if event_name != "PostToolUseFailure":
            return "ran"
        return "interrupted" if data.get("is_interrupt") is True else "failed"

    def names_call(self, event: HookEvent, rec: dict[str, Any], call: str) -> bool:
        """An assistant message of its session with a ``tool_use`` of that id and input."""
        message = rec.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if rec.get("type") != "assistant" or not isinstance(content, list):
            return False
        if event.session_id and rec.get("sessionId") not in (None, event.session_id):
            return False
        return any(
            isinstance(c, dict)
            and c.get("type") == "tool_use"
            and c.get("id") == call
            and _same_input(event, c.get("input"))
            for c in content
        )

    def ask(self, reason: str) -> dict[str, Any]:
        return self.permission("ask", reason)

    project_mcp = True
    managed_settings = "claude-code/managed-settings.json"
    hooks_switch = (
        (".claude/settings.json", ".claude/settings.local.json"),
        "disableAllHooks",
        False,
    )

    package = "@anthropic-ai/claude-code"
    otel_provider = "anthropic"
    provider = "anthropic"
    home = Home(
        variable="CLAUDE_CONFIG_DIR",
        inner="",
        settings="settings.json",
        copied=(".credentials.json", "CLAUDE.md"),
        secrets=frozenset({".credentials.json"}),
    )

    def mcp_beside(self, argv: list[str]) -> tuple[str, str] | None:
        import json

        from bar.agents.mcp_entry import claude_config

        heading = ".mcp.json (Claude Code asks once whether to use it; merge into the file)"
        return heading, json.dumps(claude_config(argv), indent=2)

    def developers_dir(self, environ: Mapping[str, str]) -> Path:
        return Path(environ.get("CLAUDE_CONFIG_DIR") or home_dir() / ".claude")

    def is_interactive(self, args: Sequence[str]) -> bool:
        return not any(a in ("-p", "--print") or a.startswith("--print=") for a in args)

    def mcp_settings(self, argv: list[str]) -> dict[str, Any]:
        # its MCP servers come from .mcp.json or its home's .claude.json, not from here;
        # a run without a person (``claude -p``) may call bar's tools only if this allows it
        from bar.agents.mcp_entry import CLAUDE_PERMISSION

        return {"permissions": {"allow": [CLAUDE_PERMISSION]}}

    def home_settings(self, step: HomeStep) -> tuple[bytes, dict[str, str]]:
        """Its ``settings.json``, JSON; ``bar mcp`` goes in ``.claude.json`` (``home_state``)."""
        from bar.agents import homes, settings

        return settings.dump(homes.json_settings(self, step)), {}

    def home_state(self, step: HomeStep) -> dict[str, str]:
        """Its ``.claude.json`` (its account, what it was told, MCP servers): the
        developer's at first, then the agent's own, with bar's server put in each step.
        And it waits ``MCP_CONNECT_TIMEOUT_MS`` (5 seconds by default) for the servers
        whose entry says ``alwaysLoad`` before its first request, then asks the model
        without their tools: on a loaded machine ``bar mcp`` can take longer to start, so
        it waits ``homes.MCP_STARTUP_S`` (as long as Codex does), unless the developer set
        a time."""
        import json

        from bar.agents import homes
        from bar.store.files import write_bytes_atomic

        # (beside the settings where CLAUDE_CONFIG_DIR names them, else in ~ itself)
        mine = step.mine if os.environ.get(self.home.variable) else home_dir()
        source, target = mine / ".claude.json", step.inside / ".claude.json"
        state = homes.read_json(target, what=None) if homes.lexists(target) else None
        if state is None:
            state = homes.read_json(source, what=f"your {source}") or {}
        servers = state.get("mcpServers")
        if not isinstance(servers, dict):
            servers = state["mcpServers"] = {}
        servers["bar"] = {
            "type": "stdio",
            "command": step.mcp_argv[0],
            "args": step.mcp_argv[1:],
            "env": step.mcp_env,
            "alwaysLoad": True,
        }
        write_bytes_atomic(target, (json.dumps(state, indent=2) + "\n").encode(), mode=0o600)
        if os.environ.get("MCP_CONNECT_TIMEOUT_MS"):
            return {}
        return {"MCP_CONNECT_TIMEOUT_MS": str(homes.MCP_STARTUP_S * 1000)}


def _same_input(event: HookEvent, given: object) -> bool:
    """Whether a tool call's input in the transcript is what ``event`` says it was."""
    if not isinstance(given, dict):
        return event.command is None and not event.paths
    if event.command is not None and given.get("command") != event.command:
        return False
    named = given.get("file_path") or given.get("notebook_path")
    if not event.paths or named in event.paths:
        return True
    return isinstance(named, str) and any(  # (a path given relative to the call's cwd)
        os.path.normpath(os.path.join(event.cwd or "/", p)) == os.path.normpath(named)
        for p in event.paths
    )


AGENT = Claude()
