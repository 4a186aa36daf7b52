#!/usr/bin/env python3
"""A stand-in for Claude Code, Codex CLI and Gemini CLI that runs their hooks.

    python tests/support/fake_agent.py --agent claude 'ls' 'rm -rf build'

For each command it does what the real agent does before running a shell command: reads
the project settings files from the current directory (for Codex also ``-c`` options, as
``bar run`` passes them), builds the agent's event payload, runs every matching hook with
``sh -c`` (payload on stdin, cwd and environment as the agent sets them), reads each reply
the way that agent reads it, and runs the command with ``sh -c`` only if no hook refused
it; then it sends the post-tool event (how the command ended). A session-start event
comes first. A command ``write:PATH=TEXT`` is a file edit through the agent's own tool
instead (Claude Code ``Write``, Codex ``apply_patch`` through its shell tool, Gemini CLI
``write_file``): the agent writes the file itself and sends the post-tool event.
``silent:PATH=TEXT`` writes the file with no hook at all (a subagent that skips hooks);
``wait:PATH`` waits until PATH exists, as an agent waits for its user between turns.

With ``--transcript`` it also keeps a transcript of the session in its home, as the
released CLIs do, where ``bar run`` points it (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``,
``GEMINI_CLI_HOME``; none is written without one): the prompt (``--prompt``), one model
answer with its tool call and then the call's result per command or edit (the call ids
the hook events carry), and a last answer in words; each answer reports ``--usage
IN,OUT,CACHED`` tokens (IN: prompt tokens not read from a cache); Ctrl-C (or bar stopping
it past a budget) leaves the agent's mark of an interrupted turn (``--interrupt-exit
CODE``: then it exits with CODE, as the released agents catch SIGINT and exit, where it
would otherwise die of it). Its lines are those of
Claude Code 2.1.197, Codex 0.169.0 and Gemini CLI 0.61.0, appended as the session goes.
A later run with the same ``--session-id`` resumes the session: it writes on in the same
file. (Not by default: tests older than sessions read a step's checkpoints file and ``bar
log --tools`` as they were without one; a Gemini CLI session adds a line to the first for
each call bar finds.) One line per decision on stdout:

    RAN: <cmd>                 DENIED: <cmd>: <reason>
    ASKED: <cmd>: <reason>     (then RAN or DENIED, per --ask-answer)
    WARNING: <cmd>: <text>     HOOK ERROR: <cmd>: <text>     STOPPED: <reason>
    INTERRUPTED                (Ctrl-C, with --interrupt-exit)

The reply rules follow each agent's documentation and source (see docs/agents.md),
including how it fails open: a hook that crashes, times out or answers something the
agent does not accept does not block the command. Hook trust prompts are not modelled:
every configured hook counts as trusted. Standard library only, so it runs anywhere.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETTINGS_FILES = {
    "claude": (".claude/settings.json", ".claude/settings.local.json"),
    "codex": (".codex/hooks.json", ".codex/config.toml"),
    "gemini": (".gemini/settings.json",),
}
EVENT_NAME = {"claude": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool"}
POST_EVENT = {
    "claude": ("PostToolUse", "PostToolUseFailure"),
    "codex": ("PostToolUse",) * 2,
    "gemini": ("AfterTool",) * 2,
}  # (succeeded, failed)
SHELL_TOOL = {"claude": "Bash", "codex": "Bash", "gemini": "run_shell_command"}
EDIT_TOOL = {"claude": "Write", "codex": "Bash", "gemini": "write_file"}


@dataclass
class Hook:
    command: str
    timeout_s: float


@dataclass
class Verdict:
    """One hook's answer as the agent understood it."""

    decision: str = "none"  # none | allow | deny | ask | stop
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# --- reading settings -----------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return data if isinstance(data, dict) else {}


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}


def command_line_config(options: list[str]) -> dict[str, Any]:
    """Codex's ``-c key=value`` options as one settings layer (values are TOML)."""
    import tomllib

    layer: dict[str, Any] = {}
    for option in options:
        key, _, value = option.partition("=")
        _merge(layer, tomllib.loads(f"{key.strip()} = {value}"))
    return layer


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def user_settings(agent: str) -> Path:
    """The agent's own settings file in its home, as the real agent finds it."""
    home = Path(os.environ.get("HOME", "~")).expanduser()
    if agent == "claude":
        return Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "settings.json"
    if agent == "codex":
        return Path(os.environ.get("CODEX_HOME") or home / ".codex") / "config.toml"
    return Path(os.environ.get("GEMINI_CLI_HOME") or home) / ".gemini" / "settings.json"


def configured_hooks(
    agent: str,
    cwd: Path,
    tool_name: str | None,
    event: str | None = None,
    options: dict[str, Any] | None = None,
) -> list[Hook]:
    """Every command hook of ``event`` (default: the pre-tool-use one) whose matcher
    selects ``tool_name``; ``options``: Codex's command-line layer."""
    event = event or EVENT_NAME[agent]
    if agent == "gemini":
        return _gemini_hooks(cwd, tool_name, event)
    found: list[Hook] = []
    layers: list[tuple[str, dict[str, Any] | None]] = [(str(user_settings(agent)), None)]
    layers += [(rel, None) for rel in SETTINGS_FILES[agent]]
    if options:
        layers.append(("-c", options))
    for rel, given in layers:
        path = cwd / rel
        if given is not None:
            settings = given
        elif agent == "codex" and rel.endswith(".toml"):
            settings = _read_toml(path)
            features = settings.get("features", {})
            if features.get("hooks") is False or features.get("codex_hooks") is False:
                return []
        else:
            settings = _read_json(path)
        if agent == "claude" and settings.get("disableAllHooks") is True:
            return []
        _collect(agent, settings, event, tool_name, set(), found)
    return found


