"""The activity: one step of a task, run on this worker (docs/workers.md).

An attempt takes the task from the remote, runs its step as ``bar run`` in this worker's
clone, with the same confinement, policy, hooks, checkpoints and session as on the
developer's machine, and pushes the history back; what that does to the task is asked of
bar through ``bar.api.attempts`` (``bar.workers.attempt`` says it in full). Here is the
attempt as Temporal sees it: while the step runs it heartbeats, streams the output
(scrubbed) to the workflow, publishes the step's progress, relays a ``decide`` question
and its answer, and stops the command when the step is cancelled or the worker is told
to. A failure to take the task (the remote cannot be reached) fails the attempt, which
Temporal retries: the step stays on the queue, and the developer sees why; an order that
is wrong is refused for good.

An attempt whose predecessor started the command and went silent (its worker died)
records that step ``interrupted`` from the progress the lost worker published, instead of
running anything; the workflow runs it again only if ``workers.retry`` says so.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from bar import api
from bar.aide import decide
from bar.api import attempts
from bar.api.orders import order as give_order
from bar.base.clock import now_iso
from bar.base.record import replace
from bar.errors import BarError
from bar.model.project import Project
from bar.model.tasks import Task
from bar.share.remotes import Remote
from bar.workers.contract import BUSY, CLAIM, FINAL, NOT_TAKEN, STEP, Order, Outcome
from bar.workers.published import Publisher
from bar.workers.temporal import identity

PROGRESS_EVERY = 3.0  # seconds between two looks at a running step's progress
TAIL = 64_000  # bytes of the newest output a heartbeat carries (the live view)
LAST_TAIL = 16_000  # ... and the result, for what came after the last heartbeat
GRACE = 10.0  # seconds a cancelled command has after SIGINT, then SIGTERM, then SIGKILL
# the step's ``bar run`` ends with this worker (``bar.cli.entry.die_with_parent``)
PARENT = "BAR_DIE_WITH"


class Steps:
    """The worker's activities, bound to its clone, its client and its event loop."""

    def __init__(
        self,
        root: Path,
        client: Any,
        loop: asyncio.AbstractEventLoop,
        claim: tuple[str, ...] = (),
        own_queue: str = "",
        concurrency: int = 1,
    ) -> None:
        self.slots = threading.BoundedSemaphore(concurrency)
        self.root, self.client, self.loop = root, client, loop
        self.claim_template = claim
        self.own_queue = own_queue  # where the workflow sends the task's next step
        self.stopping = threading.Event()  # set: interrupt running steps (on_stop)

    def project(self) -> Project:
        return api.open_project(self.root).project

    @activity.defn(name=STEP)
    def step(self, wire: dict[str, Any]) -> dict[str, Any]:
        # a cancel is seen (``is_cancelled``) and acted on: the command stopped, the
        # step recorded and pushed; never raised into this thread at a random line
        with activity.shield_thread_cancel_exception(), self._slot():
            return self._step(wire).to_wire()

    @activity.defn(name=CLAIM)
    def claim(self, wire: dict[str, Any]) -> dict[str, Any]:
        """A planned task, taken by this worker: its board owner, and the worker's
        ``--claim`` command run in it as its first step."""
        with activity.shield_thread_cancel_exception(), self._slot():
            return self._step(wire, claim=True).to_wire()

    def _step(self, wire: dict[str, Any], *, claim: bool = False) -> Outcome:
        """Take the task and run the step; or, when an earlier attempt started it and went
        silent, record that one. ``claim``: the worker becomes the planned task's owner
        and runs its ``--claim`` command in it."""
        order = _checked(wire)
        earlier = _earlier(activity.info(), order)
        project = self.project()
        if not order.sandbox and not project.config.workers.allow_unconfined:
            said = (
                f"worker {identity()} runs no step unconfined (--no-sandbox): "
                "workers.allow_unconfined is false in its config.yaml"
            )
            print(f"bar worker: refused an order: {said}", file=sys.stderr, flush=True)
            raise ApplicationError(said, type=FINAL, non_retryable=True)
        try:
            remote = attempts.remote(project, order.remote)
            if isinstance(earlier, dict) and earlier.get("started"):
                with _beating(earlier):
                    return self._recover(project, remote, order.again_as(earlier), earlier)
            with _beating({"taking": order.task_id}):
                task = attempts.take(project, remote, order)
            if claim:
                task = attempts.owned_by(task, identity())
        except BarError as exc:
            verb = "claim" if claim else "take"
            said = f"worker {identity()} cannot {verb} task {order.name}: {exc}"
            print(f"bar worker: {said}", file=sys.stderr, flush=True)
            raise ApplicationError(said, type=NOT_TAKEN) from None
        if claim:
            order = replace(order, argv=attempts.claim_command(self.claim_template, task))
            self._signal("claimed", order.request, identity(), order.argv)
        return self._run(project, remote, task, order)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """One of the worker's ``concurrency`` places, shared by its queues (the
        shared one, its own, the claims); none free: the attempt says so at once and
        the step goes elsewhere (from its own queue) or waits on the shared one."""
        if not self.slots.acquire(blocking=False):
            own = activity.info().task_queue == self.own_queue
            raise ApplicationError(f"worker {identity()} is busy", type=BUSY, non_retryable=own)
        try:
            yield
        finally:
            self.slots.release()

    # --- running it ------------------------------------------------------------------

    def _run(self, project: Project, remote: Remote, task: Task, order: Order) -> Outcome:
        step_id = attempts.next_step(task)
        pushed = attempts.history_pushed(project, task)
        started: dict[str, Any] = {"started": step_id, "since": now_iso(), "history": pushed}
        started["order"] = {"argv": order.argv}
        activity.heartbeat(started)
        self._signal("took", order.request, identity(), step_id)
        child = subprocess.Popen(
            attempts.bar_run(task, order),
            cwd=project.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # ``die_with_parent``; and no "step recorded" line of bar run's own: the
            # developer's bar says how the step ended
            env={**attempts.step_environ(), PARENT: str(os.getpid()), "BAR_QUIET": "1"},
        )
        out = _Output()
        started["request"] = order.request
        reader = threading.Thread(target=out.read, args=(child,), daemon=True)
        reader.start()
        publisher = attempts.publisher(task, remote, pushed)
        asked: set[str] = set()
        stop_reason: str | None = None
        stopped_at = 0.0
        next_look = time.monotonic() + 0.5
        try:
            while child.poll() is None:
                time.sleep(0.1)
                # (sent at most once a second, the newest details: ``worker``)
                activity.heartbeat({**started, "out": out.now()})
                if stop_reason is None and (activity.is_cancelled() or self.stopping.is_set()):
                    stop_reason = "cancelled" if activity.is_cancelled() else "worker stopped"
                    stopped_at = time.monotonic()
                    _signal_child(child, signal.SIGINT)
                elif stop_reason is not None:
                    _escalate(child, time.monotonic() - stopped_at)
                if time.monotonic() >= next_look:
                    next_look = time.monotonic() + PROGRESS_EVERY
                    self._look(task, publisher, order, asked)
            reader.join(timeout=10)
        finally:
            if child.poll() is None:
                _signal_child(child, signal.SIGKILL)
                child.wait()
        ended = attempts.outcome(project, task.id, step_id)
        ended = replace(ended, out=out.now(LAST_TAIL), sticky=self.own_queue)
        if stop_reason is not None:
            status = "interrupted" if stop_reason == "worker stopped" else "cancelled"
            ended = replace(ended, status=status, message=f"{stop_reason} while it ran")
        ended = attempts.push_back(project, attempts.reload(task), remote, ended)
        if activity.is_cancelled():
            self._signal("finished", order.request, ended.to_wire())
        return ended

    def _look(self, task: Task, publisher: Publisher, order: Order, asked: set[str]) -> None:
        """Publish progress; relay a new ``decide`` question, or the answer to one."""
        try:
            publisher.publish()
            why = publisher.held and f"held back here ({publisher.held})"
        except (BarError, OSError) as exc:
            why = f"not published: {exc}"
        if why and why not in asked:
            asked.add(why)  # said once per reason
            print(f"bar worker: task {task.name}'s progress {why}", file=sys.stderr, flush=True)
        waiting = decide.pending(task)
        if waiting is None:
            return
        sid = decide.session_of(waiting)
        if sid not in asked:
            asked.add(sid)
            data = {k: v for k, v in waiting.items() if k != "_meta"}
            self._signal("question", order.request, {"session_id": sid, "input": data})
            return
        answer = self._query("answer_of", sid)
        if isinstance(answer, dict):
            with contextlib.suppress(BarError):
                # (here the task's one writer is this machine: no worker to send it to)
                args = {"decisions": answer.get("decisions", []), "session_id": sid}
                give_order(task, "decide.answer", args)

    # --- a step whose worker was lost ------------------------------------------------

    def _recover(
        self, project: Project, remote: Remote, order: Order, earlier: dict[str, Any]
    ) -> Outcome:
        """Record the step a lost worker was running as interrupted, with what it changed
        up to the progress it published."""
        try:
            task = attempts.record_lost(project, remote, order, earlier)
        except BarError as exc:
            raise ApplicationError(
                f"worker {identity()} cannot record the lost step of task {order.name}: {exc}",
                type=NOT_TAKEN,
            ) from None
        ended = replace(
            attempts.outcome(project, task.id, str(earlier["started"])),
            status="interrupted",
            lost=True,
            message="the worker running it was lost; recorded interrupted with what it "
            "changed up to its last published progress",
        )
        return attempts.push_back(project, task, remote, ended)

    # --- talking to the workflow from this thread ------------------------------------

    def _signal(self, name: str, *args: Any) -> None:
        """Signal the task's workflow from this thread (what cannot be said now, a
        server away, is not said: the step goes on)."""
        handle = self.client.get_workflow_handle(activity.info().workflow_id)
        future = asyncio.run_coroutine_threadsafe(handle.signal(name, args=list(args)), self.loop)
        with contextlib.suppress(Exception):
            future.result(timeout=10)

    def _query(self, name: str, *args: Any) -> Any:
        handle = self.client.get_workflow_handle(activity.info().workflow_id)
        future = asyncio.run_coroutine_threadsafe(handle.query(name, args=list(args)), self.loop)
        try:
            return future.result(timeout=5)
        except Exception:
            return None


