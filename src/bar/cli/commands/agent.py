"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's hooks and its ``bar mcp`` server, or merges them
into the files with ``--write``.
"""

from __future__ import annotations

import json
import sys

from bar.agents import mcp_entry, settings
from bar.project.project import locate

# Codex runs a project's hooks only after a person trusts each one (docs/agents.md)
_CODEX_TRUST = ("Codex runs these hooks only once you trust them: open /hooks in Codex in "
                "this repository. (bar run --agent codex passes its hooks on the command "
                "line instead, trusted for that run only.)")  # fmt: skip


def setup(*, agent: str, write: bool) -> int:
    command = settings.hook_command(agent)
    # `bar mcp` with no --task serves the task of the directory the agent starts in
    mcp = mcp_entry.server_argv(settings.bar_executable(), None)
    if not write:
        rel, content = settings.setup_text(agent, command, mcp)
        print(f"# {rel} (merge into the file if it exists; or run with --write)")
        print(content, end="" if content.endswith("\n") else "\n")
        _print_mcp(agent, mcp)
    else:
        root = locate().project.root
        path = settings.write_setup(agent, root, command, mcp)
        print(f"wrote bar's hooks into {path}")
        if agent == "claude":
            print(f"wrote the bar MCP server into {settings.write_claude_mcp(root, mcp)}")
        elif agent == "codex":
            _print_mcp(agent, mcp)
    if agent == "codex":
        print(f"bar: note: {_CODEX_TRUST}", file=sys.stderr)
    return 0


def _print_mcp(agent: str, mcp: list[str]) -> None:
    """The MCP server's entry where it is not in the settings file printed above."""
    if agent == "claude":
        print("# .mcp.json (Claude Code asks once whether to use it; merge into the file)")
        print(json.dumps(mcp_entry.claude_config(mcp), indent=2))
    elif agent == "codex":
        print("# ~/.codex/config.toml: bar's MCP server (Codex reads MCP servers from there)")
        print("[mcp_servers.bar]")
        print(f"command = {json.dumps(mcp[0])}")
        print("args = [" + ", ".join(json.dumps(a) for a in mcp[1:]) + "]")
