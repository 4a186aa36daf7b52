"""``bar resident status|start|stop``: the warm bar that serves ``bar run``."""

from __future__ import annotations

from bar.api import resident
from bar.base.notices import warn
from bar.cli import entry
from bar.cli.render import print_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar resident``: its options and help."""
    from bar.cli.parser import Formatter, json_opt

    res = sub.add_parser(
        "resident",
        formatter_class=Formatter,
        description="After a `bar run`, a process of yours keeps bar's code loaded (the\n"
        "resident, one per bar home) so that the next `bar run`, `apply`, `rollback`,\n"
        "`undo` and `redo` start in a fork of it instead of loading Python and bar again;\n"
        "so do `status`, `log`, `show`, `task` and the other commands that read the\n"
        "record, run by a script (neither standard input nor output a terminal).\n"
        "It exits by itself after BAR_RESIDENT_IDLE seconds without a command (default\n"
        "900), when bar's files change (an upgrade) or its socket goes; it never runs a\n"
        "command for a process that is not as it is (user, groups, confinement, limits).\n"
        "BAR_FAST=0 or BAR_RESIDENT_IDLE=0 turns it off. Bar homes whose\n"
        "BAR_RESIDENT_SOCKET names the same socket (in a folder only you, and best no\n"
        "step, may write) share one resident; a command is handed only to a process of\n"
        "yours that is not confined. Nothing depends on it: stopping it only makes\n"
        "the next command start slower.",
        epilog="examples:\n"
        "  bar resident status           is one running, since when, for how long idle\n"
        "  bar resident stop             before measuring a cold start, or to free memory\n"
        "  bar resident start            have one ready now (else the next bar run starts it)",
    )
    rsub = res.add_subparsers(dest="resident_command", metavar="ACTION")
    res.set_defaults(_help=res)
    for action, handler, text, example in (
        (
            "status",
            status,
            "say whether a resident is running, and since when",
            '  bar resident status --json    {"running": true, "pid": 4242, ...}',
        ),
        (
            "start",
            start,
            "start one now and wait until it has loaded bar",
            "  bar resident start            before a benchmark of warm starts",
        ),
        (
            "stop",
            stop,
            "ask it to exit (a command it is running goes on to its end)",
            "  bar resident stop             before measuring a cold start",
        ),
    ):
        p = rsub.add_parser(
            action,
            help=text,
            formatter_class=Formatter,
            description=text[0].upper() + text[1:] + ".",
            epilog="examples:\n" + example,
        )
        json_opt(p)
        p.set_defaults(_run=handler)


# --- the command -----------------------------------------------------------------------


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
    unused = resident.shared_unused()
    if unused is not None:
        warn(f"BAR_RESIDENT_SOCKET is not used: {unused}; the bar home's socket is")
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
