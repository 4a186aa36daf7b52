"""The pre-tool-use hook protocols of the coding agents bar supervises.

Claude Code, Codex CLI and Gemini CLI can each run a command before every shell command
the model asks for: the event goes to the hook as JSON on stdin, and the hook answers with
JSON on stdout and/or its exit code. This module speaks the three dialects: it reads an
event into one ``HookEvent``, turns a policy action into each agent's reply, and installs
bar's hook entry into an agent's project-local settings file for the length of a run,
putting the file back exactly as it was afterwards. The field names, and why each reply
looks the way it does, are in docs/agents.md with their sources.

Two rules shape everything here:

* Every agent treats a hook that crashes, times out or answers something it does not
  understand as "no objection": the command runs. So a block is said on every channel
  the agent reads (exit code 2 with the reason on stderr, and the agent's JSON deny on
  stdout), replies carry only fields the agent's schema accepts, and an event bar cannot
  read is answered with a block (fail closed), never with silence.
* This module runs before every shell command an agent issues, so importing it must
  cost next to nothing: only ``json`` is imported at module level;
  the file-writing code imports what it needs when it is called.
"""

from __future__ import annotations

import json

from bar.errors import BarError, ConfigError, ExitCode, UsageError

# ``typing`` and ``pathlib`` are slow to import; mypy treats a module-level name called
# TYPE_CHECKING as true, so these imports exist for the type checker only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType
    from typing import Any

AGENTS = ("claude", "codex", "gemini")
ACTIONS = ("allow", "log", "warn", "block")

_FALLBACK_REASON = "blocked by bar policy"


class _Protocol:
    """What differs between the agents. Sources for every value: docs/agents.md.

    Plain classes rather than dataclasses here and below: ``import dataclasses`` (through
    ``inspect``) costs more than the rest of this module, on a path run before every shell
    command an agent issues.
    """

    __slots__ = ("display_name", "entry_name", "event_name", "matcher", "settings_path",
                 "shell_tool", "timeout")  # fmt: skip

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
    ) -> None:
        self.display_name = display_name
        self.event_name = event_name
        self.shell_tool = shell_tool
        self.settings_path = settings_path
        self.matcher = matcher
        self.timeout = timeout
        self.entry_name = entry_name


_PROTOCOLS = {
    "claude": _Protocol(
        display_name="Claude Code",
        event_name="PreToolUse",
        shell_tool="Bash",
        settings_path=".claude/settings.local.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
    ),
    "codex": _Protocol(
        display_name="Codex CLI",
        event_name="PreToolUse",
        shell_tool="Bash",
        settings_path=".codex/hooks.json",
        matcher="Bash",
        timeout=60,  # seconds
        entry_name=None,
    ),
    "gemini": _Protocol(
        display_name="Gemini CLI",
        event_name="BeforeTool",
        shell_tool="run_shell_command",
        settings_path=".gemini/settings.json",
        matcher="run_shell_command",
        timeout=60_000,  # milliseconds
        entry_name="bar-policy",
    ),
}


class HookInputError(BarError):
    """The event on stdin is not one bar can check (bad JSON, a missing field, another event).

    Its exit code is 2 on purpose: should it ever escape ``bar hook`` uncaught, the
    top-level handler still exits 2 with the message on stderr, which all three agents
    read as "block this tool call".
    """

    exit_code = ExitCode.USAGE


class UnknownAgent(UsageError):
    pass


class AgentSettingsError(ConfigError):
    """An agent's settings file cannot be merged safely (not JSON, odd shape, a symlink)."""


class HookEvent:
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

    def _key(self) -> tuple[str | None, ...]:
        return (self.agent, self.event_name, self.tool_name, self.command,
                self.session_id, self.tool_use_id, self.cwd)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HookEvent) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"HookEvent{self._key()!r}"


class HookReply:
    """What ``bar hook AGENT`` writes and how it exits."""

    __slots__ = ("exit_code", "stderr", "stdout")

    def __init__(self, stdout: str, stderr: str, exit_code: int) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HookReply) and (self.stdout, self.stderr, self.exit_code) == (
            other.stdout, other.stderr, other.exit_code)  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.stdout, self.stderr, self.exit_code))

    def __repr__(self) -> str:
        return f"HookReply({self.stdout!r}, {self.stderr!r}, {self.exit_code!r})"


