"""The command line of workers: ``bar worker`` (``serve``, its short form, and
``dev-server``) and ``bar cancel`` (docs/workers.md); ``--on``,
``--detach`` and ``--server`` of ``bar run`` and ``bar task new`` are added where those
are built (``server_opt``, ``on_opts``). Part of ``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

import argparse
from typing import Any

from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt, implied_action


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


_SERVE_ABOUT = (
    "Serve a task queue: steps sent with `bar run --on QUEUE` (and tasks made\n"
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
    "Needs bar's workers extra (Temporal's SDK and CLI) and a Temporal server: `bar\n"
    "worker dev-server` starts one on this machine. See docs/workers.md."
)
_SERVE_EXAMPLES = (
    "examples:\n"
    "  bar worker --queue builds\n"
    "  bar worker --queue gpu --concurrency 4 --server temporal.internal:7233\n"
    "  bar worker --queue team --claim -- claude -p '{description}'"
)


def _is_serving(word: str) -> bool:
    """Whether ``bar worker WORD ...`` is the short form of ``bar worker serve WORD ...``:
    an option of serve's (``--queue``), not help and not an action."""
    return word.startswith("-") and word not in ("-h", "--help")


def commands(sub: Any) -> None:
    w = sub.add_parser(
        "worker",
        help="take steps from a task queue and run them on this machine (Temporal); "
        "dev-server: a Temporal server for one machine",
        formatter_class=_Formatter,
        usage="%(prog)s --queue QUEUE [--concurrency N] [--server HOST:PORT]\n"
        "                  [--on-stop {finish,interrupt}] [--claim -- CMD]\n"
        "       %(prog)s dev-server [--port N] [--db FILE]",
        description=_SERVE_ABOUT + "\n\nShort form: `bar worker --queue QUEUE ...` is "
        "`bar worker serve --queue QUEUE ...`;\nits options: `bar worker serve --help`.",
        epilog=_SERVE_EXAMPLES + "\n  bar worker dev-server\n  bar worker dev-server "
        "--port 7300 --db ~/.bar/temporal.db",
    )
    wsub = w.add_subparsers(dest="worker_command", metavar="ACTION")
    w.set_defaults(_help=w)
    implied_action(w, "serve", _is_serving)
    # (each names itself: argparse would put the worker's two-line usage before the name)
    p = wsub.add_parser(
        "serve",
        prog="bar worker serve",
        help="take steps from a task queue and run them here (short form: bar worker "
        "--queue QUEUE)",
        formatter_class=_Formatter,
        description=_SERVE_ABOUT,
        epilog=_SERVE_EXAMPLES,
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

    p = wsub.add_parser(
        "dev-server",
        prog="bar worker dev-server",
        help="run a Temporal dev server on 127.0.0.1 in the foreground, for one machine",
        formatter_class=_Formatter,
        description="Start Temporal's dev server (`temporal server start-dev`, the temporal\n"
        "command of bar's workers extra) on 127.0.0.1, and keep it in the foreground\n"
        "until Ctrl-C or SIGTERM: what workers and `bar run --on` need on one machine,\n"
        "to try them or for a demo. It listens on this machine only, with no web UI.\n\n"
        "Its workflows (the tasks sent to workers, their waiting steps and results)\n"
        "are kept in memory, and lost when it stops, unless --db names a file to keep\n"
        "them in: started again with the same --db, it goes on where it was.\n"
        "On port 7233 (the default) bar's workers.server default reaches it with no\n"
        "setting; on another, say BAR_TEMPORAL=127.0.0.1:PORT. A team uses a Temporal\n"
        "cluster instead (docs/workers.md). Run inside a repository whose config.yaml\n"
        "names a workers.namespace, it makes that namespace too.",
        epilog="examples:\n"
        "  bar worker dev-server\n"
        "  bar worker dev-server --db ~/.bar/temporal.db\n"
        "  bar worker dev-server --port 7300      (then: BAR_TEMPORAL=127.0.0.1:7300)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=7233,
        metavar="N",
        help="the port it listens on, on 127.0.0.1 (default 7233)",
    )
    p.add_argument(
        "--db",
        metavar="FILE",
        help="keep its workflows in this database file, across restarts (default: in "
        "memory, lost when it stops)",
    )
    _cmd(p, "workers:dev_server")

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
