"""``bar mcp`` registered with each agent, next to bar's hooks (docs/mcp.md).

``bar run`` puts the server in the agent's home for the task (``bar.agents.homes``), with
the environment it needs to find the task. Found out with the released CLIs (the
versions in the Makefile):

* Claude Code reads no MCP server from its settings files, only from ``.mcp.json`` (which
  it asks a person to approve), ``.claude.json`` (in its home) or ``--mcp-config``. It
  starts a conversation before slow servers connect unless the entry says ``alwaysLoad``;
  and a non-interactive run may call an MCP tool only if its permissions allow it, so
  the settings file with bar's hooks also allows ``mcp__bar``.
* Codex CLI reads ``[mcp_servers.bar]`` from its ``config.toml`` and starts the server
  with a clean environment: only what the entry's ``env`` names reaches it. It begins a
  turn without an optional server not up within a second, so the entry says ``required``.
* Gemini CLI reads ``mcpServers`` from its ``settings.json``, the file that holds bar's
  hooks; ``trust`` spares the person a confirmation for each call of bar's tools.

The server's command is absolute (as the hook's is) and names the task.
"""

from __future__ import annotations

import shlex
from typing import Any

NAME = "bar"
CLAUDE_PERMISSION = f"mcp__{NAME}"  # every tool of the server


def server_argv(bar_command: str, task_id: str | None) -> list[str]:
    """``bar mcp [--task ID]`` as an argument vector, ``bar_command`` being how to run bar
    (``settings.bar_executable``)."""
    argv = [*shlex.split(bar_command), "mcp"]
    return [*argv, "--task", task_id] if task_id else argv


def claude_config(argv: list[str]) -> dict[str, Any]:
    """The ``mcpServers`` object of ``--mcp-config`` or ``.mcp.json``."""
    return {
        "mcpServers": {
            NAME: {"type": "stdio", "command": argv[0], "args": argv[1:], "alwaysLoad": True}
        }
    }


def settings_entries(agent: str, argv: list[str]) -> dict[str, Any]:
    """What the agent's settings file (the one with bar's hooks) gets for the server."""
    from bar.agents.base import of

    return of(agent).mcp_settings(argv)


def merge(settings: dict[str, Any], agent: str, argv: list[str]) -> None:
    """Add the server's entries to ``settings`` (a copy the caller owns), in place;
    entries already there are kept as they are, but a server already named ``bar`` (one
    the repository planted) gives way to bar's own: the agent must not take another
    program's answers for bar's."""
    for key, value in settings_entries(agent, argv).items():
        current = settings.setdefault(key, {})
        if not isinstance(current, dict):
            continue  # not ours to fix: the agent reports its own settings errors
        for inner, entry in value.items():
            if isinstance(entry, list):
                listed = current.setdefault(inner, [])
                if isinstance(listed, list):
                    listed += [e for e in entry if e not in listed]
            elif key == "mcpServers":
                current[inner] = entry
            else:
                current.setdefault(inner, entry)


def remove(settings: dict[str, Any], agent: str, argv: list[str]) -> None:
    """Take out what ``merge`` added (and what it emptied), in place."""
    for key, value in settings_entries(agent, argv).items():
        current = settings.get(key)
        if not isinstance(current, dict):
            continue
        for inner, entry in value.items():
            if isinstance(entry, list) and isinstance(current.get(inner), list):
                current[inner] = [e for e in current[inner] if e not in entry]
                if not current[inner]:
                    del current[inner]
            elif current.get(inner) == entry:
                del current[inner]
        if not current:
            del settings[key]
