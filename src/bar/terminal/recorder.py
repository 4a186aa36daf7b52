"""A pty step's recording, made beside the pump that reads the terminal.

Recording what a step prints (the secret scrubber, the plain text, the cast's events:
``bar.terminal.cast``) takes more of a core than reading the pty and showing what it
gave: ~1.2 s for 100 MB, against ~0.3 s. Done between two reads, it leaves the pty
unread meanwhile, and the child that prints waits on a full terminal. So a step that
prints little is recorded in bar's process as it reads (``Recording``), and once it has
printed ``HANDOVER`` bytes its recording is handed to a fork of bar (``handed``), which
takes it over exactly as it stands (what the scrubber holds back, a character half
decoded, the events waiting for their text: the fork has them all), while bar goes on
reading and showing and sends it what it read through a pipe, each piece with the time
it was read. The two then run on two cores, as ``script`` and its child do.

If bar is killed, the fork writes what it was sent and ends where bar's own recording
would have ended (without what the scrubber held back, or the events whose frame had
not passed: ``Recording.abort``). It holds what bar held (the task's lock among them)
until then, so the next command, which recovers the step, waits for it. A recording
that fails in the fork (a full disk) fails the step as it would in bar's process, with
the same error, when bar next sends it something or ends it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import struct
import time
from typing import NoReturn, Protocol

from bar.errors import BarError
from bar.terminal.cast import CastWriter
from bar.terminal.pipes import cut_mark

HANDOVER = 1 << 20  # bytes printed before the recording is handed to a fork
_CONTROLS = bytes([*range(32), 127])  # kept escaped in a recording (``\\u0001``)
_HEAD = struct.Struct("<cdI")  # a piece sent to the fork: kind, when it was read, length
_PIPE_SIZE = 1 << 20  # asked of the kernel for the pipe to the fork (Linux)
_F_SETPIPE_SZ = 1031
_TICK = 1 / 60  # seconds between two looks at the events the fork holds (a frame)
_OUTPUT, _RESIZE, _END = b"o", b"r", b"e"
_LEAST = 4096  # bytes: a piece that fits under the limit and is smaller ends the output kept


class Recorder(Protocol):
    """What the pump records through, in its process or a fork's."""

    def output(self, data: bytes) -> None: ...
    def resize(self, width: int, height: int) -> None: ...
    def tick(self) -> None: ...
    def close(self) -> bool: ...
    def abort(self) -> None: ...


class Recording:
    """The recording in this process: the cast (and its text), and the limit of the bytes
    kept (None: all); past it, what the child prints is shown, not kept (``cut``)."""

    def __init__(self, cast: CastWriter, limit: int | None) -> None:
        self.cast = cast
        self.limit = limit
        self.cut = False
        self.taken = 0  # bytes recorded so far

    def output(self, data: bytes, read_at: float | None = None) -> None:
        self.taken += len(data)
        if self.limit is None:
            self.cast.output(data, read_at)
            return
        # the bytes kept, the recording's and its text's, reach the limit and stop there:
        # what fits is kept, piece by piece, each at most what it could take (a control
        # character is six bytes in the recording's JSON), and the cut is marked
        while data and not self.cut:
            room = self.limit - self.cast.kept()
            if _cost(data) > room:
                # (``kept`` counts the events held for their frame at the most they could
                # take: written now, they count what they took, mostly references to the
                # text)
                self.cast.release()
                room = self.limit - self.cast.kept()
            piece = _fitting(data, room)
            if len(piece) < len(data) and len(piece) < _LEAST:
                self.cast.output(cut_mark(), read_at)
                self.cut = True
                return
            self.cast.output(piece, read_at)
            data = data[len(piece) :]

    def resize(self, width: int, height: int, read_at: float | None = None) -> None:
        self.cast.resize(width, height, read_at)

    def tick(self) -> None:
        self.cast.tick()

    def close(self) -> bool:
        """Write what is held, close; whether the output went past its limit."""
        self.cast.close()
        return self.cut

    def abort(self) -> None:
        self.cast.abort()


class Handed:
    """The recording handed to a fork of this process: what the pump records goes to it
    through a pipe (``_HEAD`` and the bytes), to be recorded there as it comes."""

    def __init__(self, pid: int, pieces: int, answer: int) -> None:
        self.pid = pid
        self.pieces: int | None = pieces  # (the pipe to the fork: None once closed)
        self.answer = answer  # (the fork's last word: see ``_said``)
        self.cut: bool | None = None  # (what it said, once it ended)
        self.error: OSError | BarError | None = None

    def output(self, data: bytes) -> None:
        self._send(_OUTPUT, data)

    def resize(self, width: int, height: int) -> None:
        self._send(_RESIZE, b"%dx%d" % (width, height))

    def tick(self) -> None:
        pass  # (the fork looks at its held events itself)

    def close(self) -> bool:
        """Have the fork write what it holds and end; whether the output went past its
        limit (its error, if it could not record: raised here)."""
        self._send(_END, b"")
        return self._end()

    def abort(self) -> None:
        """End the fork as bar's being killed would (nothing more written than it could)."""
        with contextlib.suppress(OSError):
            self._end()

    def _send(self, kind: bytes, data: bytes) -> None:
        if self.pieces is None:
            self._end()  # (raises the fork's error, if it met one)
            raise OSError("the recording has ended")
        parts = [_HEAD.pack(kind, time.monotonic(), len(data)), data]
        try:
            _write_all(self.pieces, parts)
        except BrokenPipeError:  # (the fork failed: its error is the one to raise)
            self._end()
            raise

    def _end(self) -> bool:
        if self.pieces is not None:
            os.close(self.pieces)
            self.pieces = None
        if self.pid:
            pid, self.pid = self.pid, 0
            _, status = os.waitpid(pid, 0)
            try:
                self.cut = _said(self.answer, pid, status)
            except (OSError, BarError) as exc:
                self.error = exc
        if self.error is not None:
            raise self.error
        return bool(self.cut)


