"""A confined step holds no privilege (docs/sandbox.md, "Processes, /tmp and privileges").

In its own user namespace the step's first process holds every capability of that
namespace; started by root, it would keep them across ``exec`` and could, as the owner of
root's files, mark one of them setuid, which outside the step runs as root. So, right
before the step's program is executed (after Landlock, which sets ``no_new_privs``:
nothing executed gains a privilege from a setuid bit or file capabilities):

- every capability leaves the bounding, ambient, inheritable, permitted and effective
  sets (``drop_capabilities``): nothing the step executes can hold one again;
- a seccomp filter (``Filter``) refuses with ``EPERM`` every system call that would set a
  setuid or setgid bit (``chmod`` and its kin with ``S_ISUID``/``S_ISGID``; ``open``,
  ``creat`` and ``mknod`` that would make a file with them), refuses ``openat2`` and
  ``io_uring_setup`` (``ENOSYS``: their arguments cannot be read by a filter; C libraries
  fall back to ``openat``) and every system call of another architecture's table.

The filter is built in bar's process (``Filter.build``) and installed between fork and
exec (``Filter.install``): system calls only there.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# classic BPF, as seccomp reads it
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_SETID_BITS = 0o6000  # S_ISUID | S_ISGID
_CREATES = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE

# (audit architecture, {system call: (index of its mode argument, index of its flags
# argument or None)}, system calls refused outright)
_TABLES = {
    "x86_64": (
        0xC000003E,
        {
            90: (1, None),  # chmod
            91: (1, None),  # fchmod
            268: (2, None),  # fchmodat
            452: (2, None),  # fchmodat2
            2: (2, 1),  # open
            257: (3, 2),  # openat
            85: (1, None),  # creat
            133: (1, None),  # mknod
            259: (2, None),  # mknodat
        },
        (437, 425),  # openat2, io_uring_setup
    ),
    "aarch64": (
        0xC00000B7,
        {
            52: (1, None),  # fchmod
            53: (2, None),  # fchmodat
            452: (2, None),  # fchmodat2
            56: (3, 2),  # openat
            33: (2, None),  # mknodat
        },
        (437, 425),
    ),
}


class Insn(ctypes.Structure):
    """One instruction of classic BPF, as seccomp reads it (also ``exec_watch``'s)."""

    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class Prog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Insn)))


def _arg(index: int) -> int:
    """Where the low 32 bits of argument ``index`` lie in ``struct seccomp_data``."""
    return 16 + 8 * index + (0 if sys.byteorder == "little" else 4)


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter's instructions (code, jt, jf, k) for ``machine``; None for a machine
    bar has no system call table of."""
    table = _TABLES.get(machine)
    if table is None:
        return None
    arch, checked, refused = table
    deny = _ERRNO | errno.EPERM
    nosys = _ERRNO | errno.ENOSYS
    # the tail each checked call jumps to: [flags test,] mode test, then allow/deny
    out: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, nosys),  # another architecture's table (i386 from x86_64)
        (_LD_W_ABS, 0, 0, 0),  # nr
        (_JGE_K, 0, 1, _X32_BIT),
        (_RET_K, 0, 0, nosys),  # the x32 table
    ]
    for nr in refused:
        out += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, nosys)]
    for nr, (mode, flags) in checked.items():
        body: list[tuple[int, int, int, int]] = []
        if flags is not None:  # the mode counts only for a call that makes a file
            body += [
                (_LD_W_ABS, 0, 0, _arg(flags)),
                (_JSET_K, 1, 0, _CREATES),
                (_RET_K, 0, 0, _ALLOW),
            ]
        body += [
            (_LD_W_ABS, 0, 0, _arg(mode)),
            (_JSET_K, 0, 1, _SETID_BITS),
            (_RET_K, 0, 0, deny),
            (_RET_K, 0, 0, _ALLOW),
        ]
        out += [(_JEQ_K, 0, len(body), nr), *body]
    out.append((_RET_K, 0, 0, _ALLOW))
    return out


class Filter:
    """The seccomp filter of a step, built before the fork (``build``), installed in the
    command's process (``install``)."""

    def __init__(self, insns: list[tuple[int, int, int, int]]) -> None:
        self._insns = (Insn * len(insns))(*(Insn(*i) for i in insns))
        self._prog = Prog(len(insns), self._insns)
        self._libc = ctypes.CDLL(None, use_errno=True)

    @classmethod
    def build(cls) -> Filter | None:
        insns = program(os.uname().machine)
        return cls(insns) if insns is not None else None

    def install(self) -> None:
        """In the command's process, after ``no_new_privs`` is set (Landlock sets it)."""
        result = self._libc.prctl(
            _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0
        )
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp: {os.strerror(err)}")


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


class Capabilities:
    """Made before the fork; ``drop`` in the command's process."""

    def __init__(self) -> None:
        self._header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        self._data = (_CapData * 2)()
        self._libc = ctypes.CDLL(None, use_errno=True)
        try:
            with open("/proc/sys/kernel/cap_last_cap") as f:
                self._last = int(f.read())
        except (OSError, ValueError):
            self._last = 63

    def drop(self) -> None:
        """Leave no capability in any set of this process. The bounding set can be
        emptied only by a process that holds ``CAP_SETPCAP``: one without it (an ordinary
        user with no namespace of its own) holds nothing to drop."""
        for cap in range(self._last + 1):
            if self._libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
                err = ctypes.get_errno()
                if err == errno.EINVAL:  # (a capability this kernel does not know)
                    continue
                if err == errno.EPERM:
                    break
                raise OSError(err, f"dropping capability {cap}: {os.strerror(err)}")
        self._libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if self._libc.capset(ctypes.byref(self._header), self._data) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"capset: {os.strerror(err)}")
