"""``bar task rename``: give a task another name.

The name is what a person calls the task (``--task NAME``, ``bar task list``); the id
is what everything else holds on to (the task's directory, its snapshot ref, the
``Bar-Task`` trailer of an applied commit, a pushed history). So a rename changes
task.json's ``name`` alone: the branch (``bar/<old name>-<id>``) and the worktree keep
theirs, since a branch may be checked out, pushed or named in a merge request, and both
carry the id, which still finds the task.

A name is refused when ``bar task new`` would refuse it, when an open task has it (one
open task per name, counted under the project lock as ``bar task new`` counts), and when
it starts the id of another task (``--task`` would then be ambiguous). The rename is
one change of task.json under the task's lock and one ``task.renamed`` event in
events.jsonl with ``changed: {"name": {"from", "to"}}``.
"""

from __future__ import annotations

from bar.base.record import record
from bar.errors import Locked, UsageError
from bar.model import board
from bar.model.tasks import ID_PREFIX_MIN, Task, list_tasks, validate_name
from bar.step import transaction
from bar.task.new import name_holder
from bar.task.state import is_running


@record(frozen=True)
class Renamed:
    task: Task
    old: str  # the name it had


def rename(task: Task, new: str) -> Renamed:
    """Call ``task`` ``new``; raises ``UsageError`` for a name it cannot have."""
    validate_name(new)
    if new == task.name:
        raise UsageError(
            f"task {task.name} ({task.id}) is already named {new!r}", hint="give another name"
        )
    if is_running(task):
        raise Locked(
            f"task {task.name} ({task.id}) is running a step",
            hint="rename it when the step has ended",
        )
    project = task.project
    with project.lock(f"bar task rename {task.name} {new}"):
        holder = name_holder(project, new)
        if holder is not None and holder != task.id:
            raise UsageError(
                f"an open task is already named {new!r} ({holder})",
                hint=f"pick another name, or rename or close that task first "
                f"(`bar task rename {holder} NEW`)",
            )
        if len(new) >= ID_PREFIX_MIN:
            starts = sorted(t.id for t in list_tasks(project) if t.id.startswith(new))
            others = [i for i in starts if i != task.id]
            if others:
                raise UsageError(
                    f"{new!r} starts the id of task {others[0]}: --task {new} would name both",
                    hint="pick another name",
                )
        with transaction.holding(task, f"bar task rename {new}", wait=False) as task:
            old = task.name
            task.name = new
            task.save()
        project.log_event(
            "task.renamed", task=board.task_view(task), changed={"name": {"from": old, "to": new}}
        )
    return Renamed(task, old)
