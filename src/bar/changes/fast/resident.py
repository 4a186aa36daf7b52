"""A warm bar: ``bar run`` (and ``apply``, ``rollback``, ``undo``, ``redo``; and from
scripts and agents, the commands that read the record) served by a process that has
already loaded bar.

Python's start-up and bar's imports are most of what ``bar run`` costs on a small
repository (150 ms against 9 ms of ``git status``). So after a ``bar run`` a process of
the developer's own stays behind, the resident (``bar.changes.fast.resident_daemon``): it has imported
everything ``bar run`` uses and waits on ``resident.sock`` in the bar home. The next
``bar run`` (this module, loaded before anything else) connects; the resident's fork that
takes the connection says ``hello``, and unless the kernel shows that line to come from a
process like this one (``_trusted``: a confined step's listener is never handed a
command), this ``bar`` runs the command itself. Else it sends the fork its command line,
environment, umask, working directory and standard streams (the descriptors themselves),
and the fork becomes that ``bar run``: same arguments, environment, directory, streams,
umask and limits, bar's code already loaded. This process waits, passes on the signals it
receives, and exits with the fork's exit code.

The fork is the child of the resident, not of this process, so it is served only where
that makes no difference:

- the command is one of ``SERVED``, none of which needs a terminal of its own, or one
  of ``QUIET`` with neither standard input nor output a terminal (where they would page
  or colour); not inside a step, with no Python options or ``PYTHON*`` variables that
  change how bar's code loads (bar's fault injection is read again by the fork, from the
  caller's environment: ``bar.base.faults.configure``);
- for ``bar run``, whose command may want the controlling terminal: this process has none
  (agents, scripts, CI), or it is in the terminal's foreground, its stdin and stdout are
  terminals and the step gets a pty of its own (``--pty``, the default there), whose
  controlling terminal the command gets as it would here;
- the resident is the same program (bar's files unchanged since it loaded them, the same
  interpreter) and the caller could have been it: the same user, groups, capabilities,
  ``no_new_privs``, seccomp, namespaces, cgroup, root directory and resource limits
  (``bar.changes.fast.resident_daemon`` compares them; a confined process is never served).

Anything else, or no answer within ``TIMEOUT``: bar runs here, as it always did, and
one of ``SERVED`` starts a resident for next time (a ``QUIET`` command starts none: a
``bar status`` alone in a new bar home would pay for loading all of bar, unused).
``BAR_RESIDENT_IDLE`` is how many seconds one waits for a command before it exits
(default ``IDLE_S``; 0: none is started or used).
"""

import os
import sys

SOCKET = "resident.sock"
IDLE_S = 900  # seconds without a command before the resident exits
TIMEOUT = 2.0  # seconds to wait for the resident to take the command
MAGIC = b"bar-resident/2"
HELLO = b"hello"  # the first line of the fork that took the connection (``_trusted``)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from _socket import socket as _Socket
    from typing import Any
# the commands it serves: those that change a task and need no terminal of their own (no
# pager, editor or prompt), whose start-up is most of what they cost; each starts a
# resident for the next when none listens
SERVED = ("run", "apply", "rollback", "undo", "redo")
# the commands it also serves when neither standard input nor output is a terminal
# (scripts, agents, CI: no pager then, and none of these asks anything): they read or
# write bar's record on this machine and never reach another, so a git asking for a
# password on the terminal is never theirs. They use a resident that is up, and start none
QUIET = ("status", "log", "show", "diff", "blame", "task", "init", "doctor", "trash", "verify")
# the signals this process passes on to the fork running the command
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGWINCH", "SIGCONT", "SIGUSR1", "SIGUSR2")
# variables that change nothing in how bar's code loads
_HARMLESS_PYTHON = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}
_RUN_OPTIONS_HERE = {"--no-pty", "--json"}  # with a terminal: the command must be ours


