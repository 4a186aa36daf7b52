"""A step's processes die with the ``bar`` that supervises them (docs/sandbox.md, "What a
step may do").

A ``bar run`` killed by SIGKILL cannot stop anything itself: the step's processes would go
on, and what they write afterwards would read as the developer's hand edit. So a step's
command is not bar's child but its grandchild. Between the two sits a *holder*: a copy
of bar made by ``fork`` in the command's ``preexec_fn`` (no program is started for it,
so it costs one fork). The holder

- is a child subreaper: whatever the command starts, however it detaches (``setsid``,
  a double fork), is re-parented to the holder when its parent ends;
- watches bar: once bar is gone (its parent is no longer bar) it kills the command and
  everything it holds at once: the kernel wakes it when bar dies (``PR_SET_PDEATHSIG``
  with ``_LOOK``, a signal that is only ever a cue to look), and it looks every
  ``_WATCH`` seconds anyway. (A step's process left writing for those seconds would
  have its writes credited to the developer by the recovery.);
- keeps open the locks bar held when it started the command (``keep``: the descriptors
  it was forked with). A lock is held as long as one descriptor of it is open, so a bar
  killed during a step passes its task to no other bar before the holder has killed
  everything of the step: what a step's process writes is never seen by a recovery
  while it is still being written;
- when the command ends, kills what it left running (``stop_leftovers``: a confined step)
  and reports their pids to bar through a pipe;
- then ends as the command ended (its exit code, or the same signal), so bar records the
  command's own outcome;
- passes on the signals bar sends to it alone. Those sent to the whole process group, or
  by the terminal (Ctrl-C), reached the command already and are not sent twice.

The command is killed when its holder dies (``PR_SET_PDEATHSIG``), so even a holder
killed by SIGKILL does not leave the command running.

A subreaper loses a race to a chain of processes that forks faster than it can kill
(hundreds deep, each re-parented one generation at a time). So where the kernel allows
(``bar.sandbox.namespace``), a confined step has a PID namespace of its own, and between the
holder and the command sits the namespace's init (``_Init``): when the command ends, the
init kills every process of the namespace with one ``kill(-1)``; when the init itself
dies (the holder gone, bar gone), the kernel kills them all at once, however deep.

The holder runs Python in a forked child of a process that may have threads: it imports
nothing, takes no lock and touches nothing but system calls.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import signal
from collections.abc import Callable

from bar.base import file_clock
from bar.sandbox import landlock, namespace

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_WATCH = 0.2  # seconds between two looks at whether bar is still there
_ROUNDS = 200  # a process that forks as fast as it is killed is stopped in time anyway
# sent by the kernel to a holder when the thread of bar that made it ends: look whether bar
# is gone (the thread may end with bar alive: then nothing is done)
_LOOK = signal.SIGRTMAX - 1
# what would end the holder before it can pass the command's outcome on (all waited for)
_HELD: frozenset[int] = frozenset(
    {
        _LOOK,
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGALRM,
        signal.SIGPIPE,
        signal.SIGCHLD,
    }
)
# the file whose mtime is the running step's last sign of life (``bar.step.interrupted``)
_SIGN: list[str] = []
_SI_KERNEL_LOWEST = 1  # si_code above 0: sent by the kernel (a terminal), not by a process


def sign_of_life(path: str | None) -> None:
    """Name the file whose mtime says until when the running step may have written
    (its intent journal), or None. A holder that kills its step because bar died
    touches it once every process of the step is gone: what the step wrote until then
    is the step's, not a hand edit (``bar.step.interrupted``)."""
    _SIGN[:] = [path] if path else []


def _open_sign() -> int:
    try:
        return os.open(_SIGN[0], os.O_RDONLY | os.O_CLOEXEC) if _SIGN else -1
    except OSError:
        return -1


