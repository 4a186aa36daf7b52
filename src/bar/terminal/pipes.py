"""Running a step's command with its output shown live and captured at the same time.

stdout and stderr are read from two pipes as they come, written to the terminal unchanged,
and streamed through the secret scrubber into two files, so memory does not grow with
output. Each read is written to its file at once, unbuffered: if bar is killed, stdout is
in the artifact up to what the scrubber still held back (stderr is in a side file). The
artifact is then ``=== STDOUT ===`` + stdout + ``=== STDERR ===`` + stderr.

Signals: a Ctrl-C typed at the terminal reaches the child directly (it is in our process
group), so bar only notes it and waits for the child to decide. A SIGINT, SIGTERM or
SIGHUP sent to bar alone is forwarded to the child. Either way bar stays alive to record
the step with the child's real exit status, and the signal that stopped it: a child that
catches it and exits 0 (an agent does) is not recorded as a success (``exit_status``).
A signal that comes while the child is being started is passed on once it runs; one
that a process of the command missed, being started itself, is given to it again
(``bar.terminal.missed``); one that comes after the child ended stops nothing and is not
recorded. Whichever of bar's threads the kernel gives the signal to, it is passed on at
once: the interpreter's handler wakes bar's main thread through a pipe
(``signal.set_wakeup_fd``), where it waits for output or for the child's end.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO, BinaryIO

from bar.base.proc import Starter, exit_status, start_directly
from bar.base.record import record
from bar.errors import CannotConfine, ExitCode
from bar.store.files import create_file
from bar.terminal.filters import StreamFilter
from bar.terminal.missed import Sent, ended, members

STDOUT_HEADER = b"=== STDOUT ===\n"
STDERR_HEADER = b"=== STDERR ===\n"
_CHUNK = 1 << 20  # the most one read takes: what a busy pipe holds (``_PIPE_SIZE``)
_PIPE_SIZE = 1 << 20  # asked of the kernel for each pipe: fewer, larger reads (Linux)
_F_SETPIPE_SZ = 1031
_GRACE = 2.0  # seconds to drain pipes held open by the child's own children


class _Identity:
    def feed(self, chunk: bytes) -> bytes:
        return chunk

    def flush(self) -> bytes:
        return b""


@record(frozen=True)
class Outcome:
    exit_code: int
    signal: int | None
    printed: bool
    cut: bool = False  # its output went past the limit: the rest was shown, not kept


class Forwarding:
    """The signals that reached the child to stop it (``passed``: passed on by
    ``forwarding_signals``, or sent by the terminal to the child and bar alike), and
    those that came while it was being started (``waiting``), passed on by ``started``."""

    def __init__(self, send: Callable[[int], bool], note: Callable[[int], None]) -> None:
        self.passed: list[int] = []
        self.waiting: list[int] = []
        self.starting = True
        self.sent: list[Sent] = []
        self.wake = -1  # read end of the wake-up pipe (-1: none, not the main thread)
        self._send = send
        self._note = note

    def started(self) -> None:
        """The child's pid is known now: pass on what came while it was being started
        (it may have come before the child was made, or reached it before it ran its
        program, which never saw it; and the command can run, and be signalled by a
        user who saw it start, before ``Popen`` returns)."""
        self.starting = False
        waiting, self.waiting = self.waiting, []
        for signum in waiting:
            self._send(signum)

    def noted(self, signum: int) -> None:
        """The terminal sent ``signum`` to the child's process group (bar's own)."""
        self.passed.append(signum)
        self._note(signum)

    def woken(self) -> None:
        """Empty the wake-up pipe (the handlers ran as the main thread woke)."""
        with contextlib.suppress(OSError):
            while os.read(self.wake, 512):
                pass

    def wait_for_end(self, proc: subprocess.Popen[bytes]) -> int:
        """``proc``'s end (its ``wait()``), once its pipes closed: what comes meanwhile is
        passed on at once, and given again to who missed it. Its end wakes bar through a
        descriptor of the process (``pidfd_open``): the pipes' end and the process's come
        a moment apart, and a sleep between two looks would add to every step."""
        try:
            ended = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # (Linux before 5.3: looked at every 10 ms)
            ended = -1
        try:
            while proc.poll() is None:
                again = self.resend()
                awake = [fd for fd in (self.wake, ended) if fd >= 0]
                wait = 0.01 if ended < 0 else 0.05 if again else 0.25
                ready = select.select(awake, [], [], wait)[0]
                if self.wake in ready:
                    self.woken()
        finally:
            if ended >= 0:
                os.close(ended)
        return proc.wait()

    def resend(self) -> bool:
        """Give the signals passed on again to the processes that missed them
        (``bar.terminal.missed``); True while some are still looked at."""
        self.sent = [sent for sent in self.sent if sent.resend()]
        return bool(self.sent)


@contextmanager
def forwarding_signals(
    get_pid: Callable[[], int | None], *, group: bool = False
) -> Iterator[Forwarding]:
    """While the block runs, keep bar alive and pass signals on to the child (``group``:
    to the child's process group, for a child in a session of its own, which the
    terminal's Ctrl-C does not reach). Yields what was passed on; the block calls its
    ``started`` once ``get_pid`` can answer, and its ``resend`` now and then."""
    from_terminal = False
    try:
        from_terminal = not group and os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        from_terminal = False

    def watch(signum: int, pid: int, in_group: int | None) -> None:
        """Note who the signal was sent to, to give it again to those that miss it."""
        pids = [pid] if in_group is None else members(in_group, pid)
        # (not bar; nor the holder, which passes on nothing bar sends to its group)
        skip = {os.getpid(), pid} if group else {os.getpid()}
        forwarding.sent.append(Sent(signum, [p for p in pids if p not in skip]))

    def send(signum: int) -> bool:
        pid = get_pid()
        if pid is None:
            return False
        if ended(pid):  # (ended before it came, not yet waited for: nothing is stopped)
            return True
        forwarding.passed.append(signum)
        try:
            (os.killpg if group else os.kill)(pid, signum)
        except ProcessLookupError:
            pass
        # who is in the group is looked at once the signal went, not before: a process a
        # shell forks in between got it (and, dash's child, dropped it) but would be
        # missing from a look taken before (``bar.terminal.missed``)
        watch(signum, pid, pid if group else None)
        return True

    def note(signum: int) -> None:
        pid = get_pid()
        if pid is not None:
            watch(signum, pid, os.getpgrp())

    forwarding = Forwarding(send, note)

    def handler(signum: int, frame: FrameType | None) -> None:
        if forwarding.starting:  # (it may have reached the child, or not: passed on later)
            forwarding.waiting.append(signum)
        elif signum == signal.SIGINT and from_terminal:
            pid = get_pid()
            if pid is not None and not ended(pid):
                forwarding.noted(signum)  # the terminal sent it to the child too
        else:
            send(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    wake = os.pipe() if previous else None
    woke = -1
    if wake is not None:
        for fd in wake:
            os.set_blocking(fd, False)
        forwarding.wake = wake[0]
        woke = signal.set_wakeup_fd(wake[1], warn_on_full_buffer=False)
    try:
        yield forwarding
    finally:
        if wake is not None:
            signal.set_wakeup_fd(woke)
            for fd in wake:
                os.close(fd)
        for sig, old in previous.items():
            signal.signal(sig, old)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _write_live(stream: BinaryIO | None, data: bytes) -> BinaryIO | None:
    """Echo to the terminal; a closed reader (``bar run ... | head``) stops the echo only."""
    if stream is None:
        return None
    try:
        stream.write(data)
        stream.flush()
    except (BrokenPipeError, ValueError, OSError):
        return None
    return stream


class _Sink:
    """An artifact being written. A failed write (disk full, quota, file-size limit) stops
    the capture, not the command: the command's output keeps reaching the terminal, and
    bar says what could not be written. Past ``limit`` bytes it keeps no more either,
    and marks where it stopped (``cut_mark``)."""

    def __init__(self, path: Path, limit: int | None = None) -> None:
        self.path = path
        self.error: OSError | None = None
        self._fh: BinaryIO | None = open(path, "ab", buffering=0)  # noqa: SIM115
        self._room = limit  # bytes it may still keep (None: no limit)
        self.cut = False

    def write(self, data: bytes) -> None:
        if self._fh is None or not data:
            return
        if self._room is not None:
            if len(data) > self._room:
                data, self.cut = data[: self._room] + cut_mark(), True
                self._room = 0
            else:
                self._room -= len(data)
        view = memoryview(data)
        try:
            while view:  # unbuffered: one write() may take only part
                view = view[self._fh.write(view) :]
        except OSError as exc:
            self._fail(exc)
        if self.cut:
            self.close()  # (the rest is shown, not kept)

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError as exc:
                self._fail(exc)
            self._fh = None

    def _fail(self, exc: OSError) -> None:
        self.error = exc
        try:
            if self._fh is not None:
                self._fh.close()
        except OSError:
            pass
        self._fh = None
        print(
            f"bar: warning: could not write {self.path}: {exc.strerror or exc}; "
            "the rest of the output is shown but not recorded",
            file=sys.stderr,
        )


def run_piped(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output_path: Path,
    make_filter: Callable[[], StreamFilter] | None = None,
    live: bool = True,
    start: Starter = start_directly,
    detach: bool = False,
    limit: int | None = None,
) -> Outcome:
    """Run ``argv`` and capture its output into ``output_path`` (removed if it printed
    nothing); ``start`` starts the process (``bar.sandbox`` confines it there);
    ``limit``: the bytes of each stream kept (the rest is shown, not kept: ``cut``).

    ``detach``: the child gets a session of its own and, if bar's stdin is a terminal,
    no stdin: a confined command must not reach the developer's terminal, where it could
    push keystrokes into the input of the shell that started bar (``TIOCSTI``)."""
    new_filter = make_filter or _Identity
    err_path = stderr_file(output_path)
    create_file(output_path, STDOUT_HEADER)
    create_file(err_path)
    out_live: BinaryIO | None = sys.stdout.buffer if live else None
    err_live: BinaryIO | None = sys.stderr.buffer if live else None
    proc: subprocess.Popen[bytes] | None = None
    try:
        out_file, err_file = _Sink(output_path, limit), _Sink(err_path, limit)
        stdin = subprocess.DEVNULL if detach and _is_terminal(0) else None
        with forwarding_signals(lambda: proc.pid if proc else None, group=detach) as forwarding:
            try:
                proc = start(
                    lambda prepare: subprocess.Popen(
                        list(argv),
                        cwd=cwd,
                        env=dict(env),
                        stdin=stdin,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        start_new_session=detach,
                        preexec_fn=prepare,
                    )
                )
            except FileNotFoundError:
                outcome = _not_run(
                    ExitCode.NOT_FOUND_COMMAND, f"command not found: {argv[0]}", err_file, err_live
                )
            except CannotConfine as exc:  # (its namespaces could not be made: nothing ran)
                message = f"{exc}" + (f"\nhint: {exc.hint}" if exc.hint else "")
                outcome = _not_run(ExitCode.CANNOT_EXECUTE, message, err_file, err_live)
            except OSError as exc:
                message = f"cannot execute {argv[0]}: {exc.strerror or exc}"
                outcome = _not_run(ExitCode.CANNOT_EXECUTE, message, err_file, err_live)
            else:
                forwarding.started()
                assert proc.stdout is not None and proc.stderr is not None
                _widen(proc.stdout, proc.stderr)
                printed = _pump(
                    proc,
                    forwarding,
                    _Stream(proc.stdout, out_file, new_filter(), out_live),
                    _Stream(proc.stderr, err_file, new_filter(), err_live),
                )
                status = forwarding.wait_for_end(proc)
                passed = forwarding.passed
                code, sig = exit_status(status, passed[0] if passed else None)
                outcome = Outcome(code, sig, printed, out_file.cut or err_file.cut)
        out_file.close()
        err_file.close()
        if outcome.printed and out_file.error is None:
            _assemble(output_path, err_path)
        elif not outcome.printed:
            output_path.unlink(missing_ok=True)
    finally:
        err_path.unlink(missing_ok=True)
    return outcome


def cut_mark() -> bytes:
    """What ends a kept output that went past its limit (``run.output_limit``)."""
    return b"\n[bar: the rest of this output was shown, not kept: past run.output_limit]\n"


def stderr_file(output_path: Path) -> Path:
    """Where stderr waits while the command runs, until it is added to ``output_path``
    (a reader following the step reads it there: ``bar.step.live``)."""
    return output_path.with_name(output_path.name + ".stderr.tmp")


def _widen(*pipes: IO[bytes]) -> None:
    """Ask for larger pipe buffers: a command printing fast then fills 1 MiB between two
    reads rather than 64 KiB, so each read, scrub and write handles sixteen times more.
    Refused past the user's limit (``/proc/sys/fs/pipe-max-size``): then as it was."""
    import fcntl

    for pipe in pipes:
        try:
            fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)
        except OSError:
            return