def _speed_off() -> bool:
    """``BAR_FAST=0``: no shortcut at all, the resident among them (``bar.base.speed``, which
    this module does not import: it is all the client loads)."""
    return os.environ.get("BAR_FAST", "").strip().lower() in ("0", "false", "no", "off")


def idle_seconds() -> int:
    """How long the resident waits for a command (``BAR_RESIDENT_IDLE``; 0: none)."""
    value = os.environ.get("BAR_RESIDENT_IDLE", "")
    return int(value) if value.isdigit() else IDLE_S


def socket_path() -> str:
    """Where the resident of this bar home listens (``bar.store.layout.bar_home``), or
    the one several bar homes share (``BAR_RESIDENT_SOCKET``: a fork takes its caller's
    environment, its bar home with the rest), if that is an absolute path in a folder of
    this user's that no one else may write (a command hands the resident its environment
    and descriptors: only a resident of its own user may listen there)."""
    shared = os.environ.get("BAR_RESIDENT_SOCKET", "")
    if shared and shared_refusal(shared) is None:
        return shared
    home = os.environ.get("BAR_HOME")
    if home:
        return os.path.join(home, SOCKET)  # (absolute: ``bar.cli.entry``)
    user = os.environ.get("HOME", "")
    if not os.path.isabs(user):
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_dir
    return os.path.join(user, ".bar", SOCKET)


def shared_refusal(path: str) -> str | None:
    """Why the shared socket ``path`` (``BAR_RESIDENT_SOCKET``) is not used; None if it
    is: an absolute path in a folder owned by this user that neither its group nor
    others may write."""
    if not os.path.isabs(path):
        return "it is not an absolute path"
    folder = os.path.dirname(path)
    try:
        found = os.stat(folder)
    except OSError:
        return f"its folder {folder} is not there"
    if found.st_uid != os.getuid():
        return f"its folder {folder} is not yours"
    if found.st_mode & 0o022:
        return f"others may write its folder {folder}"
    return None


def may_serve(args: list[str]) -> bool:
    """Whether this command line may be served by a resident (see the module's text)."""
    if not args or idle_seconds() == 0 or os.environ.get("BAR_STEP_ID"):
        return False
    if args[0] in QUIET:
        if _a_terminal(0) or _a_terminal(1):
            return False
    elif args[0] not in SERVED:
        return False
    if _speed_off():
        return False
    flags = sys.flags
    if flags.dev_mode or flags.optimize or flags.verbose or flags.inspect or sys.warnoptions:
        return False
    if getattr(sys, "_xoptions", None):
        return False
    for name in os.environ:
        if name.startswith("PYTHON") and name not in _HARMLESS_PYTHON:
            return False
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if stream is None or not hasattr(stream, "line_buffering"):
            return False
    if args[0] == "run" and _has_terminal():
        options = args[1 : args.index("--")] if "--" in args else args[1:]
        if not (os.isatty(0) and os.isatty(1)) or any(map(_run_here, options)):
            return False
        try:  # in the background, the terminal is not ours to set raw (job control)
            if os.tcgetpgrp(0) != os.getpgrp():
                return False
        except OSError:
            return False
    return True


def starts_one(args: list[str]) -> bool:
    """Whether this command line, run here, leaves a resident for the next (``start``)."""
    return bool(args) and args[0] in SERVED and may_serve(args)


def _a_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _run_here(option: str) -> bool:
    """Whether ``option`` is one of ``_RUN_OPTIONS_HERE`` (or what argparse reads as one:
    an abbreviation)."""
    name = option.partition("=")[0]
    return len(name) > 2 and any(full.startswith(name) for full in _RUN_OPTIONS_HERE)


