"""The activity: one step of a task, run on this worker (docs/workers.md).

An attempt:

1. **takes the task** from the remote: fetches its history, adopts it (a copy, or this
   worker's own record when another machine went on with it). A record this worker left
   behind that the remote does not continue (a step killed with its worker) is dropped
   and taken again: the remote's history is the task. A failure here (the remote cannot
   be reached) fails the attempt, which Temporal retries: the step stays on the queue,
   and the developer sees why;
2. **runs it** as ``bar run`` in this worker's clone, with the same confinement, policy,
   hooks, checkpoints and session as on the developer's machine. While it runs the
   attempt heartbeats, streams the output (scrubbed) to the workflow, publishes the
   step's progress (``bar.workers.published``), relays a ``decide`` question and its
   answer, and stops the command when the step is cancelled or the worker is told to;
3. **pushes the history** back (scanned first, as ``bar push`` does) and returns the
   step's result.

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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from bar import git
from bar.aide import decide
from bar.base.clock import now_iso
from bar.errors import BarError
from bar.model import journals
from bar.model.config import NETWORK_MODES, tighter_network
from bar.model.project import Project, find_project
from bar.model.records import RunStep
from bar.model.tasks import Task, load_task
from bar.redact import known
from bar.redact.stream import StreamScrubber
from bar.share import fetch as fetching
from bar.share import push as pushing
from bar.share.adopt import adopt
from bar.share.remotes import Remote, resolve
from bar.step import dispatch
from bar.store.layout import TASK_ID_RE
from bar.task.close import close
from bar.task.delete import delete
from bar.task.start import start
from bar.workers import published, task_workflow
from bar.workers.task_workflow import BUSY

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
        return find_project(self.root).project

    @activity.defn(name=task_workflow.STEP)
    def step(self, order: dict[str, Any]) -> dict[str, Any]:
        # a cancel is seen (``is_cancelled``) and acted on: the command stopped, the
        # step recorded and pushed; never raised into this thread at a random line
        with activity.shield_thread_cancel_exception(), self._slot():
            return self._step(order)

    def _step(self, order: dict[str, Any], *, claim: bool = False) -> dict[str, Any]:
        """Take the task and run the step; or, when an earlier attempt started it and went
        silent, record that one. ``claim``: the worker becomes the planned task's owner
        and runs its ``--claim`` command in it."""
        earlier = _earlier(activity.info(), order)
        _checked(order)
        project = self.project()
        if order.get("sandbox") is False and not project.config.workers.allow_unconfined:
            said = (
                f"worker {_identity()} runs no step unconfined (--no-sandbox): "
                "workers.allow_unconfined is false in its config.yaml"
            )
            print(f"bar worker: refused an order: {said}", file=sys.stderr, flush=True)
            raise ApplicationError(said, type=task_workflow.FINAL, non_retryable=True)
        try:
            remote = resolve(project, order["remote"])
            if isinstance(earlier, dict) and earlier.get("started"):
                again = {**order, **earlier.get("order", {})}
                with _beating(earlier):
                    return self._recover(project, remote, again, earlier)
            with _beating({"taking": order["task_id"]}):
                task = take(project, remote, order["task_id"], order.get("history"))
            if claim:
                task = _owned_by(task, _identity())
        except BarError as exc:
            verb = "claim" if claim else "take"
            said = f"worker {_identity()} cannot {verb} task {order.get('name')}: {exc}"
            print(f"bar worker: {said}", file=sys.stderr, flush=True)
            raise ApplicationError(said, type="NotTaken") from None
        if claim:
            argv = claim_command(self.claim_template, task)
            self._signal(order, "claimed", order["request"], _identity(), argv)
            order = {**order, "argv": argv}
        return self._run(project, remote, task, order)

    @activity.defn(name=task_workflow.CLAIM)
    def claim(self, order: dict[str, Any]) -> dict[str, Any]:
        """A planned task, taken by this worker: its board owner, and the worker's
        ``--claim`` command run in it as its first step."""
        with activity.shield_thread_cancel_exception(), self._slot():
            return self._step(order, claim=True)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """One of the worker's ``concurrency`` places, shared by its queues (the
        shared one, its own, the claims); none free: the attempt says so at once and
        the step goes elsewhere (from its own queue) or waits on the shared one."""
        if not self.slots.acquire(blocking=False):
            own = activity.info().task_queue == self.own_queue
            raise ApplicationError(f"worker {_identity()} is busy", type=BUSY, non_retryable=own)
        try:
            yield
        finally:
            self.slots.release()

    # --- running it ------------------------------------------------------------------

    def _run(
        self, project: Project, remote: Remote, task: Task, order: dict[str, Any]
    ) -> dict[str, Any]:
        request = order["request"]
        step_id = f"{task.ledger_steps() + 1:04d}"
        pushed = pushing_history(project, task)
        started: dict[str, Any] = {"started": step_id, "since": now_iso(), "history": pushed}
        started["order"] = {"argv": order["argv"]}
        activity.heartbeat(started)
        self._signal(order, "took", request, _identity(), step_id)
        child = subprocess.Popen(
            _bar_run(task, order),
            cwd=project.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # ``die_with_parent``; and no "step recorded" line of bar run's own: the
            # developer's bar says how the step ended
            env={**_step_environ(), PARENT: str(os.getpid()), "BAR_QUIET": "1"},
        )
        out = _Output()
        started["request"] = request
        reader = threading.Thread(target=out.read, args=(child,), daemon=True)
        reader.start()
        publisher = published.Publisher(task, remote, [c for c in [pushed] if c])
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
        task = load_task(project, task.id)
        result = _result(task, _run_step(task, step_id), order)
        result["out"] = out.now(LAST_TAIL)
        result["sticky"] = self.own_queue
        if stop_reason is not None:
            result["status"] = "interrupted" if stop_reason == "worker stopped" else "cancelled"
            result["message"] = f"{stop_reason} while it ran"
        result.update(_publish(project, task, remote))
        if activity.is_cancelled():
            self._signal(order, "finished", request, result)
        return result

    def _look(
        self, task: Task, publisher: published.Publisher, order: dict[str, Any], asked: set[str]
    ) -> None:
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
            self._signal(order, "question", order["request"], {"session_id": sid, "input": data})
            return
        answer = self._query(order, "answer_of", sid)
        if isinstance(answer, dict):
            with contextlib.suppress(BarError):
                # (here the task's one writer is this machine: no worker to send it to)
                args = {"decisions": answer.get("decisions", []), "session_id": sid}
                dispatch.order(task, "decide.answer", args)

    # --- a step whose worker was lost ------------------------------------------------

    def _recover(
        self, project: Project, remote: Remote, order: dict[str, Any], earlier: dict[str, Any]
    ) -> dict[str, Any]:
        """Record the step a lost worker was running as interrupted, with what it changed
        up to the progress it published."""
        try:
            task = take(project, remote, order["task_id"], order.get("history"))
            found = published.fetch(task, remote)
            step_id = published.restore(task, found) if found else None
            if step_id is None:
                _mark_started(task, order, earlier)
            from bar.step import transaction

            with transaction.changing(
                task, "bar worker: recording a lost worker's step", wait=True
            ):
                pass
        except BarError as exc:
            raise ApplicationError(
                f"worker {_identity()} cannot record the lost step of task "
                f"{order.get('name')}: {exc}",
                type="NotTaken",
            ) from None
        task = load_task(project, task.id)
        result = _result(task, _run_step(task, str(earlier["started"])), order)
        result.update(
            status="interrupted",
            lost=True,
            message="the worker running it was lost; recorded interrupted with what it "
            "changed up to its last published progress",
        )
        result.update(_publish(project, task, remote))
        return result

    # --- talking to the workflow from this thread ------------------------------------

    def _signal(self, order: dict[str, Any], name: str, *args: Any) -> None:
        """Signal the task's workflow from this thread (what cannot be said now, a
        server away, is not said: the step goes on)."""
        handle = self.client.get_workflow_handle(activity.info().workflow_id)
        future = asyncio.run_coroutine_threadsafe(handle.signal(name, args=list(args)), self.loop)
        with contextlib.suppress(Exception):
            future.result(timeout=10)

    def _query(self, order: dict[str, Any], name: str, *args: Any) -> Any:
        handle = self.client.get_workflow_handle(activity.info().workflow_id)
        future = asyncio.run_coroutine_threadsafe(handle.query(name, args=list(args)), self.loop)
        try:
            return future.result(timeout=5)
        except Exception:
            return None


def _identity() -> str:
    from bar.workers.temporal import identity

    return identity()


# --- the task, from the remote -------------------------------------------------------


def _checked(order: dict[str, Any]) -> None:
    """``check_order``, failing the step for good: no retry makes a bad order good."""
    try:
        check_order(order)
    except BarError as exc:
        print(f"bar worker: refused an order: {exc}", file=sys.stderr, flush=True)
        raise ApplicationError(
            f"refused: {exc}", type=task_workflow.FINAL, non_retryable=True
        ) from None


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


def _earlier(info: Any, order: dict[str, Any]) -> Any:
    """What an earlier attempt at this step said in its last heartbeat: this activity's
    own, or, for a step its first worker did not start in time after going silent, the
    one the workflow passed on (``bar.workers.task_workflow``)."""
    if info.heartbeat_details:
        return info.heartbeat_details[0]
    return order.get("earlier")


def check_order(order: dict[str, Any]) -> None:
    """An order comes from whoever may signal the workflow: its words are checked
    before any is used (the rest, ``bar run`` checks as it checks a command line)."""
    task_id, argv = order.get("task_id"), order.get("argv")
    if not isinstance(task_id, str) or not TASK_ID_RE.fullmatch(task_id):
        raise BarError(f"the order names no valid task id: {task_id!r}")
    if not isinstance(argv, list) or not all(isinstance(a, str) and "\0" not in a for a in argv):
        raise BarError("the order's command is not a list of strings")
    history = order.get("history")
    if history is not None and not git.is_object_id(history):
        raise BarError(f"the order names no valid history commit: {history!r}")
    env = order.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise BarError("the order's variables are not a mapping of strings")


def take(project: Project, remote: Remote, task_id: str, expected: str | None) -> Task:
    """The task here at the remote's history of it, with a worktree, ready for a step."""
    for attempt in range(2):
        fetched = fetching.fetch(project, remote, only=[task_id])
        seen = next((t for t in fetched.tasks if t.task_id == task_id), None)
        if seen is None:
            raise BarError(f"{remote} holds no history of task {task_id}")
        if seen.outcome == fetching.BROKEN:
            raise BarError(f"the history of task {task_id} on {remote} is broken: {seen.message}")
        task = load_task(project, task_id)
        if expected and seen.history and not git.is_ancestor(project.root, expected, seen.history):
            raise BarError(
                f"the history of task {task.name} on {remote} does not continue the one sent"
            )
        stale = not task.read_only and (
            seen.outcome in (fetching.AHEAD, fetching.DIVERGED)
            or journals.RUN.read(task.paths) is not None
        )
        if stale and attempt == 0:
            # this worker's record went on where the remote did not (a step killed with
            # its worker, recorded elsewhere since): the remote's history is the task
            _discard(project, task)
            continue
        # (a base its start moves is recorded as moved by this worker: ``bar.task.start``)
        if task.read_only or seen.outcome == fetching.BEHIND:
            task = adopt(project, task, by=_identity()).task
        elif task.pending or not task.worktree.is_dir():
            task = start(task, activate=False, by=_identity())
        return task
    raise BarError(f"task {task_id} could not be taken from {remote}")


