"""The resident process's entry (``python -m bar.cli.warm FD SOCKET IDLE``, started by
``bar.changes.fast.resident.start``): bar's command line loaded once, each command it is
handed run in a fork of it (``bar.changes.fast.resident_daemon``)."""

from __future__ import annotations

import gc
import importlib
import sys

from bar.changes import fast

# what ``bar run`` (and the other served commands, and the most used of those served to
# scripts) load, so that a fork has nothing left to import (anything missing is
# imported by the fork itself: slower, never wrong)
PRELOAD = (
    "bar.cli.main",
    "bar.cli.parser",
    "bar.cli.commands.run",
    "bar.cli.commands.apply",
    "bar.cli.commands.rollback",
    "bar.cli.commands.undo",
    "bar.cli.commands.status",
    "bar.cli.commands.log",
    "bar.cli.commands.show",
    "bar.cli.commands.task",
    "bar.api",
    "bar.step.run",
    "bar.step.supervisor",
    "bar.history.queued",
    "bar.step.recovery",
    "bar.step.transaction",
    "bar.changes.sync",
    "bar.step.complete",
    "bar.changes.apply",
    "bar.changes.merge",
    "bar.changes.checkout",
    "bar.changes.rollback",
    "bar.changes.undo",
    "bar.changes.fast.prescan",
    "bar.changes.fast.rescan",
    "bar.changes.fast.watcher",
    "bar.changes.fast.watches",
    "bar.changes.fast.restored",
    "bar.task.status",
    "bar.task.start",
    "bar.aide.decide",
    "bar.session.stored",
    "bar.session.found",
    "bar.ledger.select",
    "bar.ledger.describe",
    "bar.ledger.rows",
    "bar.terminal.pty",
    "bar.terminal.pipes",
    "bar.sandbox.landlock",
    "bar.sandbox.leftovers",
    "bar.sandbox.plan",
    "bar.sandbox.holder",
    "bar.sandbox.lockdown",
    "bar.sandbox.namespace",
    "bar.sandbox.running",
    "bar.sandbox.exec_quick",
    "bar.sandbox.exec_watch",
    "bar.agents.detect",
    "bar.agents.rollout",
    "bar.git.packing",
    "bar.worktree.git_state",
    "bar.terminal.stdio",
    "bar.model.placement",
    "locale",
    "pwd",
    "atexit",
    "hashlib",
    "resource",
)


def warm_up() -> None:
    """Load what the served commands use, and fill argparse's caches for each. What this
    loads lives as long as the resident: the cycle collector is off while it loads, and
    then leaves it out for good (``gc.freeze``), so a fork neither walks it nor, by
    walking it, copies the pages it shares with the resident."""
    gc.disable()
    for name in PRELOAD:
        importlib.import_module(name)
    from bar.sandbox import namespace

    namespace.pids_available("/")  # (what this kernel offers a step: asked once, here)
    from bar.cli import parser

    parser.build_parser("run").parse_args(["run", "--", "true"])
    for command in fast.SERVED + fast.QUIET:
        parser.prebuild(command)
    gc.freeze()
    gc.enable()


def run(argv: list[str]) -> int:
    """One command line, in a fork of the resident."""
    from bar.cli.main import main

    return main(argv)


if __name__ == "__main__":
    sys.exit(fast.resident_main(sys.argv, run, warm_up))
