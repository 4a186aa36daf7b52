"""What of a task's work no branch has yet: the steps and files ``bar apply`` would land.

Closing a task keeps its record, so nothing is lost then; but a task closed and
forgotten holds work nobody landed, and ``bar task delete`` is the first to say so. The
close says it at once (``bar task close``, ``bar worktree remove --complete``), with the
command that lands it.

Work is applied, as ``bar task list`` and ``bar task delete`` judge it (``bar.task.risk``),
when an ``apply`` step landed the last recorded state (or one with its tree) on a branch
that still has the commit. Otherwise the apply is computed as a dry run onto the branch
it would land on (the branch of the last apply that still stands, so a task applied part
of the way is told what it added since; else the task's own target), from the record
alone: it writes git objects only. Its stat is what is missing there; a target that
already holds it all (merged by hand) has nothing missing. The steps named are those
that changed files since that apply (since the start without one).
"""

from __future__ import annotations

from typing import Any

from bar import git
from bar.base.record import field, record
from bar.errors import ApplyConflict, BarError
from bar.git import DiffStat
from bar.history import bases
from bar.model.records import ApplyStep
from bar.model.tasks import Task, still_landed


@record(frozen=True)
class Unapplied:
    target_branch: str  # where ``command`` lands it
    stat: DiffStat  # what landing it changes there (the task's change, if it cannot say)
    steps: list[str]  # the steps that changed files since ``applied_step`` (or the start)
    command: str  # the ``bar apply`` command line that lands it
    task_ref: str  # what names the task on a command line (its id, once closed)
    applied_step: str | None = None  # the last apply that still stands, if any
    conflicts: list[str] = field(default_factory=list)  # the apply would conflict there

    def to_json(self) -> dict[str, Any]:
        return {
            "target_branch": self.target_branch,
            "diff_stat": self.stat.to_record(),
            "steps": self.steps,
            "applied_step": self.applied_step,
            "conflicts": self.conflicts,
            "command": self.command,
        }


def unapplied(task: Task) -> Unapplied | None:
    """What of ``task``'s last recorded state no branch has (None: nothing, or it is all
    applied). For a task without its worktree (closed), as it is computed from its record."""
    from bar.changes import apply

    repo = task.project.root
    final = task.recorded_snapshot()
    tree = git.tree_of(repo, final)
    if tree == git.tree_of(repo, task.base_commit):
        return None
    records = task.ledger.read_all(warn=False)
    standing = [  # (an apply that still stands, the state it landed)
        (s, s.snapshot)
        for s in records
        if isinstance(s, ApplyStep) and s.snapshot and still_landed(task, s)
    ]
    if any(state == final or git.tree_of(repo, state) == tree for _, state in standing):
        return None
    last, since = standing[-1] if standing else (None, task.base_commit)
    target = last.target_branch if last is not None else bases.branch(task)
    after = last.number if last is not None else 0
    steps = [
        s.step_id
        for s in records
        if s.number > after and not isinstance(s, ApplyStep) and s.diff_stat.files
    ]
    command = apply.apply_command(task, target=target if target != bases.branch(task) else None)
    conflicts: list[str] = []
    try:
        done = apply.dry_run(task, mode="commit", target_branch=target, message=None)
    except ApplyConflict as exc:
        conflicts = list(exc.paths)
        stat = git.numstat(repo, since, final)
    except BarError:  # (the target is gone, conflict markers unresolved...): its change
        stat = git.numstat(repo, since, final)
    else:
        if done.nothing_to_do:
            return None
        stat = done.stat
    return Unapplied(
        target,
        stat,
        steps,
        command,
        task.name if task.active else task.id,
        last.step_id if last else None,
        conflicts=conflicts,
    )