def _has_terminal() -> bool:
    """Whether this process has a controlling terminal."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


def request(args: list[str]) -> bytes:
    """The request for ``bar ARGS``: what the fork needs to be this process."""
    mask = os.umask(0o022)
    os.umask(mask)
    import _signal  # type: ignore[import-not-found]  # (``signal`` loads ``enum``: 7 ms)

    from bar import __file__ as package

    ignored = [n for n in range(1, _signal.NSIG) if _ignored(_signal, n)]
    blocked = sorted(int(n) for n in _signal.pthread_sigmask(_signal.SIG_BLOCK, []))
    # the fields of ``bar.changes.fast.resident_daemon.Request``, in its order
    fields = [
        MAGIC,
        os.fsencode(os.path.dirname(package)),
        os.fsencode(sys.executable),
        sys.getfilesystemencoding().encode(),
        b"%d" % sys.flags.utf8_mode,
        b"%d" % mask,
        ",".join(map(str, ignored)).encode(),
        ",".join(map(str, blocked)).encode(),
    ]
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        fields.append(
            b"%s:%s:%d:%d"
            % (
                str(stream.encoding).encode(),
                str(stream.errors).encode(),
                stream.line_buffering,
                getattr(stream, "write_through", False),
            )
        )
    fields.append(b"%d" % (len(args) + 1))
    fields += [os.fsencode(a) for a in (sys.argv[0] if sys.argv else "bar", *args)]
    fields += [k + b"=" + v for k, v in os.environb.items()]
    body = b"\0".join(fields)
    return b"%d\n" % len(body) + body


def _ignored(signals: "Any", number: int) -> bool:
    """Whether signal ``number`` is ignored here (``nohup``, a shell's ``&``)."""
    try:
        return bool(signals.getsignal(number) == signals.SIG_IGN)
    except (OSError, ValueError):
        return False


def serve(args: list[str]) -> int | None:
    """Have the resident run ``bar ARGS``: its exit code; None if it did not take it
    (then the caller runs it, and ``start``s one)."""
    if not may_serve(args):
        return None
    import _socket  # (``socket`` loads ``enum``, which costs more than all the rest here)

    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        here = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        sock.close()
        return None
    path = socket_path()
    known = file_id(path)
    try:
        sock.settimeout(TIMEOUT)
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_PASSCRED, 1)
        try:
            sock.connect(_address(path))
        except ConnectionRefusedError:  # its resident died (or never started): a new one
            _forget(path, known)
            raise
        lines = _Lines(sock)
        if not _trusted(lines, path):
            sock.close()
            return None
        data = request(args)
        sent = sock.sendmsg(
            [data[:65536]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _fds(here, 0, 1, 2))]
        )
        sock.sendall(data[sent:])
        first = lines.next()
        if first.startswith(b"pid "):
            sock.sendall(b"go\n")  # (a fork told nothing runs nothing: never twice)
    except TimeoutError:  # a resident that does not answer (stopped, or stuck)
        sock.close()
        _forget(path, known)
        return None
    except OSError:
        # a connection dropped unanswered is no sign of a dead resident: a live one's
        # spare drops a confined caller's at once, and a spare that finds its resident
        # dead removes the socket itself before it leaves (``resident_daemon``)
        sock.close()
        return None
    finally:
        os.close(here)
    if not first.startswith(b"pid "):
        sock.close()
        return None  # refused: the reason is the resident's (``no ...``)
    sock.settimeout(None)  # from here the command runs: as long as it takes
    return _wait(sock, lines, int(first[4:]))


