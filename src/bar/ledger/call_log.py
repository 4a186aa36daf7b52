"""The log of a step's inner commands: what bar answered each, and what became of it.

While a step runs, its supervisor (``bar.step.supervisor``) appends to
``artifacts/<step>.policy.jsonl``, at once, so a crash of bar loses none: one line per
decision on a command an agent asked about (numbered by ``call``), one per outcome the
agent reported back (``{"call": N, "outcome": ...}``) and one per session that started
(``{"session_start": id}``). When the step is recorded, ``read_recorded`` folds them into
the step's ``policy_events``.
"""

from __future__ import annotations

from bar.base.record import record, replace
from bar.model.records import PolicyEventRecord
from bar.model.tasks import Task
from bar.store.files import read_json_lines

CALL = "call"  # numbers a step's inner commands in its decision log; not in the ledger


@record(frozen=True)
class Recorded:
    """What a step's supervisor logged: decisions with what became of them, and the
    sessions that started (their hooks ran)."""

    events: list[PolicyEventRecord]
    sessions: list[str]


def read_recorded(
    task: Task, step_id: str, *, finished: bool = True, stopped: bool = False
) -> Recorded:
    """The decisions a step's supervisor recorded (also after bar died mid-step), each
    with its ``outcome``: "ran", "failed" or "interrupted" as the agent reported;
    "refused" when bar denied it and nothing says it ran, or when the agent reports what
    it runs, ended on its own (``finished``) and never ran this one; "interrupted" when
    a signal stopped the agent (``stopped``: Ctrl-C, a timeout) before it reported the
    call; none when it cannot be known (bar died)."""
    lines = read_json_lines(task.paths.policy_events(step_id))
    outcomes = {
        rec[CALL]: str(rec["outcome"])
        for rec in lines
        if "outcome" in rec and "action" not in rec and isinstance(rec.get(CALL), int)
    }
    reported = bool(outcomes)  # the agent sends post-tool events in this step
    sessions = [str(rec["session_start"]) for rec in lines if "session_start" in rec]
    events: list[PolicyEventRecord] = []
    for rec in lines:
        if "action" not in rec:
            continue
        call = rec.pop(CALL, None)
        event = PolicyEventRecord.from_record(rec)
        if isinstance(call, int) and event.source is not None:
            outcome = outcomes.get(call)
            if outcome is None and (event.answer == "deny" or (reported and finished)):
                outcome = "refused"
            elif outcome is None and stopped:
                outcome = "interrupted"
            if outcome is not None:
                event = replace(event, outcome=outcome)
        events.append(event)
    return Recorded(events, sessions)
