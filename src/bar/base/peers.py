"""Who is at the other end of one of bar's Unix sockets.

The sockets live in the task's directory (0700, each 0600), so only the developer's own
processes reach them. Among those are the processes a step runs confined: an agent of
this task or of another one. The kernel says which process connected (``SO_PEERCRED``)
and whether it runs with ``no_new_privs`` (every confined command does), which is how a
server tells a confined caller from the developer.
"""

from __future__ import annotations

import os
import socket
import struct

_CREDS = struct.Struct("3i")


def peer_pid(conn: socket.socket) -> int | None:
    """The pid of the process at the other end (None: the system does not say)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDS.size)
    except OSError:
        return None
    return int(_CREDS.unpack(creds)[0])


def no_new_privs(pid: int) -> bool:
    """Whether ``pid`` runs with ``no_new_privs`` (True when it cannot be told: gone, or
    hidden from us, it is not to be trusted)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return b"\nNoNewPrivs:\t1" in f.read()
    except OSError:
        return True


def confined_caller(conn: socket.socket) -> bool:
    """Whether the process at the other end is confined while this one is not."""
    pid = peer_pid(conn)
    return pid is not None and no_new_privs(pid) and not no_new_privs(os.getpid())
