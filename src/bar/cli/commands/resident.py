"""``bar resident status|start|stop``: the warm bar that serves ``bar run``."""

from __future__ import annotations

from bar.api import resident
from bar.cli import entry
from bar.cli.render import print_json


def status(*, as_json: bool) -> int:
    _show(resident.status(), as_json)
    return 0


def start(*, as_json: bool) -> int:
    found = resident.start(entry.WARM)
    _show(found, as_json)
    return 0 if found.running or found.off else 1


def stop(*, as_json: bool) -> int:
    was = resident.stop()
    if as_json:
        print_json({"stopped": was})
    else:
        print("stopped the resident" if was else "no resident was running")
    return 0


def _show(found: resident.Resident, as_json: bool) -> None:
    if as_json:
        print_json(found.to_record())
        return
    if found.running:
        print(
            f"a resident is running: pid {found.pid}, loaded at {found.started_at}; it "
            f"exits after {found.idle_seconds} s without a command"
        )
    elif found.off:
        print(f"no resident: none is started here ({found.off})")
    else:
        print("no resident is running (the next bar run starts one)")
    print(f"socket: {found.socket}")