def _checked(wire: dict[str, Any]) -> Order:
    """The order, its words checked (``Order.from_wire``), failing the step for good
    when one is wrong: no retry makes a bad order good."""
    try:
        return Order.from_wire(wire)
    except BarError as exc:
        print(f"bar worker: refused an order: {exc}", file=sys.stderr, flush=True)
        raise ApplicationError(f"refused: {exc}", type=FINAL, non_retryable=True) from None


@contextlib.contextmanager
def _beating(details: dict[str, Any]) -> Iterator[None]:
    """Heartbeat ``details`` every second while the block runs (taking a task can make
    a worktree of a large repository: longer than the silence that counts a worker as
    lost)."""
    done = threading.Event()
    context = contextvars.copy_context()  # the activity's, in the beating thread

    def beat() -> None:
        while not done.wait(1.0):
            context.run(activity.heartbeat, details)

    beater = threading.Thread(target=beat, daemon=True, name="bar-heartbeat")
    beater.start()
    try:
        yield
    finally:
        done.set()
        beater.join()


def _earlier(info: Any, order: Order) -> Any:
    """What an earlier attempt at this step said in its last heartbeat: this activity's
    own, or, for a step its first worker did not start in time after going silent, the
    one the workflow passed on (``bar.worker.workflow``)."""
    if info.heartbeat_details:
        return info.heartbeat_details[0]
    return order.earlier


def _signal_child(child: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(sig)


def _escalate(child: subprocess.Popen[bytes], waited: float) -> None:
    if waited > 2 * GRACE:
        _signal_child(child, signal.SIGKILL)
    elif waited > GRACE:
        _signal_child(child, signal.SIGTERM)


class _Output:
    """The newest part of the step's output as the worker sees it, scrubbed: what the
    heartbeat carries to whoever follows the step (``end``: the bytes so far; ``tail``:
    the last of them, base64). The whole output is in the step's record."""

    def __init__(self) -> None:
        self._scrub = attempts.output_scrubber()
        self._tail = bytearray()
        self._end = 0
        self._lock = threading.Lock()

    def read(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        fd = child.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self._add(self._scrub.feed(chunk))
        self._add(self._scrub.flush())

    def _add(self, clean: bytes) -> None:
        with self._lock:
            self._tail += clean
            self._end += len(clean)
            del self._tail[:-TAIL]

    def now(self, limit: int = TAIL) -> dict[str, Any]:
        with self._lock:
            tail = bytes(self._tail[-limit:])
            return {"end": self._end, "tail": base64.b64encode(tail).decode("ascii")}
