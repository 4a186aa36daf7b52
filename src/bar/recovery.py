"""Finishing what a crashed bar left, and recording what nobody recorded.

Every command that changes a task first takes the task lock and calls ``prepare``:
intents left by a bar that died (``bar.journals``) are completed by the same
``complete`` the verb itself would have called, then hand edits made since the last
step are recorded as a ``manual`` step, so nothing is lost or mis-attributed.
``finish_pending`` is the first half alone, for ``bar doctor --repair`` and ``task close``.
"""

from __future__ import annotations

import shlex

from bar import apply, journals, rollback, run, steps
from bar.notices import note
from bar.records import Step
from bar.tasks import Task


def finish_pending(task: Task) -> list[Step]:
    """Complete every intent a dead bar left (the caller holds the task lock)."""
    done: list[Step] = []
    last = task.ledger.last()
    run_intent = journals.read_run(task.paths)
    if run_intent is not None:
        if last is not None and last.number >= int(run_intent.step_id):
            journals.clear_run(task.paths)  # the step was recorded before the crash
        else:
            done.append(run.complete(task, run_intent, None))
            note(
                f"recorded step {run_intent.step_id} ({shlex.join(run_intent.cmd)}) as "
                "interrupted: bar stopped before it finished"
            )
    rollback_intent = journals.read_rollback(task.paths)
    if rollback_intent is not None:
        last = task.ledger.last()
        if last is not None and last.number >= int(rollback_intent.step_id):
            journals.clear_rollback(task.paths)
        else:
            note(f"finishing rollback step {rollback_intent.step_id}, which was interrupted")
            done.append(rollback.complete(task, rollback_intent))
    apply_intent = journals.read_apply(task.paths)
    if apply_intent is not None:
        last = task.ledger.last()
        recorded = last is not None and last.number >= apply_intent.step.number
        landed = apply.complete(task, apply_intent)
        if landed is not None and not recorded:
            note(
                f"recorded apply step {landed.step_id} ({landed.commit_sha[:10]} on "
                f"{landed.target_branch}), which bar stopped before recording"
            )
            done.append(landed)
    return done


def prepare(task: Task) -> None:
    """What every command that changes a task does first, under the task lock."""
    task.require_worktree()
    finish_pending(task)
    steps.record_hand_edits(task)
