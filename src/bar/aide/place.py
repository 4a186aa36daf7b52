"""Where aide's clients look: ``.aide/`` in the task's worktree.

aide keeps its files in the project it works on (reference 003 §1.1:
``.aide/decisions/pending.json`` and ``.aide/decisions/<session_id>.json``; 004 §3.1:
``.aide/flow-status.json``), and its front ends and agents find them there, relative to
the directory they work in. bar keeps its own in the task directory, where no step can
write them (``bar.aide.decide``, ``bar.aide.flow``), and a copy of each here, in the
task's worktree: whenever bar writes one of its own, it writes the copy too (``copy``,
``copy_flow``); a worktree made again gets them all (``prepare`` then ``sync``).

What aide's web server writes here, the person's answer ``<session_id>.json``, is
read back (``read``) and taken by ``bar.aide.answers``, which decides whether it can be
the person's.

The copies are bookkeeping, never a change of the task's: ``.aide/.gitignore`` (written
when there is none) keeps them out of git's view, the agent's ``git add -A`` included,
and no snapshot takes them in any case (``bar.store.layout.AIDE_FILES``,
``bar.history.side_index``). A step sees ``.aide/`` read-only (``bar.sandbox.plan``).

The worktree is the step's to write: every byte here is written, read and removed
through ``bar.base.beneath``, which follows no link on the way; where a link or a file
stands in place of ``.aide`` or ``.aide/decisions``, bar writes no copy there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bar.base.beneath import open_beneath, replace_at, unlink_beneath
from bar.base.notices import warn
from bar.model.tasks import Task
from bar.store.layout import AIDE_DIR

DECISIONS = f"{AIDE_DIR}/decisions"
FLOW_STATUS = f"{AIDE_DIR}/flow-status.json"
# what keeps the copies out of git's view (itself included); a .gitignore already there
# is the repository's, never rewritten
IGNORE = (
    b"# bar keeps aide's decisions and flow here for aide's clients: bookkeeping,\n"
    b"# never part of the task's work (docs/decide-flow.md)\n"
    b"/decisions/\n/flow-status.json\n/.gitignore\n"
)
_DIR = os.O_RDONLY | os.O_DIRECTORY
# a file bar makes in the worktree: never through a link, never an open that waits
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# a file larger than this is no decision of a person's (and is not read whole)
LARGEST = 16 << 20


def root(task: Task) -> Path:
    """``.aide`` in the task's worktree."""
    return task.worktree / AIDE_DIR


def decisions(task: Task) -> Path:
    """Where aide's clients find the decisions: ``.aide/decisions`` in the worktree."""
    return task.worktree / DECISIONS


def flow_status(task: Task) -> Path:
    """Where aide's clients find the flow: ``.aide/flow-status.json`` in the worktree."""
    return task.worktree / FLOW_STATUS


def _store(task: Task) -> Path:
    return task.dir / "decisions"  # (``bar.aide.decide.directory``)


def prepare(task: Task) -> bool:
    """``.aide`` and ``.aide/decisions`` directories of their own in the worktree (made
    where missing, ``.aide/.gitignore`` with them), and every copy written if ``.aide``
    had to be made (a worktree made again). False where that cannot be: no worktree, or
    a link or a file stands there."""
    if not task.worktree.is_dir():
        return False
    try:
        made = _make(task.worktree)
    except OSError:
        return False
    if made:
        _write_all(task)
    return True


