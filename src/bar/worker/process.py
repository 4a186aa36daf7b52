"""``bar worker``: this machine takes steps from a task queue (docs/workers.md).

One Temporal worker polls the queue for the tasks' workflows (``bar.worker.workflow``) and
their steps (``bar.worker.activities``), at most ``concurrency`` steps at once, in this
machine's clone of the repository. With ``claim`` it also takes planned tasks sent to
the queue (``bar task new NAME --plan --on Q``) and runs the ``claim`` command in each,
the task's words filled in.

SIGTERM or Ctrl-C stops it cleanly: it takes nothing new, and its running steps finish
(``workers.on_stop: finish``) or are interrupted and recorded so (``interrupt``); either
way their histories are pushed before it exits. A second signal interrupts at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from bar import api
from bar.base.record import record
from bar.errors import UsageError
from bar.model.project import Project
from bar.workers import temporal
from bar.workers.contract import BUSY, CLAIMS, FINAL, NOT_TAKEN


def own_queue(queue: str) -> str:
    """This worker's own queue: the next step of a task it ran is offered here first."""
    return f"{queue}@{temporal.identity()}"


def claim_queue(queue: str) -> str:
    """The queue of planned tasks."""
    return f"{queue}{CLAIMS}"


@record(frozen=True)
class Serving:
    root: Path
    queue: str
    server: str
    namespace: str
    concurrency: int
    on_stop: str
    access: temporal.Access
    claim: tuple[str, ...] = ()  # the command run in a claimed task ({name}, {description})


def check_queue(queue: str) -> str:
    if not queue or len(queue) > 200 or any(c.isspace() or not c.isprintable() for c in queue):
        raise UsageError(f"{queue!r} is not a queue name", hint="like gpu, builds or team-a")
    return queue


def serve(
    project: Project,
    queue: str,
    *,
    server: str | None,
    concurrency: int,
    on_stop: str | None,
    claim: Sequence[str] = (),
    say: Callable[[str], None],
) -> int:
    """``bar worker``: take the queue's steps (and, with ``claim``, its planned tasks)
    and run them here until SIGTERM; the exit code."""
    serving = Serving(
        access=temporal.access_of(project),
        root=project.root,
        queue=check_queue(queue),
        server=api.temporal_server(project, server),
        namespace=project.config.workers.namespace,
        concurrency=concurrency,
        on_stop=on_stop or project.config.workers.on_stop,
        claim=tuple(claim),
    )
    temporal.require_sdk()
    return int(temporal.run(_serve(serving, say)))


class _Quiet(logging.Filter):
    """A step an attempt could not take (the remote out of reach, say) or an order it
    refused was said in one line already (``bar.worker.activities``), and a busy worker
    is no failure: the SDK's traceback of these is dropped."""

    def filter(self, rec: logging.LogRecord) -> bool:
        exc = rec.exc_info[1] if rec.exc_info else None
        quiet = (NOT_TAKEN, BUSY, FINAL)  # (a refused order: said in a line too)
        return not (exc is not None and getattr(exc, "type", None) in quiet)


async def _serve(serving: Serving, say: Callable[[str], None]) -> int:
    from temporalio.worker import Worker

    from bar.worker.activities import Steps
    from bar.worker.workflow import TaskFlow

    logging.basicConfig(format="bar worker: %(message)s", level=logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Quiet())
    client = await temporal.connect(serving.server, serving.namespace, serving.access)
    loop = asyncio.get_running_loop()
    own = own_queue(serving.queue)
    steps = Steps(serving.root, client, loop, serving.claim, own, serving.concurrency)
    # each queue's Worker may start ``concurrency`` attempts; past the worker's places
    # (``Steps._slot``) an attempt ends at once, so threads never wait for places
    pool = ThreadPoolExecutor(
        max_workers=3 * serving.concurrency + 2, thread_name_prefix="bar-step"
    )
    finish = serving.on_stop == "finish"
    common: dict[str, Any] = {
        "activity_executor": pool,
        "max_concurrent_activities": serving.concurrency,
        "max_heartbeat_throttle_interval": timedelta(seconds=1),
        "default_heartbeat_throttle_interval": timedelta(seconds=1),
        "graceful_shutdown_timeout": timedelta(days=1 if finish else 0, seconds=120),
        "identity": temporal.identity(),
    }
    workers = [
        Worker(
            client,
            task_queue=serving.queue,
            workflows=[TaskFlow],
            activities=[steps.step],
            **common,
        )
    ]
    # the next steps of a task this worker ran come here first: its worktree is there
    workers.append(Worker(client, task_queue=own, activities=[steps.step], **common))
    if serving.claim:
        workers.append(
            Worker(
                client, task_queue=claim_queue(serving.queue), activities=[steps.claim], **common
            )
        )
    stop = asyncio.Event()
    signals = 0

    def stopping() -> None:
        nonlocal signals
        signals += 1
        if signals == 1 and finish:
            say("stopping: running steps finish first (again: interrupt them)")
        else:
            say("stopping: interrupting running steps, recording and pushing them")
            steps.stopping.set()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)
    runs = [asyncio.create_task(w.run()) for w in workers]
    said = f" and planned tasks ({' '.join(serving.claim)})" if serving.claim else ""
    say(
        f"worker {temporal.identity()} takes steps{said} from queue {serving.queue} at "
        f"{serving.server} ({serving.access.describe()}, {serving.concurrency} at "
        f"once), in {serving.root}; Ctrl-C stops"
    )
    waiting = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([waiting, *runs], return_when=asyncio.FIRST_COMPLETED)
    failed = [r for r in runs if r in done and r.exception() is not None]
    await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
    pool.shutdown(wait=True)
    if failed:
        exc = failed[0].exception()
        print(f"bar worker: the worker stopped: {exc}", file=sys.stderr)
        return 1
    say("stopped")
    return 0