def claim_command(template: Sequence[str], task: Task) -> list[str]:
    """The ``--claim`` command with the task's words in it: ``{name}``, ``{id}``,
    ``{description}`` (its metadata's, else its name)."""
    meta = task.metadata or {}
    words = {
        "name": task.name,
        "id": task.id,
        "description": str(meta.get("description") or task.name),
    }
    out = []
    for part in template:
        for key, value in words.items():
            part = part.replace("{" + key + "}", value)
        out.append(part)
    return out


def _discard(project: Project, task: Task) -> None:
    """Drop this worker's record of ``task`` (closed, then deleted with its worktree,
    branch and refs): the remote's history is the task, and is taken again."""
    if task.active:
        close(task, force=True)
    delete(project, task.id, force=True)


def _owned_by(task: Task, owner: str) -> Task:
    """The claimed task's board names the worker that took it (what the lead's board
    shows once the history comes back)."""
    from bar.model import board
    from bar.step import transaction

    with transaction.holding(task, "bar worker: claiming") as task:
        task.board.owner = board.validate_owner(owner)
        task.save()
    return task


def pushing_history(project: Project, task: Task) -> str | None:
    from bar.share import history_commit

    return git.rev_parse(project.root, history_commit.history_ref(task.id))


def _publish(project: Project, task: Task, remote: Remote) -> dict[str, Any]:
    """Push the task's history back; say what happened."""
    try:
        pushed = pushing.push(project, [task], remote)
    except BarError as exc:
        return {"pushed": False, "push": str(exc)}
    one = pushed.tasks[0]
    if one.outcome in (pushing.PUSHED, pushing.UP_TO_DATE):
        with contextlib.suppress(BarError):
            published.clear(task, remote)
        return {"pushed": True, "history": one.history}
    findings = [f"{f.kind} in {f.where()} (--allow {f.id})" for f in one.findings]
    return {"pushed": False, "push": one.message or one.outcome, "findings": findings}


