"""``bar worker`` (and ``bar worker dev-server``), ``bar cancel``, and the ``--on QUEUE`` of
``bar run`` and ``bar task new`` (docs/workers.md): thin over ``bar.workers``."""

from __future__ import annotations

import sys
from typing import Any

from bar import api
from bar.cli.render import print_json, stat_text
from bar.errors import BarError, UsageError
from bar.git import DiffStat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar worker`` and ``bar cancel``: their options and help."""
    import argparse

    from bar.cli.parser import Formatter, implied_action, json_opt, server_opt, task_opt

    w = sub.add_parser(
        "worker",
        formatter_class=Formatter,
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
        formatter_class=Formatter,
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
    p.set_defaults(_run=worker)

    p = wsub.add_parser(
        "dev-server",
        prog="bar worker dev-server",
        help="run a Temporal dev server on 127.0.0.1 in the foreground, for one machine",
        formatter_class=Formatter,
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
    p.set_defaults(_run=dev_server)

    p = sub.add_parser(
        "cancel",
        formatter_class=Formatter,
        description="Stop the task's running step wherever it runs. Here: its command gets\n"
        "SIGINT, as Ctrl-C would, and the step is recorded with how it ended. On workers:\n"
        "the worker stops it the same way, records it and pushes the history; steps\n"
        "waiting behind it are dropped. `bar fetch` brings the record back.",
        epilog="examples:\n  bar cancel\n  bar cancel --task fix-login --json",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=cancel)


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


# --- the command -----------------------------------------------------------------------


def _say(text: str) -> None:
    print(f"bar: {text}", file=sys.stderr, flush=True)


def worker(
    *,
    queue: str,
    concurrency: int,
    server: str | None,
    on_stop: str | None,
    claim: bool,
    argv: list[str],
) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if claim and not argv:
        raise UsageError(
            "--claim needs the command to run in each task it takes",
            hint="like: bar worker --queue team --claim -- claude -p '{description}'",
        )
    if argv and not claim:
        raise UsageError("a command after -- is what --claim runs; add --claim")
    if concurrency < 1:
        raise UsageError("--concurrency must be 1 or more")
    from bar.worker import process

    project = api.open_project().project
    return process.serve(
        project,
        queue,
        server=server,
        concurrency=concurrency,
        on_stop=on_stop,
        claim=argv,
        say=_say,
    )


def dev_server(*, port: int, db: str | None) -> int:
    """``bar worker dev-server``: a Temporal dev server in the foreground."""
    return api.run_dev_server(port, db, say=_tell)


def _tell(text: str) -> None:
    print(text, flush=True)


def cancel(*, task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    out = api.cancel_step(the_task)
    if as_json:
        print_json(out)
    elif out["where"] == "workers":
        print(f"asked the workers of queue {out['queue']} to stop task {the_task.name}'s step")
    else:
        print(f"stopping step {out['step_id']} of task {the_task.name} (SIGINT, as Ctrl-C)")
    return 0


def run_on(
    *,
    queue: str,
    server: str | None,
    detach: bool,
    task_ref: str | None,
    step: Any,
    as_json: bool,
) -> int:
    """``bar run --on QUEUE``: send the step, then follow it (unless ``detach``)."""
    loc = api.open_project()
    the_task = api.get_task(loc, task_ref)
    sent = api.send_to_workers(the_task, queue, server, say=_say)
    request = api.order_step(sent.task, step)
    if detach:
        out = {"request": request, **sent.to_json()}
        if as_json:
            print_json(out)
        else:
            print(
                f"sent to queue {queue}: task {sent.task.name}, step request {request} "
                "(bar status follows it; bar fetch brings the result)"
            )
        return 0
    show = _write_err if as_json else _write_out
    followed = api.follow_step(sent.task, request, show=show, say=_say)
    result = followed.result or {}
    if as_json:
        print_json(followed.to_json())
    else:
        _said_result(result)
    return followed.exit_code


def _write_err(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _said_result(result: dict[str, Any]) -> None:
    where = result.get("worker", "a worker")
    status = result.get("status")
    if status == "failed":
        _say(f"the step failed on {where}: {result.get('message')}")
        return
    stat = result.get("diff_stat")
    changed = stat_text(_stat(stat)) if isinstance(stat, dict) else "no record"
    code = result.get("exit_code")
    ended = f"exit {code}" if code is not None else "no exit code"
    said = f"step {result.get('step_id')} {status} on {where}: {ended}, "
    _say(said + changed + (f" ({result['message']})" if result.get("message") else ""))
    if result.get("pushed") is False:
        _say(f"its history stayed on the worker: {result.get('push')}")
        for finding in result.get("findings", []):
            _say(f"  {finding}")


def _stat(rec: dict[str, Any]) -> DiffStat:
    """A diff stat as the result carries it."""
    return DiffStat(
        int(rec.get("files", 0)),
        int(rec.get("additions", 0)),
        int(rec.get("deletions", 0)),
        tuple(rec.get("file_list", ())),
    )


def new_on(task: Any, queue: str, server: str | None, as_json: bool, *, claim: bool) -> int:
    """``bar task new NAME --on QUEUE``: the new task sent to the queue's workers (a
    planned one waits there for a ``bar worker --claim``)."""
    try:
        sent = api.send_to_workers(task, queue, server, plan=claim, say=_say)
    except BarError as exc:
        failed = BarError(
            f"task {task.name} ({task.id}) was made here but not sent to queue {queue}: {exc}",
            hint=exc.hint or f"`bar run --on {queue} --task {task.id} -- CMD` sends it later",
        )
        failed.exit_code = exc.exit_code
        raise failed from None
    if as_json:
        print_json(sent.to_json())
        return 0
    if claim:
        print(
            f"Planned task {task.name} ({task.id}) on queue {queue}: the first "
            f"`bar worker --queue {queue} --claim -- CMD` takes it"
        )
    else:
        print(f"Created task {task.name} ({task.id}) on queue {queue} at {sent.where.server}")
        print(f"Next: bar run --on {queue} -- <command>")
    return 0
