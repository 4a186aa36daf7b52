"""The lock files a stopped bar or git left, cleared before a command changes a task
(``bar.step.transaction``, which then finishes what the stopped bar was doing).

A bar killed while git moved the task's snapshot ref leaves git's ``<ref>.lock`` behind,
and every later move of the ref would fail on it. bar is the only writer of
``refs/bar/tasks/<id>`` and writes it only under the task lock, so the caller, holding
that lock, knows such a lock file is stale: ``clear_stale_ref_lock`` removes it first
(and ``clear_stale_index_lock`` the side index's, which only bar writes). The locks of
the worktree's own git (``HEAD.lock``, ``index.lock``, the branch's) are removed once no
live git holds them (``clear_stale_git_locks``, ``bar.worktree.git_locks``).
"""

from __future__ import annotations

import time
from pathlib import Path

from bar import git
from bar.base.notices import note
from bar.model.tasks import Task
from bar.worktree import git_locks as git_locks

# git itself may lock the ref for a moment (``git gc`` packing refs from another task's
# worktree): a lock file younger than this gets the time to go away before it is removed.
_LIVE_REF_LOCK_S = 1.0


def clear_stale_ref_lock(task: Task) -> bool:
    """Remove a ``<snapshot ref>.lock`` left by a killed ``git update-ref`` (the caller
    holds the task lock). True if there was one."""
    path = git.ref_lock_path(task.project.root, task.snapshot_ref)
    deadline = time.monotonic() + _LIVE_REF_LOCK_S
    while True:
        try:
            age = time.time() - path.lstat().st_mtime
        except FileNotFoundError:
            return False
        if age >= _LIVE_REF_LOCK_S or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    path.unlink(missing_ok=True)
    note(f"removed {path}: a git lock on {task.snapshot_ref} left by a bar that was stopped")
    return True


def clear_stale_index_lock(task: Task) -> bool:
    """Remove the side index's ``index.lock`` left by a git that died or failed mid-write
    (a full disk): only bar writes the side index, under the task lock the caller holds."""
    path = task.index.with_name(task.index.name + ".lock")
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    note(f"removed {path}: a git lock on the side index left by a git that was stopped")
    return True


def clear_stale_git_locks(task: Task) -> list[Path]:
    """Remove the lock files a killed git left in the task's worktree's git directory
    and on its branch (``bar.worktree.git_locks``); those removed."""
    removed = git_locks.clear(task)
    for lock in removed:
        note(
            f"removed {lock}: a git lock in task {task.name}'s worktree left by a git "
            "that was stopped"
        )
    return removed
