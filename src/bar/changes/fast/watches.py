"""One budget of inotify watches for all of bar, and one of fanotify marks: never more than
half of the user's.

Each directory a ``TreeWatch`` watches costs one of the user's inotify watches
(``fs.inotify.max_user_watches``). Editors, language servers and ``git fsmonitor`` need
them too, and they fail when the user runs out. So every holder of bar's watches (a
step's ``bar run``, a task's watcher) first *claims* its share: a file in
``$BAR_HOME/watches/`` named by its process, holding how many watches it may use. The
claims are added up under a lock; what is left of the budget is what a new claim is
granted. A holder that asks for more than is left gets what is left, and watches that
many directories: its watch is *partial*, and the directories it leaves unwatched are
looked at by their ctimes (``bar.changes.fast.rescan``), so the answer stays exact.

The user's fanotify marks (``fs.fanotify.max_user_marks``, ``bar.base.fanotify``) are
a second budget, claimed the same way: a holder granted fewer watches than it asked for
is granted marks for the rest, from half of the user's marks. A claim's file holds both
numbers.

A claim is given up when its holder closes its watch, handed on with the watch to the
watcher that takes it over, and forgotten when its process is gone (its file names the
process by pid and start time, so a pid used again does not keep it alive).

``BAR_WATCHES`` sets the budget (a number of watches; 0: bar watches nothing, with
marks neither, every command stats instead); by default it is half the user's limit.
``BAR_MARKS`` sets the budget of marks (0: none).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

_DIR = "watches"
HEADROOM = 1000  # watches a claim asks for beyond its directories: for new ones


def budget() -> int:
    """How many inotify watches bar's holders may use together."""
    return _half("BAR_WATCHES", "/proc/sys/fs/inotify/max_user_watches")


def mark_budget() -> int:
    """How many fanotify marks bar's holders may use together (0 where the kernel has
    none for users: before Linux 5.13)."""
    if budget() == 0:
        return 0
    return _half("BAR_MARKS", "/proc/sys/fs/fanotify/max_user_marks")


def _half(variable: str, limit: str) -> int:
    value = os.environ.get(variable, "")
    if value.isdigit():
        return int(value)
    try:
        with open(limit, "rb") as f:
            return int(f.read()) // 2
    except (OSError, ValueError):
        return 0


def _folder() -> Path:
    from bar.store.layout import bar_home

    return bar_home() / _DIR


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), which tells it from a later
    process given the same pid; None if it is gone."""
    from bar.sandbox.leftovers import stat_fields

    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] == b"Z":
        return None
    return fields[19].decode()


def _name(pid: int) -> str | None:
    started = _started(pid)
    return None if started is None else f"{pid}.{started}"


def _held(folder: Path, mine: str | None) -> tuple[int, int]:
    """The watches and the marks claimed by live holders but ``mine``; the claims of
    dead ones are removed."""
    watches = marks = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0, 0
    for entry in entries:
        if entry.name == mine or entry.name.startswith("."):
            continue
        pid, _, started = entry.name.partition(".")
        if not pid.isdigit() or _started(int(pid)) != started:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)  # its holder is gone
            continue
        try:
            with open(entry.path, "rb") as f:
                said = f.read(64).split()
            watches += int(said[0]) if said else 0
            marks += int(said[1]) if len(said) > 1 else 0
        except (OSError, ValueError):
            continue
    return watches, marks


class Claim:
    """A share of the budgets: ``granted`` watches and ``marks`` marks, held by this
    process until ``release`` (or ``hand_to`` another)."""

    def __init__(self, granted: int, path: Path | None, marks: int = 0) -> None:
        self.granted = granted
        self.marks = marks
        self._path = path

    def release(self) -> None:
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)
            self._path = None

    def hand_to(self, pid: int) -> None:
        """The process ``pid`` holds the watches from now on (a watcher that took them).
        Renamed under the lock: a claim counting the others between its listing of the
        folder and its read of this file would miss it, and grant its watches again."""
        name = _name(pid)
        if self._path is None or name is None:
            return
        with contextlib.suppress(OSError), _locked(self._path.parent):
            os.replace(self._path, self._path.with_name(name))
        self._path = None


def claim(wanted: int) -> Claim:
    """Claim up to ``wanted`` watches (plus some for directories that appear) from what
    the budget has left, and marks for what it could not grant; the claim grants what it
    could, 0 of each when nothing is left."""
    folder = _folder()
    mine = _name(os.getpid())
    total = budget()
    if mine is None or total <= 0:
        return Claim(0, None)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _locked(folder):
            watches, marks = _held(folder, mine)
            granted = max(0, min(wanted + HEADROOM, total - watches))
            short = wanted + HEADROOM - granted
            marked = max(0, min(short, mark_budget() - marks)) if short > 0 else 0
            if granted + marked == 0:
                return Claim(0, None)
            path = folder / mine
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, f"{granted} {marked}\n".encode())
            finally:
                os.close(fd)
            return Claim(granted, path, marked)
    except OSError:
        return Claim(0, None)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The folder's lock, held by one claim or one hand-over at a time."""
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (and the lock with it)


def held() -> tuple[int, int]:
    """The watches and the marks all of bar's live holders claim now."""
    return _held(_folder(), None)
