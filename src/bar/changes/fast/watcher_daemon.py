"""The watcher process (``bar.changes.fast.watcher``): collects the paths that change in a task's
worktree between bar commands, and answers the commands that ask.

Started by ``bar.changes.fast.watcher.hand_over`` as ``python -m bar.changes.watching FD``, with the
step's inotify descriptor, its listening socket and its state (a memory file, ``FD``)
inherited. It runs outside any sandbox and writes nothing in the worktree: it reads the
kernel's events, the side index's stamps and the HEADs of nested repositories, and
answers on its socket. While no command asks, it stages the hand edits it saw into a
copy of the side index (``bar.changes.fast.staging``), with the git directories bar pinned for the
task and the environment of the ``bar run`` that handed the watch over: the staging itself
is the record's (``Stage``, handed in by the entry, ``bar.changes.watching``). A staging
runs on a thread of its own (``_Flight``), so the watcher goes on answering meanwhile: a
command that asks while git adds (a clean filter may take seconds) is answered at once,
without the staging, and adds by itself; the staging then stops at its next stage and
is thrown away.

Each path it collects is tagged with a generation: a ``look`` answers every path
collected since the side index was last settled at the state asked about, then starts a
new generation; the ``settle`` that follows clears only the paths of the generations
that look answered, so a path that changed again meanwhile is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar import git
from bar.base import peers
from bar.base.inotify import Handed, TreeWatch
from bar.changes.fast import staging, stamps
from bar.changes.fast.resident import file_id

_MAX_PATHS = 200_000  # more changed paths than this: a full look is cheaper
_WAKE_MS = 5_000  # how often it checks that its worktree and socket are still there
_RETRY_S = 1.0  # a staging refused for the clock is tried again this much later
_CLOSE_S = 10.0  # how long an exiting watcher waits for its staging under way

# (worktree, side index, the state it was stamped at, changed paths, the copy's name,
# whether a command took the task meanwhile) -> what a command needs to take the
# staging, or None (``bar.history.ahead.stage``)
Stage = Callable[[Path, Path, str, set[str], str, Callable[[], bool]], "dict[str, Any] | None"]


class _Flight:
    """A staging under way on a thread of its own, with what the watcher knew when it
    began (to tell, once it lands, whether anything changed meanwhile). The thread writes
    a byte to ``wake`` when it is done, which the watcher's poll waits on."""

    def __init__(
        self,
        work: Callable[[], dict[str, Any] | None],
        wake: int,
        *,
        name: str,
        base: str,
        paths: frozenset[str],
        moved: int,
        heads: dict[str, str | None],
    ) -> None:
        self.name, self.base, self.paths, self.moved, self.heads = name, base, paths, moved, heads
        self.result: dict[str, Any] | None = None
        self.failed = False
        self._work, self._wake = work, wake
        self.thread = threading.Thread(target=self._run, name="staging", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self._work()
        except Exception:  # (whatever it was, the command adds by itself)
            self.failed = True
        finally:
            with contextlib.suppress(OSError):
                os.write(self._wake, b"\0")


def _mounts(said: object) -> list[tuple[int, str]] | None:
    """The mount points the step noted (``bar.base.mounts``), as the state carries them."""
    if not isinstance(said, list):
        return None
    return [(int(i), str(p)) for i, p in said]


class Watcher:
    def __init__(self, state: dict[str, Any], stage: Stage) -> None:
        self.stage = stage
        self.root = str(state["root"])
        self.index = Path(str(state["index"]))
        self.socket_file = str(state["socket"])
        self.idle = float(state["idle"])
        self.verify = float(state["verify"])
        handed = Handed(
            fd=int(state["fd"]),
            dirs={int(wd): str(rel) for wd, rel in dict(state["dirs"]).items()},
            marks_fd=int(state.get("marks_fd", -1)),
            marks={str(k): str(rel) for k, rel in dict(state.get("marks") or {}).items()},
            partial=state.get("partial") is True,
            mounts=_mounts(state.get("mounts")),
        )
        # (it watches no more directories than the claim it took over: ``bar.changes.fast.watches``)
        self.watch = TreeWatch.adopt(
            self.root,
            handed,
            limit=int(state["limit"]),
            marks=int(state.get("mark_limit", 0)),
        )
        self.listener = socket.socket(fileno=int(state["listener"]))
        self.poll = select.poll()
        self.polled: set[int] = set()
        self.base: str | None = str(state["base"])
        self.found: dict[str, int] = {}
        self.gen = 0
        self.lost_gen = -1  # the generation in which the kernel last lost events
        # every change since ``base`` was stamped is in ``found``: not to begin with,
        # since the step's watch began after its look for hand edits had begun to stat
        # (an edit in between is in neither), so the first command asked looks by itself
        self.sure = False
        # the last full look: the step's, which began ``age`` seconds before the hand-over
        self.verified = time.monotonic() - float(state.get("age", 0.0))
        self.last_question = time.monotonic()
        self.socket_id: tuple[int, int] | None = None
        self.root_id = file_id(self.root)
        self.heads: dict[str, str | None] = {}  # of the nested repositories
        self.folder = self.index.parent
        self.env = {str(k): str(v) for k, v in dict(state.get("env") or {}).items()}
        os.environ.clear()
        os.environ.update(self.env)  # (what its git runs with: the command's own)
        pinned, own = state.get("pinned"), state.get("own")
        if isinstance(pinned, list) and len(pinned) == 2:
            git.pin(Path(self.root), Path(pinned[0]), Path(pinned[1]))
        if isinstance(own, list) and len(own) == 2:
            git.pin_own(self.folder, Path(own[0]), Path(own[1]), Path(self.root))
        self.stages = bool(state.get("stage")) and bool(self.env)
        self.moved = 0  # how many times ``found`` grew from the kernel's events
        self.quiet = staging.QUIET_MS / 1000  # the stillness asked for before staging
        self.stage_at: float | None = None  # when to stage, if it stays still
        self.staged: dict[str, Any] | None = None
        self.staged_paths: frozenset[str] = frozenset()
        self.staged_heads: dict[str, str | None] = {}  # of the nested repositories, then
        self.stagings = 0
        self.retried = -1  # the count of changes (``moved``) a staging was tried again at
        self.flight: _Flight | None = None  # the staging under way
        self.wake, self.woken = os.pipe()  # (read, write): a staging landed
        os.set_blocking(self.wake, False)
        staging.leftovers(self.folder, keep=f"{staging.PREFIX}{os.getpid()}.")

    def serve(self) -> None:
        self._cover(self.base)
        self.socket_id = self._socket_id()
        poll = self.poll
        self._poll_new()
        poll.register(self.listener.fileno(), select.POLLIN)
        poll.register(self.wake, select.POLLIN)
        while True:
            now = time.monotonic()
            left = self.idle - (now - self.last_question)
            if left <= 0:
                return
            wait = min(left * 1000, _WAKE_MS)
            if self.stage_at is not None:
                wait = min(wait, max(0.0, (self.stage_at - now) * 1000))
            ready = {fd for fd, _ in poll.poll(int(wait) + 1)}
            if self.wake in ready:
                self._landed()
            if ready & self.polled:
                self._collect()
            elif not ready and self.stage_at is not None and time.monotonic() >= self.stage_at:
                self._stage()
            if not self.watch.sure or not self._still_here():
                return
            if self.listener.fileno() in ready and not self._answer_one():
                return

    def _poll_new(self) -> None:
        """Wait on each of the watch's descriptors: the fanotify group's too, once its
        first mark is made."""
        for fd in set(self.watch.filenos()) - self.polled:
            self.poll.register(fd, select.POLLIN)
            self.polled.add(fd)

    def _collect(self) -> None:
        changed = self.watch.drain()
        self._poll_new()
        if changed is None:
            self._lose()
            return
        if changed:
            self.moved += 1
            self._unstage()  # (of the paths as they were)
            if self.stages:
                self.stage_at = time.monotonic() + self.quiet
        for path in changed:
            self.found[path] = self.gen
        if len(self.found) > _MAX_PATHS:
            self._lose()

    def _lose(self) -> None:
        self.sure, self.lost_gen = False, self.gen
        self.moved += 1
        self._unstage()
        self.found.clear()

    def _stage(self) -> None:
        """Begin to stage what changed since ``base`` (``bar.changes.fast.staging``), on a
        thread of its own (``_landed`` takes it up when it is done); one at a time: a change
        during one is staged once it has landed."""
        self.stage_at = None
        if self.flight is not None:
            return  # (``_landed`` stages again: the one under way is thrown away)
        self._unstage()
        base, paths, moved = self.base, frozenset(self.found), self.moved
        if (
            not self.sure
            or self.watch.partial  # (what changed in the unwatched part is not known here)
            or base is None
            or not paths
            or len(paths) > staging.MAX_PATHS
            or time.monotonic() - self.verified >= self.verify
            or staging.busy(self.folder)
        ):
            return
        self.stagings += 1
        name = f"{staging.PREFIX}{os.getpid()}.{self.stagings}"
        root, index, folder, stage = Path(self.root), self.index, self.folder, self.stage
        self.flight = _Flight(
            lambda: stage(root, index, base, set(paths), name, lambda: staging.busy(folder)),
            self.woken,
            name=name,
            base=base,
            paths=paths,
            moved=moved,
            heads=self._nested_heads(),
        )

    def _landed(self) -> None:
        """Take up the staging that finished: it is answered from now on if the worktree
        stayed still while it ran (and the side index is still at the state it began
        from); else it is thrown away, and what changed is staged anew, after a longer
        stillness."""
        with contextlib.suppress(OSError):
            os.read(self.wake, 64)
        flight, self.flight = self.flight, None
        if flight is None:
            return
        flight.thread.join()  # (its work is done: it wrote the byte last)
        staged = flight.result
        if flight.failed:
            staging.discard(self.folder / flight.name)
            return
        if staged is None:
            # (a file changed in the second git began to add it is hashed again by the
            # command, which no staging does: tried once more when that second is past)
            if self.retried != flight.moved:
                self.retried = flight.moved
                self.stage_at = time.monotonic() + _RETRY_S
            elif self.moved != flight.moved:  # (changed meanwhile: staged anew)
                self.stage_at = time.monotonic() + self.quiet
            return
        self._collect()
        if (
            self.moved != flight.moved
            or frozenset(self.found) != flight.paths
            or self.base != flight.base
            or self._nested_heads() != flight.heads
        ):
            staging.discard(self.folder / flight.name)
            if self.moved != flight.moved:  # (a file that keeps changing: wait longer)
                self.quiet = min(self.quiet * 4, staging.MAX_QUIET_MS / 1000)
                self.stage_at = time.monotonic() + self.quiet
            return
        self.staged, self.staged_paths, self.staged_heads = staged, flight.paths, flight.heads

    def close(self) -> None:
        """Before it exits: the staging under way finished (``_CLOSE_S`` at most: a clean
        filter that never returns holds it for ever) and thrown away, as is the one it
        holds."""
        flight, self.flight = self.flight, None
        if flight is not None:
            flight.thread.join(_CLOSE_S)
            staging.discard(self.folder / flight.name)
        self._unstage()

    def _unstage(self) -> None:
        if self.staged is not None:
            staging.discard(self.folder / str(self.staged["file"]))
            self.staged = None

    def _still_here(self) -> bool:
        """Its worktree's root is still watched and still at its path, and its socket is
        still the one it listens on (not removed, nor replaced by another's)."""
        return (
            "" in self.watch.watched
            and self._socket_id() == self.socket_id
            and file_id(self.root) == self.root_id
        )

    def _socket_id(self) -> tuple[int, int] | None:
        return file_id(self.socket_file)

    def _answer_one(self) -> bool:
        """Answer one connection; False when asked to exit."""
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return True
        with conn:
            conn.settimeout(2.0)
            try:
                line = _read_line(conn)  # (read first: unread, a reply would be reset)
            except OSError:
                return True
            if peers.confined_caller(conn):
                return self._reply(conn, {"error": "refused"})
            try:
                request = json.loads(line)
            except ValueError:
                return True
            if not isinstance(request, dict):
                return True
            self.last_question = time.monotonic()
            op = request.get("op")
            if op == "look":
                self._collect()
                return self._reply(
                    conn,
                    self._look(
                        request.get("base"), request.get("stale_ok") is True, request.get("env")
                    ),
                )
            if op == "settle":
                self._collect()
                keep = request.get("keep")
                self._settle(
                    request.get("from"),
                    request.get("gen"),
                    request.get("base"),
                    keep if isinstance(keep, list) else [],
                )
                return True
            if op == "forget":
                self._collect()
                self._forget(request.get("gen"), request.get("paths"))
                return True
            if op == "status":
                return self._reply(conn, self._status())
            if op == "exit":
                self._reply(conn, {"ok": True})
                return False
            return self._reply(conn, {"error": f"unknown request {op!r}"})

    def _look(self, base: object, stale_ok: bool, env: object = None) -> dict[str, Any]:
        self._nested_moved()
        gen, self.gen = self.gen, self.gen + 1
        fresh = stale_ok or time.monotonic() - self.verified < self.verify
        if self.sure and fresh and base is not None and base == self.base:
            reply: dict[str, Any] = {"gen": gen, "paths": sorted(self.found)}
            if self.watch.partial:  # the caller stats the directories not among these
                reply["watched"] = sorted(self.watch.watched)
            if (
                self.staged is not None
                and env == self.env
                and frozenset(self.found) == self.staged_paths
            ):
                reply["staged"] = self.staged
            return reply
        return {"gen": gen, "paths": None}

    def _settle(self, was: object, gen: object, base: object, keep: list[object]) -> None:
        if not isinstance(gen, int) or not isinstance(base, str):
            return
        self._unstage()  # (taken by the command, or of a state no longer the side index's)
        self.quiet = staging.QUIET_MS / 1000
        if was is None:  # a full look, begun after ``gen`` was answered
            if self.lost_gen <= gen:
                self.sure = True
            self.verified = time.monotonic()
        elif was != self.base:
            self.sure = False  # settled from a state it did not hold: not sure of it
        self.found = {path: g for path, g in self.found.items() if g > gen}
        for path in keep:
            self.found.setdefault(str(path), self.gen)
        self.base = base
        self._cover(base)

    def _forget(self, gen: object, paths: object) -> None:
        if not isinstance(gen, int) or not isinstance(paths, list):
            return
        for path in paths:
            if self.found.get(str(path), gen + 1) <= gen:
                del self.found[str(path)]

    def _cover(self, base: str | None) -> None:
        """Watch every directory the stamps of ``base`` cover. One it was not watching
        may have changed before its watch began: it is reported whole."""
        record = stamps.noted(self.index)
        if record is None or record.get("commit") != base:
            return
        dirs = record.get("dirs")
        if not isinstance(dirs, list):
            return
        for rel in dirs:
            name = str(rel)
            if name not in self.watch.watched and self.watch.add(name):
                self.found[name] = self.gen

    def _nested_moved(self) -> None:
        """A commit in a nested repository (or submodule) writes nothing the watch
        covers, only its own git directory: its HEAD is read at every question, and the
        repository reported when it moved (or cannot be read; and all of them at the
        first question, since the step that handed over)."""
        heads = self._nested_heads()
        for name, head in heads.items():
            if head is None or self.heads.get(name) != head:
                self.found[name] = self.gen
        if heads != self.staged_heads:
            self._unstage()  # (it holds the commits the repositories were at then)
        self.heads = heads

    def _nested_heads(self) -> dict[str, str | None]:
        return {
            n: _nested_head(os.path.join(self.root, n))
            for n in stamps.nested_repositories(self.index)
        }

    def _status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "base": self.base,
            "sure": self.sure,
            "gen": self.gen,
            "watched": len(self.watch.watched),
            "marked": self.watch.marked,
            "partial": self.watch.partial,
            "limit": self.watch.limit,
            "mark_limit": self.watch.mark_limit,
            "paths": len(self.found),
            "idle": self.idle,
            "verify": self.verify,
            "stagings": self.stagings,
            "staging": self.flight is not None,
            "staged": self.staged is not None,
        }

    @staticmethod
    def _reply(conn: socket.socket, reply: dict[str, Any]) -> bool:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply).encode() + b"\n")
        return True


_nested_head = stamps.nested_head


def _read_line(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks)


def main(argv: list[str], stage: Stage) -> int:
    os.umask(0o077)  # what its git writes in the task's directory names the task's files
    with open(int(argv[1]), encoding="utf-8") as f:  # the state, in memory (memfd)
        state = json.load(f)
    watcher = Watcher(state, stage)
    try:
        watcher.serve()
    finally:
        watcher.close()
        with contextlib.suppress(OSError):
            if watcher._socket_id() == watcher.socket_id:
                os.unlink(watcher.socket_file)
    return 0