def _gemini_hooks(cwd: Path, tool_name: str | None, event: str) -> list[Hook]:
    """Gemini CLI's: its user, workspace and system settings (``GEMINI_CLI_SYSTEM_SETTINGS_PATH``)
    merged as it merges them: ``hooksConfig.enabled`` from the highest that sets it, the
    ``disabled`` lists united, the hooks of all three."""
    system = os.environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
    layers = [
        _read_json(user_settings("gemini")),
        _read_json(cwd / ".gemini" / "settings.json"),
        _read_json(Path(system)) if system else {},
    ]
    enabled, disabled = True, set()
    for settings in layers:
        config = settings.get("hooksConfig", {})
        if isinstance(config, dict):
            if "enabled" in config:
                enabled = config["enabled"] is not False
            disabled |= set(config.get("disabled", []))
    found: list[Hook] = []
    if enabled:
        for settings in layers:
            _collect("gemini", settings, event, tool_name, disabled, found)
    return found


def _collect(
    agent: str,
    settings: dict[str, Any],
    event: str,
    tool_name: str | None,
    disabled: set[str],
    found: list[Hook],
) -> None:
    hooks = settings.get("hooks", {})
    groups = hooks.get(event, []) if isinstance(hooks, dict) else []
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        if tool_name is not None and not _matches(agent, group.get("matcher"), tool_name):
            continue
        for entry in group.get("hooks", []):
            if not isinstance(entry, dict) or entry.get("type") != "command":
                continue
            command = entry.get("command")
            if not isinstance(command, str) or not command.strip():
                continue
            if entry.get("name") in disabled or command in disabled:
                continue
            found.append(Hook(command, _timeout(agent, entry.get("timeout"))))


def _timeout(agent: str, value: object) -> float:
    if agent == "gemini":  # milliseconds, default 60 s
        return float(value) / 1000 if isinstance(value, int | float) and value > 0 else 60.0
    default = 600.0 if agent == "codex" else 60.0  # seconds
    return float(value) if isinstance(value, int | float) and value > 0 else default


def _matches(agent: str, matcher: object, tool_name: str) -> bool:
    if matcher is None or matcher in ("", "*"):
        return True
    if not isinstance(matcher, str):
        return False
    if agent == "gemini":
        try:
            return re.search(matcher, tool_name) is not None
        except re.error:
            return matcher == tool_name
    # Claude Code and Codex: a plain name (letters, digits, _ and |) matches exactly,
    # anything else is a regular expression.
    if re.fullmatch(r"[A-Za-z0-9_|]+", matcher):
        return tool_name in matcher.split("|")
    try:
        return re.search(matcher, tool_name) is not None
    except re.error:
        return False


# --- building events ------------------------------------------------------------------


def build_payload(
    agent: str, command: str, cwd: Path, session_id: str, transcript: str | None = None
) -> dict[str, Any]:
    """The pre-tool event of a shell command; ``transcript``: the session's transcript,
    if one is kept (Claude Code and Gemini CLI name it)."""
    transcript = transcript or str(cwd / ".fake-agent" / f"{session_id}.jsonl")
    if agent == "claude":
        return {
            "session_id": session_id,
            "transcript_path": transcript,
            "cwd": str(cwd),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Run a command", "timeout": 120000},
            "tool_use_id": "toolu_" + uuid.uuid4().hex[:24],
        }
    if agent == "codex":
        return {
            "session_id": session_id,
            "turn_id": "turn-" + uuid.uuid4().hex[:8],
            "transcript_path": None,
            "cwd": str(cwd),
            "hook_event_name": "PreToolUse",
            "model": "gpt-5-codex",
            "permission_mode": "default",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "call_" + uuid.uuid4().hex[:24],
        }
    return {
        "session_id": session_id,
        "transcript_path": transcript,
        "cwd": str(cwd),
        "hook_event_name": "BeforeTool",
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z"),
        "tool_name": "run_shell_command",
        "tool_input": {"command": command, "description": "Run a command"},
    }


def edit_payload(
    agent: str, path: str, text: str, cwd: Path, session_id: str, transcript: str | None = None
) -> dict[str, Any]:
    """The pre-tool event of a file edit through the agent's own tool."""
    if agent == "codex":  # apply_patch, as Codex hands it to hooks: a Bash heredoc
        added = "".join(f"+{line}\n" for line in text.splitlines())
        patch = f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n{added}*** End Patch\nEOF\n"
        return build_payload(agent, patch, cwd, session_id)
    payload = build_payload(agent, "", cwd, session_id, transcript)
    payload["tool_name"] = EDIT_TOOL[agent]
    payload["tool_input"] = {"file_path": str(cwd / path), "content": text}
    return payload


