"""``bar agent setup``: an agent's settings wired to bar (its hooks, bar's MCP server), to
print or to write into the project."""

from __future__ import annotations

from pathlib import Path

from bar.agents import mcp_entry, settings
from bar.base.record import record
from bar.model.project import locate


@record(frozen=True)
class Setup:
    """What wires ``agent`` to bar: the hook command its settings run, and ``bar mcp``'s
    command line (with no ``--task``: it serves the task of the directory it starts in)."""

    agent: str
    hook: str
    mcp: list[str]


def setup(agent: str) -> Setup:
    return Setup(
        agent, settings.hook_command(agent), mcp_entry.server_argv(settings.bar_executable(), None)
    )


def settings_text(wiring: Setup) -> tuple[str, str]:
    """(the settings file's path in a project, its content) to print."""
    return settings.setup_text(wiring.agent, wiring.hook, wiring.mcp)


def write(wiring: Setup) -> tuple[Path, Path | None]:
    """Write the settings into the current project: (the settings file, and for Claude
    Code the project's ``.mcp.json``, else None)."""
    root = locate().project.root
    path = settings.write_setup(wiring.agent, root, wiring.hook, wiring.mcp)
    mcp = settings.write_claude_mcp(root, wiring.mcp) if wiring.agent == "claude" else None
    return path, mcp


def claude_mcp_config(wiring: Setup) -> dict[str, object]:
    """The ``.mcp.json`` entry of bar's MCP server."""
    return mcp_entry.claude_config(wiring.mcp)
