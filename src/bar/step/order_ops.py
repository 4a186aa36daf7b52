"""The orders on a task's states: ``checkpoint`` and ``rollback`` (``bar.changes.orders``).

``checkpoint`` {label}: record the worktree's state now: a checkpoint of the running step
(tool ``checkpoint``, with the label), or, with no step running, hand edits recorded as
usual; the result names the state either way. ``rollback`` {to}: the agent rolls its own
task back, never hard, to a recorded state of this task: a rollback checkpoint of the
running step, undoable like the developer's.
"""

from __future__ import annotations

from collections.abc import Mapping

from bar.changes import orders
from bar.history import states
from bar.history.checkpoints import Checkpoint


@orders.register("checkpoint", "any")
def checkpoint(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    label = args.get("label")
    name, commit = ctx.state(str(label) if isinstance(label, str) and label else "checkpoint")
    taken = ctx.last_checkpoint()
    return {
        "state": name,
        "snapshot": commit,
        "running": ctx.running,
        "checkpoint": taken.to_record() if taken is not None else None,
    }


@orders.register("rollback", "inside")
def rollback(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    (to,) = orders.require_args(args, "to")
    states.resolve(ctx.task, to)  # a state of this task, or a clear error
    done = ctx.rollback(to)
    if isinstance(done, Checkpoint):
        return {
            "state": done.name,
            "snapshot": done.snapshot,
            "target": to,
            "checkpoint": done.to_record(),
        }
    return {
        "state": done.step_id,
        "snapshot": done.snapshot,
        "target": to,
        "step": done.to_record(),
    }