def file_id(path: str) -> tuple[int, int] | None:
    """Which file ``path`` is now (device, inode); None if there is none (the daemons'
    check that their socket, or a worktree's root, is still the one they know)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _forget(path: str, known: tuple[int, int] | None) -> None:
    """Remove the socket of a resident that is not there, if it is still that socket
    (not one a new resident has made since; never a file that is not a socket: a
    ``BAR_RESIDENT_SOCKET`` may name anything)."""
    if known is not None and file_id(path) == known:
        with _suppress():
            if os.lstat(path).st_mode & 0o170000 == 0o140000:  # (S_IFSOCK)
                os.unlink(path)


def _address(path: str) -> str:
    if len(path.encode()) < 100:
        return path
    folder, name = os.path.split(path)  # too long for a socket address: through /proc
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}"  # (closed at exit: this process is short-lived)


def _fds(*fds: int) -> bytes:
    return b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)


class _Lines:
    """The lines the resident and its fork send (without their newlines; b"" at the end),
    and who sent the first: ``sender``, its pid and uid as the kernel gives them to a
    socket with ``SO_PASSCRED`` (None: not said)."""

    def __init__(self, sock: "_Socket") -> None:
        self.sock, self.held = sock, b""
        self.sender: tuple[int, int] | None = None

    def next(self) -> bytes:
        import _socket

        while b"\n" not in self.held:
            chunk, ancillary, _flags, _address = self.sock.recvmsg(256, _socket.CMSG_SPACE(12))
            if not chunk:
                return b""
            for level, kind, creds in ancillary:
                said = (level, kind) == (_socket.SOL_SOCKET, _socket.SCM_CREDENTIALS)
                if said and self.sender is None and len(creds) >= 8:
                    pid = int.from_bytes(creds[:4], sys.byteorder, signed=True)
                    self.sender = (pid, int.from_bytes(creds[4:8], sys.byteorder))
            self.held += chunk
        line, _, self.held = self.held.partition(b"\n")
        return line


# what a process that answers on the socket must share with the caller: a step's
# process (its own PID namespace, ``no_new_privs``, its seccomp filter) shares none of it
_SHARED = (b"Uid:", b"NoNewPrivs:", b"Seccomp:", b"Seccomp_filters:")


def _trusted(lines: _Lines, path: str) -> bool:
    """Whether the process that answers on the socket at ``path`` could be a resident of
    this caller's: its first line says ``HELLO``, and the kernel says it was sent by a
    process this one can see, of the same user, pid namespace, ``no_new_privs`` and
    seccomp. A step could bind a socket where it may write (a ``BAR_RESIDENT_SOCKET``
    in a folder it can write) and be handed a command's environment and descriptors:
    it is refused, with a warning. A refusal (``no ...``) or silence: False, quietly."""
    first = lines.next()
    if first != HELLO:
        return False
    sender = lines.sender
    if sender is not None and sender[0] > 0 and sender[1] == os.getuid():
        try:
            pid = sender[0]
            if os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid") and (
                _status(pid) == _status("self")
            ):
                return True
        except OSError:
            pass
    print(
        f"bar: warning: the process listening on {path} is not a resident of yours "
        f"(pid {sender[0] if sender else '?'}: a confined step's, or another user's); "
        "not used",
        file=sys.stderr,
    )
    return False


def _status(pid: "int | str") -> list[bytes]:
    with open(f"/proc/{pid}/status", "rb") as f:
        return [line for line in f.read().splitlines() if line.startswith(_SHARED)]


def _wait(sock: "_Socket", lines: "_Lines", pid: int) -> int:
    """Pass signals on to the fork ``pid`` until it says how it exited."""
    import _signal  # (see ``request``)

    # passed to the fork's process group, which holds what would have shared this
    # process's group (a command not in a session of its own, git), as from a terminal
    fatal = {_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT}

    def forward(signum: int, frame: object) -> None:
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:  # nothing left to pass it to: it is this process's
            if signum in fatal:
                _signal.signal(signum, _signal.SIG_DFL)
                os.kill(os.getpid(), signum)
        except OSError:
            pass

    def stop(signum: int, frame: object) -> None:
        # Ctrl-Z: the fork stops with this process, and goes on with it (SIGCONT is passed)
        try:
            os.killpg(pid, _signal.SIGSTOP)
        except OSError:
            pass
        _signal.signal(_signal.SIGTSTP, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGTSTP)
        _signal.signal(_signal.SIGTSTP, stop)

    for name in FORWARDED:
        number = getattr(_signal, name)
        if not _ignored(_signal, number):  # (ignored here, so it is in the fork)
            _signal.signal(number, forward)
    if not _ignored(_signal, _signal.SIGTSTP):
        _signal.signal(_signal.SIGTSTP, stop)
    said = lines.next()
    sock.close()
    if said.startswith(b"exit "):
        return int(said[5:])
    # it ended without a word: the resident says how (``ended`` and its wait status);
    # killed, this process dies of the same signal, for its own caller to see the same
    status = int(said[6:]) if said.startswith(b"ended ") else None
    if status is not None and os.WIFSIGNALED(status):
        try:
            _signal.signal(os.WTERMSIG(status), _signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # (SIGKILL: always the default)
        os.kill(os.getpid(), os.WTERMSIG(status))
    print(
        f"bar: the process running this command (pid {pid}) ended without saying how; "
        "run `bar status` to see what was recorded",
        file=sys.stderr,
    )
    return os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else 1


def start(entry: str) -> None:
    """Start a resident for this bar home, if none listens and one may run here: the
    module ``entry`` run as ``python -m ENTRY FD SOCKET IDLE`` (``bar.cli.warm``: the face
    hands it in). Never fails: a resident is only ever a way to start faster."""
    if idle_seconds() == 0 or os.environ.get("BAR_STEP_ID") or _speed_off():
        return
    from bar.base import speed

    if not speed.fast():
        return  # (the project's speed.fast: false, read by the command just run)
    path = socket_path()
    if os.path.exists(path):
        return
    import socket
    import subprocess

    from bar.base import peers

    if peers.no_new_privs(os.getpid()):
        return  # it could not tell a confined caller from this one (``bar.base.peers``)
    folder = os.path.dirname(path)
    spare = os.path.join(folder, f".{SOCKET}.{os.getpid()}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not os.path.isdir(folder):
            return
        with _suppress():
            os.unlink(spare)
        old = os.umask(0o177)
        try:
            listener.bind(_address(spare))
        finally:
            os.umask(old)
        listener.listen(16)
        os.replace(spare, path)  # listening already: a command waits for it to load
        flags = ["-E", "-P"] if sys.version_info >= (3, 11) else ["-E"]
        command = [
            sys.executable,
            *flags,
            "-m",
            entry,
            str(listener.fileno()),
            path,
            str(idle_seconds()),
        ]
        subprocess.Popen(
            command,
            cwd="/",
            env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(listener.fileno(),),
            start_new_session=True,
        )
    except OSError:
        for leftover in (spare, path):
            with _suppress():
                os.unlink(leftover)
    finally:
        listener.close()


def status(home: str | None = None) -> "tuple[int, int, int] | None":
    """(pid, when it loaded bar in ns since the epoch, idle seconds) of the resident of
    this bar home (``home``: of that one); None if none answers."""
    said = _ask(home, b"status")
    parts = said.split() if said else []
    if len(parts) != 4 or parts[0] != b"status" or not all(p.isdigit() for p in parts[1:]):
        return None
    return int(parts[1]), int(parts[2]), int(parts[3])


def stop(home: str | None = None) -> bool:
    """Ask the resident of this bar home (``home``: of that one) to exit; whether one
    was listening."""
    return _ask(home, b"exit") == b"bye"


def ready(home: str | None = None) -> bool:
    """Wait until the resident of this bar home (``home``: of that one) has loaded bar;
    whether one answered."""
    return _ask(home, b"ping") == b"pong"


def _ask(home: str | None, word: bytes) -> bytes | None:
    import _socket

    path = os.path.join(home, SOCKET) if home else socket_path()
    if not os.path.exists(path):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(10 * TIMEOUT)  # (a resident that has only just started loads first)
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_PASSCRED, 1)
        sock.connect(_address(path))
        lines = _Lines(sock)
        if not _trusted(lines, path):
            return None
        sock.sendall(b"%d\n%s" % (len(word), word))
        return lines.next()
    except OSError:
        return None
    finally:
        sock.close()


class _suppress:
    """``contextlib.suppress(OSError)``, without loading contextlib."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, tb: object) -> bool:
        return isinstance(value, OSError)
