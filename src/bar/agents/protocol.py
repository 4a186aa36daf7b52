"""The pre-tool-use hook protocols of the coding agents bar supervises.

Claude Code, Codex CLI and Gemini CLI can each run a command before every shell command
the model asks for: the event goes to the hook as JSON on stdin, and the hook answers with
JSON on stdout and/or its exit code. This module speaks the three dialects: it reads an
event into one ``HookEvent`` and turns a policy action into each agent's reply. What
differs between the agents is data, in one table (``PROTOCOLS``). The field names, and why
each reply looks the way it does, are in docs/agents.md with their sources.

Two rules shape everything here:

* Every agent treats a hook that crashes, times out or answers something it does not
  understand as "no objection": the command runs. So a block is said on every channel
  the agent reads (exit code 2 with the reason on stderr, and the agent's JSON deny on
  stdout), replies carry only fields the agent's schema accepts, and an event bar cannot
  read is answered with a block (fail closed), never with silence.
* ``bar hook`` imports this module when no ``bar run`` is there to answer for it, before
  every shell command of the agent: records are ``Slotted``, not dataclasses.
"""

from __future__ import annotations

import json
from typing import Any

from bar.agents import AGENTS
from bar.errors import HookInputError, UnknownAgent
from bar.slotted import Slotted

ACTIONS = ("allow", "log", "warn", "block")

_FALLBACK_REASON = "blocked by bar policy"


class Protocol(Slotted):
    """What differs between the agents. Sources for every value: docs/agents.md."""

    __slots__ = ("display_name", "entry_name", "event_name", "matcher", "run_env",
                 "run_notice", "settings_path", "shell_tool", "state", "timeout")  # fmt: skip

    def __init__(
        self,
        *,
        display_name: str,
        event_name: str,  # the pre-tool-use event, as named in settings and in the payload
        shell_tool: str,  # tool_name of the agent's shell tool
        settings_path: str,  # project-local file bar installs its hook into
        matcher: str,  # matcher of bar's group: the shell tool, matched exactly
        timeout: int,  # timeout of bar's entry, in the unit the agent reads
        entry_name: str | None,  # Gemini shows a hook's name in its /hooks panel
        run_env: dict[str, str] | None = None,  # what `bar run --agent` adds to its env
        run_notice: str | None = None,  # what `bar run --agent` tells the developer
        state: tuple[str, ...] = (),  # the agent's own files in ~, writable in its runs
    ) -> None:
        self.display_name = display_name
        self.event_name = event_name
        self.shell_tool = shell_tool
        self.settings_path = settings_path
        self.matcher = matcher
        self.timeout = timeout
        self.entry_name = entry_name
        self.run_env = run_env or {}
        self.run_notice = run_notice
        self.state = state


PROTOCOLS = {
    "claude": Protocol(
        display_name="Claude Code",
        event_name="PreToolUse",
        shell_tool="Bash",
        settings_path=".claude/settings.local.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
        state=("~/.claude", "~/.claude.json", "~/.claude.json.backup"),
    ),
    "codex": Protocol(
        display_name="Codex CLI",
        event_name="PreToolUse",
        shell_tool="Bash",
        settings_path=".codex/hooks.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
        run_notice="Codex runs bar's hook only once it is trusted: accept it in /hooks "
        "(or pass --dangerously-bypass-hook-trust to codex)",
        state=("~/.codex",),
    ),
    "gemini": Protocol(
        display_name="Gemini CLI",
        event_name="BeforeTool",
        shell_tool="run_shell_command",
        settings_path=".gemini/settings.json",
        matcher="run_shell_command",
        timeout=60_000,  # milliseconds
        entry_name="bar-policy",
        # project hooks run only in trusted folders; this one bar made for the task
        run_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
        state=("~/.gemini",),
    ),
}


class HookEvent(Slotted):
    """One pre-tool-use event, whatever agent sent it."""

    __slots__ = ("agent", "command", "cwd", "event_name", "session_id", "tool_name",
                 "tool_use_id")  # fmt: skip

    def __init__(
        self,
        agent: str,
        event_name: str,
        tool_name: str | None,
        command: str | None,  # None when the tool is not the agent's shell tool
        session_id: str | None,
        tool_use_id: str | None,  # Gemini sends none
        cwd: str | None,
    ) -> None:
        self.agent = agent
        self.event_name = event_name
        self.tool_name = tool_name
        self.command = command
        self.session_id = session_id
        self.tool_use_id = tool_use_id
        self.cwd = cwd


class HookReply(Slotted):
    """What ``bar hook AGENT`` writes and how it exits."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, stdout: str, stderr: str, exit_code: int) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code


def protocol(agent: str) -> Protocol:
    """The agent's entry of the table; ``UnknownAgent`` for a name bar does not know."""
    try:
        return PROTOCOLS[agent]
    except KeyError:
        raise UnknownAgent(
            f"unknown agent {agent!r}", hint=f"use one of: {', '.join(AGENTS)}"
        ) from None


# --- reading events -------------------------------------------------------------------