def _make(worktree: Path) -> bool:
    """``.aide``, ``.aide/decisions`` and ``.aide/.gitignore`` in ``worktree``, each made
    where missing, one directory at a time and no link followed (a link or a file in
    place of a directory is an ``OSError``); True if ``.aide`` had to be made."""
    top = os.open(worktree, _DIR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        made = _mkdir_at(top, AIDE_DIR)
        aide = os.open(AIDE_DIR, _DIR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
    finally:
        os.close(top)
    try:
        _mkdir_at(aide, DECISIONS.rpartition("/")[2])
        try:
            out = os.open(".gitignore", _NEW, 0o644, dir_fd=aide)
        except FileExistsError:
            return made
        with open(out, "wb") as ignore:
            ignore.write(IGNORE)
    finally:
        os.close(aide)
    return made


def _mkdir_at(fd: int, name: str) -> bool:
    """Make the directory ``name`` in ``fd`` if it is not there; True if made."""
    try:
        os.mkdir(name, 0o755, dir_fd=fd)
    except FileExistsError:
        os.close(os.open(name, _DIR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd))  # (a link: ELOOP)
        return False
    return True


def read(task: Task, rel: str) -> bytes | None:
    """The bytes of the regular file ``rel`` of ``.aide`` (``decisions/X.json``), reached
    without following a link; None if there is no such file (or one over ``LARGEST``)."""
    try:
        fd = open_beneath(task.worktree, f"{AIDE_DIR}/{rel}", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _read_fd(fd: int) -> bytes | None:
    """What the open file ``fd`` holds, if it is a regular file of at most ``LARGEST``."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > LARGEST:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None


def read_json(task: Task, rel: str) -> dict[str, Any] | None:
    """``read``, as a JSON object (None: no such file, or no JSON object in it)."""
    data = read(task, rel)
    if data is None:
        return None
    try:
        found = json.loads(data)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def waiting(task: Task) -> str | None:
    """The session id of the latest submission if an answer to it lies in
    ``.aide/decisions`` and bar has none yet (aide's web server wrote it): a cheap look,
    made before every command changes the task; ``bar.aide.answers`` takes it."""
    try:
        latest = json.loads((_store(task) / "pending.json").read_bytes())
    except (OSError, ValueError):
        return None
    meta = latest.get("_meta") if isinstance(latest, dict) else None
    sid = meta.get("session_id") if isinstance(meta, dict) else None
    if not isinstance(sid, str) or not sid or "/" in sid or sid.startswith("."):
        return None
    if (_store(task) / f"{sid}.json").exists() or read(task, f"decisions/{sid}.json") is None:
        return None
    return sid


def names(task: Task) -> list[str]:
    """The names of the JSON files in ``.aide/decisions`` ([] where there is none)."""
    try:
        fd = open_beneath(task.worktree, DECISIONS, _DIR)
    except OSError:
        return []
    try:
        return sorted(n for n in os.listdir(fd) if n.endswith(".json") and not n.startswith("."))
    finally:
        os.close(fd)


def _put(worktree: Path, rel: str, data: bytes | None) -> None:
    """Make ``rel`` (beneath ``worktree``) hold ``data``, unless it holds that already
    (``replace_at``); None: removed (if there)."""
    folder, _, name = rel.rpartition("/")
    fd = open_beneath(worktree, folder, _DIR)
    try:
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
            return
        with contextlib.suppress(OSError):
            held = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=fd)
            try:
                if _read_fd(held) == data:
                    return
            finally:
                os.close(held)
        replace_at(fd, name, data)
    finally:
        os.close(fd)


def copy(task: Task, name: str) -> None:
    """Copy the task's decision file ``name`` (``pending.json``, ``<session_id>.json``)
    to ``.aide/decisions``: removed there if bar has none. Where there is no place for
    the copy (no worktree, a link in the way, a step's read-only view), nothing is
    written: the next ``sync`` writes it."""
    with _quietly():
        if prepare(task):
            _put(task.worktree, f"{DECISIONS}/{name}", _own(_store(task) / name))


def copy_flow(task: Task) -> None:
    """Copy the task's ``flow-status.json`` to ``.aide/flow-status.json``."""
    with _quietly():
        if prepare(task) and (data := _own(task.dir / "flow-status.json")) is not None:
            _put(task.worktree, FLOW_STATUS, data)


def sync(task: Task) -> None:
    """Every copy written where it differs from bar's own: ``pending.json``, each
    answered decision and ``flow-status.json``. (A file bar does not have, an answer aide's
    web server wrote say, is left as it is.)"""
    if prepare(task):
        _write_all(task)


def _write_all(task: Task) -> None:
    copies: list[tuple[str, bytes | None]] = []
    with _quietly():
        try:
            own = sorted(
                n for n in os.listdir(_store(task)) if n.endswith(".json") and not n.startswith(".")
            )
        except FileNotFoundError:
            own = []
        copies += ((f"{DECISIONS}/{name}", _own(_store(task) / name)) for name in own)
        if (flow := _own(task.dir / "flow-status.json")) is not None:
            copies.append((FLOW_STATUS, flow))
    for rel, data in copies:
        with _quietly():
            _put(task.worktree, rel, data)


def _own(path: Path) -> bytes | None:
    """What bar's own file ``path`` holds (None: there is none)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def remove(task: Task, name: str) -> None:
    """Remove ``.aide/decisions/<name>`` (if there)."""
    with _quietly(), contextlib.suppress(FileNotFoundError):
        unlink_beneath(task.worktree, f"{DECISIONS}/{name}")


@contextlib.contextmanager
def _quietly() -> Iterator[None]:
    """The copies are a courtesy to aide's clients, never a reason for bar's own write to
    fail: a link in the way, a full disk leave the copy as it was (said), a step's
    read-only view too (silently), and the next write or ``sync`` tries again."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EROFS:
            warn(f"aide's copy in {AIDE_DIR}/ was not written: {exc}")
