"""``bar agent setup``: an agent's settings wired to bar (its hooks, bar's MCP server), to
print or to write into the project."""

from __future__ import annotations

from pathlib import Path

from bar.agents import AGENTS, mcp_entry, settings
from bar.agents.base import of
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
    mcp = settings.write_claude_mcp(root, wiring.mcp) if of(wiring.agent).project_mcp else None
    return path, mcp


def shell_tool(agent: str) -> str:
    """What ``agent`` calls its shell tool ("shell" for a name bar does not know)."""
    return of(agent).protocol.shell_tool if agent in AGENTS else "shell"


def mcp_beside(wiring: Setup) -> tuple[str, str] | None:
    """What to print for ``bar mcp`` where the settings file does not hold it: (a heading
    naming the file, the entry)."""
    return of(wiring.agent).mcp_beside(wiring.mcp)


def setup_note(agent: str) -> str | None:
    """What a person wiring ``agent`` by hand must know besides."""
    return of(agent).setup_note()
