"""The resident (``bar.changes.fast.resident``): a bar with its code loaded, which forks to run a
``bar run`` sent to it.

Started by ``bar.changes.fast.resident.start`` as ``python -m bar.cli.warm FD SOCKET IDLE``
(the face's entry, which hands ``main`` the command line to run and what to load first),
with its listening socket (``FD``, bound at ``SOCKET``) inherited, in a session of its
own, its directory ``/`` and its environment empty but for ``PATH`` and the locale. It
runs nothing itself: its forks wait for the callers (the spares); the spare that takes
a connection from a caller that is not confined says ``hello`` first (the caller sends
nothing to a process the kernel does not show to be like itself: ``resident._trusted``),
reads the request, and if it may serve it (``_refusal``) the fork takes the caller's descriptors, directory, umask, environment, locale
and standard streams, says its pid, runs the command line and says its exit code. The
resident exits after ``IDLE`` seconds without a request, when its socket is removed or
replaced, when one of bar's files it loaded has changed (an upgrade: the next command
runs the new code and starts a new resident), or when asked (``exit``).
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

from bar.base import faults, peers
from bar.base.inotify import ANY_CHANGE, Watch
from bar.base.proc import work_nowhere
from bar.base.record import record
from bar.changes.fast import own_pages
from bar.changes.fast.resident import HELLO, MAGIC, file_id
from bar.policy.loader import compile_cached

_WAKE_S = 5.0  # how often it checks that its socket and its code are still its own
_MAX_REQUEST = 4 << 20  # bytes: an environment and command line larger than any exec takes
SPARES = 2  # forks waiting for a command while none runs
Runner = Callable[[list[str]], int]  # runs one command line (without the program's name)
# what a caller must share with the resident to be served by a fork of it
# (one thread, as both are: a thread of its own confined, as Landlock can, is not)
_STATUS_KEYS = (
    b"Uid:",
    b"Gid:",
    b"Groups:",
    b"CapInh:",
    b"CapPrm:",
    b"CapEff:",
    b"CapBnd:",
    b"CapAmb:",
    b"NoNewPrivs:",
    b"Seccomp:",
    b"Seccomp_filters:",
    b"Threads:",
    b"Cpus_allowed_list:",
    b"Mems_allowed_list:",
)
_NAMESPACES = ("mnt", "pid", "net", "user", "uts", "ipc", "cgroup", "time")


def identity(pid: int | str) -> list[bytes] | None:
    """What a process shares with those it could have been forked from: credentials,
    capabilities, confinement, namespaces, cgroup, root, limits, nice value (None: not
    readable, so not the same)."""
    proc = f"/proc/{pid}"
    try:
        with open(f"{proc}/status", "rb") as f:
            status = f.read().splitlines()
        said = [line for line in status if line.startswith(_STATUS_KEYS)]
        said += [
            os.readlink(f"{proc}/ns/{ns}").encode()
            for ns in _NAMESPACES
            if os.path.exists(f"/proc/self/ns/{ns}")
        ]
        said.append(os.readlink(f"{proc}/root").encode())
        for name in ("cgroup", "limits", "oom_score_adj"):
            with open(f"{proc}/{name}", "rb") as f:
                said.append(f.read())
        with open(f"{proc}/stat", "rb") as f:
            said.append(f.read().rpartition(b")")[2].split()[16])  # (its nice value)
    except (OSError, IndexError):
        return None
    try:  # the security module's label (AppArmor, SELinux), where there is one
        with open(f"{proc}/attr/current", "rb") as f:
            said.append(f.read())
    except OSError as exc:
        said.append(b"(%d)" % (exc.errno or 0))
    return said


_SO_PEERPIDFD = 77  # (Linux 6.5; not named by Python 3.11's socket module)


def _code_dirs(package: str) -> list[str]:
    """The directories of bar's code and data (not the byte-code caches)."""
    found = []
    for folder, subdirs, _ in os.walk(package):
        subdirs[:] = [d for d in subdirs if d != "__pycache__"]
        found.append(folder)
    return found


def _caller_still_there(conn: socket.socket) -> bool | None:
    """Whether the process that connected is still the one alive (a pidfd of it says so
    whatever became of its pid since); None where the kernel cannot say."""
    try:
        pidfd = int.from_bytes(conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD, 4), sys.byteorder)
    except OSError:
        return None
    try:
        poll = select.poll()
        poll.register(pidfd, select.POLLIN)
        return not poll.poll(0)  # (readable: it has exited)
    finally:
        os.close(pidfd)


