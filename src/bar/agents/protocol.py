"""The hook protocols of the coding agents bar supervises.

Claude Code, Codex CLI and Gemini CLI can each run a command before every shell command
the model asks for, after it, and when a session starts: the event goes to the hook as
JSON on stdin, and the hook answers with JSON on stdout and/or its exit code. This module
speaks the three dialects: it reads an event into one ``HookEvent`` (``kind`` "pre",
"post" or "start") and turns a policy action into each agent's reply. What differs
between the agents is in each agent's module (``bar.agents.base.of``: its ``Protocol``
and the shape of its replies). The field names, and why each reply looks the way it
does, are in docs/agents.md, as observed with the released CLIs.

Two rules shape everything here:

* Every agent treats a hook that crashes, times out or answers something it does not
  understand as "no objection": the command runs. So a block is said on every channel
  the agent reads (exit code 2 with the reason on stderr, and the agent's JSON deny on
  stdout), replies carry only fields the agent's schema accepts, and an event bar cannot
  read is answered with a block (fail closed), never with silence.
* ``bar hook`` imports this module when no ``bar run`` is there to answer for it, before
  every shell command of the agent: records are ``bar.base.record`` records, not dataclasses.
"""

from __future__ import annotations

import json
from typing import Any

from bar.agents.base import Protocol, of
from bar.base.record import record
from bar.errors import HookInputError

ACTIONS = ("allow", "log", "warn", "block")

_FALLBACK_REASON = "blocked by bar policy"


@record(frozen=True)
class HookEvent:
    """One hook event, whatever agent sent it: before a tool call (``kind`` "pre"), after
    it ("post", with ``outcome`` "ran" or "failed"), or at a session's start ("start")."""

    agent: str
    event_name: str
    tool_name: str | None
    command: str | None  # None when the tool is not the agent's shell tool
    session_id: str | None
    tool_use_id: str | None  # Gemini sends none
    cwd: str | None
    kind: str = "pre"
    outcome: str | None = None
    paths: tuple[str, ...] = ()  # the files an edit tool names, as the agent gave them
    transcript: str | None = None  # the agent's own record of the session (a path)
    agent_id: str | None = None  # a subagent's (Claude Code's Task tool), and its kind
    agent_type: str | None = None


@record(frozen=True)
class HookReply:
    """What ``bar hook AGENT`` writes and how it exits."""

    stdout: str
    stderr: str
    exit_code: int


def protocol(agent: str) -> Protocol:
    """The agent's protocol; ``UnknownAgent`` for a name bar does not know."""
    return of(agent).protocol


# --- reading events -------------------------------------------------------------------


def parse_event(agent: str, payload: bytes) -> HookEvent:
    """Read the JSON event an agent wrote to the hook's stdin.

    Strict where a wrong guess would let a command through unchecked (a pre-tool event's
    name, tool and shell command), lenient about metadata (ids, cwd): a metadata field
    of an unexpected type reads as None. Post-tool and session events only inform, so
    they need no more than their event name.
    """
    proto = protocol(agent)
    who = proto.display_name
    data = _event_object(who, payload)
    event_name = _required_str(data, "hook_event_name", who)
    kind = _kind(proto, event_name)
    if kind is None:
        handled = ", ".join(repr(name) for name, _ in proto.events())
        raise HookInputError(f"{who} sent a {event_name!r} event; bar's hook handles {handled}")
    if kind == "pre":
        tool_name: str | None = _required_str(data, "tool_name", who)
    else:
        tool_name = _optional_str(data, "tool_name")

    command: str | None = None
    paths: tuple[str, ...] = ()
    tool_input = data.get("tool_input")
    if tool_name in proto.edit_tools and isinstance(tool_input, dict):
        paths = tuple(v for k in _PATH_KEYS if isinstance(v := tool_input.get(k), str) and v)
    if tool_name == proto.shell_tool:
        if not isinstance(tool_input, dict):
            if kind == "pre":
                raise HookInputError(
                    f"{who} {tool_name} event has no tool_input object"
                    f" (got {json_type(tool_input)})"
                )
        else:
            raw = tool_input.get("command")
            if isinstance(raw, str):
                command = raw
            elif kind == "pre":
                raise HookInputError(
                    f"{who} {tool_name} event has no tool_input.command string"
                    f" (got {json_type(raw)})"
                )
        edit = of(agent).own_edit(command) if command is not None else None
        if edit is not None:  # (an agent's file edit sent through its shell tool)
            tool_name, paths = edit
            command = None

    return HookEvent(
        agent=agent,
        event_name=event_name,
        tool_name=tool_name,
        command=command,
        session_id=_optional_str(data, "session_id"),
        tool_use_id=_optional_str(data, "tool_use_id"),
        cwd=_optional_str(data, "cwd"),
        kind=kind,
        outcome=of(agent).outcome(event_name, tool_name, data) if kind == "post" else None,
        paths=paths,
        transcript=_optional_str(data, "transcript_path"),
        # Claude Code names the subagent a call is made in; its main session has no id
        agent_id=_optional_str(data, "agent_id"),
        agent_type=_optional_str(data, "agent_type") if data.get("agent_id") else None,
    )


