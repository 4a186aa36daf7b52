"""A step's own view of a few directories: Linux mount namespaces (SPEC §8, round two).

Landlock says which files a step may write; it cannot say "add files here, but change
none that are there". git's object store needs exactly that: a commit adds objects, and
an object once written must never change. So a confined step gets its own view of the
repository's git directory, in a user and mount namespace of its own: ``objects`` is a
quarantine directory of the task's (whatever git writes lands there), with the real store
mounted read-only beside it as an alternate (git finds every existing object, and can
change none); the directory of the task branch's ref, and of its reflog, are copies
(``bar.sandbox.quarantine`` brings back what the step did to its own branch, and nothing else).

The views are made in the command's process, after its holder is forked off and before
Landlock confines it: Landlock then forbids any change of the mounts (``mount``,
``umount``, ``pivot_root`` are refused to a confined process), and the command, once it
executes a program as an ordinary user of its namespace, holds no capability at all.
Nothing here runs in bar's own process but ``available``, which tries it in a child.

This module runs between fork and exec: system calls only, nothing imported there.
"""

from __future__ import annotations

import ctypes
import os

from bar.base.record import record

# set to make bar act as if the kernel offered no namespaces (to try the fallback)
UNAVAILABLE_ENV = "BAR_NAMESPACES_UNAVAILABLE"
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_BIND = 4096
_MS_REC = 16384
_MS_SLAVE = 1 << 19
_MS_RELATIME = 1 << 21
_MS_STRICTATIME = 1 << 24
# ``statvfs`` flags of a mount that a remount in a user namespace must keep as they are
_ST_RELATIME = 4096
_KEPT = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME


@record(frozen=True)
class Bind:
    """Show the directory ``source`` at ``target`` (read-only if asked)."""

    source: str
    target: str
    read_only: bool = False


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter(binds: tuple[Bind, ...], uid: int, gid: int) -> None:
    """Make this process's own user and mount namespaces (the same user and group
    inside as out) and mount ``binds`` in order. In a child about to execute the step's
    command; an error here reaches ``Popen``, and the command never runs."""
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # nothing mounted here reaches the namespace bar runs in
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "mount --make-rslave /")
    for bind in binds:
        source, target = os.fsencode(bind.source), os.fsencode(bind.target)
        _check(
            _libc.mount(source, target, None, _MS_BIND | _MS_REC, None),
            f"mount --bind {bind.source} {bind.target}",
        )
        if bind.read_only:
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _kept_flags(bind.target)
            _check(
                _libc.mount(None, target, None, flags, None), f"mount -o remount,ro {bind.target}"
            )


def _kept_flags(path: str) -> int:
    """The flags of the mount at ``path`` that a remount from a user namespace may not
    change (the kernel refuses one that drops them)."""
    have = os.statvfs(path).f_flag
    flags = have & _KEPT
    if have & _ST_RELATIME:
        flags |= _MS_RELATIME
    elif not have & _MS_NOATIME:
        flags |= _MS_STRICTATIME
    return flags


_available: dict[str, str | None] = {}


def available(probe: str) -> str | None:
    """None where this kernel lets an ordinary user make these namespaces and mount a
    read-only view of ``probe`` (a directory) in them; else why not. Tried once per
    process, in a child."""
    if os.environ.get(UNAVAILABLE_ENV):
        return f"{UNAVAILABLE_ENV} is set"
    if "" in _available:
        return _available[""]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # (the child only makes system calls, then ends)
        os.close(read)
        try:
            enter((Bind(probe, probe, read_only=True),), os.getuid(), os.getgid())
            os.write(write, b"ok")
        except BaseException as e:  # (said to the parent, whatever it is)
            os.write(write, str(e).encode()[:500])
        finally:
            os._exit(0)
    os.close(write)
    said = b""
    while chunk := os.read(read, 4096):
        said += chunk
    os.close(read)
    os.waitpid(pid, 0)
    why = None if said == b"ok" else (said.decode(errors="replace") or "the probe died")
    _available[""] = why
    return why