def _mark_started(task: Task, order: dict[str, Any], earlier: dict[str, Any]) -> None:
    """No progress was published: the step is put back from what the order says, with
    the worktree as it was recorded (what it changed before the worker died is lost with
    the worker, and the record says it ran)."""
    step_id = str(earlier["started"])
    last = task.ledger.last()
    if last is not None and last.number >= int(step_id):
        return
    journals.RUN.write(
        task.paths,
        journals.RunIntent(
            pid=0,
            step_id=step_id,
            started_at=str(earlier.get("since") or now_iso()),
            cmd=[known.scrub(a) for a in order["argv"]],
            cwd=str(order.get("cwd") or "."),
            snapshot_before=task.recorded_snapshot(),
        ),
    )


def _run_step(task: Task, step_id: str) -> RunStep | None:
    """The run step the attempt recorded (a decision answered while it ran is recorded
    after it), or None."""
    for step in task.ledger.iter_reverse(warn=False):
        if isinstance(step, RunStep) and step.number >= int(step_id):
            return step
        if step.number < int(step_id):
            break
    return None


def _result(task: Task, step: Any, order: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "task_id": task.id,
        "worker": _identity(),
        "status": "recorded",
        "step_id": None,
        "exit_code": None,
    }
    if isinstance(step, RunStep):
        out.update(
            step_id=step.step_id,
            exit_code=step.exit_code,
            diff_stat=step.diff_stat.to_record(),
            blocked=step.blocked,
        )
        if step.extra.get("interrupted"):
            out["status"] = "interrupted"
    return out


