"""The resident process's entry (``python -m bar.cli.warm FD SOCKET IDLE``, started by
``bar.changes.fast.resident.start``): bar's command line loaded once, each command it is
handed run in a fork of it (``bar.changes.fast.resident_daemon``)."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

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


# what ``bar run --on`` loads besides: Temporal's client alone takes ~220 ms to import,
# each time in the fork that serves the command if the resident has not; its import starts
# no thread (its runtime's start with the first connection, in the fork). Loaded only
# where a task of the bar home runs on workers (``_on_workers``): its ~34 MB made every
# fork of the resident, and so every command it serves, ~8 ms slower (a served
# ``bar run -- true``: 84 ms against 76, medians of 40, interleaved)
PRELOAD_WORKERS = (
    "bar.workers.client",
    "bar.share.adopt",
    "temporalio.client",
    "temporalio.common",
    "temporalio.exceptions",
)


_workers_loaded = False


def _on_workers() -> bool:
    """Whether a task of the resident's bar home runs on workers (``bar.model.placement``'s
    files), where bar's workers extra is installed. (The resident's environment holds
    ``PATH`` and ``LC_ALL`` alone: its bar home is its socket's folder, argv's third; a
    socket shared by several bar homes, ``BAR_RESIDENT_SOCKET``, names none.)"""
    if importlib.util.find_spec("temporalio") is None or len(sys.argv) < 3:
        return False
    return any((Path(sys.argv[2]).parent / "projects").glob("*/workers/*.json"))


def fits() -> bool:
    """Whether what ``warm_up`` loaded still suits the bar home: not once a task of it was
    sent to workers since (the resident exits; the next command starts one that loads
    Temporal's client)."""
    return _workers_loaded or not _on_workers()


def warm_up() -> None:
    """Load what the served commands use, and fill argparse's caches for each. What this
    loads lives as long as the resident: the cycle collector is off while it loads, and
    then leaves it out for good (``gc.freeze``), so a fork neither walks it nor, by
    walking it, copies the pages it shares with the resident."""
    global _workers_loaded
    gc.disable()
    for name in PRELOAD:
        importlib.import_module(name)
    if _on_workers():
        _workers_loaded = True
        try:
            for name in PRELOAD_WORKERS:
                importlib.import_module(name)
        except ImportError:  # (an extra broken: the fork that needs it says how)
            pass
        # (a resident forks: were a later SDK to start a thread as it loads, a fork of it
        # could hang on a lock that thread held; with no resident, commands run as before)
        if threading.active_count() > 1 or len(os.listdir("/proc/self/task")) > 1:
            raise SystemExit("bar's resident: loading Temporal's client started a thread")
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
    sys.exit(fast.resident_main(sys.argv, run, warm_up, fits))
