"""A step's own view of a few directories: Linux mount namespaces (docs/sandbox.md, "The
object store and the refs: a quarantine").

Landlock says which files a step may write; it cannot say "add files here, but change
none that are there". git's object store needs exactly that: a commit adds objects, and
an object once written must never change. So a confined step gets its own view of the
repository's git directory, in a user and mount namespace of its own: ``objects`` is a
quarantine directory of the task's (whatever git writes lands there), with the real store
mounted read-only beside it as an alternate (git finds every existing object, and can
change none); the directory of the task branch's ref, and of its reflog, are copies
(``bar.sandbox.quarantine`` brings back what the step did to its own branch, and nothing else).

The same namespaces give the step a PID namespace of its own (docs/sandbox.md, "Processes,
/tmp and privileges"): its first process is the init of a world where the step's processes
are the only ones (``mount_proc`` shows them alone in ``/proc``: no other process's command
line or environment can be read), and when that init ends, the kernel kills every process
left in it at once, however deep its chain of children (``bar.sandbox.holder``). Its
``/tmp`` and ``/var/tmp`` are directories of the task's: ``Bind`` entries the plan makes
(``bar.sandbox.plan``).

The views are made in the holder of the command, before the init is forked, and before
Landlock confines the command: Landlock then forbids any change of the mounts (``mount``,
``umount``, ``pivot_root`` are refused to a confined process), and the command drops
every capability of its namespace before it executes its program (``bar.sandbox.lockdown``).
Nothing here runs in bar's own process but ``available``, which tries it in a child.

This module runs between fork and exec: system calls only, nothing imported there.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from collections.abc import Callable

from bar.base.record import record

# set to make bar act as if the kernel offered no namespaces (to try the fallback)
UNAVAILABLE_ENV = "BAR_NAMESPACES_UNAVAILABLE"
_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 1
_IFREQ = struct.Struct("16sH22x")  # (a name, the flags, and the rest of the union)
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
# mount_setattr(2): the same number in every architecture's table (a call of Linux 5.12)
_SYS_MOUNT_SETATTR = 442
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR = struct.Struct("QQQQ")  # attr_set, attr_clr, propagation, userns_fd
_MS_RELATIME = 1 << 21
_MS_STRICTATIME = 1 << 24
# ``statvfs`` flags of a mount that a remount in a user namespace must keep as they are
_ST_RELATIME = 4096
_KEPT = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME


@record(frozen=True)
class Bind:
    """Show the directory ``source`` at ``target`` (read-only if asked). A ``layer`` is
    laid over ``target`` instead, read-only: what ``source`` holds is seen there in front
    of what ``target`` holds (an overlay), and the mounts that were inside ``target``
    (``nested``) are shown again where they were. ``if_present``: what the plan saw may
    be gone when the step starts (another task's temporary directory, an entry of the
    machine's /tmp shown again): then there is nothing to show or to cover, and nothing
    is mounted."""

    source: str
    target: str
    read_only: bool = False
    layer: bool = False
    nested: tuple[str, ...] = ()
    if_present: bool = False


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")  # (ENOENT: FileNotFoundError)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter(
    binds: tuple[Bind, ...], uid: int, gid: int, *, pids: bool = False, net: bool = False
) -> None:
    """Make this process's own user and mount namespaces (the same user and group
    inside as out), with ``pids`` a PID namespace its next child is the init of (and
    an IPC namespace), with
    ``net`` a network namespace of its own (its loopback up, nothing else: no route out),
    and mount ``binds`` in order. In the holder of the step's command; an error here
    reaches ``Popen``, and the command never runs."""
    try:
        here: str | None = os.getcwd()
    except OSError:  # (a directory removed since: nothing to enter again)
        here = None
    # with its own processes, its own System V shared memory, semaphores and message
    # queues too: those of the developer's programs (a database's, an X server's) are
    # no step's to read or write, as their POSIX ones in /dev/shm are not
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | (_CLONE_NEWPID | _CLONE_NEWIPC if pids else 0)
    _check(_libc.unshare(flags | (_CLONE_NEWNET if net else 0)), "unshare")
    if net:
        loopback_up()
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # nothing mounted here reaches the namespace bar runs in
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "mount --make-rslave /")
    made: list[str] = []  # the writable mounts made so far (the quarantine's, ...)
    for bind in binds:
        source, target = os.fsencode(bind.source), os.fsencode(bind.target)
        if bind.layer:
            _lay(bind, source, target)
            made += bind.nested
            continue
        if bind.if_present and not (os.path.lexists(source) and os.path.lexists(target)):
            continue
        try:
            _check(
                _libc.mount(source, target, None, _MS_BIND | _MS_REC, None),
                f"mount --bind {bind.source} {bind.target}",
            )
        except FileNotFoundError:
            if bind.if_present:  # (gone between the look above and the mount)
                continue
            raise
        if not bind.read_only:
            made.append(bind.target)
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _kept_flags(bind.target)
        _check(_libc.mount(None, target, None, flags, None), f"mount -o remount,ro {bind.target}")
        _read_only_below(bind.target)
        # what this namespace made writable inside what is shown read-only (the object
        # store's quarantine in a repository shown again in the step's /tmp) is shown
        # writable again, as it is where it was made
        inside = bind.source.rstrip("/") + "/"
        for path in (m for m in made if m.startswith(inside)):
            again = bind.target.rstrip("/") + path[len(inside) - 1 :]
            _check(
                _libc.mount(os.fsencode(path), os.fsencode(again), None, _MS_BIND | _MS_REC, None),
                f"mount --bind {path} {again} (writable again)",
            )
    if binds and here is not None:
        # the working directory was entered before these mounts, beneath them: entered
        # again, so that a relative path sees what an absolute one does (a directory of
        # the worktree shown read-only is read-only by either)
        os.chdir(here)


def _read_only_below(target: str) -> None:
    """The mounts a recursive bind copied with ``target`` (a repository, a home, a
    container's volume on a mount of its own inside what is shown) read-only too: a
    remount changes one mount, and Landlock lets a step write wherever a writable
    directory's rule reaches, mounts included. One ``mount_setattr`` where the kernel
    has it (Linux 5.12), else a remount of each."""
    attr = ctypes.create_string_buffer(_MOUNT_ATTR.pack(_MOUNT_ATTR_RDONLY, 0, 0, 0))
    done = _libc.syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_long(_AT_FDCWD),
        ctypes.c_char_p(os.fsencode(target)),
        ctypes.c_ulong(_AT_RECURSIVE),
        attr,
        ctypes.c_size_t(_MOUNT_ATTR.size),
    )
    if done == 0:
        return
    for point in mounts_inside(target):
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _kept_flags(point)
        _check(
            _libc.mount(None, os.fsencode(point), None, flags, None), f"mount -o remount,ro {point}"
        )


def _lay(bind: Bind, source: bytes, target: bytes) -> None:
    held = [os.open(path, os.O_PATH | os.O_CLOEXEC) for path in bind.nested]
    try:
        options = b"ro,lowerdir=" + _escaped(source) + b":" + _escaped(target)
        _check(
            _libc.mount(b"overlay", target, b"overlay", _MS_RDONLY | _MS_NOSUID, options),
            f"mount -t overlay -o lowerdir={bind.source}:{bind.target} {bind.target}",
        )
        for fd, path in zip(held, bind.nested, strict=True):
            _check(
                _libc.mount(
                    f"/proc/self/fd/{fd}".encode(),
                    os.fsencode(path),
                    None,
                    _MS_BIND | _MS_REC,
                    None,
                ),
                f"mount --bind {path} (again, over the layer)",
            )
    finally:
        for fd in held:
            os.close(fd)


def loopback_up() -> None:
    """Bring up ``lo`` of this (new) network namespace: 127.0.0.1 and ::1 answer, and
    they are its own."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        name = b"lo"
        flags = _IFREQ.unpack(fcntl.ioctl(s, _SIOCGIFFLAGS, _IFREQ.pack(name, 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, _IFREQ.pack(name, flags | _IFF_UP))


def _escaped(path: bytes) -> bytes:
    """``path`` as an overlay's option names it (its separators escaped)."""
    for special in (b"\\", b":", b","):
        path = path.replace(special, b"\\" + special)
    return path


def mount_proc() -> None:
    """Show this PID namespace's processes, and no other, at ``/proc`` (in its init)."""
    _check(
        _libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None),
        "mount -t proc proc /proc",
    )


_TIOCSCTTY = 0x540E  # (Linux's number on x86 and arm; termios is not loaded for it)


def take_terminal() -> None:
    """Make the terminal on descriptor 0 this session's controlling terminal (in the
    init of a terminal's step, just made a session leader)."""
    _check(_libc.ioctl(0, _TIOCSCTTY, 0), "ioctl TIOCSCTTY")


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
    if "mounts" not in _available:
        _probe(probe)
    return _available["mounts"]


def pids_available(probe: str) -> str | None:
    """None where a step can also have a PID namespace and a ``/proc`` of its own (as
    ``available``); else why not."""
    why = available(probe)
    if why is not None:
        return why
    if os.environ.get(NO_PIDS_ENV):
        return f"{NO_PIDS_ENV} is set"
    return _available["pids"]


def net_available(probe: str) -> str | None:
    """None where a step can also have a network namespace of its own (as
    ``available``); else why not."""
    why = available(probe)
    if why is not None:
        return why
    if os.environ.get(NO_NET_ENV):
        return f"{NO_NET_ENV} is set"
    return _available["net"]


def layer_available(layer: Bind) -> str | None:
    """None where ``layer`` (a ``Bind`` with ``layer``) can be laid in a step's mount
    namespace; else why not (tried once per process, in a child: overlays in a user
    namespace need Linux 5.11, and a file system that allows them)."""
    why = available(layer.source)
    if why is not None:
        return why
    key = f"layer {layer.target}"
    if key not in _available:

        def attempt(write: int) -> None:
            try:
                enter((layer,), os.getuid(), os.getgid())
                os.write(write, b"ok")
            except BaseException as e:
                os.write(write, str(e).encode()[:500])

        text = _in_child(attempt)
        _available[key] = None if text == "ok" else text or "the probe died"
    return _available[key]


def _in_child(attempt: Callable[[int], None]) -> str:
    """What ``attempt`` writes to the descriptor it is given, run in a child that ends
    after it (the namespaces it makes are gone with it)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            attempt(write)
        finally:
            os._exit(0)
    os.close(write)
    said = b""
    while chunk := os.read(read, 4096):
        said += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return said.decode(errors="replace")


def mounts_inside(folder: str) -> tuple[str, ...]:
    """The mount points strictly inside ``folder`` in bar's own view, outermost first."""
    found: list[str] = []
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return ()
    prefix = folder.rstrip("/") + "/"
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            point = _unescape(fields[4].decode("utf-8", "surrogateescape"))
            if point.startswith(prefix) and point not in found:
                found.append(point)
    return tuple(sorted(found, key=lambda p: p.count("/")))


def _unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (``\\040`` for a space) read."""
    if "\\" not in field:
        return field
    import re

    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


# set to make bar act as if the kernel offered no PID namespaces (to try the fallback)
NO_PIDS_ENV = "BAR_PID_NAMESPACES_UNAVAILABLE"
# ... or no network namespaces
NO_NET_ENV = "BAR_NET_NAMESPACES_UNAVAILABLE"


def _net_probe() -> bytes:
    """Whether this process (in a user namespace of its own) can make a network
    namespace and bring its loopback up: empty if so, else why not."""
    try:
        _check(_libc.unshare(_CLONE_NEWNET), "unshare")
        loopback_up()
    except OSError as e:
        return b"no network namespace of its own: " + str(e).encode()[:300]
    return b""


def _probe(probe: str) -> None:
    """Try the namespaces in a child (its own child for the PID namespace): the answers
    for ``available`` and ``pids_available``."""

    def attempt(write: int) -> None:
        try:
            try:
                enter((Bind(probe, probe, read_only=True),), os.getuid(), os.getgid(), pids=True)
            except OSError:  # (mounts without a PID namespace: tried alone)
                enter((Bind(probe, probe, read_only=True),), os.getuid(), os.getgid())
                net = _net_probe()
                os.write(write, b"ok:" + net + b"\0no PID namespace for an ordinary user here")
                return
            net = _net_probe()  # (the init forked next is in it: harmless)
            init = os.fork()
            if init == 0:
                try:
                    mount_proc()
                    pids = b"" if os.getpid() == 1 else b"no PID namespace"
                except BaseException as e:
                    pids = b"no /proc of its own: " + str(e).encode()[:500]
                finally:
                    os.write(write, b"ok:" + net + b"\0" + pids)
                    os._exit(0)
            os.waitpid(init, 0)
        except BaseException as e:  # (said to the parent, whatever it is)
            os.write(write, str(e).encode()[:500])

    text = _in_child(attempt)
    if text.startswith("ok:"):
        net, _, pids = text[3:].partition("\0")
        _available["mounts"] = None
        _available["pids"] = pids or None
        _available["net"] = net or None
    else:
        _available["mounts"] = _available["pids"] = _available["net"] = text or "the probe died"
