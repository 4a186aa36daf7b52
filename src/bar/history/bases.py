"""The base each recorded state was recorded against.

A task's changes are its last state against its base (``base_commit`` in task.json). A
``sync`` step moves the base to the tip of a branch it merged in, and a rollback to a
state recorded before that moves it back, so that every state keeps the base it was
recorded against: diffs, applies and undos of an earlier state use that base, never
today's. The ledger is the truth: a step that moved the base carries ``base_before`` and
``base_after``; ``base_commit`` in task.json caches the last one. ``first_base`` in
task.json (set before the first move is recorded) is both the base the task started from
and the sign that the ledger needs reading at all: a task whose base never moved answers
from task.json alone, however long its ledger.
"""

from __future__ import annotations

from pathlib import Path

from bar import git
from bar.errors import BarError
from bar.model.project import Project
from bar.model.tasks import Task, list_tasks


def branch(task: Task) -> str:
    """The branch the task's work goes back to: the ref it was created from when that
    names a local branch (``bar task new --base feature``), else git.default_base. What
    ``bar apply`` lands on and ``bar task sync`` merges in when given no branch (so that
    a sync prepares the apply). Never another task's branch: it is checked out in that
    task's worktree, where its agent works, and bar writes into no task's worktree; a
    task created from one (``--base bar/a-<id>``) goes back to git.default_base."""
    base, default = task.base_ref, task.project.config.git.default_base
    if (
        base != default
        and git.branch_exists(task.project.root, base)
        and not any(other.branch == base for other in list_tasks(task.project))
    ):
        return base
    return default


def refuse_task_worktree(
    project: Project, branch: str, listed: list[dict[str, str]] | None = None
) -> None:
    """Raise if ``branch`` is checked out in a task's worktree under $BAR_HOME: landing
    on it would write that task's files, maybe while its agent runs a step there.
    ``listed``: ``git.worktree_list`` of the repository if the caller has it."""
    ref = f"refs/heads/{branch}"
    for entry in git.worktree_list(project.root) if listed is None else listed:
        where = Path(entry["worktree"])
        if entry.get("branch") != ref or not where.is_relative_to(project.paths.workspaces):
            continue
        task_id = where.relative_to(project.paths.workspaces).parts[0]
        owner = next((t for t in list_tasks(project) if t.id == task_id), None)
        named = f"task {owner.name} ({task_id})" if owner is not None else f"task {task_id}"
        raise BarError(
            f"{branch} is checked out in the worktree of {named} at {where}; bar never "
            "writes into another task's worktree; nothing was changed",
            hint="land it on another branch with --target BRANCH (your checkout's, e.g. "
            f"{project.config.git.default_base}), or apply {named} first and then this one",
        )


def first(task: Task) -> str:
    """The base the task started from: the root of its snapshot chain."""
    return task.first_base or task.base_commit


def base_at(task: Task, number: int) -> str:
    """The base in effect after step ``number`` (0: before the first step)."""
    if task.first_base is None:
        return task.base_commit
    for step in task.ledger.iter_reverse(warn=False):
        after = getattr(step, "base_after", None)
        if step.number <= number and after:
            return str(after)
    return task.first_base


def will_move(task: Task) -> None:
    """Note the first base before a step that moves it is recorded (the caller holds the
    task lock), so that readers look for the move in the ledger from then on."""
    if task.first_base is None:
        task.first_base = task.base_commit
        task.save()


def settle(task: Task, base: str) -> None:
    """Make task.json name ``base``, the base the last recorded step left (a step that
    moved it is recorded first, then task.json follows; recovery finishes the second
    half). The new base is kept reachable, as the snapshots of the states on it are."""
    if task.base_commit == base:
        return
    git.git(
        task.project.root,
        "update-ref",
        "-m",
        "bar: keep a base",
        f"{KEPT_BASES}{task.id}/{base}",
        base,
        check=False,
    )
    task.base_commit = base
    task.save()


KEPT_BASES = "refs/bar/bases/"
