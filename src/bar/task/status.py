"""Where a task stands (``bar status``): its steps, a running or interrupted step,
unrecorded changes, conflict markers a sync left unresolved, nested repositories and how
steps are confined. Reads only; never
waits for a running step."""

from __future__ import annotations

from typing import Any

from bar.base import notices
from bar.base.record import field, record
from bar.changes import conflict_markers, fast
from bar.errors import TaskNotFound, WriteFailed
from bar.history import side_index, steps
from bar.model import journals
from bar.model.journals import RunIntent
from bar.model.project import Location, Project
from bar.model.tasks import Task, resolve_task
from bar.store.lock import is_locked
from bar.task.state import TaskState, state_of


@record(frozen=True)
class Status:
    project: Project
    task: Task | None
    no_task_reason: str | None  # why there is no task, when there is none
    steps: int = 0
    last_step: str | None = None
    running: RunIntent | None = None  # the step running now
    interrupted: RunIntent | None = None  # a step whose bar died; recorded by the next command
    unrecorded_changes: bool | None = None  # None: not known (busy, closed, no worktree)
    nested_repos: list[str] = field(default_factory=list)  # their files are not recorded
    sandbox: dict[str, Any] = field(default_factory=dict)  # how steps here are confined
    checkpoints: int = 0  # taken so far in the running step (an agent session)
    state: TaskState | None = None  # running, applied, active, closed, missing-worktree
    # files where the last recorded state still holds the conflict markers a sync left
    unresolved_conflicts: list[str] = field(default_factory=list)
    # how the worktree is looked at between commands (``bar.changes.fast.watcher.mode``)
    watch: dict[str, Any] | None = None
    # the decision the task's agent asked and that waits for an answer (``bar decide``):
    # its session_id, task, created_at and number of items; None: none waits
    decision: dict[str, Any] | None = None
    # why the worktree could not be looked at (a named pipe git would wait on), with
    # its hint; nothing is recorded until it is cleared
    blocked: str | None = None
    # the worktree's files the record leaves out (``bar.history.side_index.LEFT_OUT``),
    # each with why: ``large``, ``holes`` or ``links``
    left_out: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "project": self.project.name,
            "root": str(self.project.root),
            "dir": str(self.project.dir),
            "config": str(self.project.paths.config),
            "shared_config": (
                str(shared) if (shared := self.project.shared_config_path()).is_file() else None
            ),
        }
        if self.task is None:
            info.update(task=None, message=self.no_task_reason)
            return info
        t = self.task
        info["task"] = {
            "id": t.id,
            "name": t.name,
            "status": t.status,
            "branch": t.branch,
            "worktree": str(t.worktree),
            "steps": self.steps,
            "last_step": self.last_step,
        }
        if self.state is not None:
            info["task"].update(self.state.to_json())
        r = self.running
        info["running"] = (
            {
                "step_id": r.step_id,
                "pid": r.pid,
                "cmd": r.cmd,
                "started_at": r.started_at,
                "checkpoints": self.checkpoints,
            }
            if r
            else None
        )
        info["interrupted_step"] = self.interrupted.step_id if self.interrupted else None
        info["unrecorded_changes"] = self.unrecorded_changes
        info["blocked"] = self.blocked
        info["left_out"] = self.left_out
        info["unresolved_conflicts"] = self.unresolved_conflicts
        info["sandbox"] = self.sandbox
        info["watch"] = self.watch
        info["nested_repos"] = self.nested_repos
        info["decision"] = self.decision
        return info


def status(loc: Location, ref: str | None = None) -> Status:
    """Where things stand: the task, a running or interrupted step, unrecorded changes.
    Reads only; never waits for a running step."""
    try:
        task = resolve_task(loc.project, ref, from_cwd=loc.task_id)
    except TaskNotFound as exc:  # a broken file is an error here too, not "no task"
        if ref:
            raise
        return Status(loc.project, None, str(exc))
    last = task.ledger.last()
    busy = is_locked(task.paths.lock)
    marker = journals.RUN.read(task.paths)
    unrecorded = None
    from bar.sandbox import status as sandbox_status

    watch = None
    blocked = None
    left_out: dict[str, str] = {}
    if task.active and task.worktree.is_dir() and not busy:
        # (the files it leaves out are said on a line of their own: not warned of too,
        # unless the look fails, whose message names them as said above)
        with notices.held(side_index.LEFT_OUT_SAID) as warned:
            try:
                unrecorded, left_out = steps.unrecorded(task)
            except WriteFailed as exc:  # (a named pipe git would wait on: the rest is said)
                blocked = str(exc) + (f"\nhint: {exc.hint}" if exc.hint else "")
        if blocked is not None:
            notices.say(warned)
        watch = fast.watch_mode(task.index)
    return Status(
        loc.project,
        task,
        None,
        steps=last.number if last else 0,
        last_step=last.step_id if last else None,
        running=marker if marker and busy else None,
        checkpoints=_taken(task, marker.step_id) if marker and busy else 0,
        interrupted=marker if marker and not busy else None,
        unrecorded_changes=unrecorded,
        nested_repos=fast.nested_repositories(task.index),
        sandbox=sandbox_status(
            loc.project.config.sandbox,
            exec_check=loc.project.config.policy.enabled and loc.project.config.policy.exec_check,
        ),
        state=state_of(task),
        unresolved_conflicts=conflict_markers.unresolved(task, task.recorded_snapshot()),
        watch=watch,
        decision=_waiting_decision(task),
        blocked=blocked,
        left_out=left_out,
    )


def _waiting_decision(task: Task) -> dict[str, Any] | None:
    """The decision that waits for the person's answer, as ``bar decide list`` says it
    (read only: an answer aide's page wrote is taken by the next ``bar decide``)."""
    from bar.aide import decide
    from bar.errors import BarError

    try:
        waiting = decide.pending(task)
    except BarError:
        return None  # a broken file: `bar decide list` and `bar doctor` say what is wrong
    if waiting is None:
        return None
    meta = waiting.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    items = waiting.get("items")
    return {
        "session_id": meta.get("session_id"),
        "task": waiting.get("task"),
        "created_at": meta.get("created_at"),
        "items": len(items) if isinstance(items, list) else 0,
    }


def _taken(task: Task, step_id: str) -> int:
    """How many checkpoints the running step holds (lines of its checkpoints file)."""
    try:
        with open(task.paths.artifacts / f"{step_id}.checkpoints.jsonl", "rb") as fh:
            return sum(1 for line in fh if line.startswith(b'{"checkpoint"'))  # (not amends)
    except OSError:
        return 0