@record(frozen=True)
class Request:
    """A caller's ``bar`` command, as ``bar.changes.fast.resident.request`` sends it: what
    the fork must take on to be that caller's ``bar``. Sent as its fields in this order,
    NUL-separated (``HEADER``), then the number of arguments, the arguments (the program
    first) and the environment, one ``KEY=VALUE`` each."""

    magic: bytes  # ``resident.MAGIC``: the protocol's name and version
    package: str  # where the caller's bar is installed
    executable: str  # the caller's Python
    fs_encoding: bytes  # its file system encoding and ``-X utf8`` mode: as ours or refused
    utf8_mode: bytes
    umask: int
    ignored: list[int]  # the signals it ignores (``nohup``): ignored in the fork too
    blocked: list[int]  # its signal mask
    streams: list[bytes]  # stdin, stdout, stderr: ``encoding:errors:line_buffering:write_through``
    argv: list[str]
    environ: dict[bytes, bytes]

    @classmethod
    def parse(cls, data: bytes) -> Request | None:
        """The request ``data`` holds; None if it is not one this resident reads."""
        fields = data.split(b"\0")
        try:
            if fields[0] != MAGIC:
                return None
            argc = int(fields[11])
            environ = (e.partition(b"=") for e in fields[12 + argc :])
            return cls(
                magic=fields[0],
                package=os.fsdecode(fields[1]),
                executable=os.fsdecode(fields[2]),
                fs_encoding=fields[3],
                utf8_mode=fields[4],
                umask=int(fields[5]),
                ignored=_numbers(fields[6]),
                blocked=_numbers(fields[7]),
                streams=fields[8:11],
                argv=[os.fsdecode(a) for a in fields[12 : 12 + argc]],
                environ={k: v for k, sep, v in environ if sep and k},
            )
        except (IndexError, ValueError):
            return None


def _numbers(field: bytes) -> list[int]:
    return [int(n) for n in field.split(b",") if n]


