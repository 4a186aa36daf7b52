"""The hook protocols of the coding agents bar supervises.

Claude Code, Codex CLI and Gemini CLI can each run a command before every shell command
the model asks for, after it, and when a session starts: the event goes to the hook as
JSON on stdin, and the hook answers with JSON on stdout and/or its exit code. This module
speaks the three dialects: it reads an event into one ``HookEvent`` (``kind`` "pre",
"post" or "start") and turns a policy action into each agent's reply. What differs
between the agents is data, in one table (``PROTOCOLS``). The field names, and why each
reply looks the way it does, are in docs/agents.md, as observed with the released CLIs.

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
import re
from typing import Any

from bar.agents import AGENTS
from bar.base.record import field, record
from bar.errors import HookInputError, UnknownAgent

ACTIONS = ("allow", "log", "warn", "block")

_FALLBACK_REASON = "blocked by bar policy"


@record(frozen=True, kw_only=True)
class Protocol:
    """What differs between the agents. Sources for every value: docs/agents.md."""

    display_name: str
    event_name: str  # the pre-tool-use event, as named in settings and in the payload
    post_events: tuple[str, ...]  # after a tool call: (succeeded, failed) or one event
    start_event: str  # a session starts: proves the agent runs bar's hooks at all
    can_ask: bool  # the pre-tool reply can put a question to the person at the prompt
    shell_tool: str  # tool_name of the agent's shell tool
    edit_tools: tuple[str, ...]  # its tools that write files (a checkpoint after each)
    settings_path: str  # project-local file bar installs its hook into
    matcher: str  # matcher of bar's group: the shell tool, matched exactly
    timeout: int  # timeout of bar's entry, in the unit the agent reads
    entry_name: str | None  # Gemini shows a hook's name in its /hooks panel
    run_env: dict[str, str] = field(default_factory=dict)  # what `bar run --agent` adds

    @property
    def post_matcher(self) -> str:
        """The tools after which bar takes a checkpoint: the shell and the edit tools."""
        return "|".join((self.matcher, *self.edit_tools))

    def changes_files(self, tool_name: str | None) -> bool:
        """Whether a call of ``tool_name`` can change files (a checkpoint follows it)."""
        return tool_name == self.shell_tool or tool_name in self.edit_tools

    def events(self) -> tuple[tuple[str, str | None], ...]:
        """(event, matcher) of every hook bar installs: every tool that can change files
        before it runs (the policy judges the shell's commands; an edit's start marks what
        changed before it as no call's: ``Recorder.catch_up``) and after it ran, and
        session start (no matcher: every start)."""
        return (
            (self.event_name, self.post_matcher),
            *((name, self.post_matcher) for name in self.post_events),
            (self.start_event, None),
        )


PROTOCOLS = {
    "claude": Protocol(
        display_name="Claude Code",
        event_name="PreToolUse",
        post_events=("PostToolUse", "PostToolUseFailure"),
        start_event="SessionStart",
        can_ask=True,
        shell_tool="Bash",
        edit_tools=("Edit", "Write", "MultiEdit", "NotebookEdit"),
        settings_path=".claude/settings.local.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
    ),
    "codex": Protocol(
        display_name="Codex CLI",
        event_name="PreToolUse",
        post_events=("PostToolUse",),
        start_event="SessionStart",
        can_ask=False,
        shell_tool="Bash",
        edit_tools=("apply_patch",),  # which it sends through its shell tool (see below)
        settings_path=".codex/hooks.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
    ),
    "gemini": Protocol(
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
    ),
}


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
        if command is not None and agent == "codex" and _is_codex_patch(command):
            # Codex's file edits come through its shell tool; no shell runs them
            paths = tuple(_CODEX_PATCH_PATH.findall(command))
            tool_name, command = CODEX_PATCH_TOOL, None

    return HookEvent(
        agent=agent,
        event_name=event_name,
        tool_name=tool_name,
        command=command,
        session_id=_optional_str(data, "session_id"),
        tool_use_id=_optional_str(data, "tool_use_id"),
        cwd=_optional_str(data, "cwd"),
        kind=kind,
        outcome=_outcome(agent, event_name, tool_name, data) if kind == "post" else None,
        paths=paths,
        transcript=_optional_str(data, "transcript_path"),
        # Claude Code names the subagent a call is made in; its main session has no id
        agent_id=_optional_str(data, "agent_id"),
        agent_type=_optional_str(data, "agent_type") if data.get("agent_id") else None,
    )


_PATH_KEYS = ("file_path", "notebook_path", "path")  # where edit tools name their file
CODEX_PATCH_TOOL = "apply_patch"  # the tool_name bar gives Codex's patches


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


# Codex hands apply_patch to the hook as a Bash command: `apply_patch <<'EOF'` followed by
# a patch that starts with this line. Codex applies it itself; no shell runs it.
_CODEX_PATCH = re.compile(r"\A\s*apply_patch\s+<<-?\s*(['\"]?)(\w+)\1\s*\n\*\*\* Begin Patch\n")
_CODEX_PATCH_PATH = re.compile(
    r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$", re.MULTILINE
)
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)


def _is_codex_patch(command: str) -> bool:
    """Whether a Codex shell event is only its built-in patch tool: the heredoc must be
    all there is (a command after the patch's end would be run by a shell)."""
    match = _CODEX_PATCH.match(command)
    if match is None:
        return False
    rest = command[match.end() :]
    end = rest.find("\n*** End Patch\n" + match.group(2))
    return end >= 0 and not rest[end + len("\n*** End Patch\n" + match.group(2)) :].strip()


def _outcome(agent: str, event_name: str, tool_name: str | None, data: dict[str, Any]) -> str:
    """What a post-tool event says of the call: "ran" (completed), "failed" (ran and
    failed: a non-zero exit, an error), "interrupted" (the person stopped it: Esc,
    Ctrl-C) or "refused" (the agent itself would not run it)."""
    if agent == "claude":
        if event_name != "PostToolUseFailure":
            return "ran"
        return "interrupted" if data.get("is_interrupt") is True else "failed"
    if agent == "gemini":
        response = data.get("tool_response")
        if isinstance(response, dict):
            content = response.get("llmContent")
            if isinstance(content, str) and _GEMINI_CANCELLED in content:
                return "interrupted"
            if response.get("error"):
                return "failed"
            if isinstance(content, str):
                codes = _EXIT_CODE.findall(content)
                if codes and codes[-1] != "0":
                    return "failed"
                # a command Gemini CLI ran reports its process group; one it blocked
                # itself (command substitution, its own policy) reports only why
                if (
                    tool_name == PROTOCOLS[agent].shell_tool
                    and not codes
                    and (_GEMINI_RAN not in content)
                ):
                    return "refused"
    # Codex's post event carries the command's output only: its rollout says how it ended
    # (``bar.agents.rollout``, read by the supervisor)
    return "ran"


_GEMINI_RAN = "Process Group PGID:"
_GEMINI_CANCELLED = "Command was cancelled by user"  # (its shell tool's words, 0.61)


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
    proto = protocol(agent)
    answer = answer_for(agent, action, ask)
    if answer == "none":
        return render_ack(agent)
    if answer == "deny":
        return _block_reply(agent, proto, _clean_reason(reason))
    if answer == "ask":
        return _ask_reply(agent, proto, _clean_reason(reason))
    return _warning_reply(agent, proto, _clean_reason(reason))


def render_ack(agent: str) -> HookReply:
    """No opinion: the reply to an allowed command and to every post-tool or session
    event. Gemini's docs ask for a JSON object on stdout whenever the hook exits 0."""
    return HookReply("{}\n" if agent == "gemini" else "", "", 0)


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


def _ask_reply(agent: str, proto: Protocol, reason: str) -> HookReply:
    body: dict[str, Any]
    if agent == "claude":
        body = {
            "hookSpecificOutput": {
                "hookEventName": proto.event_name,
                "permissionDecision": "ask",
                "permissionDecisionReason": reason,
            }
        }
    else:
        body = {"decision": "ask", "reason": reason, "systemMessage": reason}
    return HookReply(_json_line(body), "", 0)


def _warning_reply(agent: str, proto: Protocol, reason: str) -> HookReply:
    """The command runs; the person sees the warning (``systemMessage``) and, where the
    agent passes it on, so does the model (``additionalContext``)."""
    message = f"warning: {reason}"
    body: dict[str, Any] = {"systemMessage": message}
    if agent != "gemini":  # Gemini shows the message; its pre-tool context is not read
        body["hookSpecificOutput"] = {
            "hookEventName": proto.event_name,
            "additionalContext": message,
        }
    return HookReply(_json_line(body), "", 0)


def _json_line(body: dict[str, Any]) -> str:
    return json.dumps(body) + "\n"
