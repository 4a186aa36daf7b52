"""Orders: every change to a task's files that can come from inside a step, or while one runs.

While a step runs, its ``bar run`` is the one writer of the task's files, and a process
inside the step (the agent's shell, ``bar mcp`` started by the agent) is confined: it
cannot write ``$BAR_HOME`` at all. So ``bar decide``, ``bar flow`` and the agent's own
checkpoints and rollbacks are *orders*: ``order(task, op, args)`` sends one over the
task's socket to the running step's ``bar run`` (channel verb ``order``, its argument the
op, its body the arguments as JSON), which does it (``bar.step.order_server``); with no step
running, it is done here under the task's lock, after what a crashed bar left is
finished and hand edits are recorded. The same handler runs either way, given a
``Context`` that says which.

Each op says who may give it: ``inside`` (only a process descending from the running
step: the agent rolls its own task back), ``outside`` (only the developer's processes: a
person answers the agent's questions, never the agent) or ``any``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from bar import git
from bar.errors import BarError, UsageError
from bar.model.records import Step
from bar.model.tasks import Task

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.model.records import RollbackStep

WHO = ("inside", "outside", "any")


class Context:
    """What a handler may do to its task. ``running``: a step is running (the handler
    runs in its ``bar run``); ``inside``: the order came from a process of that step."""

    running: bool = False
    step_id: str | None = None  # the running step's

    def __init__(self, task: Task, *, inside: bool) -> None:
        self.task = task
        self.inside = inside

    def state(self, label: str, message: str | None = None) -> tuple[str, str]:
        """(the name of the worktree's state now, its snapshot commit): recorded now as a
        checkpoint named ``label`` inside a running step (``message``: the snapshot
        commit's, if a new one is made), or the last recorded state (hand edits recorded
        first) with no step running."""
        raise NotImplementedError

    def last_checkpoint(self) -> Checkpoint | None:
        """The checkpoint ``state`` took (None with no step running)."""
        return None

    def rollback(self, to: str) -> Checkpoint | RollbackStep:
        """Restore the recorded state ``to``: a rollback checkpoint of the running step,
        or an ordinary rollback step (undoable either way)."""
        raise NotImplementedError

    def add_step(self, step: Step) -> Step | None:
        """Record ``step`` (its ``step_id`` and snapshots are filled in): appended now, or
        queued to follow the running step (None then)."""
        raise NotImplementedError

    def branch_moved(self) -> None:
        """bar moved the task branch (a flow's commit, ``bar.aide.flow``): a running step
        sees it where it looks for its branch. Nothing to do with no step running."""


Handler = Callable[[Context, Mapping[str, object]], dict[str, object]]
_REGISTRY: dict[str, tuple[Handler, str]] = {}


def register(op: str, who: str) -> Callable[[Handler], Handler]:
    """Make the decorated function the handler of ``op``, which ``who`` may give."""
    assert who in WHO, who

    def add(handler: Handler) -> Handler:
        _REGISTRY[op] = (handler, who)
        return handler

    return add


def lookup(op: str) -> tuple[Handler, str]:
    """(handler, who) of ``op``; a bad command line if there is no such op (the caller
    loads the handlers first: ``bar.step.order_handlers.load``)."""
    try:
        return _REGISTRY[op]
    except KeyError:
        raise UsageError(
            f"{op!r} is not an order bar knows", hint="known: " + ", ".join(sorted(_REGISTRY))
        ) from None


def refused(op: str, who: str, *, running: bool) -> BarError | None:
    """Why a process on the wrong side may not give ``op`` (None: it may)."""
    if who == "inside":
        if not running:
            return NotInsideStep(
                f"{op} is done from inside a running step, by its agent; no step is running",
                hint="run it inside `bar run`; from outside, use bar's own command "
                "(`bar rollback --to STATE`)",
            )
        return NotInsideStep(
            f"{op} is done from inside the running step, by its agent; this process is not "
            "part of it",
            hint="from outside, use bar's own command (`bar rollback --to STATE`)",
        )
    return NotInsideStep(
        f"{op} is for the developer, outside the step; a process of the running step may "
        "not give it",
        hint="ask the person at the terminal to run it (`bar decide answer`)",
    )


class NotInsideStep(BarError):
    """An order given from the wrong side of a running step."""

    exit_code = UsageError.exit_code


# --- with no step running ------------------------------------------------------------


def last_state(task: Task) -> tuple[str, str]:
    """(name, commit) of the task's last recorded state: a step id, or ``base``."""
    for step in task.ledger.iter_reverse():
        if step.snapshot and step.kind != "apply":
            return step.step_id, step.snapshot
    return "base", task.base_commit


class LocalContext(Context):
    """No step is running: the caller holds the task's lock and ran ``transaction.prepare``
    (hand edits are recorded), so the last recorded state is the worktree's."""

    def __init__(self, task: Task) -> None:
        super().__init__(task, inside=False)

    def state(self, label: str, message: str | None = None) -> tuple[str, str]:
        return last_state(self.task)

    def rollback(self, to: str) -> Checkpoint | RollbackStep:
        from bar.changes import rollback as verb

        return verb.rollback(self.task, verb.target_of(self.task, to), hard=False)

    def add_step(self, step: Step) -> Step | None:
        from bar.history import steps

        state = self.task.recorded_snapshot()
        rec = {
            **step.to_record(),
            "step_id": self.task.ledger.next_step_id(),
            "snapshot_before": state,
            "snapshot": state,
            "head": git.rev_parse(self.task.worktree, "HEAD"),
        }
        from bar.model.records import step_from_record

        return steps.append(self.task, step_from_record(rec, "step"))  # type: ignore[type-var]


def require_args(args: Mapping[str, object], *names: str) -> list[str]:
    """The string arguments ``names`` of an order; a bad command line if one is missing."""
    found = []
    for name in names:
        value = args.get(name)
        if not isinstance(value, str):
            raise UsageError(f"the order needs {name!r} (a string)")
        found.append(value)
    return found
