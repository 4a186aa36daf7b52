"""How ``bar run --agent`` starts each agent so that bar's hooks really run.

What had to be found out with the released CLIs (docs/agents.md):

* Claude Code and Gemini CLI read hooks from a project-local settings file in the task
  worktree, which ``bar.agents.settings`` installs for the run.
* Codex CLI reads no hooks file from a linked worktree (it looks in the main checkout),
  and runs a hook only once its hash is trusted. bar passes its hooks on Codex's command
  line (``-c hooks.PreToolUse=…``) together with their trust (``-c hooks.state=…``, the
  hash Codex computes for exactly these entries): only bar's own hooks are armed, and
  neither the developer's checkout nor Codex's trust store is written.
* A ``warn`` answered with a question is refused by Claude Code in ``-p`` mode and waits
  for ever in Gemini CLI's ``-p`` mode: whether a person is at the agent's prompt
  decides whether bar may ask (``interactive``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bar.agents import mcp_entry
from bar.agents.protocol import protocol
from bar.slotted import Slotted

if TYPE_CHECKING:
    from pathlib import Path

    from bar.agents.settings import InstalledHook

# Codex keys a hook's trust by its source, its event's label and its place in the list
# (hooks/src/engine/discovery.rs in openai/codex); hooks given with -c come from here.
_CODEX_SOURCE = "/<session-flags>/config.toml"
_CODEX_LABELS = {"PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use",
                 "SessionStart": "session_start"}  # fmt: skip


class Launch(Slotted):
    """The agent's command line as bar starts it, and what bar knows about the session."""

    __slots__ = ("argv", "hooked_by", "interactive")

    def __init__(self, argv: list[str], hooked_by: str, interactive: bool) -> None:
        self.argv = argv
        # "settings": the project-local settings file; "arguments": the command line;
        # "none": bar found no way to reach the agent (its commands go unchecked)
        self.hooked_by = hooked_by
        self.interactive = interactive


def for_step(agent: str, argv: Sequence[str], socket: Path, task_id: str,
             terminal: bool) -> tuple[Launch, list[str]]:  # fmt: skip
    """How ``argv`` starts as ``agent`` in a step of task ``task_id`` whose ``bar run``
    listens at ``socket``: its launch with bar's hook, and the command of its ``bar mcp``.
    An unknown agent fails here, before anything is set up."""
    from bar.agents import settings

    mcp = mcp_entry.server_argv(settings.bar_executable(), task_id)
    protocol(agent)
    launch = prepare(agent, argv, settings.hook_command(agent, socket), terminal, mcp)
    return launch, mcp


def hook_up(launch: Launch, agent: str, worktree: Path, socket: Path,
            mcp: list[str] | None) -> tuple[InstalledHook | None, dict[str, str]]:  # fmt: skip
    """Give ``agent`` bar's hook the way ``launch`` says: its settings file in
    ``worktree`` (the installed hook is returned, to be restored), its command line, or
    none (said as a warning). Returns too what the agent's environment gets."""
    from bar.agents import settings
    from bar.notices import warn

    proto = protocol(agent)
    installed = None
    if launch.hooked_by == "settings":
        command = settings.hook_command(agent, socket)
        installed = settings.install_hook(agent, worktree, command, mcp)
    elif launch.hooked_by == "none":
        warn(
            f"bar passes its hooks to {proto.display_name} on its command line, "
            f"which must start with {agent!r}: the commands it runs in "
            "this step are not checked by the policy"
        )
    return installed, dict(proto.run_env)


def prepare(agent: str, argv: Sequence[str], hook_command: str, terminal: bool,
            mcp: list[str] | None = None) -> Launch:  # fmt: skip
    """How to start ``argv`` as ``agent`` with bar's hook ``hook_command``; ``terminal``:
    the agent gets a terminal with a person at it. ``mcp``: the command of ``bar mcp``,
    given to Claude Code and Codex on their command line (``mcp_entry``; Gemini CLI reads
    it from the settings file)."""
    at = _position(argv, agent)
    interactive = terminal and is_interactive(agent, argv[at if at is not None else 0 :])
    if agent == "claude":
        if mcp is None or at is None:
            return Launch(list(argv), "settings", interactive)
        added = mcp_entry.claude_arguments(mcp)
        return Launch([*argv[: at + 1], *added, *argv[at + 1 :]], "settings", interactive)
    if agent != "codex":
        return Launch(list(argv), "settings", interactive)
    if at is None:
        return Launch(list(argv), "none", interactive)
    added = codex_arguments(hook_command) + (mcp_entry.codex_arguments(mcp) if mcp else [])
    return Launch([*argv[: at + 1], *added, *argv[at + 1 :]], "arguments", interactive)


def is_interactive(agent: str, argv: Sequence[str]) -> bool:
    """Whether the agent's command line starts a session a person drives (rather than
    one prompt run to the end): ``claude -p``, ``codex exec`` and ``gemini -p`` / a
    prompt given as an argument are not. When unsure, not interactive: a warning that
    is shown costs nothing, a question nobody answers stops the agent."""
    args = list(argv[1:])
    if agent == "claude":
        return not any(a in ("-p", "--print") or a.startswith("--print=") for a in args)
    if agent == "codex":
        return not any(a in ("exec", "e", "review") for a in args if not a.startswith("-"))
    if any(a in ("-i", "--prompt-interactive") or a.startswith("--prompt-interactive=")
           for a in args):  # fmt: skip
        return True
    if any(a in ("-p", "--prompt") or a.startswith("--prompt=") for a in args):
        return False
    return not any(not a.startswith("-") for a in args)  # a positional prompt


def _position(argv: Sequence[str], agent: str) -> int | None:
    """Where the agent's own program is in ``argv`` (its options go right after it):
    behind wrappers (``env``, ``timeout``), as a path, or run by ``npx``
    (``bar.agents.detect``)."""
    from bar.agents.detect import locate

    found = locate(list(argv))
    return found[1] if found is not None and found[0] == agent else None


def codex_arguments(hook_command: str) -> list[str]:
    """``-c`` options that give Codex bar's hooks for one run, each trusted by hash."""
    proto = protocol("codex")
    args: list[str] = []
    trusted: dict[str, str] = {}
    for event, matcher in proto.events():
        group: dict[str, object] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": hook_command,
                           "timeout": proto.timeout}]  # fmt: skip
        args += ["-c", f"hooks.{event}=[{_toml_inline(group)}]"]
        trusted[f"{_CODEX_SOURCE}:{_CODEX_LABELS[event]}:0:0"] = codex_trust_hash(
            event, matcher, hook_command, proto.timeout
        )
    state = ",".join(
        f"{json.dumps(k)}={{trusted_hash={json.dumps(v)}}}" for k, v in trusted.items()
    )
    args += ["-c", f"hooks.state={{{state}}}"]
    return args


def codex_trust_hash(event: str, matcher: str | None, command: str, timeout: int) -> str:
    """The hash Codex records when a person trusts this hook in its /hooks panel: SHA-256
    of the entry's normalised identity as JSON with sorted keys, unset fields left out."""
    import hashlib

    handler = {"type": "command", "command": command, "timeout": timeout, "async": False}
    identity: dict[str, object] = {"event_name": _CODEX_LABELS[event], "hooks": [handler]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _toml_inline(value: object) -> str:
    """A TOML inline value (a JSON string is a valid TOML basic string)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={_toml_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_toml_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False)
