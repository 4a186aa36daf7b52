"""The look for hand edits, started before the command's own code has loaded.

Every command that changes a task first looks for hand edits, and the slow half of that
look is ``git diff-files`` statting every recorded file (``bar.changes.fast.rescan``). It needs only
the task's worktree and side index, known once the command line is parsed; the command's
code then takes tens of milliseconds more to import. So ``begin`` starts diff-files at
once, on the other core (where the task has stamps: without them the look adds
everything, and ``cancel`` stops one started), and ``rescan.scan`` takes its answer
(``claim``) instead of
starting its own, if it is still an answer to the same question: the same worktree and
side index, the side index not written since (no other bar command recorded or restored
in between) and not long ago. Anything else, and the early process is stopped and the
look starts over as before.

diff-files compares the files with the side index as they are while it runs: an edit of
a recorded file made after it looked (before the step's watch begins) is found by the
next command's look, recorded as a hand edit then, never lost.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bar.model.project import Location

_MAX_AGE = 5.0  # seconds: an answer older than this (a wait for the lock) is asked again

_Key = tuple[int, int, int, int]


class _Early:
    __slots__ = ("index", "key", "proc", "started", "worktree")

    def __init__(self, worktree: str, index: str, key: _Key, proc: subprocess.Popen[bytes]):
        self.worktree, self.index, self.key, self.proc = worktree, index, key, proc
        self.started = time.monotonic()


_early: _Early | None = None
_found: tuple[str, Location] | None = None  # (the directory, the project found there)


# a gitlink is recorded by the commit its repository is at: whether its files are dirty
# is nothing to bar, and asking would start a ``git status`` inside each one
_DIFF_FILES = ("diff-files", "--ignore-submodules=dirty", "--name-only", "-z")


def diff_files(worktree: Path, index: Path) -> subprocess.Popen[bytes]:
    """``git diff-files --name-only -z`` of ``worktree`` against the side index
    ``index``, started (its output on a pipe)."""
    from bar import git
    from bar.base.proc import clean_env

    return subprocess.Popen(
        ["git", *git.NO_PROGRAMS, "-C", str(worktree), *_DIFF_FILES],
        env=clean_env(git.pinned_env(worktree, git.index_env(index))),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def _key(index: Path | str) -> _Key | None:
    try:
        st = os.stat(index)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def begin(task_ref: str | None) -> None:
    """Start diff-files for the task ``task_ref`` names (None: the one the current
    directory is in, else the active one), if it is found without a doubt. Never
    fails: whatever goes wrong here, the command finds and reports itself."""
    discard()  # one command's look is never another's
    if os.environ.get("BAR_STEP_ID"):
        return  # inside a step, bar changes no task from here
    try:
        from bar.model.project import find_project
        from bar.model.tasks import load_task
        from bar.store.layout import TASK_ID_RE

        loc = find_project()
        global _found
        _found = (os.getcwd(), loc)
        task_id = task_ref if task_ref is not None else loc.task_id
        task_id = task_id if task_id is not None else loc.project.active_task_id()
        if not task_id or not TASK_ID_RE.match(task_id):
            return  # a name or a prefix: resolved (and reported) by the command
        task = load_task(loc.project, task_id)
        worktree, index = task.worktree, task.index
        key = _key(index)
        if key is None or not task.active or not os.path.isdir(worktree):
            return
        from bar.base import speed

        if not speed.fast() or not os.path.exists(f"{index}.stamps"):
            return  # no stamps: the look for hand edits adds everything
        proc = diff_files(worktree, index)
    except Exception:  # an optimisation only: the command finds and reports any error
        return
    global _early
    _early = _Early(str(worktree), str(index), key, proc)
    import atexit

    atexit.register(discard)


def start(worktree: Path, index: Path) -> None:
    """Start diff-files for a snapshot about to be taken (a step whose command just
    ended, with no hook to run after it): it stats while bar records how the command
    ended. Never fails."""
    discard()
    key = _key(index)
    if key is None:
        return
    try:
        proc = diff_files(worktree, index)
    except OSError:
        return
    global _early
    _early = _Early(str(worktree), str(index), key, proc)


def claim(worktree: Path, index: Path) -> subprocess.Popen[bytes] | None:
    """The early diff-files, if it answers for ``worktree`` and ``index`` as they are
    now (call it under the task's lock); else None, and it is stopped."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if (
        early.worktree == str(worktree)
        and early.index == str(index)
        and early.key == _key(index)
        and time.monotonic() - early.started < _MAX_AGE
    ):
        return early.proc
    _stop(early.proc)
    return None


def cancel(worktree: Path, index: Path) -> None:
    """Stop the early diff-files for ``worktree`` and ``index``: the look will add
    everything (its stamps cannot say what changed), and it would take a core from it."""
    global _early
    early = _early
    if early is not None and early.worktree == str(worktree) and early.index == str(index):
        _early = None
        _stop(early.proc)


def location() -> Location | None:
    """The project (and task) ``begin`` found for the current directory, if it did."""
    found = _found
    return found[1] if found is not None and found[0] == os.getcwd() else None


def discard() -> None:
    """Stop the early diff-files nobody claimed (the command ended without a look), and
    forget the project found."""
    global _early, _found
    early, _early, _found = _early, None, None
    if early is not None:
        _stop(early.proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
