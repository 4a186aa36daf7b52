"""The channel between a running step's ``bar run`` and the ``bar`` commands inside it.

While a step runs, its ``bar run`` process is the only writer of the task's files. A
``bar hook`` started by the agent inside the step does not write them: it hands the
agent's event to ``bar run`` over a Unix socket in the task directory
(``bar.store.layout.TaskPaths.socket``, 0600 in a 0700 directory), and prints the reply
it gets back. ``bar run`` keeps the compiled policy in memory, judges the event, records
the decision and answers (``bar.step.supervisor``).

The wire format is small enough to need no JSON on the client side, which runs before
every shell command an agent issues and imports only ``os``, ``socket`` and
``bar.base.record`` (which imports nothing):

    request:  b"bar1 " + VERB + b" " + ARG + b"\\n" + BODY      (then end of writing)
    reply:    EXIT_CODE + b"\\n" + len(STDOUT) + b"\\n" + STDOUT + STDERR

A Unix socket path may not be longer than about 100 bytes, while task directories can
be deep; a longer path is reached through ``/proc/self/fd/N/`` of an open directory.
"""

from __future__ import annotations

import socket

from bar.base.record import record
from bar.base.socket_path import Address

MAGIC = b"bar1"
MAX_REQUEST = 16 << 20  # an agent's event with a long command, with room to spare
TIMEOUT = 60.0  # seconds a hook waits for ``bar run``; agents give a hook about as long


@record(frozen=True)
class Reply:
    """What the running step's ``bar run`` answered: what to print and how to exit."""

    exit_code: int
    stdout: bytes
    stderr: bytes


def encode_reply(reply: Reply) -> bytes:
    return b"%d\n%d\n" % (reply.exit_code, len(reply.stdout)) + reply.stdout + reply.stderr


def decode_request(data: bytes) -> tuple[str, str, bytes] | None:
    """(verb, argument, body), or None for anything that is not a request."""
    head, sep, body = data.partition(b"\n")
    words = head.split(b" ")
    if not sep or len(words) != 3 or words[0] != MAGIC:
        return None
    try:
        return words[1].decode("ascii"), words[2].decode("ascii"), body
    except UnicodeDecodeError:
        return None


def request(path: str, verb: str, arg: str, body: bytes, timeout: float = TIMEOUT) -> Reply | None:
    """Send one request to the ``bar run`` listening at ``path``; None when nothing
    listens there (no step is running). A server that answers garbage, or not in time,
    is an ``OSError``."""
    address = Address(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(address.name)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        sock.sendall(b"%s %s %s\n" % (MAGIC, verb.encode(), arg.encode()) + body)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
        address.close()
    data = b"".join(chunks)
    code, _, rest = data.partition(b"\n")
    size, _, rest = rest.partition(b"\n")
    if not code.removeprefix(b"-").isdigit() or not size.isdigit() or int(size) > len(rest):
        raise OSError(f"bar run answered something unreadable ({len(data)} bytes)")
    return Reply(int(code), rest[: int(size)], rest[int(size) :])
