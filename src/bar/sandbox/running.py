"""Which processes belong to a running step (docs/sandbox.md, "What bar does on the step's
behalf").

A step's processes live in a PID namespace of its own (``bar.sandbox.namespace``), which
nothing in the step can leave. While a step runs, bar keeps a note of that namespace
under ``$BAR_HOME/run/steps/`` (a file named after the namespace's inode, which the step
cannot write: ``$BAR_HOME`` is read-only to it). What serves the developer on this
machine and must never take orders from a step, ``bar ui`` above all, asks
``holds_socket`` whether a connection it accepted was made from inside one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bar.store.files import ensure_dir
from bar.store.layout import bar_home


def _notes() -> Path:
    return bar_home() / "run" / "steps"


def note(holder: int) -> str | None:
    """Note the PID namespace the children of ``holder`` (a step's holder) are in; the
    name of the note, or None where there is none to take."""
    try:
        inode = os.stat(f"/proc/{holder}/ns/pid_for_children").st_ino
    except OSError:
        return None
    if inode == os.stat("/proc/self/ns/pid").st_ino:  # (no namespace of its own)
        return None
    folder = _notes()
    ensure_dir(folder)  # (0700, each folder it makes)
    name = str(inode)
    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with contextlib.suppress(OSError):
        os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return name


def forget(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(_notes() / name)


def _noted() -> set[int]:
    try:
        return {int(n) for n in os.listdir(_notes()) if n.isdigit()}
    except OSError:
        return set()


def holds_socket(local_port: int, remote_port: int) -> bool:
    """Whether a process of a running step holds the TCP socket from ``local_port`` to
    ``remote_port`` on this machine (as ``/proc/net/tcp`` names them). Costs nothing
    while no step runs."""
    spaces = _noted()
    if not spaces:
        return False
    sockets = _sockets(local_port, remote_port)
    if not sockets:
        return False
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}/ns/pid").st_ino not in spaces:
                continue
            held = {os.readlink(f"/proc/{name}/fd/{fd}") for fd in os.listdir(f"/proc/{name}/fd")}
        except OSError:
            continue
        if held & sockets:
            return True
    return False


def _sockets(local_port: int, remote_port: int) -> set[str]:
    """``socket:[inode]`` of each TCP socket from ``local_port`` to ``remote_port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == local_port and (
                int(remote.rsplit(":", 1)[1], 16) == remote_port
            ):
                found.add(f"socket:[{inode}]")
    return found
