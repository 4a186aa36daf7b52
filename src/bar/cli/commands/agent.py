"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's hooks and its ``bar mcp`` server, or merges them
into the files with ``--write``.
"""

from __future__ import annotations

import sys

from bar.api import agents


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
        else:
            _print_mcp(wiring)
    note = agents.setup_note(agent)
    if note:
        print(f"bar: note: {note}", file=sys.stderr)
    return 0


def _print_mcp(wiring: agents.Setup) -> None:
    """The MCP server's entry where it is not in the settings file printed above."""
    beside = agents.mcp_beside(wiring)
    if beside is not None:
        heading, entry = beside
        print(f"# {heading}")
        print(entry)