class Resident:
    def __init__(
        self,
        listener_fd: int,
        socket_file: str,
        idle: float,
        run: Runner,
        fits: Callable[[], bool] = lambda: True,
    ) -> None:
        self.run = run
        self.fits = fits  # False: what it loaded no longer suits its bar home (it exits)
        self.loaded_at = 0
        self.listener = socket.socket(fileno=listener_fd)
        self.socket_file = socket_file
        self.idle = idle
        self.socket_id = file_id(socket_file)
        self.package = os.path.dirname(sys.modules["bar"].__file__ or "")
        self.loaded: dict[str, int] = {}
        self.code: Watch | None = None
        self.me: list[bytes] | None = None
        self.pid = os.getpid()
        # what a spare tells the resident: ``t PID`` (taken; with the connection when it
        # runs a command), ``x`` (exit)
        self.news, self.tell = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.news.setblocking(False)  # (read until empty: ``_hear``)
        self.running: dict[int, socket.socket] = {}  # pid -> its caller's connection
        self.spares: set[int] = set()
        self.heard = False
        self.others: dict[str, int] = {}  # the other files it loaded (libraries, stdlib)
        self.woken, self.wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # (SIGCHLD)

    def load(self, warm_up: Callable[[], None]) -> None:
        """Load what the commands will need: ``warm_up`` (the face's code, which it hands
        in), then what every confined step needs; and note what was loaded."""
        # bar's directories, watched from before it loads: a spare then knows at once
        # that none of its files changed (~10 µs, where statting each one takes ~0.5 ms)
        self.code = Watch(_code_dirs(self.package), ANY_CHANGE)
        warm_up()
        from bar.base.record import compile_all
        from bar.sandbox import own_code  # (loaded here: the socket is taken before)

        compile_all()  # (what its forks make, they make at full speed)
        own_code.linked()  # (the walk of bar's files a confined step needs, made once)
        compile_cached(os.path.dirname(self.socket_file))
        make_first_uses()
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if path:
                with contextlib.suppress(OSError):
                    mine = self.loaded if path.startswith(self.package) else self.others
                    mine[path] = os.stat(path).st_mtime_ns
        self.me = identity("self")
        self.loaded_at = time.time_ns()
        gc.freeze()  # what is loaded stays shared with the forks: no collection touches it

    def serve(self) -> None:
        """Keep forks (the spares) waiting for the next commands: two while no command
        runs, so that the one a command takes is replaced once it ends, not while it
        runs (a fork of the resident takes milliseconds of a core the command could
        use); at least one at all times. Exit when idle with no command running, or
        told to. (A spare is not killed on the way out: it may have just taken a
        command; it leaves by itself once it finds the resident gone.)"""
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake)
        last = checked = time.monotonic()
        while True:
            if not self._hear():
                return
            if self.heard:
                last, self.heard = time.monotonic(), False
            self._reap()
            while len(self.spares) < (1 if self.running else SPARES):
                self.spares.add(self._fork_spare())
            now = time.monotonic()
            if now - checked >= _WAKE_S:  # (every file it loaded, not only bar's)
                checked = now
                if not self._unchanged(self.others) or self._links_made() or not self.fits():
                    return
            left = self.idle - (now - last)
            if (left <= 0 and not self.running) or not self._still_here():
                return
            wait = min(max(left, 0.0), _WAKE_S)
            select.select([self.news.fileno(), self.woken], [], [], wait)
            with contextlib.suppress(OSError):
                os.read(self.woken, 512)

    def _hear(self) -> bool:
        """Take what the spares said (before any fork is reaped: a fork that ran a
        command is known as such before its end is collected); False: exit."""
        while True:
            try:
                said, fds, _flags, _addr = socket.recv_fds(self.news, 64, 1)
            except BlockingIOError:
                return True
            if said.startswith(b"x"):
                return False
            self.heard = True
            if said.startswith(b"t "):
                pid = int(said[2:])
                self.spares.discard(pid)
                if fds:
                    self.running[pid] = socket.socket(fileno=fds[0])
                if not self.spares:
                    self.spares.add(self._fork_spare())

    def _reap(self) -> None:
        """Collect the forks that ended; a fork that ran a command has said how it
        exited, unless it was killed: its caller is told how it ended (``ended``). A
        spare that died waiting is replaced."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.running.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.settimeout(1.0)
                    _say(conn, b"ended %d" % status)
                conn.close()
            self.spares.discard(pid)  # (one that died waiting: replaced by ``serve``)

    def _fork_spare(self) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                self._wait_as_spare()
            finally:
                os._exit(0)
        return pid

    def _still_here(self) -> bool:
        """Its socket is its own still, and bar's files are those it loaded."""
        if self.socket_id is None or file_id(self.socket_file) != self.socket_id:
            return False  # (gone before it started: its home was removed at once)
        if self.code is not None and self.code.quiet():
            return True  # (nothing happened in bar's directories since it loaded)
        return self._unchanged(self.loaded) and not self._links_made()

    @staticmethod
    def _links_made() -> bool:
        """Whether a file of bar's has gained or lost a hard link since it was walked (a
        link leaves the file's mtime as it was, and its directory's watch silent): the
        forks take this process's answer, and a confined step must not start beside one
        (``bar.sandbox.own_code``). A walk of ~2 ms, made at each check (``_WAKE_S``)."""
        from bar.sandbox import own_code

        before = own_code.linked()
        return own_code.linked(again=True) != before

    @staticmethod
    def _unchanged(files: dict[str, int]) -> bool:
        for path, mtime in files.items():
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return False
            except OSError:
                return False
        return True

    def _forget_dead_resident(self) -> None:
        """In an orphaned spare: remove the socket of its dead resident, if it is still
        that one, so that the next command starts a new resident."""
        if file_id(self.socket_file) == self.socket_id:
            with contextlib.suppress(OSError):
                os.unlink(self.socket_file)

    def _wait_as_spare(self) -> None:
        """In the spare: take the next connection, tell the resident, then serve it."""
        signal.set_wakeup_fd(-1)
        for fd in (self.woken, self.wake):
            os.close(fd)
        self.news.close()
        for conn in self.running.values():
            conn.close()
        os.setpgid(0, 0)  # (a signal to the resident's group is not one to this command)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        own_pages.copy_shared_pages()  # (the copies its command's writes would make: now)
        self.listener.settimeout(_WAKE_S)
        while True:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                if os.getppid() != self.pid:
                    self._forget_dead_resident()  # the resident is gone
                    return
                continue
            except OSError:
                return
            if os.getppid() != self.pid:
                # its resident died (killed): an orphan serves no one, and takes the dead
                # resident's socket with it, so that this caller starts a new resident
                self._forget_dead_resident()
                with conn, contextlib.suppress(OSError):
                    conn.settimeout(0.5)
                    _say(conn, b"no resident")
                return
            if not peers.confined_caller(conn):
                break
            # a process of a confined step is never served, and never holds a spare
            # (holding connections open would leave none for the developer's bar)
            with conn, contextlib.suppress(OSError):
                conn.settimeout(0.5)
                _say(conn, b"no caller")
        self.listener.close()
        with conn:
            conn.settimeout(2.0)
            try:
                # first the caller hears from this process, whose credentials the kernel
                # gives it: it sends nothing to a process it cannot trust
                # (``resident._trusted``)
                _say(conn, HELLO)
                data, fds = _receive(conn)
            except (OSError, ValueError):
                self._tell(b"t %d" % os.getpid())
                return
            try:
                if data in (b"exit", b"ping", b"status"):
                    self._tell(b"x" if data == b"exit" else b"t %d" % os.getpid())
                    _say(conn, {b"exit": b"bye", b"ping": b"pong"}.get(data) or self._status())
                    return
                why = self._refusal(conn, data, fds)
                if why is not None:
                    self._tell(b"x" if why == "stale" else b"t %d" % os.getpid())
                    _say(conn, b"no " + why.encode())
                    return
                # the resident keeps the connection, to tell the caller how this fork
                # ended if it cannot say so itself (killed)
                self._tell(b"t %d" % os.getpid(), conn.fileno())
                self.tell.close()
                _become(conn, data, fds, self.run)
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _tell(self, word: bytes, fd: int | None = None) -> None:
        with contextlib.suppress(OSError):
            socket.send_fds(self.tell, [word], [fd] if fd is not None else [])

    def _other_caller(self, conn: socket.socket) -> bool:
        """Whether the process at the other end is not one this could have been (a
        confined one among them: its no_new_privs differs), or no longer the one that
        connected (its pid taken by another process since)."""
        pid = peers.peer_pid(conn)
        if pid is None or self.me is None or identity(pid) != self.me:
            return True
        return not _caller_still_there(conn)

    def _status(self) -> bytes:
        """``status PID LOADED IDLE``: the resident's pid, when it had loaded bar (ns since
        the epoch) and how many seconds it waits for a command before it exits."""
        return b"status %d %d %d" % (self.pid, self.loaded_at, self.idle)

    def _refusal(self, conn: socket.socket, data: bytes, fds: list[int]) -> str | None:
        """Why this request is not served here (None: it is)."""
        if not self._still_here():
            return "stale"
        if len(fds) != 4:
            return "descriptors"
        if self._other_caller(conn):
            return "caller"
        request = Request.parse(data)
        if request is None:
            return "request"
        if request.package != self.package or request.executable != sys.executable:
            return "program"
        mine = (sys.getfilesystemencoding().encode(), b"%d" % sys.flags.utf8_mode)
        if (request.fs_encoding, request.utf8_mode) != mine:
            return "encoding"
        return None


