"""What a coding agent is to bar, and how one is found by its name.

An agent is one module (``bar.agents.claude``, ``codex``, ``gemini``) holding one
``Agent``: its hook protocol (``Protocol``: the names of its events and tools, and where
its settings live) and what bar must do differently for it: the shape of each reply to
its hook, what its post-tool event says of how a call ended, the directory it keeps its
own things in, whether its command line starts a session a person drives, its entries
for ``bar mcp``, the model servers it reaches, and its home in a task (``Home``: what
``bar.agents.homes`` makes of the developer's settings for it). Sources for every value:
docs/agents.md, as observed with the released CLIs.

``of(name)`` imports the named agent's module alone: ``bar hook`` runs before every shell
command an agent issues and needs no other. Adding an agent is adding its module and its
name to ``bar.model.agent_names.AGENTS`` (CONTRIBUTING.md, "Add an agent").
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bar.agents import AGENTS
from bar.base.record import field, record
from bar.errors import UnknownAgent

if TYPE_CHECKING:
    from pathlib import Path

    from bar.agents.protocol import HookEvent
    from bar.model.tasks import Task


@record(frozen=True, kw_only=True)
class Protocol:
    """The names an agent's hooks use, and where its settings live."""

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


@record(frozen=True, kw_only=True)
class Home:
    """The agent's home in a task (``bar.agents.homes``): how it is named to the agent,
    and what bar puts in it."""

    variable: str  # what names the home to the agent
    inner: str  # where in the home the agent keeps what it keeps in its own directory
    settings: str  # the settings file (in ``inner``) with bar's hooks
    copied: tuple[str, ...]  # the developer's files copied in, when they changed
    secrets: frozenset[str]  # the credentials among them: only the owner may read them


@record(frozen=True, kw_only=True)
class HomeStep:
    """The agent's home in ``task``, made ready for one step (``bar.agents.homes.prepare``)."""

    task: Task
    mine: Path  # the developer's own directory of the agent
    inside: Path  # the home's directory of the same (``Home.inner``)
    hook_command: str  # bar's hook
    mcp_argv: list[str]  # ``bar mcp``, and the environment it needs to find the task,
    mcp_env: dict[str, str]  # whatever environment the agent gives it
    own_tmp: bool  # the step has a ``/tmp`` of its own (``bar.agents.managed``)


