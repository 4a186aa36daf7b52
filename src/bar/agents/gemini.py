"""Gemini CLI, as bar supervises it (docs/agents.md, "Gemini CLI").

Its hook replies are its own shape (``decision``), it wants a JSON object on stdout
whenever its hook exits 0, and it reads no model context from a pre-tool reply. Its
post-tool event carries what its shell tool told the model, from which the outcome is
read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.agents.base import Agent, Home, HomeStep, Protocol
from bar.store.layout import home_dir

if TYPE_CHECKING:
    pass

_RAN = "Process Group PGID:"  # (a command its shell tool ran reports its process group)
_CANCELLED = "Command was cancelled by user"  # (its shell tool's words, 0.61)
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)


class Gemini(Agent):
    name = "gemini"
    protocol = Protocol(
        display_name="Gemini CLI",
        event_name="BeforeTool",
        post_events=("AfterTool",),
        start_event="SessionStart",
        can_ask=True,
        shell_tool="run_shell_command",
        edit_tools=("write_file", "replace"),
        settings_path=".gemini/settings.json",
        matcher="run_shell_command",
        timeout=60_000,  # milliseconds
        entry_name="bar-policy",
        # project hooks run only in trusted folders; this one bar made for the task
        run_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
    )
    # its events carry no call id, and its chat file gets a call only after its hooks ran
    call_ids = False
    own_system_settings = True
    hooks_switch = ((".gemini/settings.json",), "hooksConfig.enabled", True)
    package = "@google/gemini-cli"
    otel_provider = "gcp.gemini"
    provider = "google"
    home = Home(
        variable="GEMINI_CLI_HOME",
        inner=".gemini",
        settings="settings.json",
        copied=("oauth_creds.json", "google_accounts.json", "GEMINI.md", ".env"),
        secrets=frozenset({"oauth_creds.json", "google_accounts.json", ".env"}),
    )

    def outcome(self, event_name: str, tool_name: str | None, data: dict[str, Any]) -> str:
        response = data.get("tool_response")
        if not isinstance(response, dict):
            return "ran"
        content = response.get("llmContent")
        if isinstance(content, str) and _CANCELLED in content:
            return "interrupted"
        if response.get("error"):
            return "failed"
        if isinstance(content, str):
            codes = _EXIT_CODE.findall(content)
            if codes and codes[-1] != "0":
                return "failed"
            # one it blocked itself (command substitution, its own policy) reports only why
            if tool_name == self.protocol.shell_tool and not codes and _RAN not in content:
                return "refused"
        return "ran"

    def ack(self) -> str:
        return "{}\n"  # (its docs ask for a JSON object whenever the hook exits 0)

    def block(self, reason: str) -> dict[str, Any]:
        return {"decision": "deny", "reason": reason}

    def warning(self, message: str) -> dict[str, Any]:
        return {"systemMessage": message}  # (it shows it; its pre-tool context is not read)

    def developers_dir(self, environ: Mapping[str, str]) -> Path:
        return Path(environ.get("GEMINI_CLI_HOME") or home_dir()) / ".gemini"

    def is_interactive(self, args: Sequence[str]) -> bool:
        if any(
            a in ("-i", "--prompt-interactive") or a.startswith("--prompt-interactive=")
            for a in args
        ):
            return True
        if any(a in ("-p", "--prompt") or a.startswith("--prompt=") for a in args):
            return False
        return not any(not a.startswith("-") for a in args)  # a positional prompt

    def mcp_settings(self, argv: list[str]) -> dict[str, Any]:
        from bar.agents.mcp_entry import NAME

        return {"mcpServers": {NAME: {"command": argv[0], "args": argv[1:], "trust": True}}}

    def home_settings(self, step: HomeStep) -> tuple[bytes, dict[str, str]]:
        """The developer's settings with ``bar mcp`` (and its environment); bar's hooks go
        in the system settings of the step (``bar.agents.managed.gemini_system``), which
        rank above this file, else here, under a name of the step's own."""
        import os

        from bar.agents import homes, managed, settings

        merged = homes.json_settings(self, step)
        merged["mcpServers"]["bar"]["env"] = step.mcp_env
        theirs = os.environ.get(managed.GEMINI_SYSTEM)
        hook = step.hook_command
        extra = managed.gemini_system(step.task, hook, theirs, own_tmp=step.own_tmp)
        if extra:  # (bar's hooks are in its system settings, above this file: not twice)
            merged = settings.remove_hook_settings(self.name, merged, hook) or {}
        else:
            managed.name_entries(merged, hook)
        return settings.dump(merged), extra


AGENT = Gemini()
