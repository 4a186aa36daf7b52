"""The command line of workers: ``bar worker`` and ``bar cancel`` (SPEC §15); ``--on``,
``--detach`` and ``--server`` of ``bar run`` and ``bar task new`` are added where those
are built (``server_opt``, ``on_opts``). Part of ``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

import argparse
from typing import Any

from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt


def server_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="the Temporal server (default: BAR_TEMPORAL, else workers.server in config.yaml, "
        "127.0.0.1:7233)",
    )


def on_opts(p: argparse.ArgumentParser, *, detach: bool) -> None:
    p.add_argument(
        "--on",
        metavar="QUEUE",
        help="run on the workers of this task queue (bar worker --queue QUEUE), not here",
    )
    if detach:
        p.add_argument(
            "--detach",
            action="store_true",
            help="with --on: send the step and return at once (bar status follows it; bar "
            "fetch brings the result)",
        )
    server_opt(p)


def commands(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="take steps from a task queue and run them on this machine (Temporal)",
        formatter_class=_Formatter,
        description="Serve a task queue: steps sent with `bar run --on QUEUE` (and tasks made\n"
        "with `bar task new --on QUEUE`) run here, in this clone, under the same\n"
        "confinement, policy, hooks, checkpoints and sessions as `bar run`. For each\n"
        "step the worker fetches the task's history from the remote (workers.remote,\n"
        "else share.remote, else origin), runs it, streams its output back, publishes\n"
        "its progress while it runs, and pushes the history back when it ends.\n\n"
        "One Temporal workflow per task, one activity per step: a worker that dies is\n"
        "noticed (workers.heartbeat seconds) and its step recorded interrupted with what\n"
        "it changed up to its last published progress; it runs again only if\n"
        "workers.retry says so. SIGTERM or Ctrl-C stops the worker cleanly: its running\n"
        "steps finish (workers.on_stop: finish) or are interrupted (interrupt), and are\n"
        "pushed either way; a second signal interrupts at once.\n\n"
        "--claim also takes planned tasks sent to the queue (`bar task new NAME --plan\n"
        "--on QUEUE`): the worker becomes the task's owner on the board and runs CMD in\n"
        "it, with {name}, {id} and {description} replaced by the task's.\n\n"
        "Needs bar[workers] (the temporalio SDK); `python -m bar.workers.devserver` runs a\n"
        "Temporal dev server for one machine. See docs/workers.md.",
        epilog="examples:\n"
        "  bar worker --queue builds\n"
        "  bar worker --queue gpu --concurrency 4 --server temporal.internal:7233\n"
        "  bar worker --queue team --claim -- claude -p '{description}'",
    )
    p.add_argument("--queue", "-q", required=True, metavar="QUEUE", help="the task queue to serve")
    p.add_argument(
        "--concurrency",
        "--max-tasks",
        type=int,
        default=1,
        metavar="N",
        help="steps run at once (default 1)",
    )
    server_opt(p)
    p.add_argument(
        "--on-stop",
        choices=("finish", "interrupt"),
        help="on SIGTERM, let running steps finish or interrupt them (default: "
        "workers.on_stop, finish)",
    )
    p.add_argument(
        "--claim",
        action="store_true",
        help="also take planned tasks sent to the queue, running CMD in each",
    )
    p.add_argument(
        "argv", nargs=argparse.REMAINDER, metavar="-- CMD", help="with --claim: the command"
    )
    _cmd(p, "workers:worker")

    p = sub.add_parser(
        "cancel",
        help="stop a task's running step, here or on a worker",
        formatter_class=_Formatter,
        description="Stop the task's running step wherever it runs. Here: its command gets\n"
        "SIGINT, as Ctrl-C would, and the step is recorded with how it ended. On workers:\n"
        "the worker stops it the same way, records it and pushes the history; steps\n"
        "waiting behind it are dropped. `bar fetch` brings the record back.",
        epilog="examples:\n  bar cancel\n  bar cancel --task fix-login --json",
    )
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "workers:cancel")
