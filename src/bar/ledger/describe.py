"""What a rollback, an undo or a redo did, in the words every face uses.

An undo or a redo is a rollback step (``undo_of`` / ``redo_of``: the step it undid or
redid); its own ``target_step`` is where it went, which for a redo is the redone step
itself (``bar.changes.undo``). Said from that alone, a redo of step 0006 reads "rollback
to step 0006", as if step 0006 were that rollback. So an undo or redo is said as what it
undid or redid: ``undo of step 0006 (rollback to step 0003)``, the parenthesis saying
what step 0006 was, read from the ledger (``bar undo`` and ``bar redo`` say the same).
"""

from __future__ import annotations

from bar.base.cmdline import line_of
from bar.model.records import (
    ApplyStep,
    DecisionStep,
    ManualStep,
    RollbackStep,
    RunStep,
    Step,
    SyncStep,
)


def rollback_text(step: RollbackStep, undone: Step | None) -> str:
    """A rollback step in a few words; ``undone``: the step an undo or redo names, as the
    ledger has it (None: not found, and the words then say no more than its id)."""
    named = step.undo_of or step.redo_of
    if named:
        verb = "undo" if step.undo_of else "redo"
        what = f" ({summary(undone)})" if undone is not None else ""
        return f"{verb} of step {named}{what}"
    return f"rollback to {step.target_text}" + (" (--hard)" if step.hard else "")


def summary(step: Step) -> str:
    """What a step did, short, as the parenthesis of an undo or redo names it: a run's
    command line, the change a rollback or sync made (a step an undo can name)."""
    if isinstance(step, RunStep):
        return line_of(step.cmd)
    if isinstance(step, ManualStep):
        return "changes made outside bar"
    if isinstance(step, RollbackStep):
        return rollback_text(step, None)
    if isinstance(step, SyncStep):
        return f"sync onto {step.onto}"
    if isinstance(step, DecisionStep):
        return "a decision"
    assert isinstance(step, ApplyStep)
    return f"apply onto {step.target_branch}"
