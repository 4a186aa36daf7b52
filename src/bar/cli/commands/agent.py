"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's hooks and its ``bar mcp`` server, or merges them
into the files with ``--write``.
"""

from __future__ import annotations

import json
import sys

from bar.api import agents

# Codex runs a project's hooks only after a person trusts each one (docs/agents.md)
_CODEX_TRUST = (
    "Codex runs these hooks only once you trust them: open /hooks in Codex in "
    "this repository. (bar run --agent codex passes its hooks on the command "
    "line instead, trusted for that run only.)"
)


def setup(*, agent: str, write: bool) -> int:
    wiring = agents.setup(agent)
    if not write:
        rel, content = agents.settings_text(wiring)
        print(f"# {rel} (merge into the file if it exists; or run with --write)")
        print(content, end="" if content.endswith("\n") else "\n")
        _print_mcp(wiring)
    else:
        path, mcp = agents.write(wiring)
        print(f"wrote bar's hooks into {path}")
        if mcp is not None:
            print(f"wrote the bar MCP server into {mcp}")
        elif agent == "codex":
            _print_mcp(wiring)
    if agent == "codex":
        print(f"bar: note: {_CODEX_TRUST}", file=sys.stderr)
    return 0


def _print_mcp(wiring: agents.Setup) -> None:
    """The MCP server's entry where it is not in the settings file printed above."""
    mcp = wiring.mcp
    if wiring.agent == "claude":
        print("# .mcp.json (Claude Code asks once whether to use it; merge into the file)")
        print(json.dumps(agents.claude_mcp_config(wiring), indent=2))
    elif wiring.agent == "codex":
        print("# ~/.codex/config.toml: bar's MCP server (Codex reads MCP servers from there)")
        print("[mcp_servers.bar]")
        print(f"command = {json.dumps(mcp[0])}")
        print("args = [" + ", ".join(json.dumps(a) for a in mcp[1:]) + "]")
