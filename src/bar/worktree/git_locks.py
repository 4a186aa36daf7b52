"""Git's lock files that a killed git left in a task's own places.

bar runs git in a task's worktree (a hard rollback's reset, a sync's merge), and so does
the step's command. A git killed with its bar leaves ``HEAD.lock``, ``index.lock`` or its
branch's ``<ref>.lock`` behind, and every later git there fails ("Unable to create
'.../HEAD.lock': File exists"): every rollback of the task would exit 9. The caller holds
the task lock, so no step runs; a lock is stale when no live git holds it open or works
in the worktree (bar's own gits, which never take these locks, aside). Such a lock is
removed, and said so; one a live git holds (a transaction the developer's own ``git
update-ref --stdin`` prepared in the worktree) is left, and named with its process. Only Linux's ``/proc`` tells; elsewhere nothing is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from bar.model.tasks import Task, admin_dir


def lock_files(task: Task) -> list[Path]:
    """The lock files present in the task's worktree's own git directory and on its
    branch."""
    found: list[Path] = []
    common = task.project.common_dir
    admin = admin_dir(common, task.worktree) if task.worktree.is_dir() else None
    if admin is not None:
        found += sorted(p for p in admin.glob("*.lock") if not p.is_dir())
    branch = common / "refs" / "heads" / f"{task.branch}.lock"
    if branch.is_file():
        found.append(branch)
    return found


def holder(task: Task, lock: Path) -> int | None:
    """The pid of a live git that holds ``lock`` open or works in the task's worktree
    (None: the lock is stale)."""
    inside = os.fsencode(task.worktree.resolve())
    target = os.fsencode(lock)
    me = os.getpid()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return 0  # (cannot tell: treat it as held)
    for pid in pids:
        if pid == me or not _is_git(pid) or _is_bars(pid, me):
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd".encode())
        except OSError:
            cwd = b""
        if cwd == inside or cwd.startswith(inside + b"/"):
            return pid
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}".encode()) == target:
                    return pid
            except OSError:
                continue
    return None


def _is_git(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            name = f.read().strip()
    except OSError:
        return False
    return name == b"git" or name.startswith(b"git-")


def _is_bars(pid: int, me: int) -> bool:
    """Whether the git ``pid`` is one bar started for itself: this process's (the early
    ``git diff-files`` of ``bar.changes.fast.prescan``) or a watcher's, which never take these locks."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            parent = int(f.read().rpartition(b")")[2].split()[1])
        if parent == me:
            return True
        with open(f"/proc/{parent}/cmdline", "rb") as f:
            return b"bar.changes.watching" in f.read()
    except (OSError, ValueError, IndexError):
        return False


def stale(task: Task) -> list[Path]:
    """The task's git lock files that no live git holds."""
    return [lock for lock in lock_files(task) if holder(task, lock) is None]


def clear(task: Task) -> list[Path]:
    """Remove the stale ones (the caller holds the task lock); those removed."""
    removed = []
    for lock in stale(task):
        try:
            lock.unlink()
        except FileNotFoundError:
            continue
        removed.append(lock)
    return removed