def parse_event(agent: str, payload: bytes) -> HookEvent:
    """Read the JSON event an agent wrote to the hook's stdin.

    Strict where a wrong guess would let a command through unchecked (the event name,
    the tool name, the shell command), lenient about metadata (ids, cwd): a metadata
    field of an unexpected type reads as None.
    """
    proto = protocol(agent)
    who = proto.display_name
    if not payload.strip():
        raise HookInputError(f"{who} sent an empty hook event (nothing on stdin)")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HookInputError(f"{who} hook event is not UTF-8: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HookInputError(f"{who} hook event is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HookInputError(f"{who} hook event is a JSON {json_type(data)}, expected an object")

    event_name = _required_str(data, "hook_event_name", who)
    if event_name != proto.event_name:
        raise HookInputError(
            f"{who} sent a {event_name!r} event; bar's hook handles only {proto.event_name!r}"
        )
    tool_name = _required_str(data, "tool_name", who)

    command: str | None = None
    if tool_name == proto.shell_tool:
        tool_input = data.get("tool_input")
        if not isinstance(tool_input, dict):
            raise HookInputError(
                f"{who} {tool_name} event has no tool_input object (got {json_type(tool_input)})"
            )
        raw = tool_input.get("command")
        if not isinstance(raw, str):
            raise HookInputError(
                f"{who} {tool_name} event has no tool_input.command string (got {json_type(raw)})"
            )
        command = raw

    return HookEvent(
        agent=agent,
        event_name=event_name,
        tool_name=tool_name,
        command=command,
        session_id=_optional_str(data, "session_id"),
        tool_use_id=_optional_str(data, "tool_use_id"),
        cwd=_optional_str(data, "cwd"),
    )


def _required_str(data: dict[str, Any], key: str, who: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise HookInputError(f"{who} hook event has no {key} string (got {json_type(value)})")
    return value


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string" if value else "empty string"
    if isinstance(value, list):
        return "array"
    return "object"


# --- writing replies ------------------------------------------------------------------


def render_reply(agent: str, action: str, reason: str) -> HookReply:
    """The reply to send for a policy action.

    ``block``: refuse the tool call. ``warn``: the agent's "ask the user" where it has
    one (Claude Code, Gemini CLI); Codex CLI has none, so the warning is shown and the
    command runs. ``allow`` and ``log``: no opinion, so the agent's own permission rules
    still apply (an explicit "allow" would skip the user's permission prompts).
    """
    proto = protocol(agent)
    if action in ("allow", "log"):
        # Gemini's docs ask for a JSON object on stdout whenever the hook exits 0.
        return HookReply("{}\n" if agent == "gemini" else "", "", 0)
    if action == "warn":
        return _warn_reply(agent, proto, _clean_reason(reason))
    if action == "block":
        return _block_reply(agent, proto, _clean_reason(reason))
    raise ValueError(f"unknown policy action {action!r}; expected one of {ACTIONS}")


def render_input_error(agent: str, message: str) -> HookReply:
    """The reply to an event bar could not read: block the call (fail closed).

    An unreadable event means the agent's protocol changed or the hook was wired to the
    wrong event. Answering "no opinion" would run every command of the session unchecked
    without anyone noticing; a block stops the agent visibly until bar is fixed.
    """
    proto = protocol(agent)
    text = message.strip() or "unreadable event"
    reason = f"bar could not check this command, so it was blocked: {text}"
    return _block_reply(agent, proto, reason)


def _clean_reason(reason: str) -> str:
    # Codex rejects a deny without a non-empty reason (and then runs the command).
    return reason if reason.strip() else _FALLBACK_REASON


def _block_reply(agent: str, proto: Protocol, reason: str) -> HookReply:
    body: dict[str, Any]
    if agent == "gemini":
        body = {"decision": "deny", "reason": reason}
    else:
        body = {
            "hookSpecificOutput": {
                "hookEventName": proto.event_name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    # Exit 2 + stderr blocks in all three agents; the JSON says the same for any reader
    # of stdout (Gemini reads stdout first even on exit 2).
    return HookReply(_json_line(body), reason + "\n", 2)


def _warn_reply(agent: str, proto: Protocol, reason: str) -> HookReply:
    body: dict[str, Any]
    if agent == "claude":
        body = {
            "hookSpecificOutput": {
                "hookEventName": proto.event_name,
                "permissionDecision": "ask",
                "permissionDecisionReason": reason,
            }
        }
    elif agent == "codex":
        # Codex treats permissionDecision "ask" as an invalid answer; systemMessage is
        # shown to the user as a warning and the command runs, which is what warn means.
        body = {"systemMessage": reason}
    else:
        # "ask" is in Gemini's source (not yet in its reference doc); a version that does
        # not know it treats it as no objection and shows systemMessage, i.e. a warning.
        body = {"decision": "ask", "reason": reason, "systemMessage": reason}
    return HookReply(_json_line(body), "", 0)


def _json_line(body: dict[str, Any]) -> str:
    return json.dumps(body) + "\n"