def post_payload(
    agent: str, pre: dict[str, Any], exit_code: int, output: str
) -> tuple[str, dict[str, Any]]:
    """The event after a command ran, as each agent words it: (event name, payload)."""
    failed = exit_code != 0
    event = POST_EVENT[agent][failed]
    payload = {k: v for k, v in pre.items() if k != "hook_event_name"}
    payload["hook_event_name"] = event
    if agent == "claude":
        if failed:
            payload["error"] = f"Exit code {exit_code}\n{output}"
        else:
            payload["tool_response"] = {"stdout": output, "stderr": "", "interrupted": False}
    elif agent == "codex":
        payload["tool_response"] = output  # the output only, not how it ended
    else:
        # as Gemini CLI 0.61 writes it: a command that ran names its process group
        code = f"\nExit Code: {exit_code}" if failed else ""
        content = f"Output: {output or '(empty)'}{code}\nProcess Group PGID: {os.getpid()}"
        payload["tool_response"] = {"llmContent": content, "returnDisplay": output}
    return event, payload


def start_payload(agent: str, cwd: Path, session_id: str) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }


def hook_environment(agent: str, cwd: Path, session_id: str) -> dict[str, str]:
    env = dict(os.environ)
    if agent == "claude":
        env["CLAUDE_PROJECT_DIR"] = str(cwd)
    elif agent == "gemini":
        env.update(
            GEMINI_PROJECT_DIR=str(cwd),
            GEMINI_CWD=str(cwd),
            GEMINI_SESSION_ID=session_id,
            CLAUDE_PROJECT_DIR=str(cwd),
        )
    return env


# --- reading replies ------------------------------------------------------------------


def interpret(agent: str, exit_code: int | None, stdout: str, stderr: str) -> Verdict:
    """One hook's reply as ``agent`` reads it; ``exit_code`` None means it timed out."""
    if exit_code is None:
        return Verdict(errors=["hook timed out"])
    return {"claude": _claude, "codex": _codex, "gemini": _gemini}[agent](exit_code, stdout, stderr)


def _claude(exit_code: int, stdout: str, stderr: str) -> Verdict:
    if exit_code == 2:  # blocking error: stderr goes to the model, stdout is ignored
        return Verdict("deny", stderr.strip())
    if exit_code != 0:
        return Verdict(errors=[f"hook exited with code {exit_code}: {stderr.strip()}"])
    text = stdout.strip()
    if not text.startswith("{"):
        return Verdict()  # plain stdout only goes to the transcript
    try:
        data = json.loads(text)
    except ValueError:
        return Verdict(errors=["hook printed invalid JSON"])
    if not isinstance(data, dict):
        return Verdict(errors=["hook printed JSON that is not an object"])
    verdict = Verdict()
    if isinstance(data.get("systemMessage"), str):
        verdict.warnings.append(data["systemMessage"])
    if data.get("continue") is False:
        verdict.decision, verdict.reason = "stop", str(data.get("stopReason", ""))
        return verdict
    specific = data.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("hookEventName") == "PreToolUse":
        decision = specific.get("permissionDecision")
        reason = str(specific.get("permissionDecisionReason", ""))
        if decision in ("allow", "deny", "ask"):
            verdict.decision, verdict.reason = str(decision), reason
        return verdict
    legacy = data.get("decision")  # older form, still read
    if legacy == "block":
        verdict.decision, verdict.reason = "deny", str(data.get("reason", ""))
    elif legacy == "approve":
        verdict.decision = "allow"
    return verdict


_CODEX_TOP = {
    "continue",
    "stopReason",
    "suppressOutput",
    "systemMessage",
    "decision",
    "reason",
    "hookSpecificOutput",
}
_CODEX_SPECIFIC = {
    "hookEventName",
    "permissionDecision",
    "permissionDecisionReason",
    "updatedInput",
    "additionalContext",
}
_CODEX_EVENT_NAMES = {
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
}


def _codex(exit_code: int, stdout: str, stderr: str) -> Verdict:
    if exit_code == 2:
        if stderr.strip():
            return Verdict("deny", stderr.strip())
        return Verdict(
            errors=[
                "PreToolUse hook exited with code 2 but did not write a blocking reason to stderr"
            ]
        )
    if exit_code != 0:
        return Verdict(errors=[f"hook exited with code {exit_code}"])
    text = stdout.strip()
    if not text:
        return Verdict()
    data = _codex_wire(text)
    if data is None:
        if text.startswith(("{", "[")):
            return Verdict(errors=["hook returned invalid pre-tool-use JSON output"])
        return Verdict()  # plain text is ignored
    verdict = Verdict()
    if isinstance(data.get("systemMessage"), str):
        verdict.warnings.append(data["systemMessage"])
    invalid = _codex_invalid(data)
    if invalid:
        verdict.errors.append(invalid)  # an invalid answer fails open
        return verdict
    specific = data.get("hookSpecificOutput") or {}
    if any(
        k in specific for k in ("permissionDecision", "permissionDecisionReason", "updatedInput")
    ):
        if specific.get("permissionDecision") == "deny":
            verdict.decision, verdict.reason = "deny", specific["permissionDecisionReason"].strip()
        elif specific.get("permissionDecision") == "allow":
            verdict.decision = "allow"
    elif data.get("decision") == "block":
        verdict.decision, verdict.reason = "deny", data["reason"].strip()
    return verdict


