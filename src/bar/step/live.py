"""A step while it runs, as another process sees it: what is known of it, and its output
and checkpoints followed as they are written, to the step's recorded end.

``bar run`` keeps nothing only in its memory that a reader needs. Before the command
starts it writes the step's intent (``running.json``: the command, when it started, its
pid; ``bar.model.journals``), and it holds the task lock until the ledger line is
written. The output goes to the step's files as it comes: stdout (for a pty step, the
text of its terminal) into ``NNNN.output`` after its ``=== STDOUT ===`` line, stderr into
``NNNN.output.stderr.tmp``, which is added to the output file under ``=== STDERR ===``
once the command ended (``bar.terminal.pipes``); each checkpoint is a line of
``NNNN.checkpoints.jsonl``. So a reader follows a step by reading those files on from
where it stopped, learns that the step ended from the ledger (its line is the commit
point), and that bar died from the lock: an intent whose lock no process holds is a step
whose ``bar run`` is gone (the kernel drops an ``flock`` with its holder), to be recorded
as interrupted by the next command that takes the task.

``Follower.poll`` takes one look and returns what is new since the last: ``Output``,
``Taken`` (a checkpoint), and last ``Recorded`` (the step's ledger line) or ``Lost`` (it
will not end here: bar died, or stopped before the command ran). Stdout is given out only
up to where ``=== STDERR ===`` could begin, and once the step is recorded the rest of both
streams is read from its output file as recorded, so a follower shows every byte the
record holds, each once, whenever it began to follow.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from bar.base.clock import seconds_of
from bar.base.record import record
from bar.errors import CorruptFile
from bar.history import checkpoints as cps
from bar.history.checkpoints import Checkpoint
from bar.model import journals
from bar.model.records import Step
from bar.model.tasks import Task
from bar.store.lock import is_locked
from bar.terminal.pipes import STDERR_HEADER, STDOUT_HEADER, stderr_file

RUNNING = "running"  # the command runs
RECORDING = "recording"  # the command ended; bar is recording the step
INTERRUPTED = "interrupted"  # bar died while the step ran: the next command records it

POLL = 0.1  # seconds between two looks of ``watch`` and ``next_step``
_CHUNK = 1 << 20
LOOK = 8 << 20  # bytes of each stream one look reads at most (``behind`` says it stopped)


@record(frozen=True)
class LiveStep:
    """A step that is not in the ledger yet: running, being recorded, or left by a bar
    that died (``state``). ``exit_code`` and ``signal``: how the command ended, once it
    did."""

    step_id: str
    state: str
    pid: int
    started_at: str
    cmd: list[str]
    cwd: str
    env: dict[str, str]
    pty: bool
    sandbox: dict[str, Any] | None = None
    agent: dict[str, Any] | None = None
    exit_code: int | None = None
    signal: int | None = None
    unrecorded: str | None = None  # why its ``bar run`` could not record it, if it said

    @property
    def number(self) -> int:
        return int(self.step_id)

    def left(self) -> str:
        """How a step of state ``INTERRUPTED`` was left, in words (the first line, then
        any hint): the command may have ended, and its ``bar run`` may have said why it
        could not record it (a named pipe, a full disk) rather than died."""
        if self.exit_code is None:
            return f"its bar run (pid {self.pid}) died while the step ran"
        ended = f"exit {self.exit_code}" + (f", signal {self.signal}" if self.signal else "")
        if self.unrecorded:
            return f"the command ended ({ended}); bar could not record it: {self.unrecorded}"
        return f"the command ended ({ended}); its bar run (pid {self.pid}) died recording it"

    def running_ms(self) -> int:
        """How long it has run (ms)."""
        try:
            return max(0, int((time.time() - seconds_of(self.started_at)) * 1000))
        except ValueError:
            return 0

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "step_id": self.step_id,
            "kind": "run",
            "state": self.state,
            "pid": self.pid,
            "cmd": self.cmd,
            "cwd": self.cwd,
            "env": self.env,
            "started_at": self.started_at,
            "running_ms": self.running_ms(),
            "pty": self.pty,
            "exit_code": self.exit_code,
        }
        if self.signal is not None:
            rec["signal"] = self.signal
        if self.unrecorded is not None:
            rec["unrecorded"] = self.unrecorded
        if self.sandbox is not None:
            rec["sandbox"] = self.sandbox
        if self.agent is not None:
            rec["agent"] = self.agent
        return rec


def current(task: Task) -> LiveStep | None:
    """The task's step that is not recorded yet (running, being recorded, or left by a bar
    that died), if there is one."""
    try:
        intent = journals.RUN.read(task.paths)
    except CorruptFile:
        return None  # (``bar doctor`` names it; a reader has nothing to follow)
    if intent is None:
        return None
    held = is_locked(task.paths.lock)
    if recorded(task, intent.step_id) is not None:
        return None  # (the line is written before the intent goes)
    ended = intent.exit_code is not None
    state = RECORDING if held and ended else RUNNING if held else INTERRUPTED
    return LiveStep(
        step_id=intent.step_id,
        state=state,
        pid=intent.pid,
        started_at=intent.started_at,
        cmd=list(intent.cmd),
        cwd=intent.cwd,
        env=dict(intent.env),
        pty=intent.pty,
        sandbox=intent.sandbox,
        agent=intent.agent,
        exit_code=intent.exit_code,
        signal=intent.signal,
        unrecorded=intent.unrecorded,
    )


# --- following ------------------------------------------------------------------------


@record(frozen=True)
class Output:
    """Bytes the step printed, as recorded (scrubbed): ``stream`` is stdout or stderr (a
    pty step has stdout only: its terminal's text)."""

    stream: str
    data: bytes


@record(frozen=True)
class Taken:
    """A checkpoint the step took (a tool call of its agent)."""

    checkpoint: Checkpoint


@record(frozen=True)
class Recorded:
    """The step's ledger line: it ended, and this is how."""

    step: Step


@record(frozen=True)
class Lost:
    """The step will not end here: its ``bar run`` died (``live.state`` is interrupted;
    the next command in the task records it), or stopped before the command ran (nothing
    is recorded). ``reason`` says which, in words."""

    step_id: str
    reason: str
    live: LiveStep | None = None


Event = Output | Taken | Recorded | Lost


@record(frozen=True)
class Mark:
    """Where a follower is: the bytes of the output file given out (its header included),
    of stderr given out, and the checkpoints given out. A page that showed a step so far
    hands it to the follower that goes on (``Mark.parse`` of ``str(mark)``)."""

    shown: int = 0
    err: int = 0
    checkpoints: int = 0

    def __str__(self) -> str:
        return f"{self.shown}.{self.err}.{self.checkpoints}"

    @classmethod
    def parse(cls, text: str | None) -> Mark:
        parts = (text or "").split(".")
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
            return cls()
        return cls(*(int(p) for p in parts))


class Follower:
    """Follows step ``step_id`` of ``task`` from ``mark`` (the start: everything it printed)."""

    def __init__(
        self,
        task: Task,
        step_id: str,
        mark: Mark | None = None,
        *,
        output: bool = True,
        look: int = LOOK,
    ) -> None:
        mark = mark or Mark()
        self.task = task
        self.output = output  # False: its checkpoints and its end only
        self.look = look  # bytes of each stream one look reads at most
        self.step_id = step_id
        self.done = False
        self.behind = False  # the last look stopped at ``look`` bytes: more is there now
        self._out: int | None = None  # NNNN.output, open
        self._err: int | None = None  # NNNN.output.stderr.tmp, open (it outlives its name)
        self._shown = max(mark.shown, len(STDOUT_HEADER))
        self._read = self._shown  # bytes of the output file read (``_held`` is the rest)
        self._held = b""  # read, not given out: could begin ``=== STDERR ===``
        self._err_shown = mark.err
        self._taken = mark.checkpoints
        self._cp_size = -1
        self._seen = False  # the intent of this step was seen: its files are its own
        self._ledger: tuple[int, int] | None = None
        self._step: Step | None = None
        self._stderr_pos: int | None = None  # where the recorded output's stderr begins

    @property
    def mark(self) -> Mark:
        return Mark(self._shown, self._err_shown, self._taken)

    def poll(self) -> list[Event]:
        """What is new since the last look; the last event of all is ``Recorded`` or
        ``Lost`` (then ``done`` is true)."""
        if self.done:
            return []
        events: list[Event] = []
        step = self._recorded()
        if step is None:
            if self.output:
                self._open()
                events += self._output()
            events += self._checkpoints()
            step = self._recorded()  # (ended meanwhile: the rest comes from the record)
            if step is None:
                lost = self._lost()
                if lost is None:
                    return events
                events.append(lost)
                self.close()
                return events
        if self.output:
            events += self._rest(step)
            if self.behind:  # (the rest of a long output: the next looks)
                return events
        events += self._checkpoints()
        events.append(Recorded(step))
        self.close()
        return events

    def close(self) -> None:
        self.done = True
        for fd in (self._out, self._err):
            if fd is not None:
                os.close(fd)
        self._out = self._err = None

    # --- the ledger and the intent

    def _recorded(self) -> Step | None:
        if self._step is not None:
            return self._step
        try:
            info = os.stat(self.task.paths.ledger)
        except FileNotFoundError:
            return None
        now = (info.st_size, info.st_mtime_ns)
        if now == self._ledger:
            return None
        self._ledger = now
        self._step = recorded(self.task, self.step_id)
        return self._step

    def _lost(self) -> Lost | None:
        live = current(self.task)
        if live is not None and live.step_id == self.step_id:
            self._seen = True
            if live.state != INTERRUPTED:
                return None
            self._ledger = None  # (look again: it may have been recorded just now)
            if self._recorded() is not None:
                return None
            return Lost(self.step_id, f"step {self.step_id}: {live.left()}; not recorded yet", live)
        if not self._seen:
            return None  # (not begun yet)
        self._ledger = None
        if self._recorded() is not None:
            return None
        return Lost(
            self.step_id,
            f"step {self.step_id} is no longer running and was not recorded: its bar run "
            "stopped before the command ran",
        )

    # --- the output

    def _open(self) -> None:
        if not self._seen:
            if not _is_current(self.task, self.step_id):
                return
            self._seen = True
        path, _ = self.task.paths.artifact(self.step_id, "output")
        if self._err is None:  # (first: the output file is made before it)
            with contextlib.suppress(OSError):
                self._err = os.open(stderr_file(path), os.O_RDONLY | os.O_NOFOLLOW)
        if self._out is None:
            with contextlib.suppress(OSError):
                self._out = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)

    def _output(self) -> list[Event]:
        events: list[Event] = []
        self.behind = False
        if self._out is not None:
            new = _read_on(self._out, self._read, self.look)
            self.behind = len(new) >= self.look
            self._read += len(new)
            data = self._held + new
            line_start = os.pread(self._out, 1, self._shown - 1) == b"\n"
            safe = _before_stderr(data, line_start)
            if safe:
                events.append(Output("stdout", data[:safe]))
            self._shown += safe
            self._held = data[safe:]
        if self._err is not None:
            new = _read_on(self._err, self._err_shown, self.look)
            self.behind = self.behind or len(new) >= self.look
            if new:
                events.append(Output("stderr", new))
                self._err_shown += len(new)
        return events

    def _rest(self, step: Step) -> list[Event]:
        """What the recorded output holds beyond what was given out (``look`` bytes of each
        stream at most: ``behind`` says there is more)."""
        self.behind = False
        rel = step.artifacts.output
        if not rel:
            return []
        try:
            fd = os.open(self.task.dir / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return []
        try:
            size = os.fstat(fd).st_size
            if self._stderr_pos is None:
                self._stderr_pos = self._stderr_at(fd, size, step)
            stderr_at = self._stderr_pos
            events: list[Event] = []
            stdout = _read_range(fd, self._shown, min(stderr_at, self._shown + self.look))
            if stdout:
                events.append(Output("stdout", stdout))
                self._shown += len(stdout)
            if self._shown < stderr_at and stdout:
                self.behind = True
                return events
            if stderr_at < size:
                start = stderr_at + len(STDERR_HEADER) + self._err_shown
                rest = _read_range(fd, start, min(size, start + self.look))
                if rest:
                    events.append(Output("stderr", rest))
                    self._err_shown += len(rest)
                self.behind = start + len(rest) < size and bool(rest)
            return events
        finally:
            os.close(fd)

    def _stderr_at(self, fd: int, size: int, step: Step) -> int:
        """Where the recorded output's ``=== STDERR ===`` line begins (``size``: it has none,
        as the output of a step whose bar died may not)."""
        known = None
        if self._err is not None:
            known = os.fstat(self._err).st_size  # (all of stderr: it was added whole)
        elif getattr(step, "pty", False):
            known = 0
        if known is not None:
            at = size - known - len(STDERR_HEADER)
            if at >= len(STDOUT_HEADER) and _read_range(fd, at, at + len(STDERR_HEADER)) == (
                STDERR_HEADER
            ):
                return at
        found = _rfind(fd, size, b"\n" + STDERR_HEADER)
        return size if found < 0 else found + 1

    # --- the checkpoints

    def _checkpoints(self) -> list[Event]:
        path = cps.path(self.task, self.step_id)
        try:
            size = os.stat(path).st_size
        except OSError:
            return []
        if size == self._cp_size:
            return []
        self._cp_size = size
        found = cps.read(self.task, self.step_id)
        new = found[self._taken :]
        self._taken = max(self._taken, len(found))
        return [Taken(cp) for cp in new]


@record(frozen=True)
class Glance:
    """A step as one look finds it: what it printed so far (``stdout``, ``stderr``), its
    checkpoints so far, where a follower would go on from (``mark``), and its record if
    it ended meanwhile (``recorded``), or why it will not end here (``lost``)."""

    stdout: bytes
    stderr: bytes
    checkpoints: list[Checkpoint]
    mark: Mark
    recorded: Step | None = None
    lost: Lost | None = None
    cut: bool = False  # more was printed than was read (``glance``'s limit)

    def output(self) -> bytes | None:
        """What it printed so far in the output file's format (``=== STDOUT ===`` ...);
        None while it printed nothing."""
        if not self.stdout and not self.stderr:
            return None
        tail = b"" if not self.stdout or self.stdout.endswith(b"\n") else b"\n"
        return STDOUT_HEADER + self.stdout + tail + STDERR_HEADER + self.stderr


def glance(task: Task, step_id: str, limit: int | None = None) -> Glance:
    """One look at step ``step_id``: what it printed and took up to now (at least the first
    ``limit`` bytes of each stream, when given; ``cut`` says if there is more)."""
    follower = Follower(task, step_id, look=limit or LOOK)
    events: list[Event] = []
    try:
        while True:
            events += follower.poll()
            if limit is not None or not follower.behind or follower.done:
                break
    finally:
        follower.close()
    out = b"".join(e.data for e in events if isinstance(e, Output) and e.stream == "stdout")
    err = b"".join(e.data for e in events if isinstance(e, Output) and e.stream == "stderr")
    return Glance(
        stdout=out,
        stderr=err,
        checkpoints=[e.checkpoint for e in events if isinstance(e, Taken)],
        mark=follower.mark,
        recorded=next((e.step for e in events if isinstance(e, Recorded)), None),
        lost=next((e for e in events if isinstance(e, Lost)), None),
        cut=follower.behind,
    )


@record(frozen=True)
class Started:
    """A step began (or was found running when the watch began)."""

    live: LiveStep


def watch(task: Task, after: int, *, poll: float = POLL) -> Iterator[Event | Started]:
    """The task's steps after step number ``after``, as they come, until the caller stops:
    each step that starts (``Started``), the checkpoints it takes (``Taken``), each step
    recorded (``Recorded``: the ones that ran, and those recorded without running, such
    as hand edits, rollbacks and applies) and each whose bar died (``Lost``)."""
    last = after
    follower: Follower | None = None
    lost: set[str] = set()
    stamp: tuple[int, int] | None = None
    try:
        while True:
            if follower is not None:
                for event in follower.poll():
                    if isinstance(event, Taken):
                        yield event
                    elif isinstance(event, Lost):
                        lost.add(event.step_id)
                        yield event
                if follower.done:
                    follower = None
            try:
                info = os.stat(task.paths.ledger)
                now: tuple[int, int] | None = (info.st_size, info.st_mtime_ns)
            except FileNotFoundError:
                now = None
            if now != stamp:
                stamp = now
                for step in _after(task, last):
                    last = max(last, step.number)
                    yield Recorded(step)
            if follower is None:
                live = current(task)
                if live is not None and live.number > last and live.step_id not in lost:
                    follower = Follower(task, live.step_id, output=False)
                    yield Started(live)
                    continue
            time.sleep(poll)
    finally:
        if follower is not None:
            follower.close()


def _after(task: Task, number: int) -> list[Step]:
    """The recorded steps after step ``number``, oldest first (read from the end)."""
    found: list[Step] = []
    for step in task.ledger.iter_reverse(warn=False):
        if step.number <= number:
            break
        found.append(step)
    found.reverse()
    return found


def next_step(task: Task, *, poll: float = POLL) -> LiveStep:
    """The step running now, else the next one to start (waits for it)."""
    while True:
        live = current(task)
        if live is not None:
            return live
        time.sleep(poll)


def output_lines(task: Task, step_id: str) -> Iterator[str]:
    """The lines step ``step_id`` printed so far, as its files hold them now (stdout, then
    stderr), read a line at a time: what ``bar log --grep`` searches in a running step."""
    path, _ = task.paths.artifact(step_id, "output")
    for name in (path, stderr_file(path)):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW)  # (a planted link is not read)
        except OSError:
            continue  # (none yet, or gone)
        with os.fdopen(fd, "rb") as fh:
            for raw in fh:
                yield raw.decode("utf-8", "replace")


