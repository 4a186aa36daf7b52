"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's hooks and its ``bar mcp`` server, or merges them
into the files with ``--write``.
"""

from __future__ import annotations

import sys

from bar.api import agents

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar agent``: its options and help."""
    from bar.agents import AGENTS
    from bar.cli.parser import Formatter

    agent = sub.add_parser("agent")
    asub = agent.add_subparsers(dest="agent_command", metavar="ACTION")
    agent.set_defaults(_help=agent)
    p = asub.add_parser(
        "setup",
        help="print (or --write) the agent settings that route its shell commands via bar",
        formatter_class=Formatter,
        description="Print the project settings that make AGENT call `bar hook AGENT` before\n"
        "each shell command. `bar run --agent AGENT` does this by itself for one run.",
        epilog="examples:\n"
        "  bar agent setup claude            print the settings to merge by hand\n"
        "  bar agent setup codex --write     merge them into this repository's file",
    )
    p.add_argument("agent", choices=AGENTS)
    p.add_argument("--write", action="store_true", help="merge it into the file in this repo")
    p.set_defaults(_run=setup)


# --- the command -----------------------------------------------------------------------


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