class Agent(ABC):
    """One coding agent. The replies here are the shape Claude Code and Codex CLI share
    (their ``hookSpecificOutput``); an agent that reads another says so in its module."""

    name: str
    protocol: Protocol
    home: Home
    package: str  # its npm package (``npx PACKAGE``; the package.json that says its version)
    # who serves its models, in OpenTelemetry's names (``gen_ai.provider.name``) and in
    # the agent-trace's (a model id's provider, where the model's name does not say)
    otel_provider: str
    provider: str

    # its post-tool event says how the call ended (else its own record does:
    # ``bar.agents.rollout``, read once the call is reported or the session ended)
    tells_outcome = True
    # its hook events carry the call's id, which its transcript holds as well
    # (``bar.agents.transcripts``: a call made up by another process is found out)
    call_ids = True

    # --- its hook's events and replies ------------------------------------------------

    def outcome(self, event_name: str, tool_name: str | None, data: dict[str, Any]) -> str:
        """What a post-tool event says of the call: "ran" (completed), "failed" (ran and
        failed: a non-zero exit, an error), "interrupted" (the person stopped it: Esc,
        Ctrl-C) or "refused" (the agent itself would not run it)."""
        return "ran"

    def own_edit(self, command: str) -> tuple[str, tuple[str, ...]] | None:
        """(the tool, the files it names) when a shell event is the agent's own file edit,
        which no shell runs; None for a command."""
        return None

    def names_call(self, event: HookEvent, rec: dict[str, Any], call: str) -> bool:
        """Whether ``rec``, a line of the agent's transcript, is the call ``call`` as
        ``event`` tells it: the same session, the same command or the same files (a
        made-up event that borrows a real call's id, and tells another command, is not
        that call)."""
        return False

    def ack(self) -> str:
        """What the hook prints for no opinion (exit 0)."""
        return ""

    def block(self, reason: str) -> dict[str, Any]:
        """The JSON of a refused call (sent with exit 2 and the reason on stderr)."""
        return self.permission("deny", reason)

    def permission(self, decision: str, reason: str) -> dict[str, Any]:
        """A pre-tool reply's ``permissionDecision`` (Claude Code's and Codex CLI's)."""
        return {
            "hookSpecificOutput": {
                "hookEventName": self.protocol.event_name,
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        }

    def ask(self, reason: str) -> dict[str, Any]:
        """The JSON that puts the call to the person at the prompt (``protocol.can_ask``)."""
        return {"decision": "ask", "reason": reason, "systemMessage": reason}

    def warning(self, message: str) -> dict[str, Any]:
        """The JSON of a call that runs with a warning: shown to the person
        (``systemMessage``) and passed on to the model (``additionalContext``)."""
        return {
            "systemMessage": message,
            "hookSpecificOutput": {
                "hookEventName": self.protocol.event_name,
                "additionalContext": message,
            },
        }

    # --- its directory, its command line, what it reaches -------------------------------

    @abstractmethod
    def developers_dir(self, environ: Mapping[str, str]) -> Path:
        """The developer's own directory of the agent, as the agent itself finds it."""

    @abstractmethod
    def is_interactive(self, args: Sequence[str]) -> bool:
        """Whether the agent's arguments (its program's name left out) start a session a
        person drives, rather than one prompt run to the end. When unsure, not
        interactive: a warning that is shown costs nothing, a question nobody answers
        stops the agent."""

    def mcp_settings(self, argv: list[str]) -> dict[str, Any]:
        """What the settings file with bar's hooks gets for ``bar mcp`` (``argv``), where
        the agent reads its MCP servers from that file."""
        return {}

    # where a machine's administrator gives it settings that rank above every project's
    # (relative to ``/etc``): bar's hooks go there, in a layer of the step's own
    # (``bar.agents.managed.system_files``)
    managed_settings: str | None = None
    # it takes system settings from a file an environment variable names, which bar
    # writes for the step (``bar.agents.managed.gemini_system``)
    own_system_settings = False
    # (its project settings files, the key in them that switches every hook off, and the
    # value that leaves them on), where a project file can switch its hooks off
    hooks_switch: tuple[tuple[str, ...], str, object] | None = None

    # ``bar agent setup --write`` writes ``bar mcp`` into the project's own MCP file
    # (``.mcp.json``), which the agent reads beside its settings
    project_mcp = False

    def mcp_beside(self, argv: list[str]) -> tuple[str, str] | None:
        """What ``bar agent setup`` prints for ``bar mcp`` where the agent does not read
        it from the settings file printed: (a heading naming the file, its entry)."""
        return None

    def setup_note(self) -> str | None:
        """What a person wiring the agent by hand must know besides (``bar agent setup``)."""
        return None

    def model_urls(self, environ: Mapping[str, str]) -> list[str]:
        """The base URLs of model servers the agent's own settings name (besides the
        variables every agent reads: ``bar.sandbox.plan.BASE_URLS``)."""
        return []

    # --- its home in a task (``bar.agents.homes``) ---------------------------------------

    @abstractmethod
    def home_settings(self, step: HomeStep) -> tuple[bytes, dict[str, str]]:
        """What goes in the home's settings file (``Home.settings`` in ``step.inside``):
        the developer's (in ``step.mine``) with bar's hooks and ``bar mcp``, in the
        agent's format (JSON: ``bar.agents.homes.json_settings``); and what the agent's
        environment gets besides."""

    def home_state(self, step: HomeStep) -> dict[str, str]:
        """What else the home needs once its settings and the developer's files are in,
        after each step's changes; what the agent's environment gets besides."""
        return {}


def of(name: str) -> Agent:
    """The agent named ``name``, its module loaded now if it was not;
    ``UnknownAgent`` for a name bar does not know."""
    if name not in AGENTS:
        raise UnknownAgent(f"unknown agent {name!r}", hint=f"use one of: {', '.join(AGENTS)}")
    found: Agent = importlib.import_module(f"bar.agents.{name}").AGENT
    return found
