"""``bar worker`` (and ``bar worker dev-server``), ``bar cancel``, and the ``--on QUEUE`` of
``bar run`` and ``bar task new`` (docs/workers.md): thin over ``bar.workers``."""

from __future__ import annotations

import sys
from typing import Any

from bar import api
from bar.cli.render import print_json, stat_text
from bar.errors import BarError, UsageError
from bar.git import DiffStat


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