class Holder:
    """One command's holder: ``prepare`` goes in its ``preexec_fn``; after the command
    ended, ``stopped`` gives the pids of what the holder stopped.

    ``isolate`` (in the holder, before anything is forked) makes the namespaces of the
    step; with ``init``, the first of them is a PID namespace whose init (``_Init``) is
    the command's parent. ``confine`` runs in the command's process, last before exec."""

    def __init__(
        self,
        *,
        stop_leftovers: bool,
        confine: Callable[[], None] | None,
        isolate: Callable[[], None] | None = None,
        init: Callable[[], None] | None = None,
        keep: tuple[int, ...] = (),
    ) -> None:
        self.stop_leftovers = stop_leftovers
        self.keep = keep
        self.confine = confine
        self.isolate = isolate
        self.init = init
        self._bar = os.getpid()  # (taken here: a holder whose bar died first ends at once)
        self._report, self._to_report = os.pipe()  # (neither is inherited by a program)
        self._said = b""  # what it reported: the pids it stopped, or why it failed
        self._sign = _open_sign()
        # a step on a terminal of its own (``bar.terminal.pty``): its session is led by
        # the namespace's init (set in the child, by ``lead_terminal``)
        self.terminal = False
        self.prepare = functools.partial(Holder._prepare, self)
        self.prepare.holder = self  # type: ignore[attr-defined]

    def lead_terminal(self) -> bool:
        """In the child, before ``prepare``, with a terminal of the step's own on 0-2:
        whether the holder leaves making it the controlling terminal to the init (a
        shell in the namespace can then make process groups of it)."""
        self.terminal = self.init is not None
        return self.terminal

    def _prepare(self) -> None:
        """In the child, before exec: become the holder and return only in the command,
        confined by ``confine`` (an error there reaches ``Popen``: the command never runs
        unconfined)."""
        if os.getppid() != self._bar:  # bar died before its holder began
            os._exit(137)
        if self.isolate is not None:
            try:
                self.isolate()
            except OSError as exc:  # (Popen says only that preexec_fn failed: bar is told why)
                with contextlib.suppress(OSError):
                    said = (exc.strerror or str(exc)).encode(errors="replace")
                    os.write(self._to_report, b"!" + said.replace(b"\n", b" ") + b"\n")
                raise
        if self.init is not None:
            hold_in_namespace(
                self._bar,
                self._to_report,
                self.init,
                terminal=self.terminal,
                sign=self._sign,
                keep=self.keep,
            )
        else:
            hold(
                self._bar,
                self._to_report,
                stop_leftovers=self.stop_leftovers,
                sign=self._sign,
                keep=self.keep,
            )
        if self.confine is not None:
            self.confine()

    def started(self) -> None:
        """In bar, once the child is made: only the holder writes the report."""
        if self._sign >= 0:
            os.close(self._sign)
            self._sign = -1
        if self._to_report >= 0:
            os.close(self._to_report)
            self._to_report = -1

    def failure(self) -> str | None:
        """Why the step's namespaces could not be made, if that is why the command did not
        start (after ``Popen`` failed: the holder said so on its report, then ended)."""
        for line in self._read().splitlines():
            if line.startswith(b"!"):
                return line[1:].decode(errors="replace")
        return None

    def stopped(self) -> list[int]:
        """The pids the holder reported it stopped (none while it still runs); closes the
        report. Twice is harmless."""
        lines = self._read().splitlines()
        return [
            int(w)
            for line in lines
            if not line.startswith(b"!")
            for w in line.split()
            if w.isdigit()
        ]

    def _read(self) -> bytes:
        """What the holder reported, read once it ended (the report is then closed)."""
        self.started()
        if self._report >= 0:
            os.set_blocking(self._report, False)
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(self._report, 65536):
                    self._said += chunk
            os.close(self._report)
            self._report = -1
        return self._said


def _no_wake_up() -> None:
    """The holder is a fork of bar that goes on in Python: the wake-up pipe bar's main
    thread waits on (``signal.set_wakeup_fd``: a step's) is not its to write, and once it
    closed what it does not keep, that number may be one of its own pipes. (A fork's
    thread is its main one: Python made it so before ``preexec_fn``.)"""
    signal.set_wakeup_fd(-1)


