"""Codex CLI, as bar supervises it (docs/agents.md, "Codex CLI").

Its post-tool event carries a command's output only: how the command ended is read from
its rollout (``bar.agents.rollout``). Its file edits come to the hook as a shell command
(``apply_patch <<'EOF'`` and a patch) that Codex applies itself: no shell runs it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.agents.base import Agent, Home, HomeStep, Protocol
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
    package = "@openai/codex"
    otel_provider = "openai"
    provider = "openai"
    home = Home(
        variable="CODEX_HOME",
        inner="",
        settings="config.toml",
        copied=("auth.json", "AGENTS.md"),
        secrets=frozenset({"auth.json"}),
    )

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

    def home_settings(self, step: HomeStep) -> tuple[bytes, dict[str, str]]:
        """The developer's ``config.toml`` with bar's hooks (trusted, as a person trusts
        them in Codex's /hooks panel: by the hash of each entry, keyed by the file that
        holds it) and ``bar mcp``. The developer's own trusted hooks stay trusted in the
        home.

        Codex runs no hook at all where its ``hooks`` feature is off, in any layer it
        reads, a project's ``.codex/config.toml`` included; and it reads a project's files
        only in a trusted project. So the home switches the feature on and names the
        task's worktree untrusted, whatever the developer's file says of the folders
        above it."""
        import tomllib

        import tomli_w

        from bar.agents.homes import MCP_STARTUP_S
        from bar.errors import AgentSettingsError
        from bar.store.files import read_regular

        mine = step.mine / self.home.settings
        target = step.inside / self.home.settings
        raw = read_regular(mine)
        try:
            config: dict[str, Any] = tomllib.loads(raw.decode()) if raw is not None else {}
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise AgentSettingsError(
                f"your {mine} is not valid TOML: {exc}", hint="fix it, then run again"
            ) from None
        hooks = config.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise AgentSettingsError(f"'hooks' in your {mine} is not a table")
        # keyed by the file bar writes: a link the agent left in its place is replaced,
        # never followed (trust keyed by where it pointed would leave bar's hooks unrun)
        source = os.path.join(os.path.realpath(target.parent), target.name)
        theirs = os.path.realpath(mine)
        trust = {}
        for key, value in (hooks.pop("state", None) or {}).items():
            if isinstance(key, str) and key.startswith(theirs + ":"):
                trust[source + key[len(theirs) :]] = value
        features = config.setdefault("features", {})
        if isinstance(features, dict):
            features.pop("codex_hooks", None)  # (the feature's former name)
            features["hooks"] = True
        projects = config.setdefault("projects", {})
        if isinstance(projects, dict):
            projects[str(step.task.worktree)] = {"trust_level": "untrusted"}
        proto = self.protocol
        for event, matcher in proto.events():
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise AgentSettingsError(f"'hooks.{event}' in your {mine} is not an array")
            group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
            entry = {"type": "command", "command": step.hook_command, "timeout": proto.timeout}
            group["hooks"] = [entry]
            trust[f"{source}:{trust_label(event)}:{len(groups)}:0"] = {
                "trusted_hash": trust_hash(event, matcher, step.hook_command, proto.timeout)
            }
            groups.append(group)
        hooks["state"] = trust
        servers = config.setdefault("mcp_servers", {})
        if isinstance(servers, dict):
            servers["bar"] = {
                "command": step.mcp_argv[0],
                "args": step.mcp_argv[1:],
                "env": step.mcp_env,
                # Codex lists no tool of a server that starts slower than this (10 s by
                # default), and begins its first turn without an optional server that is
                # not up within a second: a loaded machine must not take bar's tools from
                # the agent, so bar's server is required (Codex waits for it)
                "startup_timeout_sec": MCP_STARTUP_S,
                "required": True,
            }
        return tomli_w.dumps(config).encode("utf-8"), {}


_TRUST_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
    "SessionStart": "session_start",
}


def trust_label(event: str) -> str:
    """The name Codex gives a hook event in its trust keys."""
    return _TRUST_LABELS[event]


def trust_hash(event: str, matcher: str | None, command: str, timeout: int) -> str:
    """The hash Codex records when a person trusts this hook in its /hooks panel: SHA-256
    of the entry's normalised identity as JSON with sorted keys, unset fields left out."""
    import hashlib

    handler = {"type": "command", "command": command, "timeout": timeout, "async": False}
    identity: dict[str, object] = {"event_name": _TRUST_LABELS[event], "hooks": [handler]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


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