def _protocol(agent: str) -> _Protocol:
    try:
        return _PROTOCOLS[agent]
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
    proto = _protocol(agent)
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
        raise HookInputError(f"{who} hook event is a JSON {_json_type(data)}, expected an object")

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
                f"{who} {tool_name} event has no tool_input object (got {_json_type(tool_input)})"
            )
        raw = tool_input.get("command")
        if not isinstance(raw, str):
            raise HookInputError(
                f"{who} {tool_name} event has no tool_input.command string (got {_json_type(raw)})"
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
        raise HookInputError(f"{who} hook event has no {key} string (got {_json_type(value)})")
    return value


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _json_type(value: object) -> str:
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
    proto = _protocol(agent)
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
    proto = _protocol(agent)
    text = message.strip() or "unreadable event"
    reason = f"bar could not check this command, so it was blocked: {text}"
    return _block_reply(agent, proto, reason)


def _clean_reason(reason: str) -> str:
    # Codex rejects a deny without a non-empty reason (and then runs the command).
    return reason if reason.strip() else _FALLBACK_REASON


def _block_reply(agent: str, proto: _Protocol, reason: str) -> HookReply:
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


def _warn_reply(agent: str, proto: _Protocol, reason: str) -> HookReply:
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


# --- settings files -------------------------------------------------------------------


def settings_path(agent: str) -> str:
    """The project-local settings file bar installs its hook into, relative to the worktree."""
    return _protocol(agent).settings_path


def _bar_entry(proto: _Protocol, hook_command: str) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if proto.entry_name is not None:
        entry["name"] = proto.entry_name
    entry.update(type="command", command=hook_command, timeout=proto.timeout)
    return entry


def _is_bar_entry(entry: object, hook_command: str) -> bool:
    return isinstance(entry, dict) and entry.get("command") == hook_command


def _copy_settings(settings: object, where: str) -> dict[str, Any]:
    # A JSON round trip is a deep copy that also proves the value can be written back.
    try:
        copied = json.loads(json.dumps(settings))
    except (TypeError, ValueError) as exc:
        raise AgentSettingsError(f"{where} holds a value that is not JSON: {exc}") from None
    if not isinstance(copied, dict):
        raise AgentSettingsError(f"{where} holds a JSON {_json_type(copied)}, expected an object")
    return copied


def merge_hook_settings(
    agent: str, existing: dict[str, Any] | None, hook_command: str
) -> dict[str, Any]:
    """Settings with bar's hook added; every other key and hook is kept as it was.

    Idempotent: if bar's command is already in a group with bar's matcher, nothing changes.
    """
    proto = _protocol(agent)
    if not hook_command.strip():
        raise ValueError("hook command is empty")
    where = proto.settings_path
    settings = _copy_settings(existing if existing is not None else {}, where)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise AgentSettingsError(
            f"'hooks' in {where} is a JSON {_json_type(hooks)}, expected an object"
        )
    groups = hooks.setdefault(proto.event_name, [])
    if not isinstance(groups, list):
        raise AgentSettingsError(
            f"'hooks.{proto.event_name}' in {where} is a JSON {_json_type(groups)},"
            " expected an array"
        )
    for group in groups:
        if (
            isinstance(group, dict)
            and group.get("matcher") == proto.matcher
            and isinstance(group.get("hooks"), list)
            and any(_is_bar_entry(entry, hook_command) for entry in group["hooks"])
        ):
            return settings
    groups.append({"matcher": proto.matcher, "hooks": [_bar_entry(proto, hook_command)]})
    return settings


def remove_hook_settings(
    agent: str, current: dict[str, Any], hook_command: str
) -> dict[str, Any] | None:
    """Settings with bar's hook entries removed; None when nothing else is left.

    Only what removing bar's entries emptied is pruned (its group, then the event's list,
    then ``hooks``); everything else, other hooks in a shared group included, stays.
    """
    proto = _protocol(agent)
    settings = _copy_settings(current, proto.settings_path)
    hooks = settings.get("hooks")
    if isinstance(hooks, dict) and isinstance(hooks.get(proto.event_name), list):
        kept_groups: list[Any] = []
        removed = False
        for group in hooks[proto.event_name]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                entries = group["hooks"]
                kept = [entry for entry in entries if not _is_bar_entry(entry, hook_command)]
                if len(kept) != len(entries):
                    removed = True
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
            kept_groups.append(group)
        if removed:
            if kept_groups:
                hooks[proto.event_name] = kept_groups
            else:
                del hooks[proto.event_name]
                if not hooks:
                    del settings["hooks"]
    return settings or None


def _dump(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _load(data: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AgentSettingsError(
            f"{where} is not valid JSON, so bar cannot add its hook to it: {exc}",
            hint="fix or remove the file, then run again",
        ) from None
    if not isinstance(value, dict):
        raise AgentSettingsError(
            f"{where} holds a JSON {_json_type(value)}, expected an object",
            hint="fix or remove the file, then run again",
        )
    return value


def setup_text(agent: str, hook_command: str) -> tuple[str, str]:
    """(relative path, content) of a settings file holding only bar's hook."""
    content = _dump(merge_hook_settings(agent, None, hook_command)).decode("utf-8")
    return settings_path(agent), content


# --- installing for one run -----------------------------------------------------------


class InstalledHook:
    """bar's hook in an agent's settings file inside a worktree, removed on exit.

    On exit the file gets back exactly its earlier bytes and mode, or disappears (with
    any directory the install created) if it did not exist. If the file was changed
    meanwhile (by the agent, say), only bar's entry is taken out and the rest kept; if
    the change left the file unreadable, the earlier content is put back and the
    unreadable bytes are kept in ``discarded`` for the caller to report.
    """

    def __init__(
        self,
        agent: str,
        worktree: Path,
        hook_command: str,
        *,
        prior: bytes | None,
        prior_mode: int | None,
        written: bytes,
        added: bool,
        created_dirs: list[Path],
    ) -> None:
        self.agent = agent
        self.worktree = worktree
        self.relative_path = settings_path(agent)
        self.path = worktree / self.relative_path
        self.hook_command = hook_command
        self.outcome: str | None = None  # set by restore(); see _finish
        self.discarded: bytes | None = None
        self._prior = prior
        self._prior_mode = prior_mode
        self._written = written
        self._added = added
        self._created_dirs = created_dirs

    def __enter__(self) -> InstalledHook:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the settings file back. Safe to call more than once."""
        if self.outcome is not None:
            return
        if not self._added:
            # bar's entry was there before the run (``bar agent setup``): nothing to undo.
            self.outcome = "untouched"
            return
        if self.path.is_symlink():
            # Never follow a link the agent may have planted: it could point at the
            # developer's own settings.
            self.path.unlink()
            self._put_back_prior("replaced-unreadable")
            return
        try:
            current: bytes | None = self.path.read_bytes()
        except FileNotFoundError:
            current = None
        if current is None or current == self._written:
            self._put_back_prior("restored" if self._prior is not None else "removed")
            return
        try:
            edited = _load(current, self.relative_path)
        except AgentSettingsError:
            self.discarded = current
            self._put_back_prior("replaced-unreadable")
            return
        cleaned = remove_hook_settings(self.agent, edited, self.hook_command)
        if self._prior is not None and (cleaned or {}) == _load(self._prior, self.relative_path):
            self._put_back_prior("restored")
        elif self._prior is None and cleaned is None:
            self._put_back_prior("removed")
        else:
            mode = self._prior_mode if self._prior_mode is not None else 0o600
            _write_atomic(self.path, _dump(cleaned or {}), mode)
            self.outcome = "merged"

    def _put_back_prior(self, outcome: str) -> None:
        if self._prior is None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            for directory in reversed(self._created_dirs):
                try:
                    directory.rmdir()
                except OSError:
                    break  # not empty: the agent put something there; leave it
        else:
            mode = self._prior_mode if self._prior_mode is not None else 0o600
            _write_atomic(self.path, self._prior, mode)
        self.outcome = outcome


def install_hook(agent: str, worktree: Path, hook_command: str) -> InstalledHook:
    """Add bar's hook to the agent's project-local settings in ``worktree`` now.

    Use the result as a context manager around the agent's run. Refuses (before writing
    anything) a settings file that is not a JSON object and any symlink on the way to
    it, so a repository cannot redirect the write into the developer's own settings.
    """
    import stat

    proto = _protocol(agent)
    rel = proto.settings_path
    path = worktree / rel
    _refuse_symlinks(worktree, rel)
    try:
        prior: bytes | None = path.read_bytes()
        prior_mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        prior, prior_mode = None, None
    existing = _load(prior, rel) if prior is not None else None
    merged = merge_hook_settings(agent, existing, hook_command)
    if existing is not None and merged == existing:
        return InstalledHook(
            agent,
            worktree,
            hook_command,
            prior=prior,
            prior_mode=prior_mode,
            written=prior or b"",
            added=False,
            created_dirs=[],
        )
    created = _make_dirs(worktree, rel)
    written = _dump(merged)
    _write_atomic(path, written, prior_mode if prior_mode is not None else 0o600)
    return InstalledHook(
        agent,
        worktree,
        hook_command,
        prior=prior,
        prior_mode=prior_mode,
        written=written,
        added=True,
        created_dirs=created,
    )


def _refuse_symlinks(worktree: Path, rel: str) -> None:
    current = worktree
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            raise AgentSettingsError(
                f"refusing to install bar's hook: {current} is a symbolic link",
                hint="bar writes agent settings only inside the task worktree",
            )


def _make_dirs(worktree: Path, rel: str) -> list[Path]:
    created: list[Path] = []
    current = worktree
    for part in rel.split("/")[:-1]:
        current = current / part
        if not current.is_dir():
            current.mkdir(mode=0o700)
            created.append(current)
    return created


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
