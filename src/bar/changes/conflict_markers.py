"""Conflict markers a sync left in the task's files, not resolved yet.

``bar task sync --allow-conflicts`` records the merge with git's conflict markers in the
files that conflicted, and its step lists them (``SyncStep.conflicts``): they are the
developer's to resolve in the worktree, and a later step records the resolution. Until
then the task's work is not fit to land: ``bar apply`` (and its dry run) refuses it, and
``bar status`` says so.

Cheap by construction: only the paths a sync step listed are looked at, in the state's
tree in the object store (one ``git grep``, no checkout read), and a task whose base never
moved (no ``first_base``, ``bar.history.bases``) has no sync step, so it costs no ledger read and
no git at all. A file counts as unresolved while a line starts with git's opening or
closing marker (``<<<<<<< `` or ``>>>>>>> ``, with the label git writes after it); a
lone ``=======`` is left alone, as it underlines many a heading.
"""

from __future__ import annotations

from bar import git
from bar.errors import GitError
from bar.model.records import SyncStep
from bar.model.tasks import Task

_MARKER = r"^(<<<<<<<|>>>>>>>) "


def synced_conflicts(task: Task, upto: int | None = None) -> list[str]:
    """Every path a sync step (up to step number ``upto``) recorded with conflict markers."""
    if task.first_base is None:
        return []
    found: dict[str, None] = {}
    for step in task.ledger.iter_reverse(warn=False):
        if isinstance(step, SyncStep) and (upto is None or step.number <= upto):
            found.update(dict.fromkeys(step.conflicts))
    return sorted(found)


def unresolved(task: Task, state: str, upto: int | None = None) -> list[str]:
    """The paths a sync left conflicted (up to step ``upto``) that still hold conflict
    markers in the recorded state ``state`` (a commit)."""
    paths = synced_conflicts(task, upto)
    if not paths:
        return []
    # the object store only: no filter, no textconv, binary files skipped
    res = git.git(
        task.project.root,
        "--literal-pathspecs",
        "grep",
        "-l",
        "-z",
        "-I",
        "--no-textconv",
        "-E",
        "-e",
        _MARKER,
        state,
        "--",
        *paths,
        check=False,
    )
    if res.returncode == 1:  # no match
        return []
    if res.returncode != 0:
        raise GitError(res.cmd, res.returncode, res.stdout, res.stderr)
    prefix = f"{state}:"
    held = []
    for item in res.stdout.split(b"\0"):
        name = item.decode("utf-8", "surrogateescape")
        if name:
            held.append(name.removeprefix(prefix))
    return sorted(held)
