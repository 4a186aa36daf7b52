"""Codex CLI, as bar supervises it (docs/agents.md, "Codex CLI").

Its post-tool event carries a command's output only: how the command ended is read from
its rollout (``bar.agents.rollout``). Its file edits come to the hook as a shell command
(``apply_patch <<'EOF'`` and a patch) that Codex applies itself: no shell runs it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.agents.base import Agent, Protocol
from bar.store.layout import home_dir

if TYPE_CHECKING:
    from bar.agents.protocol import HookEvent

PATCH_TOOL = "apply_patch"  # the tool_name bar gives Codex's patches

_PATCH = re.compile(r"\A\s*apply_patch\s+<<-?\s*(['\"]?)(\w+)\1\s*\n\*\*\* Begin Patch\n")
_PATCH_PATH = re.compile(
    r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$", re.MULTILINE
)


class Codex(Agent):
    name = "codex"
    protocol = Protocol(
        display_name="Codex CLI",
        event_name="PreToolUse",
        post_events=("PostToolUse",),
        start_event="SessionStart",
        can_ask=False,
        shell_tool="Bash",
        edit_tools=(PATCH_TOOL,),  # which it sends through its shell tool (above)
        settings_path=".codex/hooks.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
    )
    tells_outcome = False  # (its post-tool event carries the output only)

    def names_call(self, event: HookEvent, rec: dict[str, Any], call: str) -> bool:
        """A ``function_call`` of its rollout with that ``call_id`` and the command."""
        payload = rec.get("payload")
        return (
            isinstance(payload, dict)
            and payload.get("type") == "function_call"
            and payload.get("call_id") == call
            and (event.command is None or event.command in _strings(payload.get("arguments")))
        )

    def own_edit(self, command: str) -> tuple[str, tuple[str, ...]] | None:
        """Its patch tool, when the heredoc is all the command is (a command after the
        patch's end would be run by a shell)."""
        match = _PATCH.match(command)
        if match is None:
            return None
        rest = command[match.end() :]
        end_line = "\n*** End Patch\n" + match.group(2)
        end = rest.find(end_line)
        if end < 0 or rest[end + len(end_line) :].strip():
            return None
        return PATCH_TOOL, tuple(_PATCH_PATH.findall(command))

    def mcp_beside(self, argv: list[str]) -> tuple[str, str] | None:
        heading = "~/.codex/config.toml: bar's MCP server (Codex reads MCP servers from there)"
        args = ", ".join(json.dumps(a) for a in argv[1:])
        return heading, f"[mcp_servers.bar]\ncommand = {json.dumps(argv[0])}\nargs = [{args}]"

    def setup_note(self) -> str | None:
        return (
            "Codex runs these hooks only once you trust them: open /hooks in Codex in "
            "this repository. (bar run --agent codex passes its hooks on the command "
            "line instead, trusted for that run only.)"
        )

    def developers_dir(self, environ: Mapping[str, str]) -> Path:
        return Path(environ.get("CODEX_HOME") or home_dir() / ".codex")

    def is_interactive(self, args: Sequence[str]) -> bool:
        return not any(a in ("exec", "e", "review") for a in args if not a.startswith("-"))

    def model_urls(self, environ: Mapping[str, str]) -> list[str]:
        """The ``base_url`` of each model provider of its ``config.toml``."""
        import tomllib

        try:
            with open(self.developers_dir(environ) / "config.toml", "rb") as f:
                settings = tomllib.load(f)
        except (OSError, ValueError):
            return []
        providers = settings.get("model_providers")
        if not isinstance(providers, dict):
            return []
        return [
            str(p["base_url"])
            for p in providers.values()
            if isinstance(p, dict) and isinstance(p.get("base_url"), str)
        ]


def _strings(value: object) -> str:
    """Every string in ``value`` (a JSON text, or what it holds), joined by NULs."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return value if isinstance(decoded, str) else _strings(decoded)
    if isinstance(value, dict):
        return "\0".join(_strings(v) for v in value.values())
    if isinstance(value, list):
        return "\0".join(_strings(v) for v in value)
    return ""


AGENT = Codex()