def hold(
    bar: int, report: int, *, stop_leftovers: bool, sign: int = -1, keep: tuple[int, ...] = ()
) -> None:
    """Fork the command's process off this one and stay behind as its holder: returns in
    the command only; the holder itself ends in ``os._exit`` or by the command's signal.
    ``keep``: descriptors the holder keeps open until then (the locks bar holds)."""
    with contextlib.suppress(OSError):
        landlock.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _no_wake_up()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    _wake_when_gone(bar)
    holder = os.getpid()
    command = os.fork()
    if command == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        os.close(report)
        with contextlib.suppress(OSError):
            landlock.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != holder:  # the holder died before the line above
            os._exit(137)
        return
    try:
        _close_all_but(report, sign, *keep)
        status = _serve(bar, command, lambda sig: os.kill(command, sig), sign=sign)
        stopped = _stop_children(os.getpid()) if stop_leftovers else []
        with contextlib.suppress(OSError):
            os.write(report, " ".join(map(str, stopped)).encode())
        os.close(report)
        _end_as(status)
    finally:
        os._exit(70)  # (only if serving failed: never back into the caller's code)


def hold_in_namespace(
    bar: int,
    report: int,
    init: Callable[[], None],
    *,
    terminal: bool = False,
    sign: int = -1,
    keep: tuple[int, ...] = (),
) -> None:
    """``hold``, for a holder that made a PID namespace (``namespace.enter``): its child is
    that namespace's init, which runs ``init`` (it mounts its ``/proc``), forks the
    command and stays behind (``_Init``). The holder passes its signals to the init
    through a pipe (with a wake-up signal), since in the namespace no sender can be told
    from another; the init passes back how the command ended (an init cannot end by a
    signal of its own). Returns in the command only."""
    _no_wake_up()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    _wake_when_gone(bar)
    to_init, signals = os.pipe()
    said, to_holder = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(signals)
        os.close(said)
        if sign >= 0:
            os.close(sign)
        _Init(to_init, to_holder, report, before).begin(init, terminal)
        return  # (in the command)
    os.close(to_init)
    os.close(to_holder)
    try:
        _close_all_but(report, signals, said, sign, *keep)
        os.close(report)  # (the init reports what it stopped)

        def forward(sig: int) -> None:
            os.write(signals, bytes([sig]))
            os.kill(first, signal.SIGCHLD)  # (wakes the init: it takes it as no order)

        # (an init that leads a terminal's session is out of bar's process group: what
        # bar sends to that group reaches the holder alone, and is passed on)
        status = _serve(bar, first, forward, alone=terminal, sign=sign)
        told = _read_all(said)
        _end_as(int(told) if told.isdigit() else status)
    finally:
        os._exit(70)


class _Init:
    """The init of a step's PID namespace: the command's parent, and the reaper of
    everything the command leaves. It ends when the command does, after killing what is
    left (``kill(-1)`` from an init reaches its whole namespace, and nothing else) and
    reporting how many it stopped; were it killed instead, the kernel kills them all."""

    def __init__(
        self, orders: int, status: int, report: int, mask: set[int | signal.Signals]
    ) -> None:
        self.orders, self.status, self.report, self.mask = orders, status, report, mask

    def begin(self, init: Callable[[], None], terminal: bool) -> None:
        with contextlib.suppress(OSError):
            landlock.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        os.set_blocking(self.orders, False)
        if _gone(self.orders):  # the holder died before the line above
            os._exit(137)
        init()
        if terminal:  # (the step's session, led from inside, where the command's shell
            os.setsid()  # sees the process groups it makes)
            namespace.take_terminal()
        command = os.fork()
        if command == 0:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            for fd in (self.orders, self.status, self.report):
                os.close(fd)
            return
        try:
            _close_all_but(self.orders, self.status, self.report)
            self._serve(command)
        finally:
            os._exit(70)

    def _serve(self, command: int) -> None:
        status: int | None = None
        while status is None:
            signal.sigtimedwait(_HELD, _WATCH)  # (what reaches it from outside: no order)
            try:
                orders = os.read(self.orders, 256)
                if not orders:  # the holder is gone: so is everything of the step
                    os._exit(137)
            except BlockingIOError:
                orders = b""
            for sig in orders:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(command, sig)
            status = _reap(command)
        left = [pid for pid in _alive() if pid != 1]
        if os.getpid() == 1:  # (only an init's kill(-1) stays in its namespace)
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
        else:
            _stop_children(os.getpid())
        with contextlib.suppress(ChildProcessError):
            while True:
                os.waitpid(-1, 0)
        with contextlib.suppress(OSError):
            os.write(self.report, " ".join(map(str, left)).encode())
            os.write(self.status, str(status).encode())
        os._exit(0)


