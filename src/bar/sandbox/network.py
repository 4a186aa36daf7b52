"""The network a step may reach (docs/sandbox.md): its own namespace, bar's proxy the only
way out.

With ``sandbox.network: allow-list`` a step has a network namespace of its own: its
loopback, and no route anywhere else. Its way out is bar's proxy, which runs in ``bar
run`` itself, outside the namespace. The holder of the step's command (``bar.sandbox.holder``),
once in the new namespace, makes the listening sockets there and hands them to bar over a
Unix socket pair: a socket keeps the namespace it was made in, so bar accepts the step's
connections on the step's own loopback and makes its own connections from the machine's.
Nothing runs inside for it.

Two kinds of socket are made inside:

- the proxy, at ``127.0.0.1:3128`` (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and
  their lower-case forms name it). It speaks HTTP ``CONNECT``, plain HTTP in absolute
  form, and SOCKS5 (``socks5h://``: the name is resolved by bar), told apart by the first
  byte. A host is resolved outside, by bar, and only once it is allowed: a name the list
  does not hold is never even looked up;
- a forward for each endpoint on this machine's loopback the list holds with a port (a
  model server on ``127.0.0.1:8080``, the base URL of an agent): the same address and
  port inside lead to it outside. A program that ignores the proxy variables (and
  ``NO_PROXY`` keeps the loopback direct) still reaches it; the step's own loopback is
  otherwise its own.

Every connection, allowed or refused, is a line of the step's network log
(``Layout.network_log``): host, port, whether it was allowed, the bytes each way and when
it began. A crash of bar loses none of them; ``bar.step.complete`` puts them in the step's
``network``. A refusal answers the program with what to change (``403`` and its reason
for HTTP, SOCKS5's "not allowed by ruleset"), and bar says it once on its own stderr.

Where the kernel gives no network namespace, the proxy listens on bar's own loopback and
Landlock lets the step make TCP connections to its port only (``bar.sandbox.landlock``,
ABI 4: a rule names a port, never an address), and nothing is direct (``NO_PROXY`` is
empty): the step's own TCP servers are out of its reach, and UDP is not governed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar.base.clock import now_iso
from bar.base.hosts import Pattern, admitted, canonical, invalid, is_address
from bar.base.record import record

PROXY_PORT = 3128
NO_PROXY = "localhost,127.0.0.1,::1"
_HEAD_MAX = 64 * 1024  # what a request's head may hold before it is refused
_CHUNK = 256 * 1024
_CONNECT_TIMEOUT = 30.0
_RECORDS_MAX = 2000  # connections logged one by one, of each kind (allowed, refused)
_SUMMED_MAX = 500  # host and port pairs counted beyond that, of each kind; then one count
_OPEN_MAX = 256  # connections served at once; more are closed at once (a thread each)


@record(frozen=True)
class NetPlan:
    """What a step may reach: ``mode`` (``open``, ``allow-list``, ``none``), whether it
    has a network namespace of its own (``isolated``), the hosts of the allow-list, the
    loopback endpoints shown inside (``forwards``), and where the list is set."""

    mode: str = "open"
    isolated: bool = False
    hosts: tuple[Pattern, ...] = ()
    forwards: tuple[tuple[str, int], ...] = ()
    proxy_port: int = PROXY_PORT
    setting: str = "sandbox.allow_hosts"

    @property
    def gated(self) -> bool:
        return self.mode == "allow-list"

    def points(self) -> list[tuple[str, int, str | None]]:
        """Where the sockets are made inside the namespace, and what each leads to:
        the proxy (None), then each forward's host (a name of this machine is made at
        its two loopback addresses)."""
        made: list[tuple[str, int, str | None]] = [("127.0.0.1", self.proxy_port, None)]
        for host, port in self.forwards:
            for address in (host,) if is_address(host) else ("127.0.0.1", "::1"):
                made.append((canonical(address), port, host))
        return made


def plan(
    mode: str,
    isolated: bool,
    patterns: tuple[Pattern, ...],
    setting: str,
) -> NetPlan:
    """The plan for ``mode`` with the allow-list ``patterns``: the loopback endpoints
    with a port among them are forwards; the proxy's port is one none of them holds."""
    forwards = tuple(
        dict.fromkeys((p.host, p.port) for p in patterns if p.loopback and p.port is not None)
    )
    taken = {port for _, port in forwards}
    port = PROXY_PORT
    while port in taken:
        port += 1
    return NetPlan(mode, isolated, patterns, forwards if isolated else (), port, setting)