_PATH_KEYS = ("file_path", "notebook_path", "path")  # where edit tools name their file


def _event_object(who: str, payload: bytes) -> dict[str, Any]:
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
    return data


def _kind(proto: Protocol, event_name: str) -> str | None:
    if event_name == proto.event_name:
        return "pre"
    if event_name in proto.post_events:
        return "post"
    if event_name == proto.start_event:
        return "start"
    return None


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


def answer_for(agent: str, action: str, ask: bool = False) -> str:
    """What bar's reply to a policy action tells the agent: "deny", "ask" (a question
    for the person at the prompt), "warning" (the command runs; the warning is shown
    and, where the agent passes it on, the model is told) or "none" (no opinion)."""
    if action == "block":
        return "deny"
    if action == "warn":
        return "ask" if ask and protocol(agent).can_ask else "warning"
    if action in ("allow", "log"):
        return "none"
    raise ValueError(f"unknown policy action {action!r}; expected one of {ACTIONS}")


def render_reply(agent: str, action: str, reason: str, *, ask: bool = False) -> HookReply:
    """The reply to send for a policy action.

    ``block``: refuse the tool call. ``warn``: with ``ask`` (a person is at the agent's
    prompt), the agent's "ask the user" where it has one (Claude Code, Gemini CLI);
    otherwise, and always for Codex CLI, the command runs with the warning shown. Never
    a question nobody can answer: Claude Code refuses such a call and Gemini CLI waits
    for an answer for ever. ``allow`` and ``log``: no opinion, so the agent's own
    permission rules still apply (an explicit "allow" would skip the user's prompts).
    """
    answer = answer_for(agent, action, ask)
    if answer == "none":
        return render_ack(agent)
    reason = _clean_reason(reason)
    if answer == "deny":
        return _block_reply(agent, reason)
    if answer == "ask":
        return HookReply(_json_line(of(agent).ask(reason)), "", 0)
    # the command runs; the person sees the warning and, where the agent passes it on,
    # so does the model
    return HookReply(_json_line(of(agent).warning(f"warning: {reason}")), "", 0)


def render_ack(agent: str) -> HookReply:
    """No opinion: the reply to an allowed command and to every post-tool or session
    event."""
    return HookReply(of(agent).ack(), "", 0)


def render_input_error(agent: str, message: str) -> HookReply:
    """The reply to an event bar could not read: block the call (fail closed).

    An unreadable event means the agent's protocol changed or the hook was wired to the
    wrong event. Answering "no opinion" would run every command of the session unchecked
    without anyone noticing; a block stops the agent visibly until bar is fixed.
    """
    text = message.strip() or "unreadable event"
    return _block_reply(agent, f"bar could not check this command, so it was blocked: {text}")


def _clean_reason(reason: str) -> str:
    # Codex rejects a deny without a non-empty reason (and then runs the command).
    return reason if reason.strip() else _FALLBACK_REASON


def _block_reply(agent: str, reason: str) -> HookReply:
    # Exit 2 + stderr blocks in all three agents; the JSON says the same for any reader
    # of stdout (Gemini reads stdout first even on exit 2).
    return HookReply(_json_line(of(agent).block(reason)), reason + "\n", 2)


def _json_line(body: dict[str, Any]) -> str:
    return json.dumps(body) + "\n"
