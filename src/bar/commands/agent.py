"""``bar agent setup AGENT [--write]``: wire an agent's hook to bar by hand.

For developers who start the agent some other way than ``bar run --agent``: prints the
agent's project settings with bar's hooks, or merges them into the file with
``--write``.
"""

from __future__ import annotations

import sys

from bar.agents import settings
from bar.project import locate

# Codex runs a project's hooks only after a person trusts each one (docs/agents.md)
_CODEX_TRUST = ("Codex runs these hooks only once you trust them: open /hooks in Codex in "
                "this repository. (bar run --agent codex passes its hooks on the command "
                "line instead, trusted for that run only.)")  # fmt: skip


def setup(*, agent: str, write: bool) -> int:
    command = settings.hook_command(agent)
    if not write:
        rel, content = settings.setup_text(agent, command)
        print(f"# {rel} (merge into the file if it exists; or run with --write)")
        print(content, end="" if content.endswith("\n") else "\n")
    else:
        path = settings.write_setup(agent, locate().project.root, command)
        print(f"wrote bar's hooks into {path}")
    if agent == "codex":
        print(f"bar: note: {_CODEX_TRUST}", file=sys.stderr)
    return 0