def _bar_run(task: Task, order: dict[str, Any]) -> list[str]:
    argv = [sys.executable, "-m", "bar", "run", "--task", task.id, "--no-pty"]
    argv += ["--cwd", str(order.get("cwd") or ".")]
    for name, value in (order.get("env") or {}).items():
        argv += ["-e", f"{name}={value}"]
    agent = order.get("agent")
    argv += ["--agent", agent] if agent else ["--no-agent"]
    if order.get("sandbox") is False:
        argv.append("--no-sandbox")
    network = order.get("network")
    if network in NETWORK_MODES:  # (a step sent can reach less than the worker lets, never more)
        argv += ["--network", tighter_network(str(network), task.project.config.sandbox.network)]
    if order.get("max_tokens") is not None:
        argv += ["--max-tokens", str(order["max_tokens"])]
    if order.get("max_cost_usd") is not None:
        argv += ["--max-cost", str(order["max_cost_usd"])]
    return [*argv, "--", *order["argv"]]


def _step_environ() -> dict[str, str]:
    """The worker's environment but its key to the server: a step that held it could
    send steps of its own (``bar.workers.temporal.API_KEY_VARS``)."""
    from bar.workers.temporal import API_KEY_VARS

    return {k: v for k, v in os.environ.items() if k not in API_KEY_VARS}


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
        self._scrub = StreamScrubber(known.scrubber())
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
