"""Every program a confined step starts is judged before it runs (docs/policy.md).

The policy judges the command line a user or an agent typed; a shell then expands it,
and a script, an interpreter or a build tool starts programs no line ever named. So the
step's command installs, last thing before its ``exec``, a seccomp filter that hands each
``execve`` and ``execveat`` of it and of everything it starts to bar (*user
notification*): the calling thread waits while bar reads the call's real arguments from
its memory (``/proc/PID/mem``: bar is an ancestor of every process of the step) and
answers: go on, or fail with ``EPERM``.

The listening descriptor the filter gives is made in the command's process and handed to
bar over a socket pair made before the fork (``SCM_RIGHTS``), then closed there: nothing
of the step can answer its own calls. bar serves it from a thread (``Watch``), started
before the command is, since the command's own ``exec`` is the first call it answers.
Where bar was built with its compiled listener (``bar.sandbox.exec_quick``), that
thread runs it: the calls that name no program and the programs no rule can match are
answered there, every other call comes back here to be read and judged.

What this can and cannot see:

- the program and its argument vector as the kernel receives them, after every
  expansion of every shell and interpreter, and the directory it runs in;
- not what a shell does without starting a program (its builtins: ``cd``, ``echo >``);
- a program whose other thread rewrites the argument memory between bar's read and the
  kernel's can run other arguments than were judged (the kernel's own caveat for user
  notification); the confinement of the step, not this check, is the boundary there.

Where the kernel offers no user notification, or the step already runs under a filter
that listens (a ``bar run`` inside another's step: one listener per chain), the step runs
without this check and says why (``Watch.unavailable``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import select
import socket
import stat
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from bar.base.record import record
from bar.sandbox.lockdown import Insn, Prog

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bar.sandbox.exec_quick import Shortcut

_SECCOMP_SET_MODE_FILTER = 1
_FLAG_NEW_LISTENER = 1 << 3
_RET_USER_NOTIF = 0x7FC00000
_RET_ALLOW = 0x7FFF0000
_FLAG_CONTINUE = 1
# ioctls on the listener: _IOWR('!', 0, struct seccomp_notif) and its kin
_NOTIF_RECV = 0xC0502100
_NOTIF_SEND = 0xC0182101
_NOTIF_ID_VALID = 0x40082102
_NOTIF_SIZE = 80  # id u64, pid u32, flags u32, struct seccomp_data (64)
_AT_EMPTY_PATH = 0x1000

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06

# (audit architecture, seccomp(2)'s number, execve's, execveat's)
_TABLES = {
    "x86_64": (0xC000003E, 317, 59, 322),
    "aarch64": (0xC00000B7, 277, 221, 281),
}

# what bar reads of a vector: far beyond the kernel's own limit on arguments and
# environment together (a quarter of the stack limit: 2 MiB by default); a vector longer
# still is refused, never judged by a part of it
_MAX_TOTAL = 64 << 20
_MAX_STRING = 128 * 1024 + 1  # (the kernel's MAX_ARG_STRLEN, and one byte to see past it)
_WINDOW = 8192  # the bytes read at once from where the first argument is
_MAX_SHEBANGS = 4  # (the kernel follows as many interpreters of interpreters)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_HIGHEST = (1 << 63) - 1  # (an offset of /proc/PID/mem is a signed 64-bit number)
# where a distribution's own programs live: a file there is what its name says
SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/", "/libx32/", "/nix/store/")
# programs whose copies elsewhere are recognised by their bytes (the rules are about them)
_KNOWN = (
    "git",
    "rm",
    "dd",
    "find",
    "mv",
    "chmod",
    "chown",
    "shred",
    "truncate",
    "curl",
    "wget",
    "crontab",
    "tar",
    "rsync",
    "kill",
    "pkill",
    "busybox",
    "wipefs",
    "gpg",
    "scp",
    "nc",
    "mkfs",
    "sqlite3",
    "psql",
    "mysql",
    "redis-cli",
    "ssh",
    # the dynamic loaders run any program they are given without an exec of it
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "ld-linux.so.2",
    "ld-musl-x86_64.so.1",
    "ld-musl-aarch64.so.1",
)
# where the known programs are looked for (the loaders are in the libraries' directories)
_KNOWN_PATH = (
    "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin:/lib64:/lib:/usr/lib64:/usr/lib"
    ":/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib/aarch64-linux-gnu"
    ":/usr/lib/aarch64-linux-gnu"
)


@record(frozen=True)
class Exec:
    """One program a step's process asked to start: ``path`` as given to the call (made
    whole for ``execveat`` of a descriptor), ``argv`` as read, ``cwd`` where it runs,
    ``pid`` the asking process (bar's view). ``truncated``: the vector was too long to
    read whole. ``names``: what else the program is known as (the file a link leads to;
    the program of the same bytes elsewhere: a copy). ``scripts``: for a script, the
    vectors the kernel makes of its ``#!`` lines (interpreter, its argument, the script,
    the arguments), the outermost first."""

    pid: int
    path: str
    argv: tuple[str, ...]
    cwd: str
    truncated: bool = False
    names: tuple[str, ...] = ()
    scripts: tuple[tuple[str, ...], ...] = ()
    # for git: the variables of its new environment that give it settings
    # (``GIT_CONFIG_COUNT``/``KEY_N``/``VALUE_N``, ``GIT_CONFIG_PARAMETERS``), judged
    # with its words as the shell's ``VAR=value git …`` would be
    settings: tuple[str, ...] = ()


class Unreadable(Exception):
    """The process's memory cannot be read by bar (it made itself undumpable where bar
    has no right over it)."""


class Hidden(Exception):
    """The program is in a path the step may not read: the kernel refuses it (EACCES),
    and bar, unconfined, reads nothing of it on the step's behalf."""


