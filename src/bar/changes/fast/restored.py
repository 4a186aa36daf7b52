"""The directories a restore wrote, stamped with the ctimes it gave them.

A restore (``git read-tree -m -u <now> <target>`` on the side index) writes files, and so
moves the ctime of every directory it adds, removes or rewrites an entry in. Stamped the
usual way, those directories all fall in the racy window (their ctime is newer than the
moment the restore began), and the next command rescans them with a ``git add`` of their
entries: on a large repository that and the ``write-tree`` after it cost more than the
restore itself.

A directory is racy because something else may have changed it while bar looked, and
its ctime would not show it. For the directories the restore wrote bar knows what
should be in them: what was there before (listed before the restore, while the
directory's ctime was still the one stamped, so every entry was accounted for) less
the entries the restore removes, plus those it adds (``git diff-tree`` between the two
trees). After the restore each such directory is listed again. Where it holds exactly
that, nothing else added, removed or renamed an entry; where its ctime is also older
than the kernel's clock at the moment of the look, any later change moves it. Such a
directory is stamped with that ctime and is not rescanned. Any other outcome (an entry
nobody expected, a clock that had not moved on) leaves it racy, as before. Edits of
files in place are not what directory ctimes are for: ``git diff-files`` sees those.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

from bar import git
from bar.changes.fast import watcher
from bar.git.index_files import keep_private

# how much older than the clock a ctime must be (file systems that keep times coarser
# than the nanosecond round them down)
_MARGIN_NS = 1_000_000
_WAIT_NS = 50_000_000  # the longest bar waits for the clock to move past a ctime


def coarse_clock_ns() -> int:
    """The clock the kernel stamps files with (Linux: the coarse real-time clock, which
    lags the fine one by up to a tick); elsewhere a lower bound of it."""
    if sys.platform == "linux":
        return time.clock_gettime_ns(5)  # CLOCK_REALTIME_COARSE (not named by Python)
    return time.time_ns() - _WAIT_NS


class Restore:
    """A restore about to run: ``diff`` (``diff-tree -r -t -z`` between the trees) and,
    per directory it writes, the entries it must hold afterwards (None: not known)."""

    __slots__ = ("diff", "expected")

    def __init__(self, diff: bytes | None, expected: dict[str, set[str] | None]) -> None:
        self.diff = diff
        self.expected = expected


def before(worktree: Path, old_tree: str, new_tree: str, stamped: dict[str, int]) -> Restore:
    """What a restore from ``old_tree`` to ``new_tree`` will write. ``stamped``: the
    ctimes of the stamps of ``old_tree`` that are not racy (directory -> ctime)."""
    res = git.diff_trees(worktree, old_tree, new_tree, check=False)
    if res.returncode != 0:
        return Restore(None, {})
    added: dict[str, set[str]] = {}
    removed: dict[str, set[str]] = {}
    fields = res.stdout.split(b"\0")
    for head, raw_path in zip(fields[::2], fields[1::2], strict=False):
        old_mode, new_mode = head[1:7], head[8:14]
        parent, _, name = raw_path.decode("utf-8", "surrogateescape").rpartition("/")
        added.setdefault(parent, set())
        removed.setdefault(parent, set())
        if new_mode == b"000000":
            removed[parent].add(name)
        elif old_mode == b"000000":
            added[parent].add(name)
    prefix = str(worktree) + os.sep
    expected: dict[str, set[str] | None] = {}
    for parent in added:
        full = prefix + parent if parent else str(worktree)
        try:
            names = set(os.listdir(full))  # listed first: an entry made after moves the ctime
            st = os.lstat(full)
        except FileNotFoundError:
            # a directory the restore makes: nothing may be in it but what it writes
            expected[parent] = None if parent in stamped else set(added[parent])
            continue
        except OSError:
            expected[parent] = None
            continue
        same = stat.S_ISDIR(st.st_mode) and stamped.get(parent) == st.st_ctime_ns
        expected[parent] = (names - removed[parent]) | added[parent] if same else None
    return Restore(res.stdout, expected)


def moves_gitlinks(restore: Restore) -> bool:
    """Whether the restore adds, removes or moves a gitlink. git writes nothing inside a
    nested repository (it is foreign): one the target lacks stays on disk, one it holds
    is only an empty directory where the repository is gone, and one put back at another
    commit is where its repository's HEAD is. The worktree then does not hold the target
    exactly, and the snapshot that follows must look for itself."""
    if restore.diff is None:
        return True
    fields = restore.diff.split(b"\0")
    return any(b" 160000 " in b" " + head[1:14] + b" " for head in fields[::2])


def after(worktree: Path, restore: Restore) -> dict[str, int]:
    """The ctimes of the directories the restore wrote that hold exactly what was
    expected, each older than the kernel's clock when it was looked at. Waits (briefly)
    for the clock to move past the restore's last writes."""
    prefix = str(worktree) + os.sep
    pending = {p: want for p, want in restore.expected.items() if want is not None}
    found: dict[str, int] = {}
    give_up = time.monotonic_ns() + _WAIT_NS
    while pending:
        clock = coarse_clock_ns()
        late: dict[str, set[str]] = {}
        newest = 0
        for parent, want in pending.items():
            full = prefix + parent if parent else str(worktree)
            try:
                st = os.lstat(full)  # the ctime first: a change after it shows in the list
                names = set(os.listdir(full))
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or names != want:
                continue
            if st.st_ctime_ns + _MARGIN_NS < clock:
                found[parent] = st.st_ctime_ns
            else:
                late[parent] = want
                newest = max(newest, st.st_ctime_ns)
        pending = late
        wait = newest + _MARGIN_NS - coarse_clock_ns() + 1
        if not pending or time.monotonic_ns() + wait > give_up:
            break
        time.sleep(max(wait, 1_000_000) / 1e9)
    return found