def _become(conn: socket.socket, data: bytes, fds: list[int], run: Runner) -> NoReturn:
    """In the fork: become the caller's ``bar``, run its command line (``run``), say how
    it ended."""
    code = 1
    try:
        request = Request.parse(data)
        assert request is not None  # (``_refusal`` read it)
        # the caller's signal dispositions and mask: as Python starts, but what it ignored
        # stays ignored (``nohup``, a shell's ``&``) and what it blocked stays blocked
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in request.ignored:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, request.blocked)
        here, *std = fds
        for target, fd in enumerate(std):
            os.dup2(fd, target)
        os.fchdir(here)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.umask(request.umask)
        os.environb.clear()
        os.environb.update(request.environ)
        time.tzset()
        faults.configure()  # (the caller's crash points: the fault-injection tests')
        import locale

        with contextlib.suppress(locale.Error):
            locale.setlocale(locale.LC_CTYPE, "")
        sys.stdin, sys.stdout, sys.stderr = (
            _stream(fd, spec) for fd, spec in enumerate(request.streams)
        )
        for name in ("__stdin__", "__stdout__", "__stderr__"):  # (what faulthandler and
            setattr(sys, name, getattr(sys, name.strip("_")))  # the like fall back on)
        sys.argv = request.argv
        if _slow_project():
            _say(conn, b"no speed")  # (the caller runs it itself)
            os._exit(1)
        _say(conn, b"pid %d" % os.getpid())
        if conn.recv(3) != b"go\n":  # (a caller that gave up waiting runs it itself)
            os._exit(1)
        conn.settimeout(None)
    except BaseException:
        with contextlib.suppress(OSError):
            _say(conn, b"no fork")
        os._exit(1)
    interrupted = False
    done = threading.Event()
    threading.Thread(target=_die_with_caller, args=(conn, done), daemon=True).start()
    try:
        code = run(request.argv[1:])
    except SystemExit as exc:  # (as the interpreter ends on one)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:  # as an interpreter ends on one: killed by SIGINT
        interrupted = True
        code = 130
    except BaseException:
        code = 70
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        done.set()
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)  # (the resident tells the caller: ``ended``)
        with contextlib.suppress(BaseException):
            _say(conn, b"exit %d" % code)
        os._exit(code & 0xFF)