def _alive() -> list[int]:
    """The pids in ``/proc`` of the processes that have not ended (no zombie)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] != b"Z":
            found.append(int(name))
    return found


def _gone(fd: int) -> bool:
    """Whether the writer of the pipe ``fd`` (non-blocking) has closed it."""
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:
        return False


def _read_all(fd: int) -> str:
    data = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 64):
            data += chunk
    return data.decode("ascii", "replace").strip()


def _close_all_but(*keep: int) -> None:
    """Keep only ``keep`` of the descriptors (the command has its own), and ``/dev/null``
    as standard input and outputs."""
    last = 3
    for fd in sorted(k for k in keep if k >= 0):
        os.closerange(last, fd)
        last = fd + 1
    os.closerange(last, 1 << 20)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _wake_when_gone(bar: int) -> None:
    """Have the kernel send ``_LOOK`` (blocked, waited for) to this holder when bar dies."""
    with contextlib.suppress(OSError):
        landlock.prctl(_PR_SET_PDEATHSIG, _LOOK)
    if os.getppid() != bar:  # bar died before the line above
        os._exit(137)


def _serve(
    bar: int,
    command: int,
    forward: Callable[[int], None],
    *,
    alone: bool = False,
    sign: int = -1,
) -> int:
    """Wait for ``command`` to end (its wait status), passing on the signals bar sends to
    this process alone (``forward``); kill it at once when bar is gone, and once it and
    everything it held are dead, touch ``sign`` (``sign_of_life``)."""
    group = os.getpgrp() == os.getpid()  # bar signals the whole group, never the holder alone
    me = os.getpid()
    status: int | None = None
    while status is None:
        info = signal.sigtimedwait(_HELD, _WATCH)
        if os.getppid() != bar:  # bar is gone: so is everything of its step
            with contextlib.suppress(ProcessLookupError):
                os.kill(command, signal.SIGKILL)
            # (a PID namespace's init is reaped only once every process in it is gone)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(command, 0)
            _stop_children(me)
            if sign >= 0:  # (in a later tick of the file clock than the last death)
                file_clock.tick_after(file_clock.ceiling(), wait=0.5)
                with contextlib.suppress(OSError):
                    os.utime(sign)
            os._exit(137)
        if info is not None and info.si_signo not in (signal.SIGCHLD, _LOOK):
            # (a signal sent to a whole group that holds a PID namespace's processes may
            # come with no sender: the kernel clears it for them, in the one record
            # each member's copy is made from; it reached the command already)
            from_process = info.si_code < _SI_KERNEL_LOWEST and info.si_pid != me
            from_process &= alone or info.si_pid != 0
            if from_process and (alone or not (group and info.si_pid == bar)):
                with contextlib.suppress(ProcessLookupError, OSError):
                    forward(info.si_signo)
        status = _reap(command)
    return status


def _reap(command: int) -> int | None:
    """Reap every child that ended; the command's wait status once it has."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == command:
            found = status


def _stop_children(me: int) -> list[int]:
    """Kill every process this one holds; each round the next generation is re-parented
    here. Returns their pids."""
    stopped: list[int] = []
    for _ in range(_ROUNDS):
        children = _children(me)
        if not children:
            break
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
        stopped += children
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    return stopped


def _children(me: int) -> list[int]:
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:  # (a kernel without the list: read every process's parent)
        found = []
        for name in os.listdir("/proc"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
                if int(stat[stat.rfind(b")") + 2 :].split()[1]) == me:
                    found.append(int(name))
        return found


def _end_as(status: int) -> None:
    """End this process the way the command ended: its exit code, or its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # (its core was the command's)
        with contextlib.suppress(OSError, ValueError):  # (SIGKILL's cannot be set: none is)
            signal.signal(sig, signal.SIG_DFL)
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))
