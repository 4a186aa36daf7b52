"""Whether a tool call bar heard of is in the agent's own record of its session.

Any process in a step can run ``bar hook`` or talk to the step's socket, and so make up
a tool call that never happened: a checkpoint and blame for it. What the agent itself
writes is its transcript, in its home for the task (``bar.agents.homes``), before the
call runs: Claude Code's ``projects/…/SESSION.jsonl`` (an assistant message with a
``tool_use`` of that id), Codex's rollout (a ``function_call`` with that ``call_id``). A
checkpoint is ``verified`` when its call is found there; Gemini CLI's events carry no
call id (and its chat file gets a call only after its hooks ran), so its checkpoints say
nothing either way. Observed with the versions pinned in the Makefile.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bar.agents import rollout
from bar.store.files import read_beneath

if TYPE_CHECKING:
    from bar.agents.base import Agent
    from bar.agents.protocol import HookEvent
    from bar.history.checkpoints import Recorder
    from bar.model.tasks import Task

# bytes read from the end, widening: the call was just made (a long tool result after it
# can push it back)
_TAILS = (256 << 10, 4 << 20, None)


class Verifier:
    """Whether each checkpoint's call is in the agent's transcript: looked up when the
    checkpoint is taken, and those not found then looked up again once the session
    ended (Claude Code writes a call to its transcript a moment after it started it, not
    always before its hooks run); one found then is amended (``Recorder.amend``)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._later: list[tuple[int, HookEvent]] = []

    def check(self, event: HookEvent, n: int) -> bool | None:
        """For checkpoint ``n``, taken for ``event``."""
        found = verified(self.task, event)
        if found is False:
            self._later.append((n, event))
        return found

    def distrust(self, n: int) -> None:
        """Checkpoint ``n`` is not to be found verified later (another event claimed its
        call too)."""
        self._later = [(m, event) for m, event in self._later if m != n]

    def settle(self, recorder: Recorder) -> None:
        """Look again for the calls not found (once the session ended)."""
        later, self._later = self._later, []
        for n, event in later:
            if verified(self.task, event):
                recorder.amend(n, verified=True)


def verified(task: Task, event: HookEvent) -> bool | None:
    """True when the agent's transcript (in its home for ``task``) has the call of
    ``event``, False when it has not (or the event names no transcript there), None
    where the agent's events cannot be checked so (no call id)."""
    from bar.agents import homes
    from bar.agents.base import of

    agent, call = of(event.agent), event.tool_use_id
    if not agent.call_ids or not call:
        return None
    home = homes.path(task, event.agent)
    path = rollout.within(home, event.transcript)
    if path is None:
        return False
    for tail in _TAILS:
        data = read_beneath(home, path, tail=tail) or b""
        if any(
            _names_call(agent, event, line, call)
            for line in data.splitlines()
            if call.encode() in line
        ):
            return True
        if tail is not None and len(data) < tail:
            break  # (the whole file was read)
    return False


def _names_call(agent: Agent, event: HookEvent, line: bytes, call: str) -> bool:
    """Whether ``line`` of the transcript is the call ``call`` as ``event`` tells it."""
    try:
        rec: Any = json.loads(line)
    except ValueError:
        return False
    return isinstance(rec, dict) and agent.names_call(event, rec, call)
