"""The resident (``bar resident``): whether a warm bar serves this bar home, and starting
or stopping one (``bar.changes.fast.resident``)."""

from __future__ import annotations

import os
import time

from bar.base import peers, speed
from bar.base.clock import iso_of
from bar.base.record import record
from bar.changes import fast


@record(frozen=True)
class Resident:
    """The resident of this bar home as it answered (``running`` False: none did)."""

    running: bool
    socket: str
    pid: int | None = None
    started_at: str | None = None  # when it had loaded bar
    idle_seconds: int | None = None  # how long it waits for a command before it exits
    off: str | None = None  # why none is started here, if none may be

    def to_record(self) -> dict[str, object]:
        return {
            "running": self.running,
            "socket": self.socket,
            "pid": self.pid,
            "started_at": self.started_at,
            "idle_seconds": self.idle_seconds,
            "off": self.off,
        }


def _off() -> str | None:
    if fast.resident_idle_seconds() == 0:
        return "BAR_RESIDENT_IDLE=0"
    if not speed.fast():
        return "BAR_FAST=0"
    if os.environ.get("BAR_STEP_ID") or peers.no_new_privs(os.getpid()):
        return "inside a step"  # (a confined process can neither start nor reach one)
    return None


def shared_unused() -> str | None:
    """Why the socket ``BAR_RESIDENT_SOCKET`` names is not used, if one is named and is not
    (``bar.changes.fast.resident.socket_path``: the bar home's is used instead)."""
    shared = os.environ.get("BAR_RESIDENT_SOCKET", "")
    return fast.resident_shared_refusal(shared) if shared else None


def status() -> Resident:
    """The resident of this bar home, as it says itself."""
    said = fast.resident_status()
    path = fast.resident_socket()
    if said is None:
        return Resident(False, path, off=_off())
    pid, loaded, idle = said
    return Resident(True, path, pid, iso_of(loaded), idle, _off())


def start(entry: str, timeout: float = 30.0) -> Resident:
    """Start one (the module ``entry`` run as the resident process: ``bar.cli.warm``) if
    none runs and one may, and wait until it has loaded bar (``timeout`` seconds at most)."""
    if fast.resident_status() is None and _off() is None:
        os.makedirs(os.path.dirname(fast.resident_socket()), mode=0o700, exist_ok=True)
        fast.start_resident(entry)
        deadline = time.monotonic() + timeout
        while not fast.resident_ready() and time.monotonic() < deadline:
            time.sleep(0.05)
    return status()


def stop() -> bool:
    """Ask the resident to exit; whether one was running."""
    return fast.stop_resident()