def _codex_wire(text: str) -> dict[str, Any] | None:
    """The reply if it deserialises into Codex's output type (unknown fields refused)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) - _CODEX_TOP:
        return None
    if data.get("decision") not in (None, "approve", "block"):
        return None
    specific = data.get("hookSpecificOutput")
    if specific is not None:
        if not isinstance(specific, dict) or set(specific) - _CODEX_SPECIFIC:
            return None
        if specific.get("hookEventName") not in _CODEX_EVENT_NAMES:
            return None
        if specific.get("permissionDecision") not in (None, "allow", "deny", "ask"):
            return None
    return data


def _codex_invalid(data: dict[str, Any]) -> str | None:
    if data.get("continue") is False:
        return "PreToolUse hook returned unsupported continue:false"
    if data.get("stopReason") is not None:
        return "PreToolUse hook returned unsupported stopReason"
    if data.get("suppressOutput"):
        return "PreToolUse hook returned unsupported suppressOutput"
    specific = data.get("hookSpecificOutput") or {}
    if any(
        k in specific for k in ("permissionDecision", "permissionDecisionReason", "updatedInput")
    ):
        decision = specific.get("permissionDecision")
        if specific.get("updatedInput") is not None and decision != "allow":
            return "PreToolUse hook returned updatedInput without permissionDecision:allow"
        if decision == "allow" and specific.get("updatedInput") is None:
            return "PreToolUse hook returned unsupported permissionDecision:allow"
        if decision == "ask":
            return "PreToolUse hook returned unsupported permissionDecision:ask"
        if decision == "deny" and not str(specific.get("permissionDecisionReason") or "").strip():
            return "PreToolUse hook returned permissionDecision:deny without a non-empty permissionDecisionReason"
        if decision is None:
            return "PreToolUse hook returned permissionDecisionReason without permissionDecision"
        return None
    if data.get("decision") == "approve":
        return "PreToolUse hook returned unsupported decision:approve"
    if data.get("decision") == "block" and not str(data.get("reason") or "").strip():
        return "PreToolUse hook returned decision:block without a non-empty reason"
    if data.get("decision") is None and data.get("reason") is not None:
        return "PreToolUse hook returned reason without decision"
    return None


def _gemini(exit_code: int, stdout: str, stderr: str) -> Verdict:
    # stdout is read first whatever the exit code; stderr only when stdout is empty.
    text = stdout.strip() or stderr.strip()
    if not text:
        return Verdict()
    output: dict[str, Any] | None = None
    try:
        parsed = json.loads(text)
        if isinstance(parsed, str):
            parsed = json.loads(parsed)
        if isinstance(parsed, dict):
            output = parsed
    except ValueError:
        if exit_code == 0:
            output = {"decision": "allow", "systemMessage": text}
        elif exit_code == 1:
            output = {"decision": "allow", "systemMessage": f"Warning: {text}"}
        else:
            output = {"decision": "deny", "reason": text}
    if output is None:
        return Verdict()
    verdict = Verdict()
    if isinstance(output.get("systemMessage"), str):
        verdict.warnings.append(output["systemMessage"])
    reason = str(output.get("stopReason") or output.get("reason") or "No reason provided")
    if output.get("continue") is False:
        verdict.decision, verdict.reason = "stop", reason
    elif output.get("decision") in ("block", "deny"):
        verdict.decision, verdict.reason = "deny", reason
    elif output.get("decision") == "ask":
        verdict.decision, verdict.reason = "ask", reason
    return verdict


def combine(verdicts: list[Verdict]) -> Verdict:
    """All hooks' answers together: stop, then deny, then ask wins."""
    result = Verdict()
    for kind in ("stop", "deny", "ask", "allow"):
        reasons = [v.reason for v in verdicts if v.decision == kind]
        if reasons:
            result.decision, result.reason = kind, "; ".join(r for r in reasons if r)
            break
    for verdict in verdicts:
        result.warnings += verdict.warnings
        result.errors += verdict.errors
    return result


# --- the session's transcript ---------------------------------------------------------

