"""Landlock, the Linux kernel's access control for unprivileged processes.

Three system calls: create a ruleset naming the kinds of access it governs, add rules
(this directory, and everything beneath it, allows these kinds), and restrict the calling
thread with it. From then on that thread, and every process it starts, can do only what
the rules allow; the restriction cannot be lifted, only narrowed further.

The restriction applies to the *calling thread* (and its future children), not to the
whole process. bar uses that: a short-lived thread restricts itself and starts the step's
command, while ``bar run``'s other threads keep their rights and go on writing the task's
files. No helper process is executed and no Python code runs between fork and exec.

Rights this module knows depend on the kernel's Landlock ABI version: 1 (Linux 5.13) has
the file system rights, 2 adds moving files between directories (``REFER``), 3 truncation,
4 TCP bind and connect, 6 scoping of signals and abstract Unix sockets. A right the
kernel does not know is neither governed nor granted.
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

# system call numbers: the same on every architecture that uses the generic table
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

# file system rights
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3

READ = EXECUTE | READ_FILE | READ_DIR
_ABI1 = (1 << 13) - 1
_BY_ABI = {1: _ABI1, 2: _ABI1 | REFER}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # what a rule on a file may grant

# network rights (ABI 4) and scopes (ABI 6)
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_FOLLOW = os.O_PATH | os.O_CLOEXEC
_NO_FOLLOW = _FOLLOW | os.O_NOFOLLOW

_libc: list[ctypes.CDLL] = []


def _c() -> ctypes.CDLL:
    if not _libc:
        _libc.append(ctypes.CDLL(None, use_errno=True))
    return _libc[0]


def _check(result: int) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _syscall(*args: object) -> int:
    return _check(_c().syscall(*args))


def prctl(option: int, value: int) -> None:
    """``prctl(option, value)`` for this process (or, for per-thread options, thread)."""
    _check(_c().prctl(option, value, 0, 0, 0))


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or switched off."""
    try:
        return _syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    except (OSError, AttributeError):
        return 0


def fs_rights(abi: int) -> int:
    """Every file system right the kernel of this ABI governs."""
    return _BY_ABI.get(abi, _ABI1 | REFER | TRUNCATE)


class Ruleset:
    """A ruleset being built: everything governed, nothing allowed until a rule says so."""

    def __init__(self, abi: int, *, connect_ports: tuple[int, ...] | None = None) -> None:
        """``connect_ports``: None, TCP as the machine allows it; empty, no TCP at all
        (no connection, no listening); else connections to these ports only."""
        self.abi = abi
        self.handled = fs_rights(abi)
        attr = _RulesetAttr(self.handled, 0, 0)
        size = 8  # ABI 1-3 know only the file system field
        network = connect_ports is None
        if abi >= 4:
            size = 16
            if connect_ports == ():
                attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP  # no rule: none
            elif connect_ports:
                attr.handled_access_net = _NET_CONNECT_TCP
        if abi >= 6:
            size = 24
            # a confined process can neither signal nor reach an abstract Unix socket of
            # anything outside (bar's own channel is a socket with a path)
            attr.scoped = _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET
        self.network_confined = not network and abi >= 4
        self._fd: int | None = _syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        )
        for port in connect_ports or () if abi >= 4 else ():
            net_rule = _NetPortAttr(_NET_CONNECT_TCP, port)
            _syscall(
                ctypes.c_long(_SYS_ADD_RULE),
                ctypes.c_int(self._fd),
                ctypes.c_int(_RULE_NET_PORT),
                ctypes.byref(net_rule),
                ctypes.c_uint32(0),
            )
        # one rule's arguments, made once: a step's ruleset has a rule per entry beside
        # each path it protects (hundreds), and ctypes' conversions cost more than the call
        self._rule = _PathBeneathAttr(0, -1)
        self._add_rule = _c().syscall
        self._rule_args = (
            ctypes.c_long(_SYS_ADD_RULE),
            ctypes.c_int(self._fd),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(self._rule),
            ctypes.c_uint32(0),
        )

    def allow(self, path: Path | str, rights: int, *, follow: bool = True) -> bool:
        """Allow ``rights`` on ``path`` and everything beneath it. False when the path
        does not exist (or, with ``follow`` false, is a symbolic link); a file gets only
        the rights a file can have."""
        assert self._fd is not None
        try:
            fd = os.open(path, _FOLLOW if follow else _NO_FOLLOW)
        except OSError:
            return False
        try:
            mode = os.fstat(fd).st_mode
            if not follow and stat.S_ISLNK(mode):
                return False
            allowed = rights & self.handled
            if not stat.S_ISDIR(mode):
                allowed &= _FILE_ONLY
            if not allowed:
                return False
            rule = self._rule
            rule.allowed_access, rule.parent_fd = allowed, fd
            _check(self._add_rule(*self._rule_args))
            return True
        finally:
            os.close(fd)

    def restrict_this_thread(self) -> None:
        """Confine the calling thread and its future children (irreversibly)."""
        assert self._fd is not None
        prctl(_PR_SET_NO_NEW_PRIVS, 1)
        _syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(self._fd), ctypes.c_uint32(0))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