def proxy_env(address: tuple[str, int], own_loopback: bool = True) -> dict[str, str]:
    """The variables that send a step's programs through the proxy at ``address``, and
    keep its own loopback direct where it has one (else nothing is direct)."""
    url = f"http://{address[0]}:{address[1]}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY if own_loopback else ""
    return env


class Gate:
    """bar's proxy (and forwards) for one step: ``inside`` runs in each holder of the
    step's commands, ``opened`` in bar after each started, ``close`` at the end."""

    def __init__(self, plan: NetPlan, log: Path, say: Callable[[str], None]) -> None:
        self.plan = plan
        self.log = log
        self._say = say
        self._lock = threading.Lock()
        self._said: set[tuple[str, int]] = set()
        self._listeners: list[socket.socket] = []
        self._live: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._logged = {True: 0, False: 0}
        self._summed: dict[tuple[str, int, bool], dict[str, Any]] = {}
        self._closed = False
        self.address = ("127.0.0.1", plan.proxy_port)
        self._theirs, self._ours = -1, -1
        if plan.isolated:
            theirs, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._theirs, self._ours = theirs.detach(), ours.detach()
        else:  # (no namespace: the proxy is on bar's own loopback, at a port of its own)
            listener = socket.create_server(("127.0.0.1", 0), backlog=128)
            self.address = listener.getsockname()[:2]
            self._serve(listener, self._proxy)

    def env(self) -> dict[str, str]:
        return proxy_env(self.address, own_loopback=self.plan.isolated)

    # --- in the holder, in the step's new namespace (system calls only) ------------------

    def inside(self) -> None:
        """Make the listening sockets in this namespace and hand them to bar, with the
        numbers of the points they are (a forward's IPv6 twin is left out where the
        kernel has no IPv6; the proxy's failure is the step's)."""
        made: list[socket.socket] = []
        which: list[str] = []
        try:
            for i, (host, port, target) in enumerate(self.plan.points()):
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                try:
                    s = socket.socket(family, socket.SOCK_STREAM)
                except OSError:
                    if target is None:
                        raise
                    continue
                made.append(s)
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((host, port))
                    s.listen(128)
                except OSError:
                    if target is None:
                        raise
                    made.pop().close()
                    continue
                which.append(str(i))
            with socket.socket(fileno=os.dup(self._theirs)) as channel:
                socket.send_fds(channel, [",".join(which).encode()], [s.fileno() for s in made])
        finally:
            for s in made:
                s.close()

    # --- in bar ------------------------------------------------------------------------

    def opened(self) -> None:
        """After a command of the step started: serve the sockets its holder made."""
        if not self.plan.isolated or self._closed:
            return
        with socket.socket(fileno=os.dup(self._ours)) as channel:
            channel.settimeout(10)
            try:
                said, fds, _, _ = socket.recv_fds(channel, 4096, 64)
            except (TimeoutError, OSError) as exc:
                self._say(f"the step's network could not be served: {exc}")
                return
        points = self.plan.points()
        for fd, i in zip(fds, said.decode().split(","), strict=False):
            _, port, target = points[int(i)]
            listener = socket.socket(fileno=fd)
            if target is None:
                self._serve(listener, self._proxy)
            else:
                self._serve(listener, functools.partial(self._forward, host=target, port=port))

    def close(self) -> None:
        """Stop serving: no new connection, and those still open are cut (the step's
        processes are gone by now)."""
        with self._lock:
            self._closed = True
            listeners, live = list(self._listeners), list(self._live)
        for s in (*listeners, *live):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 5  # (each thread ends once its sockets are shut)
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            for summed in self._summed.values():
                self._append(summed)
            self._summed.clear()
        for s in listeners:
            s.close()
        for fd in (self._theirs, self._ours):
            if fd >= 0:
                os.close(fd)
        self._theirs = self._ours = -1

    def _serve(self, listener: socket.socket, handle: Callable[[socket.socket], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

        def accept() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                if self._closed:
                    conn.close()
                    return
                with self._lock:
                    crowded = len(self._live) >= _OPEN_MAX
                if crowded:  # (a step opening thousands of connections gets no thread for each)
                    conn.close()
                    continue
                worker = threading.Thread(target=self._guarded, args=(handle, conn), daemon=True)
                with self._lock:
                    if len(self._threads) > _OPEN_MAX:  # (those that ended are let go)
                        self._threads = [t for t in self._threads if t.is_alive()]
                    self._threads.append(worker)
                worker.start()

        thread = threading.Thread(target=accept, name="bar-network", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _guarded(self, handle: Callable[[socket.socket], None], conn: socket.socket) -> None:
        with self._lock:
            self._live.add(conn)
        try:
            handle(conn)
        except (OSError, ValueError):  # (the step went away, or sent what is no request)
            pass
        finally:
            with self._lock:
                self._live.discard(conn)
            conn.close()

    # --- the proxy ---------------------------------------------------------------------

    def _proxy(self, conn: socket.socket) -> None:
        conn.settimeout(_CONNECT_TIMEOUT)
        first = conn.recv(1, socket.MSG_PEEK)
        if not first:
            return
        if first == b"\x05":
            self._socks(conn)
        else:
            self._http(conn)

    def _http(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
            if len(data) > _HEAD_MAX:
                conn.sendall(_response(431, "Request Header Fields Too Large"))
                return
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = ([*lines[0].split(" "), "", ""])[:3]
        from urllib.parse import urlsplit

        if method.upper() == "CONNECT":
            host, port = _host_port(target, 443)
        else:
            try:
                parts = urlsplit(target)
                http = parts.scheme.lower() == "http"
                host, port = parts.hostname or "", parts.port or 80
            except ValueError:  # (a port out of range, a broken IPv6 address)
                http, host = False, ""
            if not http or not host:
                conn.sendall(_response(400, "bar's proxy takes CONNECT or http:// URLs"))
                return
        if not host:
            conn.sendall(_response(400, "no host to connect to"))
            return
        if not self._allowed(host, port, "http"):
            reason = self._refusal(host, port)
            conn.sendall(_response(403, reason))
            return
        upstream, entry = self._connect(host, port, "http")
        if upstream is None:
            conn.sendall(_response(502, f"bar could not reach {host}:{port}: {entry['error']}"))
            self._write(entry)
            return
        with upstream:
            if method.upper() == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self._relay(conn, upstream, entry, rest)
            else:
                path = urlsplit(target)._replace(scheme="", netloc="").geturl() or "/"
                kept = [
                    line
                    for line in lines[1:]
                    if line.split(":", 1)[0].strip().lower()
                    not in ("proxy-connection", "proxy-authorization", "connection", "keep-alive")
                ]
                request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
                self._relay(conn, upstream, entry, request.encode("latin-1") + b"\r\n\r\n" + rest)

    def _socks(self, conn: socket.socket) -> None:
        greeting = _exactly(conn, 2)
        _exactly(conn, greeting[1])  # (the methods offered: none is needed)
        conn.sendall(b"\x05\x00")
        version, command, _, kind = _exactly(conn, 4)
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, _exactly(conn, 4))
        elif kind == 4:
            host = socket.inet_ntop(socket.AF_INET6, _exactly(conn, 16))
        elif kind == 3:
            host = _exactly(conn, _exactly(conn, 1)[0]).decode("ascii", errors="replace")
        else:
            conn.sendall(_socks_reply(8))
            return
        (port,) = struct.unpack("!H", _exactly(conn, 2))
        if version != 5 or command != 1:  # (CONNECT only)
            conn.sendall(_socks_reply(7))
            return
        if not self._allowed(host, port, "socks"):
            self._refusal(host, port)
            conn.sendall(_socks_reply(2))
            return
        upstream, entry = self._connect(host, port, "socks")
        if upstream is None:
            conn.sendall(_socks_reply(5))
            self._write(entry)
            return
        with upstream:
            conn.sendall(_socks_reply(0))
            self._relay(conn, upstream, entry, b"")

    def _forward(self, conn: socket.socket, host: str, port: int) -> None:
        upstream, entry = self._connect(host, port, "forward")
        if upstream is None:
            self._write(entry)
            return
        with upstream:
            self._relay(conn, upstream, entry, b"")

    # --- what each connection does, and its record ---------------------------------------

    def _allowed(self, host: str, port: int, via: str) -> bool:
        """Whether ``host`` (as the step named it) may be reached at ``port``; a refusal
        is logged. A name that is no host name (control characters, spaces) is refused,
        and logged in printable form."""
        if invalid(host) is None and 0 < port < 65536 and admitted(self.plan.hosts, host, port):
            return True
        self._write(_entry(_printable(host), port, via, allowed=False))
        return False

    def _refusal(self, host: str, port: int) -> str:
        host = _printable(host)
        if ":" in host:  # (an IPv6 address, written as a URL writes it)
            host = f"[{host}]"
        said = (
            f"bar refused {host}:{port}: not in {self.plan.setting} (add it there, or run "
            "with --network open)"
        )
        with self._lock:
            first = (host, port) not in self._said
            self._said.add((host, port))
        if first:
            self._say(
                f"the step tried to reach {host}:{port}, which is not allowed: add it to "
                f"{self.plan.setting}, or run once with --network open"
            )
        return said

    def _connect(
        self, host: str, port: int, via: str
    ) -> tuple[socket.socket | None, dict[str, Any]]:
        entry = _entry(host, port, via, allowed=True)
        try:
            upstream = socket.create_connection((canonical(host), port), timeout=_CONNECT_TIMEOUT)
        except (OSError, ValueError) as exc:  # (ValueError: a name IDNA cannot encode)
            entry["error"] = getattr(exc, "strerror", None) or str(exc)
            return None, entry
        upstream.settimeout(None)
        return upstream, entry

    def _relay(
        self, conn: socket.socket, upstream: socket.socket, entry: dict[str, Any], first: bytes
    ) -> None:
        """Copy each way until both ends are done; the bytes counted, then the record."""
        conn.settimeout(None)
        with self._lock:
            self._live.add(upstream)
        counts = [0, 0]
        try:
            if first:
                upstream.sendall(first)
                counts[0] += len(first)
            back = threading.Thread(target=_copy, args=(upstream, conn, counts, 1), daemon=True)
            back.start()
            _copy(conn, upstream, counts, 0)
            back.join()
        finally:
            with self._lock:
                self._live.discard(upstream)
            entry["bytes_out"], entry["bytes_in"] = counts
            self._write(entry)

    def _write(self, entry: dict[str, Any]) -> None:
        """One line of the step's network log (appended at once: a crash loses none).
        Past the first ``_RECORDS_MAX`` of its kind (refusals cannot hide what was let
        through), a connection is counted in an entry of its host and port, written
        when the gate closes (``count``)."""
        with self._lock:
            allowed = bool(entry["allowed"])
            self._logged[allowed] += 1
            if self._logged[allowed] > _RECORDS_MAX:
                self._sum(entry)
                return
            self._append(entry)

    def _sum(self, entry: dict[str, Any]) -> None:
        allowed = bool(entry["allowed"])
        key = (str(entry["host"]), int(entry["port"]), allowed)
        if key not in self._summed:
            kinds = sum(1 for k in self._summed if k[2] == allowed)
            if kinds >= _SUMMED_MAX:  # (then every further one of its kind in one count)
                key = ("*", 0, allowed)
            self._summed.setdefault(key, {**entry, "host": key[0], "port": key[1], "count": 0})
        summed = self._summed[key]
        summed["count"] += 1
        summed["bytes_out"] += entry["bytes_out"]
        summed["bytes_in"] += entry["bytes_in"]
        summed.pop("error", None)

    def _append(self, entry: dict[str, Any]) -> None:
        """``entry`` as a line at the end of the log (the lock held)."""
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.log, flags, 0o600)
        except OSError:
            return
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
        finally:
            os.close(fd)


def _entry(host: str, port: int, via: str, *, allowed: bool) -> dict[str, Any]:
    return {
        "host": host,
        "port": port,
        "allowed": allowed,
        "bytes_out": 0,
        "bytes_in": 0,
        "started_at": now_iso(),
        "via": via,
    }


def _printable(host: str) -> str:
    """``host`` as a record and a message may show it: printable, one line, bounded."""
    return "".join(c if c.isprintable() and not c.isspace() else "?" for c in host[:255])


def _copy(source: socket.socket, sink: socket.socket, counts: list[int], which: int) -> None:
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    try:
        while n := source.recv_into(buffer):
            sink.sendall(view[:n])
            counts[which] += n
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the client went away")
        data += chunk
    return data


def _host_port(target: str, default: int) -> tuple[str, int]:
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = target.rpartition(":") if ":" in target else (target, "", "")
    return host, int(port) if port.isdigit() else default


def _response(code: int, reason: str) -> bytes:
    reason = reason.replace("\r", " ").replace("\n", " ")
    body = (reason + "\n").encode()
    return (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _socks_reply(code: int) -> bytes:
    return bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0])


def read_log(path: Path) -> list[dict[str, Any]]:
    """The connections a step's network log holds (a torn last line left out)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                found.append(entry)
    return found
