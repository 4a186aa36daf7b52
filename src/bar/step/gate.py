"""Judging one command an agent is about to run: its event in, the agent's reply out.

``bar run`` calls this for every event its agent's hook hands it (``bar.step.supervisor``);
``bar hook`` calls it itself when no ``bar run`` is there to ask. Anything that goes
wrong while judging blocks the command with a message (fail closed): a policy that cannot
be read must not become a policy that allows everything without anyone noticing.
"""

from __future__ import annotations

from bar.agents.protocol import (
    HookEvent,
    HookReply,
    answer_for,
    parse_event,
    render_ack,
    render_input_error,
    render_reply,
)
from bar.base.record import record
from bar.errors import HookInputError
from bar.policy import Policy, PolicyEvent
from bar.policy.places import Places


@record(frozen=True)
class Judgement:
    """The reply to give the agent, and what it was given for (``event`` None: the event
    could not be read; ``action`` is then ``block``). ``answer`` is what the reply told
    the agent (``bar.agents.protocol.answer_for``)."""

    reply: HookReply
    event: HookEvent | None
    action: str
    events: tuple[PolicyEvent, ...] = ()
    answer: str = "none"


def judge(
    agent: str,
    payload: bytes,
    policy: Policy | None,
    *,
    ask: bool = False,
    places: Places | None = None,
) -> Judgement:
    """Read the agent's event and, for a shell command it is about to run, decide with
    ``policy`` (None: switched off) in ``places`` (the task's worktree and the homes).
    ``ask``: a person is at the agent's prompt, so a ``warn`` may be put to them as a
    question. Post-tool and session events get no
    opinion; the caller reads what they report from ``event``."""
    try:
        event = parse_event(agent, payload)
    except HookInputError as exc:
        return Judgement(render_input_error(agent, str(exc)), None, "block", answer="deny")
    if event.kind != "pre" or event.command is None or policy is None:
        return Judgement(render_ack(agent), event, "allow")
    try:
        decision = policy.evaluate_line(event.command, places)
    except Exception as exc:  # fail closed: never let a broken check allow a command
        message = f"bar could not check this command ({exc.__class__.__name__}: {exc})"
        return Judgement(render_input_error(agent, message), event, "block", answer="deny")
    reasons = [e.reason for e in decision.events if e.action == decision.action]
    reason = "; ".join(dict.fromkeys(reasons))
    if decision.action in ("warn", "block"):
        reason = f"bar policy: {reason}" if reason else "bar policy"
    reply = render_reply(agent, decision.action, reason, ask=ask)
    answer = answer_for(agent, decision.action, ask)
    return Judgement(reply, event, decision.action, decision.events, answer)