MODELS = {"claude": "claude-opus-4-8", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro"}
VERSIONS = {"claude": "2.1.197", "codex": "0.169.0"}  # (Gemini CLI writes none)
HOMES = {"claude": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME", "gemini": "GEMINI_CLI_HOME"}


@dataclass
class Outcome:
    """How one tool call ended, as the agent tells its model."""

    ran: bool  # False: refused (a hook, the person at the prompt) or stopped
    exit_code: int = 0
    output: str = ""
    reason: str = ""  # why it did not run
    asked: bool = False  # the person at the prompt declined it


def stamp() -> str:
    """Now, as the agents stamp their lines: ISO 8601 UTC, milliseconds, ``Z``."""
    at = datetime.datetime.now(datetime.UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


class Transcript:
    """The agent's own record of the session, appended line by line as the agent goes."""

    path: Path

    def __init__(
        self,
        agent: str,
        home: Path,
        cwd: Path,
        session_id: str,
        model: str,
        usage: tuple[int, int, int],
    ) -> None:
        self.agent = agent
        self.home = home
        self.cwd = cwd
        self.session_id = session_id
        self.model = model
        self.usage = usage
        self.answers = 0

    def write(self, rec: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def next_answer(self) -> int:
        self.answers += 1
        return self.answers - 1

    # what every agent's transcript holds, in its own words
    def prompt(self, text: str) -> None:
        raise NotImplementedError

    def call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        raise NotImplementedError

    def result(self, call_id: str, name: str, args: dict[str, Any], outcome: Outcome) -> None:
        raise NotImplementedError

    def reply(self, text: str) -> None:
        raise NotImplementedError

    def close(self, last: str) -> None:
        """The session ends; ``last``: its last reply."""

    def interrupted(self) -> None:
        """The person (or bar) stopped the agent mid-turn."""


class ClaudeTranscript(Transcript):
    """``projects/<cwd as a key>/<session>.jsonl``: a ``user`` line for the prompt and for
    each tool result, an ``assistant`` line per block of an answer (its ``message.id``,
    ``model`` and ``usage``)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        key = re.sub(r"[^A-Za-z0-9]", "-", str(self.cwd))
        self.path = self.home / "projects" / key / f"{self.session_id}.jsonl"
        self.parent: str | None = None
        self.said = ""  # the prompt
        self.calling = False  # a tool call is asked for, its result not written yet

    def line(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        uid = str(uuid.uuid4())
        self.write(
            {
                "parentUuid": self.parent,
                "isSidechain": False,
                "type": kind,
                "message": message,
                "uuid": uid,
                "timestamp": stamp(),
                **extra,
                "userType": "external",
                "entrypoint": "cli",
                "cwd": str(self.cwd),
                "sessionId": self.session_id,
                "version": VERSIONS["claude"],
            }
        )
        self.parent = uid

    def answer(self, block: dict[str, Any], stop: str) -> None:
        fresh, out, cached = self.usage
        n = self.next_answer()
        message = {
            "id": f"msg_{n:02d}{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": fresh,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached,
                "output_tokens": out,
                "service_tier": "standard",
            },
        }
        self.line("assistant", message)

    def prompt(self, text: str) -> None:
        self.said = text
        self.line("user", {"role": "user", "content": text}, promptId=str(uuid.uuid4()))

    def call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        self.calling = True
        self.answer({"type": "tool_use", "id": call_id, "name": name, "input": args}, "tool_use")

    def result(self, call_id: str, name: str, args: dict[str, Any], outcome: Outcome) -> None:
        result: Any
        if not outcome.ran:
            text = (
                "The user doesn't want to proceed with this tool use. The tool use was rejected "
                "(eg. if it was a file edit, the new_string was NOT written to the file). STOP "
                "what you are doing and wait for the user to tell you how to proceed."
                if outcome.asked
                else outcome.reason
            )
            failed, result = True, f"Error: {text}"
        elif name == EDIT_TOOL["claude"]:
            text = f"File created successfully at: {args['file_path']}"
            failed = False
            result = {"type": "create", "filePath": args["file_path"], "content": args["content"]}
        elif outcome.exit_code:
            text = f"Exit code {outcome.exit_code}\n{outcome.output}".rstrip("\n")
            failed, result = True, f"Error: {text}"
        else:
            text = outcome.output.rstrip("\n") or f"({name} completed with no output)"
            failed = False
            result = {
                "stdout": outcome.output,
                "stderr": "",
                "interrupted": False,
                "isImage": False,
            }
        self.calling = False
        block = {"tool_use_id": call_id, "type": "tool_result", "content": text, "is_error": failed}
        self.line("user", {"role": "user", "content": [block]}, toolUseResult=result)

    def reply(self, text: str) -> None:
        self.answer({"type": "text", "text": text}, "end_turn")

    def interrupted(self) -> None:
        text = (
            "[Request interrupted by user for tool use]"
            if self.calling
            else "[Request interrupted by user]"
        )
        self.line("user", {"role": "user", "content": [{"type": "text", "text": text}]})

    def close(self, last: str) -> None:
        self.write(
            {
                "type": "last-prompt",
                "lastPrompt": self.said,
                "leafUuid": self.parent,
                "sessionId": self.session_id,
            }
        )


class CodexTranscript(Transcript):
    """``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``: ``{timestamp, ordinal, type,
    payload}`` lines; the model's side as ``response_item``s (``function_call`` with its
    ``call_id``, its ``function_call_output``), what the person saw as ``event_msg``s, one
    ``token_usage_record`` per model response. A resumed session writes on in its file."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        found = sorted((self.home / "sessions").glob(f"*/*/*/rollout-*-{self.session_id}.jsonl"))
        self.resumed = bool(found)
        if found:
            self.path = found[-1]
        else:
            now = datetime.datetime.now(datetime.UTC)
            name = f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{self.session_id}.jsonl"
            self.path = self.home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}" / name
        self.ordinal = 0
        self.turn = str(uuid.uuid4())
        self.totals = [0, 0, 0]

    def line(self, kind: str, payload: dict[str, Any]) -> None:
        self.write(
            {"timestamp": stamp(), "ordinal": self.ordinal, "type": kind, "payload": payload}
        )
        self.ordinal += 1

    def event(self, payload: dict[str, Any]) -> None:
        self.line("event_msg", payload)

    def item(self, item: dict[str, Any]) -> None:
        self.event(
            {
                "type": "item_completed",
                "thread_id": self.session_id,
                "turn_id": self.turn,
                "item": item,
            }
        )

    def used(self) -> None:
        fresh, out, cached = self.usage
        n = self.next_answer()
        usage = {
            "input_tokens": fresh + cached,  # (Codex counts the cached tokens in)
            "cached_input_tokens": cached,
            "cache_write_input_tokens": 0,
            "output_tokens": out,
            "reasoning_output_tokens": 0,
            "total_tokens": fresh + cached + out,
        }
        self.line(
            "token_usage_record",
            {
                "thread_id": self.session_id,
                "turn_id": self.turn,
                "session_id": self.session_id,
                "response_id": f"resp_{n}",
                "usage": usage,
            },
        )
        for i, v in enumerate((fresh + cached, cached, out)):
            self.totals[i] += v
        total = {
            "input_tokens": self.totals[0],
            "cached_input_tokens": self.totals[1],
            "output_tokens": self.totals[2],
            "total_tokens": self.totals[0] + self.totals[2],
        }
        self.event(
            {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": usage}}
        )

    def prompt(self, text: str) -> None:
        if not self.resumed:
            self.line(
                "session_meta",
                {
                    "id": self.session_id,
                    "session_id": self.session_id,
                    "timestamp": stamp(),
                    "cwd": str(self.cwd),
                    "originator": "codex_exec",
                    "cli_version": VERSIONS["codex"],
                    "source": "exec",
                    "model_provider": "openai",
                },
            )
        self.event({"type": "task_started", "turn_id": self.turn})
        self.line(
            "turn_context",
            {
                "turn_id": self.turn,
                "cwd": str(self.cwd),
                "approval_policy": "never",
                "model": self.model,
            },
        )
        self.line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )
        self.item(
            {
                "type": "UserMessage",
                "id": str(uuid.uuid4()),
                "content": [{"type": "text", "text": text, "text_elements": []}],
            }
        )

    def call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        self.line(
            "response_item",
            {
                "type": "function_call",
                "id": f"fc_{self.answers}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": args["command"]}),
                "call_id": call_id,
            },
        )
        self.used()

    def result(self, call_id: str, name: str, args: dict[str, Any], outcome: Outcome) -> None:
        command = args["command"]
        if not outcome.ran:  # (Codex's words for a call its hook refused)
            output = f"Command blocked by PreToolUse hook: {outcome.reason}. Command: {command}"
        else:
            self.item(
                {
                    "type": "CommandExecution",
                    "id": call_id,
                    "command": ["/bin/bash", "-lc", command],
                    "cwd": f"file://{self.cwd}",
                    "status": "failed" if outcome.exit_code else "completed",
                    "aggregated_output": outcome.output,
                    "exit_code": outcome.exit_code,
                }
            )
            output = (
                f"Chunk ID: {uuid.uuid4().hex[:6]}\nWall time: 0.0100 seconds\n"
                f"Process exited with code {outcome.exit_code}\n"
                f"Original token count: {len(outcome.output) // 4}\nOutput:\n{outcome.output}"
            )
        self.line(
            "response_item",
            {
                "type": "function_call_output",
                "id": f"fco_{uuid.uuid4()}",
                "call_id": call_id,
                "output": output,
            },
        )

    def reply(self, text: str) -> None:
        mid = f"msg_{self.answers}"
        self.item({"type": "AgentMessage", "id": mid, "content": [{"type": "Text", "text": text}]})
        content = [{"type": "output_text", "text": text, "annotations": []}]
        self.line(
            "response_item", {"type": "message", "id": mid, "role": "assistant", "content": content}
        )
        self.used()

    def close(self, last: str) -> None:
        self.event({"type": "task_complete", "turn_id": self.turn, "last_agent_message": last})

    def interrupted(self) -> None:
        self.event({"type": "turn_aborted", "turn_id": self.turn, "reason": "interrupted"})


