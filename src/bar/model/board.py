"""The task board: where each task stands in the plan, apart from where its files are.

The control plane of docs/board.md (reference 002): a task can exist before it has a
worktree. task.json keeps ``status`` (``active`` / ``closed``) and holds ``board``::

    "board": {"status": "pending" | "in_progress" | "completed",
              "owner": "" | "<who took it>",
              "worktree": "" | "<the worktree's name: the task's name>"}

    pending ──start / first bar run──▶ in_progress ──close──▶ completed
       │                                    ▲                     │
       └── claim (sets owner) ──────────────┘        reopen ──────┘

``pending``: planned (``bar task new --plan``), no worktree yet; its branch and snapshot
ref exist at the base. ``in_progress``: the worktree is made and bound. ``completed``:
closed. The worktree registry (``bar.task.registry``) says where each worktree is and
whether it was kept or removed; the event log (``bar.model.event_log``) says what happened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bar.base.record import record
from bar.errors import AlreadyExists, CorruptFile

if TYPE_CHECKING:
    from pathlib import Path

    from bar.model.tasks import Task

PENDING = "pending"
IN_PROGRESS = "in_progress"
COMPLETED = "completed"
STATUSES = (PENDING, IN_PROGRESS, COMPLETED)
OWNER_MAX = 64


@record
class Board:
    status: str
    owner: str = ""
    worktree: str = ""  # the bound worktree's name ("" while there is none)

    def to_record(self) -> dict[str, str]:
        return {"status": self.status, "owner": self.owner, "worktree": self.worktree}


def parse(value: object, path: Path) -> Board:
    """The ``board`` of a task.json (after its migration), or a ``CorruptFile``."""
    if not isinstance(value, dict):
        raise CorruptFile(f"task.json at {path} has no valid 'board'")
    status = value.get("status")
    if status not in STATUSES:
        raise CorruptFile(f"task.json at {path} has an unknown board status {status!r}")
    owner = value.get("owner", "")
    worktree = value.get("worktree", "")
    if not isinstance(owner, str) or not isinstance(worktree, str):
        raise CorruptFile(f"task.json at {path} has a board owner or worktree that is not text")
    return Board(str(status), owner, worktree)


def expected(task: Task) -> Board:
    """The board the task's status and its worktree on disk imply (its owner kept)."""
    if not task.active:
        status = COMPLETED
    elif task.board.status == PENDING:
        status = PENDING
    else:
        status = IN_PROGRESS
    # an open task's missing worktree is made again (``bar doctor --repair``): still bound;
    # a task on workers has none here (it is on the machine that runs its next step)
    bound = not task.on_workers and (
        status == IN_PROGRESS or (status == COMPLETED and task.worktree.is_dir())
    )
    return Board(status, task.board.owner, worktree_name(task) if bound else "")


def worktree_name(task: Task) -> str:
    """The name of the task's worktree: the one it is bound under (a worktree made or
    bound under a name of its own keeps it: ``bar.task.lanes``), else the task's name.
    ``bar.task.registry.name_of`` also knows the name of one removed."""
    return task.board.worktree or task.name


def validate_owner(owner: str) -> str:
    """An owner is a short printable name (an agent's, a person's, a worker's)."""
    from bar.errors import UsageError

    cleaned = owner.strip()
    if not cleaned or len(cleaned) > OWNER_MAX or not cleaned.isprintable():
        raise UsageError(
            f"invalid owner {owner!r}: give 1 to {OWNER_MAX} printable characters",
            hint="e.g. --owner agent-a or --owner $USER",
        )
    return cleaned


def task_view(task: Task) -> dict[str, Any]:
    """The task as an event names it (docs/board.md: ``{"id", "status"}`` and more)."""
    view: dict[str, Any] = {"id": task.id, "name": task.name, "status": task.board.status}
    if task.board.owner:
        view["owner"] = task.board.owner
    return view


def worktree_view(task: Task, status: str | None = None) -> dict[str, Any]:
    """The task's worktree as an event names it: ``{"name", "path", "branch", "status"}``
    (``status`` left out when the event is about to find it out)."""
    view: dict[str, Any] = {
        "name": worktree_name(task),
        "path": str(task.worktree),
        "branch": task.branch,
    }
    if status is not None:
        view["status"] = status
    return view


def refused(task: Task, op: str, exc: BaseException) -> None:
    """Log a refusal of ``op`` (``worktree.create``, ``worktree.remove``) as the seed logs
    a failure: ``<op>.before``, then ``<op>.failed`` with the reason, so the event log
    says what was asked and why nothing happened. The caller raises."""
    import contextlib

    from bar.errors import BarError

    project = task.project
    with contextlib.suppress(BarError, OSError):  # the refusal is what the caller says
        project.log_event(f"{op}.before", task=task_view(task), worktree=worktree_view(task))
        project.log_event(
            f"{op}.failed",
            task=task_view(task),
            worktree=worktree_view(task),
            error=str(exc) or type(exc).__name__,
        )


class Claimed(AlreadyExists):
    """The task is taken by another owner."""

    def __init__(self, task: Task, holder: str) -> None:
        super().__init__(
            f"task {task.name} ({task.id}) is already claimed by {holder}",
            hint="`bar task list --pending` shows the tasks nobody has taken",
        )
        self.holder = holder
