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
import os
from typing import TYPE_CHECKING, Any

from bar.agents import rollout
from bar.store.files import read_beneath

if TYPE_CHECKING:
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

    call = event.tool_use_id
    if event.agent not in ("claude", "codex") or not call:
        return None
    home = homes.path(task, event.agent)
    path = rollout.within(home, event.transcript)
    if path is None:
        return False
    for tail in _TAILS:
        data = read_beneath(home, path, tail=tail) or b""
        if any(
            _names_call(event, line, call) for line in data.splitlines() if call.encode() in line
        ):
            return True
        if tail is not None and len(data) < tail:
            break  # (the whole file was read)
    return False


def _names_call(event: HookEvent, line: bytes, call: str) -> bool:
    """Whether ``line`` of the transcript is the call ``call`` as ``event`` tells it: the
    same session, the same command or the same files (a made-up event that borrows a
    real call's id, and tells another command, is not that call)."""
    try:
        rec: Any = json.loads(line)
    except ValueError:
        return False
    if not isinstance(rec, dict):
        return False
    if event.agent == "codex":
        payload = rec.get("payload")
        return (
            isinstance(payload, dict)
            and payload.get("type") == "function_call"
            and payload.get("call_id") == call
            and (event.command is None or event.command in _strings(payload.get("arguments")))
        )
    message = rec.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if rec.get("type") != "assistant" or not isinstance(content, list):
        return False
    if event.session_id and rec.get("sessionId") not in (None, event.session_id):
        return False
    return any(
        isinstance(c, dict)
        and c.get("type") == "tool_use"
        and c.get("id") == call
        and _same_input(event, c.get("input"))
        for c in content
    )


def _same_input(event: HookEvent, given: object) -> bool:
    """Whether a tool call's input in the transcript is what ``event`` says it was."""
    if not isinstance(given, dict):
        return event.command is None and not event.paths
    if event.command is not None and given.get("command") != event.command:
        return False
    named = given.get("file_path") or given.get("notebook_path")
    if not event.paths or named in event.paths:
        return True
    return isinstance(named, str) and any(  # (a path given relative to the call's cwd)
        os.path.normpath(os.path.join(event.cwd or "/", p)) == os.path.normpath(named)
        for p in event.paths
    )


def _strings(value: object) -> str:
    """Every string in ``value`` (a JSON text, or what it holds), joined by NULs."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return value if isinstance(decoded, str) else _strings(decoded)
    if isinstance(value, dict):
        return "\0".join(_strings(v) for v in value.values())
    if isinstance(value, list):
        return "\0".join(_strings(v) for v in value)
    return ""