def handed(recording: Recording) -> Handed:
    """Fork: the child records what it is sent (``_record``), the caller gets the pipe to
    it."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    answer_read, answer_write = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        import fcntl

        fcntl.fcntl(write_end, _F_SETPIPE_SZ, _PIPE_SIZE)
    pid = os.fork()
    if pid == 0:  # (never returns: the caller's frames are not this process's to unwind)
        try:
            os.close(write_end)
            os.close(answer_read)
            _leave_bar([read_end, answer_write])
            _record(recording, read_end, answer_write)
        finally:
            os._exit(70)
    os.close(read_end)
    os.close(answer_write)
    recording.cast.abort()  # (the fork writes it now: this process only closes its copy)
    return Handed(pid, write_end, answer_read)


def _leave_bar(keep: list[int]) -> None:
    """In the fork: named for what it is ("bar recorder" in ps and top); no signal
    of bar's or its terminal's ends it (it ends when bar stops sending); and of bar's
    descriptors it keeps ``keep`` and bar's files alone (the recording's, the task's
    lock), none that another process waits to see closed or that serves the step (the
    pty, bar's terminal, sockets, pipes, the policy's listener of the step's programs)."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("bar recorder")
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGWINCH", "SIGTSTP", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    for name in ("SIGCHLD", "SIGCONT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        with contextlib.suppress(OSError):
            if fd > 2 and fd not in keep and not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)


def _record(recording: Recording, pieces: int, answer: int) -> NoReturn:
    """In the fork: record each piece as it comes, look at the held events each frame;
    at the end piece, close the recording; at the pipe's end without it, abort it (bar
    was killed). Say how it went on ``answer``, then exit."""
    said = b"aborted"
    try:
        buffered = bytearray()
        ended = False
        while not ended:
            wait = _TICK if recording.cast.holding else None  # (idle: asleep)
            ready, _, _ = select.select([pieces], [], [], wait)
            if ready:
                chunk = os.read(pieces, _PIPE_SIZE)
                if not chunk:
                    break
                buffered += chunk
                ended = _take(recording, buffered)
            recording.tick()
        if ended:
            said = b"cut" if recording.close() else b"ok"
        else:
            recording.abort()
    except OSError as exc:
        said = b"errno %d %s" % (exc.errno or 0, (exc.strerror or str(exc)).encode())
    except BaseException as exc:  # (said to bar, which raises it)
        said = b"error " + f"{type(exc).__name__}: {exc}".encode(errors="replace")
    with contextlib.suppress(OSError):
        os.write(answer, said)
    os._exit(0)


def _take(recording: Recording, buffered: bytearray) -> bool:
    """Record the whole pieces ``buffered`` holds (and take them out of it); whether the
    end piece was among them. Reads that follow one another within a frame are recorded
    as one, at the time of the last (as bar's process records what one look at the pty
    gave; the recording makes one event of a frame's output anyway)."""
    view = memoryview(buffered)
    at = 0
    ended = False
    reads: list[bytes] = []
    first = last = 0.0
    try:
        while len(view) - at >= _HEAD.size:
            kind, read_at, size = _HEAD.unpack_from(view, at)
            if len(view) - at - _HEAD.size < size:
                break
            body = bytes(view[at + _HEAD.size : at + _HEAD.size + size])
            at += _HEAD.size + size
            if kind == _OUTPUT:
                if reads and read_at - first > _TICK:
                    recording.output(b"".join(reads), last)
                    reads.clear()
                if not reads:
                    first = read_at
                reads.append(body)
                last = read_at
                continue
            if reads:
                recording.output(b"".join(reads), last)
                reads.clear()
            if kind == _RESIZE:
                width, _, height = body.partition(b"x")
                recording.resize(int(width), int(height), read_at)
            elif kind == _END:
                ended = True
                break
        if reads:
            recording.output(b"".join(reads), last)
    finally:
        view.release()
    del buffered[:at]
    return ended


def _said(answer: int, pid: int, status: int) -> bool:
    """What the fork said as it ended: whether the output went past its limit; an error
    it met, raised as it was met (an ``OSError`` with its number: a full disk)."""
    try:
        said = os.read(answer, 1 << 16)
    finally:
        os.close(answer)
    if said in (b"ok", b"cut"):
        return said == b"cut"
    if said.startswith(b"errno "):
        number, _, text = said[6:].partition(b" ")
        raise OSError(int(number), text.decode(errors="replace"))
    if said.startswith(b"error "):
        raise OSError(said[6:].decode(errors="replace"))
    if said == b"aborted":
        return False
    raise BarError(
        f"the recording of this step's output stopped: its process (bar recorder, pid "
        f"{pid}) {_ended(status)}",
        hint="the step's output was shown to the end; its recording ends where that process did",
    )


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(number).name}"
        return f"was killed by signal {number}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


def _cost(data: bytes) -> int:
    """The most ``data`` can take in a recording and its text."""
    return len(data) + 5 * (len(data) - len(data.translate(None, _CONTROLS)))


def _fitting(data: bytes, room: int) -> bytes:
    """The longest start of ``data`` found (a few halvings) to cost at most ``room``."""
    cost = _cost(data)
    if cost <= room:
        return data
    piece = data[: max(room, 0) * len(data) // cost]
    while piece and _cost(piece) > room:
        piece = piece[: len(piece) * 3 // 4]
    return piece


def _write_all(fd: int, parts: list[bytes]) -> None:
    views = [memoryview(part) for part in parts if part]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
