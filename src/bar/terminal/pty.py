"""Interactive steps: run a program in a pseudo-terminal and record what it shows.

The child gets a new session with the pty as its controlling terminal, so full-screen
agent UIs, job control keys and ``isatty()`` checks behave as in a real terminal. When
bar's stdin is a terminal it is put in raw mode, so every key (Ctrl-C included, as the
byte ``\\x03``) reaches the child's line discipline, which turns it into a signal just as
a real terminal would; the window size follows bar's terminal on every SIGWINCH. Raw mode
and signal handlers are restored in a ``finally`` whatever happens; SIGTERM and SIGHUP
are handed on to the child (then SIGKILL after a grace period or a second signal) so
the step still ends with the child's own exit status. A key that made the child's
terminal send a signal (Ctrl-C: SIGINT, Ctrl-\\: SIGQUIT), if it was the last thing typed
before the child ended, is how the child was stopped: an agent that catches SIGINT and
exits 0 is not recorded as a success (``bar.base.proc.exit_status``); a person who goes
on typing after it (a shell's prompt) did not end the program with it.

Everything the child prints goes to bar's stdout unchanged and, as it arrives, through
the secret scrubber to the step's files with plain ``write()`` calls: its plain text to
the output file every step has (``NNNN.output``, as a reader of the seed's format
expects it), and to an asciinema v2 cast (``bar.terminal.cast``) what the text lacks,
the timing and the escapes, referring to the text for the rest
(``bar.terminal.textref``): the output is stored about once. If bar is killed, the
recording ends where the child was, less what the scrubber held back (the few bytes
that could begin a secret) and the line being drawn (at most a second of it).

While the child prints faster than bar takes it, what is waiting in the pty is read in
one go (up to ``_BATCH`` bytes): each read is shown at once, and recorded as one event,
so the cost per byte of the recording does not grow with how finely the kernel cuts the
stream (a pty gives at most 4 KiB per read).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from bar.base.proc import Prepare, Starter, exit_status, start_directly
from bar.base.record import record
from bar.errors import BarError, CannotConfine, ExitCode, UsageError
from bar.terminal.cast import CastWriter
from bar.terminal.filters import StreamFilter
from bar.terminal.missed import Sent, members
from bar.terminal.recorder import HANDOVER, Handed, Recorder, Recording, handed

_DEFAULT_SIZE = (80, 24)
_READ_SIZE = 65536
_BATCH = 1 << 20  # bytes read from the pty before they are recorded, when it is busy
_PENDING_LIMIT = 65536  # bytes of input queued for the child before we stop reading more
_POLL = 0.5  # seconds between exit checks when no SIGCHLD handler could be installed
_DRAIN_QUIET = 0.25  # after the child exits, stop reading once the pty is this quiet...
_DRAIN_MAX = 5.0  # ...or this long after the exit (a background grandchild may hold it)
_MISSED_POLL = 0.05  # seconds between two looks for who missed a signal a key made
_KILL_GRACE = 5.0  # after passing SIGTERM/SIGHUP on, SIGKILL a child still alive
_NOT_FOUND = ExitCode.NOT_FOUND_COMMAND
_CANNOT_EXECUTE = ExitCode.CANNOT_EXECUTE

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@record(frozen=True)
class PtyResult:
    """How an interactive step ended. ``width``/``height`` are the starting size."""

    exit_code: int  # the child's code, 128+N if killed by signal N, 127/126 if not run
    signal: int | None
    printed: bool  # whether the child printed anything
    width: int
    height: int
    # the last key typed before the child ended was its terminal's interrupt character
    # (Ctrl-C), which it read itself (raw mode): the person may have stopped it with it
    interrupt_key: bool = False
    cut: bool = False  # its output went past the limit: the rest was shown, not kept


def _get_size(fd: int) -> tuple[int, int] | None:
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))
    except OSError:
        return None
    return (cols, rows) if cols > 0 and rows > 0 else None


def _set_size(fd: int, size: tuple[int, int]) -> None:
    cols, rows = size
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _env_size() -> tuple[int, int]:
    try:
        cols, rows = int(os.environ["COLUMNS"]), int(os.environ["LINES"])
    except (KeyError, ValueError):
        return _DEFAULT_SIZE
    return (cols, rows) if 0 < cols < 65536 and 0 < rows < 65536 else _DEFAULT_SIZE


def _become_controlling_terminal(then: Prepare) -> None:
    # Runs in the child after setsid() and after the pty slave became fds 0-2; ``then``
    # (the holder) after it, so the holder leads the session and the command inherits it.
    request = getattr(termios, "TIOCSCTTY", None)
    holder = getattr(then, "holder", None)
    if holder is not None and holder.lead_terminal():
        pass  # (a step's PID namespace: its init takes the terminal, bar.sandbox.holder)
    elif request is not None:
        fcntl.ioctl(0, request, 0)
    else:  # opening a tty in a new session makes it the controlling terminal
        os.close(os.open(os.ttyname(0), os.O_RDWR))
    if then is not None:
        then()


def _char(value: int | bytes) -> int | None:
    """A terminal's special character as a byte value (None: disabled)."""
    byte = value[0] if isinstance(value, bytes) else value
    return byte or None  # (0: _POSIX_VDISABLE)


