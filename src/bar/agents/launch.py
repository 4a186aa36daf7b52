"""How ``bar run --agent`` starts each agent so that bar's hooks really run.

Every agent gets bar's hooks and ``bar mcp`` from a home of its own for the task
(``bar.agents.homes``: ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``), never
from its command line: they hold however the agent is started. What had to be found out
with the released CLIs (docs/agents.md):

* Codex CLI runs a hook only once its hash is trusted. The home's ``config.toml`` holds
  bar's hooks together with their trust (``hooks.state``, the hash Codex computes for
  exactly these entries, keyed by the file, the event and the entry's place): only the
  developer's trusted hooks and bar's own are armed, and Codex's trust store is not
  written.
* A ``warn`` answered with a question is refused by Claude Code in ``-p`` mode and waits
  for ever in Gemini CLI's ``-p`` mode: whether a person is at the agent's prompt
  decides whether bar may ask (``interactive``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bar.agents import mcp_entry
from bar.agents.protocol import protocol
from bar.base.record import record

if TYPE_CHECKING:
    from pathlib import Path

    from bar.model.tasks import Task


# Codex keys a hook's trust by its source, its event's label and its place in the list
# (hooks/src/engine/discovery.rs in openai/codex)
@record(frozen=True)
class Launch:
    """The agent's command line as bar starts it, and what bar knows about the session."""

    argv: list[str]
    hooked_by: str  # "home": the agent's home for the task holds bar's hooks (bar.agents.homes)
    interactive: bool


def for_step(
    agent: str, argv: Sequence[str], socket: Path, task_id: str, terminal: bool
) -> tuple[Launch, list[str]]:
    """How ``argv`` starts as ``agent`` in a step of task ``task_id`` whose ``bar run``
    listens at ``socket``: its launch, and the command of its ``bar mcp``. An unknown
    agent fails here, before anything is set up."""
    from bar.agents import settings

    mcp = mcp_entry.server_argv(settings.bar_executable(), task_id)
    protocol(agent)
    return prepare(agent, argv, terminal), mcp


def hook_up(
    agent: str, task: Task, socket: Path, mcp: list[str], step_id: str, *, own_tmp: bool
) -> dict[str, str]:
    """Give ``agent`` bar's hook and ``bar mcp`` in its home for ``task``; returns what
    the agent's environment gets (``own_tmp``: the step has a ``/tmp`` of its own)."""
    from bar.agents import homes, settings

    hook = settings.hook_command(agent, socket)
    return homes.prepare(task, agent, hook, mcp, step_id, own_tmp=own_tmp)


def prepare(agent: str, argv: Sequence[str], terminal: bool) -> Launch:
    """How to start ``argv`` as ``agent``; ``terminal``: the agent gets a terminal with a
    person at it."""
    at = _position(argv, agent)
    interactive = terminal and is_interactive(agent, argv[at if at is not None else 0 :])
    return Launch(list(argv), "home", interactive)


def is_interactive(agent: str, argv: Sequence[str]) -> bool:
    """Whether the agent's command line starts a session a person drives (rather than
    one prompt run to the end): ``claude -p``, ``codex exec`` and ``gemini -p`` / a
    prompt given as an argument are not. When unsure, not interactive: a warning that
    is shown costs nothing, a question nobody answers stops the agent."""
    from bar.agents.base import of

    return of(agent).is_interactive(list(argv[1:]))


def _position(argv: Sequence[str], agent: str) -> int | None:
    """Where the agent's own program is in ``argv`` (its options go right after it):
    behind wrappers (``env``, ``timeout``), as a path, or run by ``npx``
    (``bar.agents.detect``)."""
    from bar.agents.detect import locate

    found = locate(list(argv))
    return found[1] if found is not None and found[0] == agent else None
