"""Where a task stands, in one word: ``pending``, ``running``, ``applied``, ``active``,
``closed``, ``missing-worktree`` or ``fetched`` (a read-only copy of another machine's).

``bar task list`` asks this of every task, so it reads only what is cheap: whether the
worktree directory is there (one stat, no scan of its files), whether a step's intent
journal exists and a live process holds the task lock (the test ``bar status`` makes),
and the newest lines of the ledger, back to the newest step that changed files
(``bar.task.applied``: the steps since, which surely changed nothing, are passed over on
their bytes, and what the lines up to some point said is kept beside the ledger).
"Applied" means an ``apply`` of the last recorded state is newer than every step that
changed files (steps that changed nothing since keep it so), and the branch it landed on
still has its commit (one ``git merge-base --is-ancestor``, for such a task only: a
reset of that branch undoes the apply). Changes nobody recorded yet are not looked for
here; ``bar status`` says whether there are any.
"""

from __future__ import annotations

from typing import Any

from bar import git
from bar.base.record import record
from bar.git import DiffStat
from bar.model.tasks import Task
from bar.store.lock import is_locked
from bar.task.applied import is_applied

PENDING = "pending"  # planned, no worktree yet (``bar.model.board``)
RUNNING = "running"
APPLIED = "applied"
ACTIVE = "active"
CLOSED = "closed"
MISSING_WORKTREE = "missing-worktree"
FETCHED = "fetched"  # a read-only copy of another machine's task (``bar.share.fetch``)
ON_WORKERS = "on-workers"  # its steps run on workers (``bar.workers``), not here


@record(frozen=True)
class TaskState:
    state: str  # one of the words above
    running: bool  # a `bar run` holds the task now
    applied: bool  # the newest step applied the last recorded state
    worktree_missing: bool  # an open task whose worktree directory is gone

    @property
    def label(self) -> str:
        """As people read it (``missing worktree``)."""
        return self.state.replace("-", " ")

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "running": self.running,
            "applied": self.applied,
            "worktree_missing": self.worktree_missing,
        }


def is_running(task: Task) -> bool:
    """A ``bar run`` is recording a step of the task right now."""
    return task.paths.marker.exists() and is_locked(task.paths.lock)


def _placed(task: Task) -> dict[str, Any] | None:
    """Where a task sent to workers runs (``bar.model.placement``), else None."""
    from bar.model import placement

    where = placement.of(task.project, task.id)
    return where.to_json() if where is not None else None


def state_of(task: Task) -> TaskState:
    if task.read_only:
        return TaskState(FETCHED, False, is_applied(task), False)
    running = task.active and is_running(task)
    # (a task on workers has its worktree on the machine that runs its next step)
    missing = (
        task.active and not task.pending and not task.on_workers and not task.worktree.is_dir()
    )
    applied = is_applied(task)
    if not task.active:
        word = CLOSED
    elif _placed(task) is not None:
        word = ON_WORKERS
    elif task.pending:
        word = PENDING
    elif running:
        word = RUNNING
    elif missing:
        word = MISSING_WORKTREE
    elif applied:
        word = APPLIED
    else:
        word = ACTIVE
    return TaskState(word, running, applied, missing)


@record(frozen=True)
class TaskSummary:
    task: Task
    active: bool  # the project's active task
    steps: int
    last_step: str | None
    diff_stat: DiffStat  # base -> last recorded state
    state: TaskState  # pending, running, applied, active, closed, missing-worktree
    # what its agent sessions cost, in US dollars, when every one's cost is known
    # (``agents.prices``; ``bar.session.stored.task_totals``); None: unknown, or none ran
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        rec = self.task.to_record()
        rec.pop("version", None)
        rec.update(
            active=self.active,
            steps=self.steps,
            last_step=self.last_step,
            diff_stat=self.diff_stat.to_record(),
            worktree=str(self.task.worktree),
        )
        rec.update(self.state.to_json())
        rec["on_workers"] = _placed(self.task)
        rec["cost_usd"] = self.cost_usd
        return rec


def summarize(task: Task, active_id: str | None = None) -> TaskSummary:
    last = task.ledger.last()
    stat = git.numstat(task.project.root, task.base_commit, task.recorded_snapshot())
    return TaskSummary(
        task,
        task.id == active_id,
        last.number if last else 0,
        last.step_id if last else None,
        stat,
        state_of(task),
        _cost(task) if last else None,
    )


def _cost(task: Task) -> float | None:
    """What the task's agent sessions cost, when every one's cost is known."""
    from bar.session import stored

    totals = stored.task_totals(task)
    cost = totals.get("cost_usd") if totals is not None else None
    return float(cost) if isinstance(cost, int | float) else None
