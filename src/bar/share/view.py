"""A history fetched for a task, read where it is, without making it a task here.

``bar fetch`` keeps each history it brings at ``refs/bar/fetched/<id>/<remote>``. Of a
task that is not this machine's it makes a read-only copy; a task of this machine it
never changes (it says ``behind``: ``bar task adopt`` takes the new steps). Reading what
another machine recorded since, say to review a branch it pushed, must not wait for an
adoption that replaces this machine's worktree: ``read`` gives the newest fetched history
of a task as a read-only task (``origin`` says where from) whose record is written once
under the project's cache (``cache/fetched/<id>-<commit>``: a history commit never
changes, so neither does what is written of it). It is checked as ``bar fetch`` checks
it (``bar.share.history_commit.read``: untrusted input); no ref moves, no task changes, and it
is in no listing of the tasks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bar import git
from bar.base.record import record
from bar.errors import BarError
from bar.model.project import Project
from bar.model.tasks import Task, load_task
from bar.share import fetch as fetching
from bar.share import history_commit
from bar.store.layout import TASK_ID_RE


@record(frozen=True)
class Fetched:
    """The newest history fetched for a task: its commit, the remote it came from."""

    commit: str
    remote: str  # the remote's key in refs/bar/fetched/<id>/<key> (its name, mostly)


def newest(project: Project, task_id: str) -> Fetched | None:
    """The newest history of ``task_id`` fetched from any remote (each push makes a child
    of the history before it: the one with the most commits), or None."""
    if not TASK_ID_RE.match(task_id):
        return None
    repo = project.root
    listed = git.git(
        repo,
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        f"{history_commit.FETCHED}{task_id}/",
    ).out.splitlines()
    found = [Fetched(line.split(" ", 1)[0], line.rsplit("/", 1)[-1]) for line in listed]
    if not found:
        return None
    if len(found) == 1:
        return found[0]

    def length(item: Fetched) -> int:
        return int(git.out(repo, "rev-list", "--count", item.commit, "--").strip() or 0)

    return max(sorted(found, key=lambda f: f.remote), key=length)


def read(project: Project, task_id: str) -> Task | None:
    """The newest history fetched for ``task_id`` as a read-only task, or None (none was
    fetched, or it cannot be read: ``bar fetch`` reported it as broken)."""
    found = newest(project, task_id)
    if found is None:
        return None
    folder = project.paths.cache / "fetched" / f"{task_id}-{found.commit}"
    try:
        if not (folder / "task.json").is_file():
            _write(project, task_id, found, folder)
        return load_task(project, task_id, record_dir=folder)
    except BarError:
        return None


def _write(project: Project, task_id: str, found: Fetched, folder: Path) -> None:
    """The record of ``found`` written at ``folder`` whole or not at all (another reader
    may write the same at the same time), and the older ones of the task removed."""
    pushed = history_commit.read(project.root, found.commit, task_id)
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = folder.parent / f".{folder.name}.{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(mode=0o700)
    try:
        origin = {"remote": found.remote, "history": found.commit}
        fetching.write_record(project, pushed, temp, origin=origin)
        try:
            os.rename(temp, folder)
        except OSError:
            if not (folder / "task.json").is_file():
                raise
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    for older in folder.parent.glob(f"{task_id}-*"):
        if older != folder:
            shutil.rmtree(older, ignore_errors=True)