class _Fault(Exception):
    """An address of the call points at no memory of the process (the kernel's EFAULT)."""


# what the judge answers: None lets the program run, said nothing; else (refused, text):
# refused, the call fails with EPERM; the text is printed on the program's standard error
# where bar can reach it (before the program runs, when it is let run)
Judge = Callable[[Exec], "tuple[bool, str] | None"]


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter: ``execve`` and ``execveat`` of this architecture's table go to bar,
    everything else is allowed (the step's other filter refuses other tables)."""
    table = _TABLES.get(machine)
    if table is None:
        return None
    arch, _, execve, execveat = table
    return [
        (_LD_W_ABS, 0, 0, 4),  # arch
        (_JEQ_K, 0, 4, arch),
        (_LD_W_ABS, 0, 0, 0),  # nr
        (_JEQ_K, 2, 0, execve),
        (_JEQ_K, 1, 0, execveat),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_USER_NOTIF),
    ]


def supported() -> str | None:
    """Why no step here can have its programs judged at exec (None: they can)."""
    if os.uname().machine not in _TABLES:
        return f"bar knows no system call table of {os.uname().machine} for the exec check"
    if not os.path.exists("/proc/self/mem"):
        return "no /proc to read a program's arguments from"
    return None


class Watch:
    """The exec check of one command: made in bar before the fork, ``inside`` in the
    command's process (after ``no_new_privs``), then served by a thread of bar until
    ``close``. ``unavailable`` says why it did not hold, once known."""

    def __init__(
        self,
        judge: Judge,
        say: Callable[[str], None] | None = None,
        hidden: Sequence[str] = (),
        shortcut: Shortcut | None = None,
        *,
        compiled: bool = True,
    ) -> None:
        self.judge = judge
        self.shortcut = shortcut  # what the compiled listener lets run unjudged
        self.compiled = compiled  # (False: the Python listener answers every call)
        # the calls the compiled listener answered: let run, no program; sent to the judge
        self.counts = (ctypes.c_uint64 * 3)()
        self.hidden = tuple(h.rstrip("/") for h in hidden)  # what the step may not read
        self.say = say or (lambda _: None)
        self.unavailable: str | None = supported()
        self.judged = 0
        self._told: tuple[int, str] | None = None  # (a PATH search tries each directory)
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._wake_r, self._wake_w = os.pipe()
        self._listener = -1
        self._thread: threading.Thread | None = None
        self._insns: ctypes.Array[Insn] | None = None
        self._prog: Prog | None = None
        self._libc = ctypes.CDLL(None, use_errno=True)
        insns = program(os.uname().machine)
        if insns is not None:
            self._insns = (Insn * len(insns))(*(Insn(*i) for i in insns))
            self._prog = Prog(len(insns), self._insns)

    @property
    def active(self) -> bool:
        return self.unavailable is None

    @property
    def begun(self) -> bool:
        return self._thread is not None or self._wake_r < 0

    # --- in the command's process, between fork and exec: system calls only ----------

    def inside(self) -> None:
        """Install the filter and hand its listener to bar; a failure is told to bar
        (and the command runs unchecked) rather than raised: a kernel that cannot is not
        the step's fault."""
        channel = self._theirs.fileno()
        if self._prog is None or self.unavailable is not None:
            with contextlib.suppress(OSError):
                os.write(channel, b"!" + (self.unavailable or "no filter").encode())
            return
        nr = _TABLES[os.uname().machine][1]
        fd = self._libc.syscall(
            nr, _SECCOMP_SET_MODE_FILTER, _FLAG_NEW_LISTENER, ctypes.byref(self._prog)
        )
        if fd < 0:
            err = ctypes.get_errno()
            why = (
                "the step already runs under a filter that listens (one per process)"
                if err == errno.EBUSY
                else f"seccomp user notification: {os.strerror(err)}"
            )
            with contextlib.suppress(OSError):
                os.write(channel, b"!" + why.encode())
            return
        try:
            socket.send_fds(self._theirs, [b"ok"], [fd])
        finally:
            os.close(fd)

    # --- in bar ----------------------------------------------------------------------

    def begin(self) -> None:
        """Before the command is started: the thread that answers its calls."""
        self._thread = threading.Thread(target=self._serve, name="bar-exec-watch", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """Once the command is made: the other end is the command's alone."""
        with contextlib.suppress(OSError):
            self._theirs.close()

    def close(self) -> None:
        """Stop answering (the step's processes are gone by now: a process still waiting
        on an answer fails its exec when the listener closes)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(5)
        for fd in (self._wake_r, self._wake_w, self._listener):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = self._listener = -1
        with contextlib.suppress(OSError):
            self._ours.close()
        self.started()

    def _serve(self) -> None:
        if not self._receive():
            return
        from bar.sandbox import exec_quick

        lib = exec_quick.library() if self.compiled else None
        if lib is not None:
            exec_quick.serve(
                lib,
                self._listener,
                self._wake_r,
                self.shortcut,
                self.hidden,
                self._judged,
                self.counts,
            )
            return
        while True:
            events = self._wait(self._listener)
            if events is None:
                return
            if events & select.POLLIN:
                self._answer_one()
            elif events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return  # (no process of the step is left to ask)

    def _wait(self, fd: int) -> int | None:
        """The events of ``fd`` once it has some; None once ``close`` wakes the thread."""
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            try:
                ready = dict(poller.poll())
            except InterruptedError:
                continue
            if self._wake_r in ready:
                return None
            return ready.get(fd, 0)

    def _receive(self) -> bool:
        """Wait for the listener (or why there is none)."""
        if self._wait(self._ours.fileno()) is None:
            return False
        try:
            said, fds, _, _ = socket.recv_fds(self._ours, 4096, 1)
        except OSError as exc:
            self.unavailable = f"the exec check's listener could not be received: {exc}"
            return False
        if not fds:
            self.unavailable = said[1:].decode("utf-8", "replace") or "no listener"
            self.say(f"programs the step starts are not checked by the policy: {self.unavailable}")
            return False
        self._listener = fds[0]
        return True

    def _judged(self, ident: int, pid: int, nr: int, args: Sequence[int]) -> int:
        """The error of a call the compiled listener sends to the judge (0: it runs)."""
        try:
            return self._decide(ident, pid, nr, args)
        except Exception as exc:
            self.say(f"the exec check could not judge a program; it was refused ({exc})")
            return errno.EPERM

    def _answer_one(self) -> None:
        buf = bytearray(_NOTIF_SIZE)
        try:
            fcntl.ioctl(self._listener, _NOTIF_RECV, buf, True)
        except OSError:  # (the asking process died before its call was read: ENOENT)
            return
        ident, pid = struct.unpack_from("=QI", buf, 0)
        nr = struct.unpack_from("=i", buf, 16)[0]
        args = struct.unpack_from("=6Q", buf, 32)
        try:
            error = self._decide(ident, pid, nr, args)
        except Exception as exc:  # (never a dead thread: every later exec would wait)
            self.say(f"the exec check could not judge a program; it was refused ({exc})")
            error = errno.EPERM
        if error:
            reply = struct.pack("=QqiI", ident, 0, -error, 0)
        else:
            reply = struct.pack("=QqiI", ident, 0, 0, _FLAG_CONTINUE)
        with contextlib.suppress(OSError):  # (ENOENT: it died meanwhile)
            fcntl.ioctl(self._listener, _NOTIF_SEND, reply)

    def _decide(self, ident: int, pid: int, nr: int, args: Sequence[int]) -> int:
        """The error the call ends with (0: it goes on)."""
        try:
            found = _read_call(pid, nr, args, self.hidden)
        except _Fault:
            return errno.EFAULT
        except Hidden:
            return errno.EACCES
        except Unfollowable as exc:
            self._tell(
                ident,
                pid,
                f"bar: refused: the way to {exc} leads through a loop of links or a link to "
                "a process's own files (/proc/self, /dev/stdin…) that bar cannot follow as "
                "the program would; run the program by its own path",
            )
            return errno.EPERM
        except Unreadable:
            if self.judged == 0 and not self.counts[0]:  # (the command's own exec: the
                # kernel does not let bar read it)
                self.unavailable = "bar may not read the memory of the step's processes"
                self.say(
                    f"programs the step starts are not checked by the policy: {self.unavailable}"
                )
                self.judged = -1
                return 0
            if self.judged < 0:
                return 0
            self._tell(
                ident,
                pid,
                "bar: refused: this process made its memory unreadable to bar, so what it "
                "runs cannot be judged",
            )
            return errno.EPERM
        if found is None:
            return errno.ENOENT  # (as the kernel would: a program made meanwhile fails)
        if not self._valid(ident):
            return errno.ESRCH  # (gone: what was read may be another process's)
        if self.judged >= 0:
            self.judged += 1
        try:
            verdict = self.judge(found)
        except Exception as exc:  # (a judge's bug refuses: it never lets through)
            self.say(f"the exec check failed on {found.path}: {exc}")
            verdict = (True, f"bar: refused: the policy could not judge {found.path}")
        if verdict is None:
            return 0
        refused, text = verdict
        if text and self._told != (pid, text):
            self._told = (pid, text)
            self._tell(ident, pid, text)
        return errno.EPERM if refused else 0

    def _tell(self, ident: int, pid: int, text: str) -> None:
        """``text`` on the standard error of the process still waiting on call ``ident``
        (pinned first, then checked: never a process that took over its number)."""
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return
        try:
            if self._valid(ident):
                _tell(pidfd, text)
        finally:
            os.close(pidfd)

    def _valid(self, ident: int) -> bool:
        """Whether the call is still waiting: the process read is the one that asked."""
        try:
            fcntl.ioctl(self._listener, _NOTIF_ID_VALID, struct.pack("=Q", ident))
        except OSError:
            return False
        return True


def _reach(pid: int, path: str, dirfd: int | None = None, empty: bool = False) -> int | None:
    """A descriptor of bar's (``O_PATH``) on the file the process ``pid`` reaches at
    ``path`` (from its directory ``dirfd``, else its working directory), its links
    followed as the kernel follows them for that process; None when nothing is there.

    What names a process's own files is read as that process's (``/proc/self``,
    ``/proc/thread-self``, ``/dev/stdin``, ``/dev/fd/N``: bar's own otherwise). Any
    other way through such a link (a link to ``/dev/stdin``, ``/proc/self`` spelt
    otherwise) cannot be followed as the process would: ``Unfollowable``."""
    own = _own(pid, path)
    if own is not None:
        try:
            return os.open(own, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return None
    try:
        if path.startswith("/"):
            base = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            resolve = _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS
        elif dirfd is not None and dirfd >= 0:
            base = os.open(f"/proc/{pid}/fd/{dirfd}", os.O_PATH | os.O_CLOEXEC)
            if empty and not path:
                return base
            resolve = _RESOLVE_NO_MAGICLINKS
        else:
            base = os.open(f"/proc/{pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            resolve = _RESOLVE_NO_MAGICLINKS
    except OSError:
        return None
    try:
        return _openat2(base, path, os.O_PATH | os.O_CLOEXEC, resolve)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # (a loop of links, or a way through a link of
            # bar's own: the kernel would fail the one, and the other cannot be judged)
            raise Unfollowable(path) from None
        if exc.errno == errno.EAGAIN:  # (still racing after every retry: refused, with
            raise  # a word, by the caller; never passed off as a missing program)
        return None
    finally:
        os.close(base)


class Unfollowable(Exception):
    """The way to the program leads through a link bar cannot follow as the process
    would (a process's own files reached by another name): it is refused, never judged
    as whatever bar's own link would lead to."""


def _own(pid: int, path: str) -> str | None:
    """``path`` where it names the process's own files, as bar reaches them."""
    for prefix, mine in (
        ("/proc/self", f"/proc/{pid}"),
        ("/proc/thread-self", f"/proc/{pid}/task/{pid}"),
        ("/dev/fd", f"/proc/{pid}/fd"),
        ("/dev/stdin", f"/proc/{pid}/fd/0"),
        ("/dev/stdout", f"/proc/{pid}/fd/1"),
        ("/dev/stderr", f"/proc/{pid}/fd/2"),
    ):
        if path == prefix or path.startswith(prefix + "/"):
            return mine + path[len(prefix) :]
    return None


_SYS_OPENAT2 = 437  # (the same on every architecture: a system call of Linux 5.6)
_AGAIN = 100  # tries of a lookup the kernel answers EAGAIN (openat2(2): "may retry")
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10


class _How(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _openat2(base: int, path: str, flags: int, resolve: int) -> int:
    how = _How(flags, 0, resolve)
    name = ctypes.c_char_p(path.encode("utf-8", "surrogateescape") or b".")
    for _ in range(_AGAIN):
        fd = _libc_syscall(
            _SYS_OPENAT2,
            base,
            name,  # type: ignore[arg-type]
            ctypes.byref(how),  # type: ignore[arg-type]
            ctypes.sizeof(how),
        )
        # EAGAIN: a rename or a mount anywhere on the machine while a ``..`` (a link's
        # ``../x`` too) was walked under RESOLVE_IN_ROOT; the kernel asks for a retry.
        # Never "no such program": that fails an exec of a file that is there
        if fd >= 0 or ctypes.get_errno() != errno.EAGAIN:
            break
    if fd < 0:
        err = ctypes.get_errno()
        if err == errno.ENOSYS:  # (an older kernel: its links followed as bar's own)
            prefix = f"/proc/self/fd/{base}/"
            return os.open(prefix + path, flags)
        raise OSError(err, os.strerror(err), path)
    return fd


def _read_call(pid: int, nr: int, args: Sequence[int], hidden: Sequence[str] = ()) -> Exec | None:
    """The program, argument vector and directory of the call ``nr`` of ``pid``; None
    when no program is where the call names one (its vector is then not read)."""
    table = _TABLES[os.uname().machine]
    if nr == table[2]:
        path_at, argv_at, env_at, dirfd, flags = args[0], args[1], args[2], None, 0
    elif nr == table[3]:
        path_at, argv_at, env_at = args[1], args[2], args[3]
        dirfd, flags = ctypes.c_int32(args[0] & 0xFFFFFFFF).value, args[4]
    else:
        return None
    if not path_at and not (dirfd is not None and flags & _AT_EMPTY_PATH):
        raise _Fault("no program named")
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError as exc:
        raise Unreadable(str(exc)) from None
    program = -1
    try:
        path = _string(fd, path_at)[0] if path_at else ""
        # where the program is, as the asking process sees it (its root, its directories)
        found = _reach(pid, path, dirfd, bool(flags & _AT_EMPTY_PATH))
        if found is None:
            return None  # (no such program: a PATH search's misses cost no more)
        program = found
        if not path.startswith("/") and dirfd is not None and dirfd >= 0:
            base = _link(f"/proc/{pid}/fd/{dirfd}")
            path = os.path.join(base, path) if path else base
        real, info = _link(f"/proc/self/fd/{program}"), os.fstat(program)
        if any(real == h or real.startswith(h + "/") for h in hidden):
            raise Hidden(real)  # (bar reads nothing of it for the step: not even its #!)
        argv, truncated = _vector(fd, argv_at)
        probe = f"/proc/self/fd/{program}"
        names, first = _FILES.of(probe, path, real, info)
        scripts = _scripts(path, argv, _shebangs(pid, first)) if first is not None else ()
        settings: tuple[str, ...] = ()
        if any(_gitlike(n) for n in (path, real, *names, argv[0] if argv else "")):
            settings = tuple(e for e in _vector(fd, env_at)[0] if e.startswith(_GIT_SETTINGS))
    except PermissionError as exc:
        raise Unreadable(str(exc)) from None
    finally:
        os.close(fd)
        if program >= 0:
            os.close(program)
    return Exec(
        pid, path, tuple(argv), _link(f"/proc/{pid}/cwd"), truncated, names, scripts, settings
    )


# the variables that give git settings as ``git -c`` does (the policy's push rules read
# them): read from the new environment of a program that is git
_GIT_SETTINGS = (
    "GIT_CONFIG_COUNT=",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
    "GIT_CONFIG_PARAMETERS=",
)


def _gitlike(name: str) -> bool:
    """Whether a program of this name is git (``git``, ``git-push``, ``git-send-pack``)."""
    base = os.path.basename(name)
    return base == "git" or base.startswith("git-")


_Line = tuple[str, "str | None"]  # a #! line: the interpreter, its one argument


class _Files:
    """What bar found out about a program file, kept while the file is the same (its
    device, inode, size and change time): what else it is (``_names``) and its ``#!``
    line."""

    def __init__(self) -> None:
        self._seen: dict[tuple[object, ...], tuple[tuple[str, ...], _Line | None]] = {}

    def of(
        self, probe: str, path: str, real: str, info: os.stat_result
    ) -> tuple[tuple[str, ...], _Line | None]:
        key = (info.st_dev, info.st_ino, info.st_size, info.st_ctime_ns, os.path.basename(path))
        found = self._seen.get(key)
        if found is None:
            found = (_names(probe, path, real, info), _shebang(probe))
            if len(self._seen) > 4096:
                self._seen.clear()
            self._seen[key] = found
        return found


_FILES = _Files()


def _names(probe: str, path: str, real: str, info: os.stat_result) -> tuple[str, ...]:
    """What else the program at ``probe`` (the file ``real``) is: the file its links lead
    to, and, for a file outside the system's directories, the known program it is a copy
    of."""
    found: list[str] = []
    if real and os.path.basename(real) != os.path.basename(path):
        found.append(real)
    if real.startswith(SYSTEM) or not stat.S_ISREG(info.st_mode):
        return tuple(found)
    same = _KNOWN_BYTES.copy_of(probe, info.st_size)
    if same is None:
        same = _KNOWN_BYTES.built_as(probe)
    if same is not None:
        found.append(same)
    return tuple(found)


_ELF_NOTE_MAX = 4096  # bytes of an ELF's notes read for its build id
_PT_DYNAMIC, _PT_INTERP, _PT_NOTE = 2, 3, 4
_ET_DYN = 3
_NT_GNU_BUILD_ID = 3


def _elf(probe: str) -> tuple[bytes | None, bool] | None:
    """An ELF program's GNU build id (None: it has none) and whether it is built as a
    dynamic loader is (a shared object with no interpreter of its own, which runs
    as a program: ``ld.so PROGRAM ARGS``, a static PIE too); None: not an ELF file. Read
    from its headers alone: the bytes a copy adds at its end, or changes in its text,
    leave them as they were."""
    fd = _open_regular(probe)
    if fd is None:
        return None
    try:
        head = os.pread(fd, 64, 0)
        if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2):
            return None
        order = "<" if head[5] == 1 else ">"
        wide = head[4] == 2
        if wide:
            kind, _, _, _, at, _, _, _, size, count = struct.unpack_from(
                order + "HHIQQQIHHH", head, 16
            )
            fields = order + "IIQQQQQQ"
        else:
            kind, _, _, _, at, _, _, _, size, count = struct.unpack_from(
                order + "HHIIIIIHHH", head, 16
            )
            fields = order + "IIIIIIII"
        if not 0 < count <= 128 or size < struct.calcsize(fields):
            return None
        table = os.pread(fd, size * count, at)
        types: set[int] = set()
        build_id = None
        for n in range(min(count, len(table) // size)):
            entry = struct.unpack_from(fields, table, n * size)
            kind_of = entry[0]
            offset, length = (entry[2], entry[5]) if wide else (entry[1], entry[4])
            types.add(kind_of)
            if kind_of == _PT_NOTE and build_id is None:
                build_id = _build_id(os.pread(fd, min(length, _ELF_NOTE_MAX), offset), order)
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)
    loader = kind == _ET_DYN and _PT_INTERP not in types and _PT_DYNAMIC in types
    return build_id, loader


def _build_id(notes: bytes, order: str) -> bytes | None:
    """The ``NT_GNU_BUILD_ID`` among ELF ``notes``."""
    at = 0
    while at + 12 <= len(notes):
        name_size, desc_size, kind = struct.unpack_from(order + "III", notes, at)
        name_at = at + 12
        desc_at = name_at + (name_size + 3) // 4 * 4
        end = desc_at + (desc_size + 3) // 4 * 4
        if end > len(notes):
            return None
        if kind == _NT_GNU_BUILD_ID and notes[name_at : name_at + name_size] == b"GNU\0":
            return notes[desc_at : desc_at + desc_size] or None
        at = end
    return None


class _Known:
    """The sizes and digests of the programs in ``_KNOWN`` (found on the system's
    ``PATH``), read once, and only for a file whose size is one of theirs; and their
    build ids, for a copy with bytes added or changed (``built_as``)."""

    def __init__(self) -> None:
        self._sizes: dict[int, list[str]] | None = None
        self._digests: dict[str, bytes] = {}
        self._built: dict[bytes, str] | None = None
        self._loader: str | None = None
        self._lock = threading.Lock()

    def built_as(self, probe: str) -> str | None:
        """The known program an ELF file was built as (its build id is theirs), or the
        system's dynamic loader for a file built as a loader is: a copy of ``rm`` or of
        ``ld.so`` with a byte added is still one (``printf x >> copy``)."""
        seen = _elf(probe)
        if seen is None:
            return None
        build_id, loader = seen
        with self._lock:
            if self._built is None:
                import shutil

                self._built = {}
                for name in _KNOWN:
                    where = shutil.which(name, path=_KNOWN_PATH)
                    known = _elf(where) if where is not None else None
                    if where is not None and known is not None:
                        if known[0] is not None:
                            self._built.setdefault(known[0], where)
                        if known[1] and self._loader is None and name.startswith("ld-"):
                            self._loader = where
            found = self._built.get(build_id) if build_id is not None else None
            return found or (self._loader if loader else None)

    def copy_of(self, probe: str, size: int) -> str | None:
        with self._lock:
            if self._sizes is None:
                import shutil  # (only for a program outside the system's directories)

                self._sizes = {}
                for name in _KNOWN:
                    where = shutil.which(name, path=_KNOWN_PATH)
                    if where is not None:
                        with contextlib.suppress(OSError):
                            self._sizes.setdefault(os.stat(where).st_size, []).append(where)
            candidates = self._sizes.get(size, [])
        if not candidates:
            return None
        digest = _digest(probe)
        if digest is None:
            return None
        for where in candidates:
            if where not in self._digests:
                known = _digest(where)
                if known is None:
                    continue
                self._digests[where] = known
            if self._digests[where] == digest:
                return where
        return None


_KNOWN_BYTES = _Known()


def _open_regular(path: str) -> int | None:
    """A descriptor for reading ``path`` if it is a regular file, and only then: no FIFO
    is waited on, no device a step names is opened by bar, not even to be looked at."""
    if not _regular(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _digest(path: str) -> bytes | None:
    """The SHA-256 of a regular file (nothing else is opened for reading: no FIFO waits,
    no device is touched)."""
    import hashlib

    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.digest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _shebangs(pid: int, first: _Line | None) -> tuple[tuple[_Line, tuple[str, ...]], ...]:
    """The ``#!`` lines the kernel follows from a file whose own line is ``first``, each
    with what else its interpreter is (the file its links lead to, the known program it
    is a copy of: ``_names``): then the same for an interpreter that is a script. An
    interpreter is found where the process finds it (a relative one from its working
    directory, as the kernel opens it)."""
    lines: list[tuple[_Line, tuple[str, ...]]] = []
    line = first
    while line is not None and len(lines) < _MAX_SHEBANGS:
        interpreter = line[0]
        found = _reach(pid, interpreter)
        if found is None:
            lines.append((line, ()))
            break
        try:
            probe = f"/proc/self/fd/{found}"
            real, info = _link(probe), os.fstat(found)
            names, after = _FILES.of(probe, interpreter, real, info)
        finally:
            os.close(found)
        lines.append((line, names))
        line = after
    return tuple(lines)


def _scripts(
    path: str, argv: list[str], shebangs: tuple[tuple[_Line, tuple[str, ...]], ...]
) -> tuple[tuple[str, ...], ...]:
    """The vectors the kernel makes of a script's ``#!`` lines: ``interpreter [its
    argument] path arguments…``, the outermost first; each again under what else its
    interpreter is (``zz -rf``, ``zz`` a link to ``rm``: ``rm -rf …`` too)."""
    made: list[tuple[str, ...]] = []
    vector = [path, *argv[1:]]
    for (interpreter, extra), names in shebangs:
        vector = [interpreter, *([extra] if extra else []), *vector]
        made.append(tuple(vector))
        made += [(name, *vector[1:]) for name in names]
    return tuple(made)


def _regular(probe: str) -> bool:
    """Whether ``probe`` (a descriptor of bar's, ``/proc/self/fd/N``: the file cannot
    change under it) is a regular file: only such a file is opened for reading, so no
    device a step names is opened by bar, not even to be looked at."""
    try:
        return stat.S_ISREG(os.stat(probe).st_mode)
    except OSError:
        return False


_BINPRM_BUF = 256  # bytes of a file the kernel reads for its ``#!`` line


def _shebang(probe: str) -> _Line | None:
    """The interpreter and its one argument on a regular file's ``#!`` line, read as the
    kernel reads it (``fs/binfmt_script.c``): the line ends at its newline, within the
    first 256 bytes (without one, the interpreter's name must end there); the name ends
    at a space, a tab or a NUL, and only those (a vertical tab is part of it); the
    argument is what follows the spaces and tabs after it, up to a NUL, its trailing
    spaces and tabs left out."""
    fd = _open_regular(probe)
    if fd is None:
        return None
    try:
        head = os.pread(fd, _BINPRM_BUF, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return None
    head = head.ljust(_BINPRM_BUF, b"\0")  # (a shorter file: the kernel's buffer is zeroed)
    end = head.find(b"\n")
    if end < 0:
        start = len(head[2:]) - len(head[2:].lstrip(b" \t")) + 2
        if start >= _BINPRM_BUF - 1:
            return None  # (only spaces and tabs: no interpreter)
        if not re.search(rb"[ \t\0]", head[start : _BINPRM_BUF - 1]):
            return None  # (its name may be cut: the kernel runs nothing)
        end = _BINPRM_BUF - 1
    line = head[2:end].rstrip(b" \t").lstrip(b" \t")
    name = re.match(rb"[^ \t\0]*", line)
    assert name is not None
    if not name.group():
        return None
    rest = line[name.end() :]
    argument = None
    if rest[:1] != b"\0":
        argument = rest.lstrip(b" \t").split(b"\0", 1)[0] or None
    text = name.group().decode("utf-8", "surrogateescape")
    return text, argument.decode("utf-8", "surrogateescape") if argument else None


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _read(fd: int, address: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``address``, stopping at the end of the mapped pages."""
    out = b""
    while len(out) < size:
        at = address + len(out)
        if at < 0 or at > _HIGHEST:
            break
        chunk = min(size - len(out), _PAGE - at % _PAGE, _HIGHEST - at + 1)
        try:
            data = os.pread(fd, chunk, at)
        except PermissionError:
            raise
        except OSError:
            break
        if not data:
            break
        out += data
        if len(data) < chunk:
            break
    return out


def _string(fd: int, address: int, limit: int = _MAX_STRING) -> tuple[str, bool]:
    """The NUL-ended string at ``address``, and whether it was read to its end; an
    address with no memory behind it is the kernel's EFAULT."""
    data = b""
    while len(data) < limit:
        at = address + len(data)
        chunk = _read(fd, at, min(_PAGE - at % _PAGE, limit - len(data)))
        if not chunk:
            if not data:
                raise _Fault(hex(address))
            break
        end = chunk.find(b"\0")
        if end >= 0:
            return (data + chunk[:end]).decode("utf-8", "surrogateescape"), True
        data += chunk
    return data.decode("utf-8", "surrogateescape"), False


def _vector(fd: int, address: int) -> tuple[list[str], bool]:
    """The strings of a NULL-ended array of pointers (``argv``); whether it was cut.
    The strings usually lie one after the other: read together, in one window."""
    words: list[str] = []
    total = 0
    if not address:
        return words, False
    start, window = 0, b""
    while True:
        raw = _read(fd, address + 8 * len(words), 8 * 64)
        if len(raw) < 8:
            raise _Fault(hex(address + 8 * len(words)))
        for (pointer,) in struct.iter_unpack("=Q", raw[: len(raw) - len(raw) % 8]):
            if pointer == 0:
                return words, False
            at = pointer - start
            end = window.find(b"\0", at) if 0 <= at < len(window) else -1
            if end >= 0:
                word = window[at:end].decode("utf-8", "surrogateescape")
                whole = True
            else:
                if not window:
                    start, window = pointer, _read(fd, pointer, _WINDOW)
                word, whole = _string(fd, pointer)
            words.append(word)
            total += len(word) + 1
            if not whole or total > _MAX_TOTAL:
                return words, True


def _tell(pidfd: int, text: str) -> None:
    """Write ``text`` on the standard error of the process of ``pidfd``, through the
    process's own open file (``pidfd_getfd``): what bar writes there is what the process
    could write itself (a descriptor it holds read-only refuses it), wherever it points
    (a pipe, a terminal, the file an agent keeps a command's output in). Never waits: a
    pipe with no room for it is left alone."""
    data = (text.rstrip("\n") + "\n").encode("utf-8", "replace")[:_PIPE_ROOM]
    fd = _libc_syscall(_SYS_PIDFD_GETFD, pidfd, 2, 0)
    if fd < 0:
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if poller.poll(0):
            os.write(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)


_SYS_PIDFD_GETFD = 438  # (the same on every architecture: a system call of Linux 5.6)
_PIPE_ROOM = 4096  # a pipe that polls writable has room for this much: the write cannot block
_LIBC: list[ctypes.CDLL] = []


def _libc_syscall(*args: int) -> int:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return int(_LIBC[0].syscall(*args))