# --- helpers ----------------------------------------------------------------------------


def _is_current(task: Task, step_id: str) -> bool:
    live = current(task)
    return live is not None and live.step_id == step_id


def recorded(task: Task, step_id: str) -> Step | None:
    """Step ``step_id`` if the ledger holds it, read from the end (a line being written is
    passed over: it is read once whole)."""
    number = int(step_id)
    for step in task.ledger.iter_reverse(warn=False):
        if step.number == number:
            return step
        if step.number < number:
            return None
    return None


def _read_on(fd: int, offset: int, most: int) -> bytes:
    """What the file holds from ``offset`` on, ``most`` bytes at most."""
    out = bytearray()
    while len(out) < most:
        chunk = os.pread(fd, min(_CHUNK, most - len(out)), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _read_range(fd: int, start: int, end: int) -> bytes:
    out = bytearray()
    while start + len(out) < end:
        chunk = os.pread(fd, min(_CHUNK, end - start - len(out)), start + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _rfind(fd: int, size: int, needle: bytes) -> int:
    """The offset of the last ``needle`` in the file (-1: none), read from its end."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        block = _read_range(fd, start, min(size, end + len(needle) - 1))
        found = block.rfind(needle)
        if found >= 0:
            return start + found
        end = start
    return -1


def _before_stderr(data: bytes, line_start: bool) -> int:
    """How much of ``data`` (``line_start``: it begins a line) is surely stdout: all of it
    but a line that is, or could grow into, ``=== STDERR ===`` and what follows it (bar
    adds stderr there once the command ended)."""
    start = 0
    if not line_start:
        first = data.find(b"\n")
        if first < 0:
            return len(data)
        start = first + 1
    while start < len(data):
        line_end = data.find(b"\n", start)
        line = data[start:] if line_end < 0 else data[start : line_end + 1]
        if STDERR_HEADER.startswith(line):  # (the whole line, or the start of it)
            return start
        if line_end < 0:
            break
        start = line_end + 1
    return len(data)