def _slow_project() -> bool:
    """Whether the project the caller stands in wants no shortcut (``speed.fast: false``
    in its config.yaml, ``bar.base.speed``): then no resident serves it."""
    try:
        from bar.model.project import find_project

        return find_project().project.config.speed.fast is False
    except Exception:  # (no project here, or one whose config the command will report)
        return False


def make_first_uses() -> None:
    """Make what a step makes at its first use, once for every fork: the secret shapes'
    regexes as an output stream is scrubbed (45 ms of every step that prints anything:
    kept in ``re``'s cache and ``bar.redact.partial_match``'s), and the shell parser the
    policy reads each command with."""
    from bar.redact import Scrubber
    from bar.redact.stream import watches_of
    from bar.shell import tree

    watches_of(Scrubber())
    tree.load_parser()


def _die_with_caller(conn: socket.socket, done: threading.Event) -> None:
    """A caller killed where it cannot pass the signal on (SIGKILL) leaves: die as its
    ``bar`` would have, alone, and leave the step to recovery, as a killed ``bar`` does.
    Alone: the step's holder (``bar.sandbox.holder``), in this process group too, kills
    everything of the step once its bar is gone, what left the command's session among
    it; killed with this process, it could not (an unconfined step's detached processes
    went on writing, to be read as the developer's)."""
    with contextlib.suppress(OSError):
        while conn.recv(1024):
            pass
    if not done.is_set():
        os.kill(os.getpid(), signal.SIGKILL)


def _stream(fd: int, spec: bytes) -> io.TextIOWrapper:
    """A standard stream on ``fd`` like the caller's (``encoding:errors:line:through``)."""
    encoding, errors, line, through = spec.decode("ascii", "replace").split(":")
    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered,
        encoding=encoding,
        errors=errors,
        line_buffering=line == "1",
        write_through=through == "1",
    )


def _receive(conn: socket.socket) -> tuple[bytes, list[int]]:
    """A request: ``LENGTH\\n`` and that many bytes, the descriptors with its first part."""
    deadline = time.monotonic() + 2.0  # (a caller that sends slowly holds the spare)
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 8)
    try:
        head, sep, rest = data.partition(b"\n")
        size = int(head) if sep and head.isdigit() else -1
        if not 0 <= size <= _MAX_REQUEST:
            raise ValueError("not a request")
        chunks = [rest]
        got = len(rest)
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ValueError("too slow")
            conn.settimeout(left)
            chunk = conn.recv(min(1 << 16, size - got))
            if not chunk:
                raise ValueError("cut short")
            chunks.append(chunk)
            got += len(chunk)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return b"".join(chunks), fds


def _say(conn: socket.socket, line: bytes) -> None:
    conn.sendall(line + b"\n")


def main(
    argv: list[str],
    run: Runner,
    warm_up: Callable[[], None],
    fits: Callable[[], bool] = lambda: True,
) -> int:
    """Be the resident: ``argv`` is ``[program, FD, SOCKET, IDLE]`` (``resident.start``),
    ``run`` runs one command line in a fork, ``warm_up`` loads what the commands need;
    ``fits``, asked now and then, False once that has changed (the resident then exits,
    as when its code changed, and the next command starts one that loads it anew)."""
    work_nowhere(os.path.dirname(argv[2]))  # (a spare moves to its caller's directory)
    resident = Resident(int(argv[1]), argv[2], float(argv[3]), run, fits)
    try:
        resident.load(warm_up)
        resident.serve()
    finally:
        with contextlib.suppress(OSError):
            if file_id(resident.socket_file) == resident.socket_id:
                os.unlink(resident.socket_file)
    return 0