class GeminiTranscript(Transcript):
    """``.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``: a line describing the
    session, then message records (``user``, ``gemini`` with its ``tokens``, ``model`` and
    ``toolCalls``), each written again whole when it grows, and ``$set`` lines."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        chats = self.home / ".gemini" / "tmp" / (self.cwd.name.lower() or "root") / "chats"
        found = sorted(chats.glob(f"session-*-{self.session_id[:8]}.jsonl"))
        self.resumed = bool(found)
        if found:
            self.path = found[-1]
        else:
            now = datetime.datetime.now(datetime.UTC)
            self.path = chats / f"session-{now:%Y-%m-%dT%H-%M}-{self.session_id[:8]}.jsonl"
        self.open: dict[str, Any] | None = None  # the answer whose tool call runs

    def touch(self, at: str) -> None:
        self.write({"$set": {"lastUpdated": at}})

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        rec = {"id": str(uuid.uuid4()), "timestamp": stamp(), "type": kind, **fields}
        self.write(rec)
        self.touch(rec["timestamp"])
        return rec

    def answer(self, content: str) -> dict[str, Any]:
        fresh, out, cached = self.usage
        self.next_answer()
        tokens = {
            "input": fresh + cached,  # (Gemini counts the cached tokens in)
            "output": out,
            "cached": cached,
            "thoughts": 0,
            "tool": 0,
            "total": fresh + cached + out,
        }
        return self.record("gemini", content=content, thoughts=[], tokens=tokens, model=self.model)

    def prompt(self, text: str) -> None:
        if not self.resumed:
            at = stamp()
            self.write(
                {
                    "sessionId": self.session_id,
                    "projectHash": hashlib.sha256(str(self.cwd).encode()).hexdigest(),
                    "startTime": at,
                    "lastUpdated": at,
                    "kind": "main",
                }
            )
        self.record("user", content=[{"text": text}])

    def call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        self.open = self.answer("")  # (its tool call is written with its result)

    def result(self, call_id: str, name: str, args: dict[str, Any], outcome: Outcome) -> None:
        if not outcome.ran:
            status = "cancelled" if outcome.asked else "error"
            response: dict[str, Any] = {"error": outcome.reason}
        elif name == EDIT_TOOL["gemini"]:
            status = "success"
            response = {
                "output": f"Successfully created and wrote to new file: {args['file_path']}."
            }
        else:
            status = "success"
            code = f"\nExit Code: {outcome.exit_code}" if outcome.exit_code else ""
            text = f"Output: {outcome.output.rstrip() or '(empty)'}{code}\nProcess Group PGID: {os.getpid()}"
            response = {"output": f"<untrusted_context>\n{text}\n</untrusted_context>"}
        part = {"functionResponse": {"id": call_id, "name": name, "response": response}}
        at = stamp()
        call = {
            "id": call_id,
            "name": name,
            "args": args,
            "result": [part],
            "status": status,
            "timestamp": at,
            "resultDisplay": outcome.output,
            "description": args.get("command") or args.get("file_path"),
            "displayName": "Shell" if name == SHELL_TOOL["gemini"] else "WriteFile",
            "renderOutputAsMarkdown": False,
        }
        assert self.open is not None
        self.write({**self.open, "toolCalls": [call]})  # the answer again, whole
        self.open = None
        self.record("user", content=[part])

    def reply(self, text: str) -> None:
        self.answer(text)

    def interrupted(self) -> None:
        self.record("info", content="Request cancelled.")


TRANSCRIPTS: dict[str, type[Transcript]] = {
    "claude": ClaudeTranscript,
    "codex": CodexTranscript,
    "gemini": GeminiTranscript,
}


def open_transcript(
    agent: str, cwd: Path, session_id: str, model: str | None, usage: tuple[int, int, int]
) -> Transcript | None:
    """The session's transcript in the agent's home, if a home is named (``bar run`` names
    one; run by hand, the agent leaves the developer's own alone)."""
    home = os.environ.get(HOMES[agent])
    if not home:
        return None
    return TRANSCRIPTS[agent](agent, Path(home), cwd, session_id, model or MODELS[agent], usage)


def usage_option(value: str) -> tuple[int, int, int]:
    try:
        fresh, out, cached = (int(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IN,OUT,CACHED, not {value!r}") from None
    return fresh, out, cached


# --- the agent loop -------------------------------------------------------------------


def run_hook(agent: str, hook: Hook, payload: bytes, cwd: Path, env: dict[str, str]) -> Verdict:
    try:
        proc = subprocess.run(
            ["sh", "-c", hook.command],
            input=payload,
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=hook.timeout_s,
        )
    except subprocess.TimeoutExpired:
        return interpret(agent, None, "", "")
    return interpret(
        agent,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def edit(
    agent: str,
    command: str,
    cwd: Path,
    session_id: str,
    env: dict[str, str],
    options: dict[str, Any] | None,
    transcript: Transcript | None = None,
) -> None:
    """``write:PATH=TEXT`` through the agent's edit tool: the pre-tool hooks that match it
    (Codex's shell matcher does), the write, the post-tool event."""
    path, _, text = command[len("write:") :].partition("=")
    named = str(transcript.path) if transcript is not None else None
    pre = edit_payload(agent, path, text, cwd, session_id, named)
    tool = str(pre["tool_name"])
    call_id = _call_id(agent, pre, transcript)
    if transcript is not None:
        transcript.call(call_id, tool, pre["tool_input"])
    payload = json.dumps(pre).encode()
    verdict = combine(
        [
            run_hook(agent, h, payload, cwd, env)
            for h in configured_hooks(agent, cwd, tool, None, options)
        ]
    )
    if verdict.decision in ("deny", "stop"):
        print(f"DENIED: {command}: {_one_line(verdict.reason)}")
        if transcript is not None:
            transcript.result(
                call_id, tool, pre["tool_input"], Outcome(False, reason=verdict.reason)
            )
        return
    target = cwd / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + ("\n" if text and not text.endswith("\n") else ""))
    print(f"WROTE: {path}")
    sys.stdout.flush()
    if agent != "codex":  # Codex 0.169 sends no post-tool event for its apply_patch
        event, after = post_payload(agent, pre, 0, "Success")
        for hook in configured_hooks(agent, cwd, tool, event, options):
            run_hook(agent, hook, json.dumps(after).encode(), cwd, env)
    if transcript is not None:
        done = f"Success. Updated the following files:\nA {path}\n" if agent == "codex" else ""
        transcript.result(call_id, tool, pre["tool_input"], Outcome(True, output=done))


def _call_id(agent: str, pre: dict[str, Any], transcript: Transcript | None) -> str:
    """The tool call's id: the one its hook events carry (Gemini CLI's carry none)."""
    if agent != "gemini":
        return str(pre["tool_use_id"])
    n = transcript.answers if transcript is not None else 0
    tool = pre["tool_name"]
    return f"{tool}__{tool}_{time.time_ns() // 1_000_000}_{n}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, choices=sorted(EVENT_NAME))
    parser.add_argument("--session-id", default="fake-" + uuid.uuid4().hex[:12])
    parser.add_argument(
        "--ask-answer",
        choices=("approve", "deny"),
        default="deny",
        help="what the simulated user answers when a hook asks for confirmation",
    )
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        help="Codex: a configuration value, key=TOML value",
    )
    parser.add_argument(
        "--mcp-config",
        action="append",
        default=[],
        help="Claude Code: MCP servers (accepted; no model calls their tools)",
    )
    parser.add_argument(
        "--transcript",
        action="store_true",
        help="keep a transcript of the session in the agent's home, as the agent does",
    )
    parser.add_argument(
        "--prompt",
        default="Run the commands I gave you, one by one.",
        help="the person's prompt, the transcript's first message",
    )
    parser.add_argument(
        "--usage",
        type=usage_option,
        default=(10, 5, 0),
        metavar="IN,OUT,CACHED",
        help="tokens each answer of the model reports: prompt tokens not read from a "
        "cache, output, prompt tokens read from a cache (default 10,5,0)",
    )
    parser.add_argument("--model", help="the model the transcript names")
    parser.add_argument(
        "--interrupt-exit",
        type=int,
        metavar="CODE",
        help="on Ctrl-C (SIGINT) end the session and exit with CODE, as the released "
        "agents do (Claude Code -p: 0), rather than be killed by it",
    )
    parser.add_argument("commands", nargs="*")
    args = parser.parse_args(argv)

    agent: str = args.agent
    cwd = Path.cwd()
    env = hook_environment(agent, cwd, args.session_id)
    options = command_line_config(args.config) if agent == "codex" else None
    transcript = (
        open_transcript(agent, cwd, args.session_id, args.model, args.usage)
        if args.transcript
        else None
    )
    # the transcript the hook events name: Codex's is left out, as before the fake agent
    # kept one (bar would read how its commands ended from it: tests/agents/test_outcomes.py
    # covers that with the real rollout format)
    named = str(transcript.path) if transcript is not None and agent != "codex" else None
    out = sys.stdout
    start = json.dumps(start_payload(agent, cwd, args.session_id)).encode()
    for hook in configured_hooks(agent, cwd, None, "SessionStart", options):
        run_hook(agent, hook, start, cwd, env)
    if transcript is not None:
        transcript.prompt(args.prompt)
    stopped = False
    done = 0
    try:
        for command in args.commands:
            if command.startswith("write:"):
                edit(agent, command, cwd, args.session_id, env, options, transcript)
                done += 1
                continue
            if command.startswith("wait:"):
                print("WAITING", flush=True)
                while not os.path.exists(command[len("wait:") :]):
                    time.sleep(0.05)
                continue
            if command.startswith("silent:"):
                path, _, text = command[len("silent:") :].partition("=")
                (cwd / path).parent.mkdir(parents=True, exist_ok=True)
                (cwd / path).write_text(text + "\n")
                print(f"WROTE (no hook): {path}")
                continue
            done += 1
            hooks = configured_hooks(agent, cwd, SHELL_TOOL[agent], None, options)
            pre = build_payload(agent, command, cwd, args.session_id, named)
            call_id = _call_id(agent, pre, transcript)
            tool, tool_input = str(pre["tool_name"]), pre["tool_input"]
            if transcript is not None:
                transcript.call(call_id, tool, tool_input)
            payload = json.dumps(pre).encode()
            verdict = combine([run_hook(agent, hook, payload, cwd, env) for hook in hooks])
            for message in verdict.warnings:
                print(f"WARNING: {command}: {_one_line(message)}", file=out)
            for message in verdict.errors:
                print(f"HOOK ERROR: {command}: {_one_line(message)}", file=out)
            refused: Outcome | None = None
            if verdict.decision == "stop":
                print(f"STOPPED: {_one_line(verdict.reason)}", file=out)
                refused, stopped = Outcome(False, reason=verdict.reason), True
            elif verdict.decision == "deny":
                print(f"DENIED: {command}: {_one_line(verdict.reason)}", file=out)
                refused = Outcome(False, reason=verdict.reason)
            elif verdict.decision == "ask":
                print(f"ASKED: {command}: {_one_line(verdict.reason)}", file=out)
                if args.ask_answer == "deny":
                    print(f"DENIED: {command}: declined at the permission prompt", file=out)
                    refused = Outcome(False, reason="declined at the permission prompt", asked=True)
            if refused is not None:
                if transcript is not None:
                    transcript.result(call_id, tool, tool_input, refused)
                if stopped:
                    break
                continue
            out.flush()
            proc = subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True)
            print(f"RAN: {command}", file=out)
            printed = (proc.stdout + proc.stderr).decode("utf-8", "replace")
            for line in printed.splitlines():
                print(f"  | {line}", file=out)
            out.flush()
            event, after = post_payload(agent, pre, proc.returncode, printed)
            for hook in configured_hooks(agent, cwd, SHELL_TOOL[agent], event, options):
                run_hook(agent, hook, json.dumps(after).encode(), cwd, env)
            if transcript is not None:
                transcript.result(
                    call_id,
                    tool,
                    tool_input,
                    Outcome(True, exit_code=proc.returncode, output=printed),
                )
    except KeyboardInterrupt:  # (Ctrl-C; what bar sends an agent past its budget)
        if transcript is not None:
            transcript.interrupted()
        if args.interrupt_exit is not None:
            print("INTERRUPTED", file=out, flush=True)
            return int(args.interrupt_exit)
        raise  # (ended by the signal, as before it kept a transcript)
    if transcript is not None:
        last = "Stopped: a hook ended the session." if stopped else f"Done: {done} tool call(s)."
        if not stopped:  # (a hook that stops the agent ends its turn: no answer follows)
            transcript.reply(last)
        transcript.close(last)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
