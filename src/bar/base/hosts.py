"""Host patterns: the entries of ``sandbox.allow_hosts`` (docs/sandbox.md), and what they let in.

An entry is a host name (``pypi.org``), every name under a domain (``*.example.com``,
which is not ``example.com`` itself), or an address (``127.0.0.1``, ``[::1]``), each with
an optional port (``localhost:8080``); without a port, every port of the host. Names are
compared without case and without a final dot; addresses as addresses (``::1`` and
``0:0::1`` are one)."""

from __future__ import annotations

import re
import socket

from bar.base.record import record

_NAME = re.compile(r"(\*\.)?[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?")
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@record(frozen=True)
class Pattern:
    host: str  # a name (lower case, no final dot), ``*.suffix``, or an address
    port: int | None = None

    def admits(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        wanted = canonical(host)
        if self.host.startswith("*."):
            return wanted.endswith(self.host[1:]) and not _address(wanted)
        return wanted == self.host

    @property
    def loopback(self) -> bool:
        """Whether it names this machine (a name of it, or a loopback address)."""
        if self.host in LOOPBACK_NAMES:
            return True
        found = _address(self.host)
        return found is not None and (found.startswith("127.") or found == "::1")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def canonical(host: str) -> str:
    """``host`` as patterns hold it: lower case, no final dot, an address written once
    one way (brackets of an IPv6 address taken off)."""
    host = host.strip().strip("[]").lower().rstrip(".")
    found = _address(host)
    return found if found is not None else host


def is_address(host: str) -> bool:
    """Whether ``host`` is an IP address rather than a name."""
    return _address(host.strip("[]")) is not None


def _address(host: str) -> str | None:
    """``host`` written the one way, if it is an IP address (``ipaddress`` would cost
    more to load than every use here)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_ntop(family, socket.inet_pton(family, host))
        except (OSError, ValueError):
            continue
    return None


def split(entry: str) -> tuple[str, str | None]:
    """An entry's host and port as written (``[v6]:port``, ``host:port``, ``host``)."""
    entry = entry.strip()
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, (rest[1:] if rest.startswith(":") else None) if rest else None
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, port
    return entry, None  # (a bare IPv6 address has several colons and no port)


def invalid(entry: str) -> str | None:
    """Why ``entry`` is not a host pattern; None if it is one."""
    if entry != entry.strip():
        return "space around it"
    if entry.startswith("[") and "]" not in entry:
        return "an address in brackets must end with ]"
    host, port = split(entry)
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return f"{port!r} is not a port"
    if _address(host) is None and not _NAME.fullmatch(host):
        if host == "*":
            return "every host is sandbox.network: open, not an entry"
        return "not a host name, *.suffix or address"
    return None


def parse(entry: str) -> Pattern:
    """The pattern of a valid ``entry`` (``invalid`` said so)."""
    host, port = split(entry)
    wild = host.startswith("*.")
    name = canonical(host[2:] if wild else host)
    return Pattern(("*." + name) if wild else name, int(port) if port else None)


def admitted(patterns: tuple[Pattern, ...], host: str, port: int) -> bool:
    return any(p.admits(host, port) for p in patterns)