_MAX_FORGET = 2000  # written paths checked one by one at most; beyond, the watcher keeps them


def forget_written(
    worktree: Path, index: Path, restore: Restore, settled: dict[str, int], sight: watcher.Sight
) -> None:
    """Tell the task's watcher which of the paths the restore wrote it need not report:
    its own writes are not changes to record. ``sight``: a question asked right after
    the restore (its events collected, its new directories watched from then on),
    before ``after`` listed them. A file counts only if ``git diff-files`` (run now, on
    the side index the restore wrote) finds it as written; a path removed, only if it is
    still gone; a directory it made, only if ``after`` found it holding exactly what was
    written. Anything changed since the question is reported anyway (a later
    generation)."""
    if restore.diff is None or sight.paths is None:
        return
    files: list[str] = []
    others: list[str] = []
    fields = restore.diff.split(b"\0")
    for head, raw_path in zip(fields[::2], fields[1::2], strict=False):
        path = raw_path.decode("utf-8", "surrogateescape")
        if path not in sight.paths:
            continue
        new_mode = head[8:14]
        if new_mode == b"000000":
            if not os.path.lexists(os.path.join(worktree, path)):
                others.append(path)
        elif new_mode == b"040000":
            if path in settled:
                others.append(path)
        elif new_mode != b"160000":
            files.append(path)
    if len(files) > _MAX_FORGET:
        files = []
    if files:
        res = git.git(
            worktree,
            "diff-files",
            "--name-only",
            "-z",
            "--",
            *[f":(top,literal){f}" for f in files],
            env=git.index_env(index),
            check=False,
        )
        if res.returncode != 0:
            files = []
        else:
            differ = {p.decode("utf-8", "surrogateescape") for p in res.stdout.split(b"\0") if p}
            files = [f for f in files if f not in differ]
        keep_private(index)
    if files or others:
        watcher.forget(index, sight, files + others)
