"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's pre-tool hook, or merges it into the file with
``--write``.
"""

from __future__ import annotations

from bar.agents import settings
from bar.project import locate


def setup(*, agent: str, write: bool) -> int:
    command = settings.hook_command(agent)
    if not write:
        rel, content = settings.setup_text(agent, command)
        print(f"# {rel} (merge into the file if it exists; or run with --write)")
        print(content, end="" if content.endswith("\n") else "\n")
        return 0
    path = settings.write_setup(agent, locate().project.root, command)
    print(f"wrote bar's hook into {path}")
    return 0