def _not_run(code: int, message: str, err_file: _Sink, err_live: BinaryIO | None) -> Outcome:
    """The command could not be started: say so on stderr and in its capture."""
    data = f"bar: {message}\n".encode()
    _write_live(err_live, data)
    err_file.write(data)
    return Outcome(code, None, printed=True)


@record
class _Stream:
    """One of the child's pipes and where what comes out of it goes."""

    pipe: IO[bytes]
    sink: _Sink
    filter: StreamFilter
    live: BinaryIO | None  # bar's own stdout or stderr; None once it stopped taking data


def _pump(proc: subprocess.Popen[bytes], forwarding: Forwarding, *streams: _Stream) -> bool:
    """Show and record the child's output until its pipes close; True if it printed.
    ``forwarding.resend`` is called before each wait (True: call it again soon), which a
    signal ends (``forwarding.wake``).

    When the child has exited but something it started still holds the pipes (a server
    sent to the background), stop ``_GRACE`` seconds later instead of waiting forever.
    """
    by_fd = {stream.pipe.fileno(): stream for stream in streams}
    printed = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        for stream in streams:
            sel.register(stream.pipe, selectors.EVENT_READ)
        pipes = len(streams)
        if forwarding.wake >= 0:
            sel.register(forwarding.wake, selectors.EVENT_READ)
        while pipes:
            events = sel.select(timeout=0.05 if forwarding.resend() else 0.25)
            if not events and proc.poll() is not None:
                now = time.monotonic()
                exited_at = exited_at or now
                if now - exited_at > _GRACE:
                    break
            for key, _ in events:
                if key.fd == forwarding.wake:
                    forwarding.woken()
                    continue
                stream = by_fd[key.fd]
                data = os.read(key.fd, _CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                    pipes -= 1
                    stream.sink.write(stream.filter.flush())
                    continue
                printed = True
                stream.live = _write_live(stream.live, data)
                stream.sink.write(stream.filter.feed(data))
        for key in list(sel.get_map().values()):  # only after the grace period
            if key.fd != forwarding.wake:
                by_fd[key.fd].sink.write(by_fd[key.fd].filter.flush())
    for stream in streams:
        stream.pipe.close()
    return printed


def _assemble(output_path: Path, err_path: Path) -> None:
    """Append ``=== STDERR ===`` and the captured stderr to the artifact."""
    try:
        with open(output_path, "r+b") as out_file:
            out_file.seek(0, os.SEEK_END)
            size = out_file.tell()
            if size > len(STDOUT_HEADER):
                out_file.seek(size - 1)
                if out_file.read(1) != b"\n":
                    out_file.write(b"\n")
            out_file.seek(0, os.SEEK_END)
            out_file.write(STDERR_HEADER)
            with open(err_path, "rb") as err_file:
                while chunk := err_file.read(1024 * 1024):
                    out_file.write(chunk)
            out_file.flush()
            os.fsync(out_file.fileno())
    except OSError as exc:
        print(
            f"bar: warning: could not finish {output_path}: {exc.strerror or exc}",
            file=sys.stderr,
        )