def _write_blocking(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:  # someone made the fd non-blocking; wait instead
            select.select([], [fd], [])


class _Session:
    """One interactive run: the pty, bar's terminal, signals and the recording."""

    def __init__(self, stdin: int, stdout: int) -> None:
        self.stdin = stdin
        self.echo: int | None = stdout
        self.forward_stdin = True
        self.saved_attrs: list[Any] | None = None  # termios attributes
        self.size_fd: int | None = None
        self.size = _DEFAULT_SIZE
        self.master = -1
        self.proc: subprocess.Popen[bytes] | None = None
        self.status: int | None = None
        self.pending = bytearray()  # input waiting to be written to the child
        self.signals: list[int] = []
        self.previous_handlers: dict[int, _Handler] = {}
        self.previous_wakeup: int | None = None  # (``install_handlers``)
        self.terminated = False
        self.stopped_by: int | None = None  # the first SIGTERM/SIGHUP passed on
        self.keyed: int | None = None  # the signal the last key typed made (``_typed``)
        self.interrupt_key = False  # the last key typed was Ctrl-C, read as a key
        self.sent: list[Sent] = []  # the signals keys made, given again to who missed them
        self.kill_at: float | None = None
        self.recording: Recorder | None = None  # (handed to a fork when heavy: ``recorder``)
        self.printed = False
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)

    # -- setup and teardown

    def find_size(self) -> tuple[int, int]:
        for fd in (self.stdin, self.echo):
            if fd is not None and os.isatty(fd):
                self.size_fd = fd
                return _get_size(fd) or _env_size()
        return _env_size()

    def install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may handle signals; fall back to polling
        wanted = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGCONT]
        if self.size_fd is not None:
            wanted.append(signal.SIGWINCH)
        for sig in wanted:
            self.previous_handlers[sig] = signal.signal(sig, self._on_signal)
        # the kernel gives a signal to any of bar's threads (the policy's, the network's,
        # the supervisor's: one whose main thread has a signal pending already), and
        # Python runs the handler in the main thread only once it runs Python again: a
        # resize, a SIGTERM or the child's end waited for the next output or the next
        # poll. The interpreter's own handler writes to the wake-up pipe at once,
        # whichever thread it ran in.
        self.previous_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def restore_handlers(self) -> None:
        if self.previous_wakeup is not None:
            signal.set_wakeup_fd(self.previous_wakeup)
            self.previous_wakeup = None
        for sig, handler in self.previous_handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.previous_handlers.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        with contextlib.suppress(OSError):
            os.write(self.wake_w, b"\0")

    def enter_raw_mode(self) -> None:
        if os.isatty(self.stdin):
            self.saved_attrs = termios.tcgetattr(self.stdin)
            tty.setraw(self.stdin, termios.TCSANOW)

    def restore_terminal(self) -> None:
        if self.saved_attrs is not None:
            # A hung-up terminal cannot be restored, and that must not hide the result.
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.stdin, termios.TCSADRAIN, self.saved_attrs)

    def spawn(self, argv: list[str], cwd: Path | str, env: dict[str, str], start: Starter) -> None:
        master, slave = os.openpty()
        self.master = master
        try:
            _set_size(slave, self.size)
            if self.saved_attrs is not None:  # the child's terminal starts like ours
                termios.tcsetattr(slave, termios.TCSANOW, self.saved_attrs)
            try:
                self.proc = start(
                    lambda prepare: subprocess.Popen(
                        argv,
                        cwd=cwd,
                        env=env,
                        stdin=slave,
                        stdout=slave,
                        stderr=slave,
                        start_new_session=True,
                        preexec_fn=lambda: _become_controlling_terminal(prepare),
                    )
                )
            except FileNotFoundError:
                self._not_run(_NOT_FOUND, f"{argv[0]}: command not found")
            except CannotConfine as exc:  # (its namespaces could not be made: nothing ran)
                self._not_run(_CANNOT_EXECUTE, str(exc))
            except OSError as exc:
                self._not_run(_CANNOT_EXECUTE, f"{argv[0]}: {exc.strerror or exc}")
            except subprocess.SubprocessError as exc:
                raise BarError(f"could not start {argv[0]}: {exc}") from exc
        finally:
            # Only the child may hold the slave, so its exit reads as EOF on the master.
            os.close(slave)
        os.set_blocking(master, False)

    def _not_run(self, code: int, message: str) -> None:
        self.status = code
        self.output(f"bar: {message}\r\n".encode())

    def stop_child(self) -> None:
        """Make sure no child outlives the run (only matters when something failed)."""
        proc = self.proc
        if proc is None or self.status is not None:
            return
        self.kill(signal.SIGHUP)
        try:
            self.status = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.status = proc.wait()

    def close(self) -> None:
        for fd in (self.master, self.wake_r, self.wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.recording is not None:
            with contextlib.suppress(OSError):
                self.recording.abort()

    # -- the loop

    def output(self, data: bytes) -> None:
        self.show(data)
        self.record(data)

    def show(self, data: bytes) -> None:
        if self.echo is not None:
            try:
                _write_blocking(self.echo, data)
            except OSError:  # terminal hung up or reader gone: keep recording
                self.echo = None

    def record(self, data: bytes) -> None:
        recording = self.recording
        assert recording is not None
        self.printed = True
        recording.output(data)
        if isinstance(recording, Recording) and recording.taken >= HANDOVER and not recording.cut:
            self.recording = handed(recording)

    def read_busy(self, first: bytes) -> bool:
        """Show ``first`` and what else the pty holds now (up to ``_BATCH`` bytes), then
        record it all as one event; False once the pty is closed. (A recording handed to
        a fork is sent each read as it comes: a batch sent whole would wait for the fork
        to empty the pipe first, and the child for this process meanwhile.)"""
        self.show(first)
        handed = isinstance(self.recording, Handed)
        batch, open_, read = bytearray() if handed else bytearray(first), True, len(first)
        if handed:
            self.record(first)
        while read < _BATCH:
            try:
                data = os.read(self.master, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:  # Linux: EIO once no process holds the slave
                if exc.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                open_ = False
                break
            self.show(data)
            read += len(data)
            if handed:
                self.record(data)
            else:
                batch += data
        if batch:
            self.record(bytes(batch))
        return open_

    def kill(self, sig: int) -> None:
        if self.proc is None or self.status is not None:
            return  # not started, or already reaped (its pid may belong to another)
        groups = {self.proc.pid}
        with contextlib.suppress(OSError):
            groups.add(os.tcgetpgrp(self.master))  # a job the child's shell put in front
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, sig)

    def handle_signals(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self.wake_r, 512):
                pass
        signals, self.signals = self.signals, []
        for sig in signals:
            if sig == signal.SIGWINCH:
                self.follow_size()
            elif sig == signal.SIGCONT:
                if self.saved_attrs is not None:  # a shell may have reset it while stopped
                    with contextlib.suppress(termios.error):
                        tty.setraw(self.stdin, termios.TCSANOW)
                self.follow_size()
            elif sig == signal.SIGINT:
                self.pending[:0] = b"\x03"  # what the key would have sent
            elif sig in (signal.SIGTERM, signal.SIGHUP):
                if self.terminated:
                    self.kill(signal.SIGKILL)
                else:
                    self.terminated = True
                    self.stopped_by = sig
                    self.kill(sig)
                    self.kill_at = time.monotonic() + _KILL_GRACE

    def follow_size(self) -> None:
        if self.size_fd is None:
            return
        size = _get_size(self.size_fd)
        if size is not None and size != self.size:
            self.size = size
            with contextlib.suppress(OSError):
                _set_size(self.master, size)  # the kernel sends the child SIGWINCH
            assert self.recording is not None
            self.recording.resize(*size)

    def pump(self) -> None:
        proc = self.proc
        assert proc is not None
        master_open = True
        exited_at = last_data = 0.0
        while True:
            self.handle_signals()
            assert self.recording is not None
            self.recording.tick()
            now = time.monotonic()
            if self.status is None:
                self.status = proc.poll()
                exited_at = now
            if self.status is not None:
                quiet = now - max(exited_at, last_data)
                if not master_open or quiet >= _DRAIN_QUIET or now - exited_at >= _DRAIN_MAX:
                    return
            if self.kill_at is not None and now >= self.kill_at:
                self.kill(signal.SIGKILL)
                self.kill_at = None
            self.sent = [sent for sent in self.sent if sent.resend()]

            readers = [self.wake_r]
            if master_open:
                readers.append(self.master)
            if self.forward_stdin and len(self.pending) < _PENDING_LIMIT:
                readers.append(self.stdin)
            writers = [self.master] if self.pending and master_open else []
            timeout = _POLL if self.status is None else _DRAIN_QUIET
            if self.sent:
                timeout = min(timeout, _MISSED_POLL)
            if self.kill_at is not None:
                timeout = min(timeout, max(self.kill_at - now, 0.0))
            ready_r, ready_w, _ = select.select(readers, writers, [], timeout)

            if self.master in ready_r:
                try:
                    data = os.read(self.master, _READ_SIZE)
                except BlockingIOError:
                    data = None
                except OSError as exc:  # Linux: EIO once no process holds the slave
                    if exc.errno != errno.EIO:
                        raise
                    data = b""
                if data:
                    last_data = time.monotonic()
                    master_open = self.read_busy(data)
                elif data is not None:
                    master_open = False
            if self.stdin in ready_r:
                try:
                    data = os.read(self.stdin, _READ_SIZE)
                except OSError:  # e.g. EIO from a terminal that hung up
                    data = b""
                if data:
                    self.pending += data
                else:  # EOF: stop forwarding, but leave the child's terminal open
                    self.forward_stdin = False
            if self.master in ready_w:
                try:
                    written = os.write(self.master, self.pending[:4096])
                except BlockingIOError:
                    pass
                except OSError:
                    self.pending.clear()
                else:
                    self._typed(bytes(self.pending[:written]))
                    del self.pending[:written]

    def _typed(self, keys: bytes) -> None:
        """Note the signal the child's terminal sent for ``keys`` (its interrupt or quit
        character, when the terminal makes signals of them), the interrupt character
        read as a key by a program that put its terminal in raw mode (a full-screen
        agent: ``interrupt_key``), or that the person went on typing (text, Enter,
        Ctrl-D: any key but those and the escape sequences)."""
        try:
            attrs = termios.tcgetattr(self.master)  # (Linux: the child's side's settings)
        except termios.error:
            return
        signals = attrs[3] & termios.ISIG
        intr, quit_ = (_char(attrs[6][i]) for i in (termios.VINTR, termios.VQUIT))
        for byte in keys:
            if byte == intr:
                self.keyed = int(signal.SIGINT) if signals else None
                self.interrupt_key = not signals
                if signals:
                    self._sent(signal.SIGINT)
            elif byte == quit_ and signals:
                self.keyed, self.interrupt_key = int(signal.SIGQUIT), False
                self._sent(signal.SIGQUIT)
            elif byte == 0x1B:
                break  # an escape sequence: a key like an arrow, or the terminal's own report
            else:  # any other key (text, Enter, Ctrl-D): the person went on
                self.keyed, self.interrupt_key = None, False

    def _sent(self, signum: int) -> None:
        """The terminal sent ``signum`` to the processes in front: note them, to give it
        again to those that were being started and missed it (``bar.terminal.missed``)."""
        if self.proc is None or self.status is not None:
            return
        with contextlib.suppress(OSError):
            front = os.tcgetpgrp(self.master)
            self.sent.append(Sent(signum, members(front, self.proc.pid)))

    def result(self, printed: bool, start_size: tuple[int, int], cut: bool) -> PtyResult:
        status = self.status
        assert status is not None
        code, sig = exit_status(status, self.stopped_by or self.keyed)
        width, height = start_size
        interrupt_key = self.interrupt_key and sig is None
        return PtyResult(code, sig, printed, width, height, interrupt_key, cut)


def run_in_pty(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None,
    cast_path: Path,
    output_path: Path,
    scrub: Callable[[], StreamFilter] | None = None,
    stdin: int = 0,
    stdout: int = 1,
    start: Starter = start_directly,
    limit: int | None = None,
) -> PtyResult:
    """Run ``argv`` in a new pseudo-terminal, showing and recording what it prints
    (``limit``: the bytes of it kept; the rest is shown, not kept: ``cut``).

    ``env`` is the child's complete environment (None: bar's own). ``output_path``
    gets the plain text, in the format of every step's output, and ``cast_path`` an
    asciinema v2 recording that refers to it for that text (``bar.terminal.textref``);
    both are created 0600 and written through a ``scrub()`` scrubber each, if given.
    ``stdin``
    and ``stdout`` are bar's terminal (file descriptors); if stdin is not a terminal its
    data is forwarded until EOF. A program that cannot be found or executed yields 127
    or 126 with a one-line message in the recording, not an exception. ``start``
    starts the process (``bar.sandbox`` confines it there).
    """
    if not argv:
        raise UsageError("no command to run")
    if not os.path.isdir(cwd):
        raise BarError(f"cannot run in {cwd}: no such directory")
    child_env = dict(os.environ if env is None else env)
    if stdout == 1:  # what bar printed before must come out before the child's output
        with contextlib.suppress(Exception):
            sys.stdout.flush()
    session = _Session(stdin, stdout)
    try:
        start_size = session.size = session.find_size()
        cast = CastWriter(
            cast_path,
            width=start_size[0],
            height=start_size[1],
            env=child_env,
            scrubber=scrub() if scrub else None,
            text=output_path,
            text_scrubber=scrub() if scrub else None,
        )
        session.recording = Recording(cast, limit)
        try:
            session.install_handlers()
            session.enter_raw_mode()
            session.spawn(list(argv), cwd, child_env, start)
            if session.status is None:
                session.pump()
        finally:
            session.stop_child()
            session.restore_terminal()
            session.restore_handlers()
        cut = session.recording.close()
        return session.result(session.printed, start_size, cut)
    finally:
        session.close()
