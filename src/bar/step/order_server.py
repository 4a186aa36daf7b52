"""The running step's side of orders (``bar.changes.orders``): its ``bar run`` answers them.

The supervisor (``bar.step.supervisor``) hands each ``order`` request here with whether it
came from a process of the step. The op is looked up, who may give it is checked, and its
handler runs with a ``StepContext``: a state is a checkpoint of the running step (taken
by the step's checkpoint recorder, ``bar.history.checkpoints``), a rollback is a rollback
checkpoint, and a step is queued to follow the running one (``bar.history.queued``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from bar.changes import orders
from bar.errors import BarError, StepBusy, UsageError
from bar.history import queued as queued_steps
from bar.model.records import Step
from bar.step import channel

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint, Recorder
    from bar.model.records import RollbackStep
    from bar.step.supervisor import Supervisor


def answer(sup: Supervisor, op: str, body: bytes, *, inside: bool) -> channel.Reply:
    """Do the order ``op`` (its arguments: the JSON ``body``) in the running step."""
    from bar.step import order_handlers  # (loaded once the first order comes)

    try:
        order_handlers.load()
        handler, who = orders.lookup(op)
        if (who == "inside" and not inside) or (who == "outside" and inside):
            error = orders.refused(op, who, running=True)
            assert error is not None
            raise error
        try:
            args = json.loads(body.decode("utf-8")) if body.strip() else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"the arguments of {op} are not JSON: {exc}") from None
        if not isinstance(args, dict):
            raise UsageError(f"the arguments of {op} must be a JSON object")
        result = handler(StepContext(sup, inside=inside), args)
    except BarError as exc:
        text = str(exc) + (f"\nhint: {exc.hint}" if exc.hint else "")
        return channel.Reply(exc.exit_code, b"", text.encode("utf-8", "replace"))
    data = json.dumps(result, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return channel.Reply(0, data, b"")


class StepContext(orders.Context):
    running = True

    def __init__(self, sup: Supervisor, *, inside: bool) -> None:
        super().__init__(sup.task, inside=inside)
        self._sup = sup
        self.step_id = sup.step_id
        self._taken: Checkpoint | None = None

    def _recorder(self) -> Recorder:
        recorder = self._sup._checkpoints
        if recorder is None or self._sup._checkpoint_failed:
            raise StepBusy(
                f"step {self.step_id} is running and takes no checkpoints",
                hint="try again when it has ended",
            )
        return recorder

    def state(self, label: str, message: str | None = None) -> tuple[str, str]:
        recorder = self._recorder()
        self._sup._checkpoint_unreported()  # edits before this one come first
        self._taken = recorder.take("tool", tool="checkpoint", label=label, message=message)
        return self._taken.name, self._taken.snapshot

    def last_checkpoint(self) -> Checkpoint | None:
        return self._taken

    def rollback(self, to: str) -> Checkpoint | RollbackStep:
        if not self.inside:
            return self._sup._rollback(to)  # refused while the agent runs a command
        # the agent asked itself, between (or from within) its own calls
        recorder = self._recorder()
        self._sup._checkpoint_unreported()
        from bar.changes import rollback  # (a plain step does without it)

        return rollback.in_step(recorder, to)

    def add_step(self, step: Step) -> Step | None:
        queued_steps.queue(self.task, step.to_record())
        return None

    def branch_moved(self) -> None:
        # where the step sees its branch in a view of its own (``bar.sandbox.quarantine``),
        # the view shows where the branch is now
        from bar.sandbox import quarantine

        quarantine.settle(self.task, final=False)  # (what it refuses is said at the step's end)
