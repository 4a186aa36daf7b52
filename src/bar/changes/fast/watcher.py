"""The task's watcher: the kernel's watch on a worktree, kept between bar commands.

A step's ``bar run`` watches the worktree while its command runs (``bar.base.inotify``), so
its snapshot looks only at the paths that moved. Between steps nothing watched: the
next command had to stat every recorded file and every directory (``bar.changes.fast.rescan``) to
find the hand edits, the slowest part of a step on a large tree. So when a step ends,
its ``bar run`` hands the watch (the inotify descriptor itself, with its queued events)
to a small process of its own, the watcher (``bar.changes.fast.watcher_daemon``), which keeps
collecting the paths that change until a command asks.

The question is always relative to a recorded state: "what changed since the side
index was stamped at ``base``?" (``look``). The watcher answers with every path changed
since it last heard that the side index holds ``base``, or with "not known" when it
cannot be sure (another state was recorded behind its back, the kernel's queue
overflowed; for a look for hand edits, its last full look is older than
``BAR_WATCHER_VERIFY`` seconds, default ``VERIFY_S``): the command then stats everything,
as without a watcher, and says so (``settle`` with ``full``), which makes the watcher
sure again. Nothing is forgotten on a question: the paths are cleared only by the
``settle`` that follows the snapshot that looked at them, so a command that dies halfway
loses nothing. What inotify cannot see (a write through a memory map, through a hard
link from outside the worktree, by another machine on a network file system) is found
by that periodic full look, and recorded as a hand edit.

The watcher listens on ``watcher.sock`` in the task directory (0600 in a 0700
directory), answers no process confined by a step (``bar.base.peers``), and exits when it
has had no question for ``BAR_WATCHER_IDLE`` seconds (default ``IDLE_S``; 0: no watcher
is started), when the worktree or its socket goes away, or when asked (``stop``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.base import speed
from bar.base.socket_path import Address
from bar.git.index_files import identity

if TYPE_CHECKING:
    from bar.base.inotify import Handed, Seen, TreeWatch
    from bar.changes.fast.watches import Claim
    from bar.model.tasks import Task

IDLE_S = 900  # seconds without a question before a watcher exits
VERIFY_S = 300  # seconds after which a watcher asks for a full look again
# watchers per bar home at once: an eighth of the user's inotify instances (each holds one;
# editors need them too), 16 of the default 128; None: from the kernel's limit
MAX_RUNNING: int | None = None
TIMEOUT = 2.0  # seconds a command waits for an answer (a watcher just started included)
SOCKET = "watcher.sock"


class Sight:
    """A watcher's answer: ``paths`` changed since ``base`` (None: not known), as of
    the moment ``gen`` (what ``settle`` clears up to); ``watched``: the directories it
    watches, if not all (a partial watch: the others are the caller's to look at);
    ``staged``: those paths already added to a copy of the side index
    (``bar.changes.fast.staging``), if asked for and done."""

    __slots__ = ("base", "gen", "index", "paths", "staged", "watched")

    def __init__(
        self,
        index: Path,
        base: str,
        gen: int,
        paths: set[str] | None,
        staged: dict[str, Any] | None = None,
        watched: frozenset[str] | None = None,
    ) -> None:
        self.index, self.base, self.gen, self.paths = index, base, gen, paths
        self.staged, self.watched = staged, watched

    def seen(self) -> Seen | None:
        """What it saw, as a step's own watch says it (``bar.base.inotify.Seen``)."""
        from bar.base.inotify import Seen

        return None if self.paths is None else Seen(self.paths, self.watched)


def socket_path(index: Path) -> Path:
    """Where the watcher of the side index ``index`` (its task's) listens."""
    return index.parent / SOCKET


def _setting(name: str, default: str) -> str:
    """``BAR_WATCHER_<name>``; else ``BAR_LOOKOUT_<name>``, its name before the watcher
    was called so."""
    environ = os.environ
    return environ.get(f"BAR_WATCHER_{name}", environ.get(f"BAR_LOOKOUT_{name}", default))


def idle_seconds() -> int:
    """How long a watcher waits for a question (``BAR_WATCHER_IDLE``; 0: none runs)."""
    value = _setting("IDLE", "")
    return int(value) if value.isdigit() else IDLE_S


def stages() -> bool:
    """Whether a watcher stages the hand edits it sees (``BAR_WATCHER_STAGE=0``: not)."""
    return _setting("STAGE", "1") != "0"


def verify_seconds() -> int:
    """How old a watcher's last full look may be (``BAR_WATCHER_VERIFY``)."""
    value = _setting("VERIFY", "")
    return int(value) if value.isdigit() and int(value) > 0 else VERIFY_S


def running(index: Path) -> bool:
    """Whether a watcher may be listening for this side index (its socket exists) and
    may be asked (the speed layer is on: ``bar.base.speed``)."""
    return os.path.exists(socket_path(index)) and speed.fast()


def look(
    index: Path,
    base: str,
    *,
    stale_ok: bool = False,
    staged: bool = False,
) -> Sight | None:
    """What changed in the worktree since the side index was stamped at ``base``, as
    its watcher saw it; None when no watcher answers. ``stale_ok``: the paths even if
    the watcher's last full look is older than ``BAR_WATCHER_VERIFY`` (a step's own
    snapshots and checkpoints: what inotify cannot see is then found by the next
    command's look for hand edits, and recorded as one). ``staged``: and the staging of
    those paths, if the watcher made one with git in this process's environment."""
    request: dict[str, Any] = {"op": "look", "base": base, "stale_ok": stale_ok}
    if staged:
        from bar.git import git_env

        request["env"] = git_env()
    reply = _ask(index, request)
    if reply is None or not isinstance(reply.get("gen"), int):
        return None
    paths = reply.get("paths")
    found = {str(p) for p in paths} if isinstance(paths, list) else None
    done = reply.get("staged")
    watched = reply.get("watched")
    return Sight(
        index,
        base,
        reply["gen"],
        found,
        done if isinstance(done, dict) else None,
        frozenset(map(str, watched)) if isinstance(watched, list) else None,
    )


def settle(sight: Sight, base: str, *, full: bool, keep: Sequence[str] = ()) -> None:
    """Tell the watcher that the side index now holds ``base``, taken by a snapshot that
    looked at the paths ``sight`` named (``full``: at every file, whatever it named);
    ``keep``: paths it named that the snapshot left out (excluded, or unreadable): they
    are reported again."""
    _tell(
        sight.index,
        {
            "op": "settle",
            "from": None if full else sight.base,
            "gen": sight.gen,
            "base": base,
            "keep": list(keep),
        },
    )


def rebase(index: Path, was: str, base: str) -> None:
    """The side index went from ``was`` to ``base`` by a restore, which wrote the side
    index and the files itself (the watcher saw those writes: it keeps them)."""
    if running(index):
        _tell(index, {"op": "settle", "from": was, "gen": -1, "base": base})


def forget(index: Path, sight: Sight, paths: Sequence[str]) -> None:
    """Tell the watcher to drop these paths if nothing changed them after ``sight``
    (bar's own writes, checked: ``bar.changes.fast.restored.forget_written``)."""
    _tell(index, {"op": "forget", "gen": sight.gen, "paths": list(paths)})


def stop(index: Path) -> None:
    """Ask the watcher of this side index to exit (if one runs)."""
    if os.path.exists(socket_path(index)):
        _tell(index, {"op": "exit"})


def stop_all(home: Path) -> int:
    """Ask every watcher under the bar home ``home`` to exit; how many were asked."""
    found = list(home.glob(f"projects/*/tasks/*/{SOCKET}"))
    for sock in found:
        _tell(sock.parent / "index", {"op": "exit"})
    return len(found)


def status(index: Path) -> dict[str, Any] | None:
    """What the watcher says of itself (pid, base, whether it is sure, how many
    directories it watches, how many paths it holds); None if none answers."""
    return _ask(index, {"op": "status"})


def keep_watching(task: Task, watch: TreeWatch, age: float, claim: Claim) -> bool:
    """Hand the watch of the step that just ended to a new watcher, if it is sure of
    what it saw and the side index holds the state the ledger recorded last (``age``:
    seconds since the step's look for hand edits, its last full look). The watcher takes
    the step's ``claim`` on bar's watches with it. True if it took them (the caller no
    longer owns the watch)."""
    from bar.base import peers
    from bar.changes.fast import stamps

    if idle_seconds() == 0 or os.environ.get("BAR_STEP_ID") or not watch.sure or not speed.fast():
        return False
    if peers.no_new_privs(os.getpid()):
        return False  # it could not tell a confined caller from this one (``bar.base.peers``)
    others, most = _others(task.index), max_running()
    if others >= most:
        reason = f"{others} other tasks' watchers run already (at most {most})"
        _note_mode(task.index, {"mode": "scanning", "reason": reason})
        return False
    record = stamps.noted(task.index)
    if record is None or record.get("index") != identity(task.index):
        return False
    if record.get("partial") is True:
        _note_mode(task.index, {"mode": "scanning", "reason": stamps.PARTIAL})
        return False  # (every look is whole: a watch would tell them nothing)
    base = record.get("commit")
    if not isinstance(base, str) or base != task.recorded_snapshot():
        return False
    given = watch.hand_over()
    if given is None:
        return False
    pid = hand_over(task.index, task.worktree, base, given, age, claim)
    for fd in (given.fd, given.marks_fd):  # the watcher has its own copies, if it started
        if fd >= 0:
            os.close(fd)
    if pid is None:
        return False
    claim.hand_to(pid)
    found = {
        "mode": "partial" if given.partial else "watching",
        "dirs": len(given.dirs) + len(given.marks),
        "marks": len(given.marks),
    }
    _note_mode(task.index, found)
    return True


def max_running() -> int:
    """How many watchers may run at once under one bar home (``MAX_RUNNING``)."""
    if MAX_RUNNING is not None:
        return MAX_RUNNING
    try:
        with open("/proc/sys/fs/inotify/max_user_instances", "rb") as f:
            return max(1, int(f.read()) // 8)
    except (OSError, ValueError):
        return 8


def claim_for(task: Task) -> Claim:
    """The step's share of bar's watches (``bar.changes.fast.watches``), enough for the
    directories of the task's last snapshot if the budget has that many left; why a
    task's worktree is not watched at all is noted for ``bar status``."""
    from bar.changes.fast import stamps, watches

    dirs = stamps.stamped_dirs(task.index)
    if dirs is None or not speed.fast():
        return watches.Claim(0, None)
    claim = watches.claim(len(dirs))
    if claim.granted + claim.marks == 0:
        total, marks = watches.budget(), watches.mark_budget()
        reason = (
            f"bar's {total:,} inotify watches and {marks:,} fanotify marks are all held"
            " by other tasks"
            if total and marks
            else f"bar's {total:,} inotify watches are all held by other tasks (and it may"
            " hold no fanotify mark: BAR_MARKS=0, or a kernel before Linux 5.13)"
            if total
            else "bar may hold no inotify watch (BAR_WATCHES=0, or no inotify here)"
        )
        _note_mode(task.index, {"mode": "scanning", "reason": reason})
    return claim


def _others(index: Path) -> int:
    """How many other tasks' watchers run under this bar home."""
    from bar.store.layout import projects_dir

    mine = socket_path(index)
    return sum(1 for p in projects_dir().glob(f"*/tasks/*/{SOCKET}") if p != mine)


MODE_FILE = "watch.json"


def _note_mode(index: Path, mode: dict[str, Any]) -> None:
    """Say for ``bar status`` whether the task's worktree is watched between commands,
    and if not, why (``mode``)."""
    from bar.store.files import write_text_atomic

    with contextlib.suppress(OSError):
        write_text_atomic(index.parent / MODE_FILE, json.dumps(mode) + "\n")


def mode(index: Path) -> dict[str, Any]:
    """How the task's worktree is looked at between commands: ``watching`` (its watcher
    answers: ``dirs`` watched, ``pid``, and whether it is ``sure`` yet: until the next
    command's full look, it is not), ``partial`` (the same, but bar's share of inotify
    watches covers only ``dirs`` of the worktree's directories: the other ``scanned``
    ones are statted by each command) or ``scanning`` (every file is statted, with the
    ``reason`` when one is known)."""
    from bar.changes.fast import stamps

    if (stamps.noted(index) or {}).get("partial") is True and speed.fast():
        return {"mode": "scanning", "reason": stamps.PARTIAL}
    if running(index):
        said = _ask(index, {"op": "status"})
        if said is not None:
            found: dict[str, Any] = {
                "mode": "partial" if said.get("partial") is True else "watching",
                "dirs": said.get("watched"),
                "marks": said.get("marked", 0),
                "pid": said.get("pid"),
                "sure": said.get("sure") is True,
            }
            if found["mode"] == "partial":
                found["scanned"] = _unwatched(index, said)
            return found
    try:
        noted = json.loads((index.parent / MODE_FILE).read_text())
    except (OSError, ValueError):
        noted = None
    reason = noted.get("reason") if isinstance(noted, dict) else None
    if not isinstance(reason, str):
        reason = "no watcher is running (one starts when a step ends, and stops when idle)"
    if not speed.fast():
        reason = "the speed layer is off (BAR_FAST=0 or speed.fast: false)"
    return {"mode": "scanning", "reason": reason}


def _unwatched(index: Path, said: dict[str, Any]) -> int | None:
    """How many directories of the last snapshot a partial watcher leaves to be
    statted (None: not known)."""
    from bar.changes.fast import stamps

    dirs = stamps.stamped_dirs(index)
    watched = said.get("watched")
    if dirs is None or not isinstance(watched, int):
        return None
    return max(0, len(dirs) - watched)


def hand_over(
    index: Path,
    worktree: Path,
    base: str,
    handed: Handed,
    age: float,
    claim: Claim,
) -> int | None:
    """Start a watcher for the side index ``index`` (of ``worktree``, stamped at
    ``base``) with the kernel's watch ``handed`` over by a step (which holds ``claim``:
    how many watches and marks it may use), whose last full look of the worktree was
    ``age`` seconds ago. The socket is bound here, so that it exists as soon as this
    returns (a question asked before the watcher has started waits in the socket's
    queue). Its pid; None if it could not start."""
    folder = index.parent
    sock_file = folder / SOCKET
    spare = folder / f".{SOCKET}.{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    state_fd = -1
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spare)
        address = Address(str(spare))
        try:
            old = os.umask(0o177)
            try:
                listener.bind(address.name)
            finally:
                os.umask(old)
        finally:
            address.close()
        listener.listen(64)
        state = {
            "root": str(worktree),
            "index": str(index),
            "socket": str(sock_file),
            "base": base,
            "fd": handed.fd,
            "marks_fd": handed.marks_fd,
            "listener": listener.fileno(),
            "idle": idle_seconds(),
            "verify": verify_seconds(),
            "age": age,
            "limit": claim.granted,
            "mark_limit": claim.marks,
            "partial": handed.partial,
            "dirs": handed.dirs,
            "marks": handed.marks,
            "mounts": handed.mounts,
            **_staging_state(index, worktree),
        }
        # handed over in memory, not in a file: nothing of it is left in the task
        # directory for a copy of it to trip on, whatever happens to either process
        state_fd = os.memfd_create("bar-watcher-state")
        os.write(state_fd, json.dumps(state).encode())
        os.lseek(state_fd, 0, os.SEEK_SET)
        os.replace(spare, sock_file)  # listening already: a question waits for it
        flags = ["-E", "-P"] if sys.version_info >= (3, 11) else ["-E"]
        started = subprocess.Popen(
            [sys.executable, *flags, "-m", "bar.changes.watching", str(state_fd)],
            cwd=folder,
            env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=tuple(
                fd for fd in (handed.fd, handed.marks_fd, listener.fileno(), state_fd) if fd >= 0
            ),
            start_new_session=True,
        )
        return started.pid
    except (OSError, AttributeError):  # (AttributeError: no memfd_create here)
        for leftover in (spare, sock_file):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        return None
    finally:
        listener.close()
        if state_fd >= 0:
            os.close(state_fd)


def _staging_state(index: Path, worktree: Path) -> dict[str, Any]:
    """What a watcher needs to stage hand edits as a command would (``bar.changes.fast.staging``):
    the git directories bar pinned for the task, the environment its git runs with."""
    from bar import git
    from bar.git import git_env

    pinned = git.pinned_env(worktree)
    own = git.index_env(index)  # (its own git directory, once made: ``git.pin_own``)
    dirs = [own["GIT_DIR"], own["GIT_COMMON_DIR"]] if "GIT_DIR" in own else None
    return {
        "stage": stages() and dirs is not None,
        "pinned": [pinned["GIT_DIR"], pinned["GIT_COMMON_DIR"]] if "GIT_DIR" in pinned else None,
        "own": dirs,
        "env": git_env(),
    }


def _connect(index: Path) -> socket.socket | None:
    sock_file = socket_path(index)
    address = Address(str(sock_file))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT)
        sock.connect(address.name)
        return sock
    except FileNotFoundError:
        sock.close()
        return None
    except OSError:  # refused: the watcher died and left its socket; or it hangs
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(sock_file)  # (a hung watcher that wakes finds it gone: it exits)
        return None
    finally:
        address.close()


def _ask(index: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    sock = _connect(index)
    if sock is None:
        return None
    try:
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(socket_path(index))  # a watcher that cannot answer is not asked again
        return None
    finally:
        sock.close()
    return reply if isinstance(reply, dict) else None


def _tell(index: Path, request: dict[str, Any]) -> None:
    """Send without waiting for the answer (the watcher takes requests in order)."""
    sock = _connect(index)
    if sock is None:
        return
    try:
        sock.sendall(json.dumps(request).encode() + b"\n")
    except OSError:
        pass
    finally:
        sock.close()
