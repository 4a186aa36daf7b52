"""An agent step's tool calls, one each: the policy's word on the call beside its checkpoint.

An agent's shell command reaches bar twice: before it runs, the agent's hook asks the
policy (a ``policy_events`` entry with ``source`` ``hook:AGENT``, one per rule that
matched, or one ``allow`` with no rule), and after it ran, the post-tool hook takes a
checkpoint naming the same call. Listed apart, each call shows twice; here they become
one ``Call``: its checkpoint (none when the policy denied it, or the agent never reported
back) and the policy's events on it (none for an edit tool, which the policy does not
judge). The call's id pairs them; an agent that sends none (Gemini) is paired by command
and session, in order, as the step's recorder pairs them (``bar.step.supervisor``).
The step's own policy events (its command line, the programs it started) are not calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bar.api.agents import shell_tool
from bar.history.checkpoints import Checkpoint
from bar.model.records import PolicyEventRecord


@dataclass(frozen=True)
class Call:
    checkpoint: Checkpoint | None
    policy: tuple[PolicyEventRecord, ...] = ()

    @property
    def blocked(self) -> bool:
        return any(e.action == "block" for e in self.policy)

    @property
    def command(self) -> str:
        if self.checkpoint is not None:
            return self.checkpoint.target_text
        return self.policy[0].command or self.policy[0].matched if self.policy else ""

    @property
    def tool(self) -> str:
        if self.checkpoint is not None:
            return self.checkpoint.tool or self.checkpoint.kind
        agent = (self.policy[0].source or "").removeprefix("hook:") if self.policy else ""
        return shell_tool(agent)

    @property
    def decision(self) -> str:
        """The policy's word on the call: ``allow``, or the action with the rules that
        said it (``block: rm-root, rm-no-preserve-root``); empty when it was not asked."""
        if not self.policy:
            return self.checkpoint.decision or "" if self.checkpoint is not None else ""
        strongest = next(
            (a for a in ("block", "warn", "ask") if any(e.action == a for e in self.policy)),
            self.policy[0].action,
        )
        rules = [e.rule for e in self.policy if e.rule and e.action == strongest]
        return f"{strongest}: {', '.join(dict.fromkeys(rules))}" if rules else strongest

    @property
    def outcome(self) -> str:
        """What became of the call: ``ran``, ``failed``, ``refused`` (empty: not said)."""
        said = next((e.outcome for e in self.policy if e.outcome), None)
        if said is None and self.checkpoint is not None:
            said = self.checkpoint.outcome
        return said or ""


def is_call(event: PolicyEventRecord) -> bool:
    """An event an agent's hook asked for (a tool call), not the step's own."""
    return (event.source or "").startswith("hook:")


def _groups(events: Sequence[PolicyEventRecord]) -> list[list[PolicyEventRecord]]:
    """The hook events of one call each: written together, one per rule that matched (a
    rule seen again, or another call's id or command, starts the next call)."""
    out: list[list[PolicyEventRecord]] = []
    for event in events:
        last = out[-1] if out else None
        if (
            last is not None
            and (last[0].tool_use_id, last[0].session_id, last[0].command)
            == (event.tool_use_id, event.session_id, event.command)
            and event.rule is not None
            and all(e.rule is not None and e.rule != event.rule for e in last)
        ):
            last.append(event)
        else:
            out.append([event])
    return out


def _same(group: list[PolicyEventRecord], cp: Checkpoint) -> bool:
    event = group[0]
    if event.tool_use_id and cp.call_id:
        return event.tool_use_id == cp.call_id
    return (
        cp.command is not None
        and event.command == cp.command
        and (event.session_id == cp.session_id or not (event.session_id and cp.session_id))
    )


def pair(
    events: Sequence[PolicyEventRecord], checkpoints: Sequence[Checkpoint]
) -> tuple[list[PolicyEventRecord], list[Call]]:
    """The step's own policy events, and its calls in the order they were made: each
    checkpoint with the policy's events on its call, and the calls that made no
    checkpoint (denied, or never reported back) where they fell among them."""
    own = [e for e in events if not is_call(e)]
    groups = _groups([e for e in events if is_call(e)])
    calls: list[Call] = []
    at = 0  # the first group not yet listed
    for cp in checkpoints:
        found = next((k for k in range(at, len(groups)) if _same(groups[k], cp)), None)
        if found is None:
            calls.append(Call(cp))
            continue
        calls += [Call(None, tuple(g)) for g in groups[at:found]]
        calls.append(Call(cp, tuple(groups[found])))
        at = found + 1
    calls += [Call(None, tuple(g)) for g in groups[at:]]
    return own, calls
