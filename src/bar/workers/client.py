"""The developer's side of workers: send a task and its steps, follow them, stop them.

* ``send``: the task's record is pushed to the remote (scanned first, as ``bar push``
  is), its worktree here removed (hand edits recorded first: the workers continue from
  the record), and its workflow started on the queue. ``bar.model.placement`` notes
  where it runs;
* ``order``: one step, sent as a signal; ``follow`` streams its output from the
  workflow's window and, when the step ends, fetches the history back (``take_back``),
  so ``bar log``, ``diff``, ``review`` and ``apply`` see it here;
* ``cancel``, ``answer`` (a ``decide`` question from an agent on a worker), ``state``,
  ``recall`` (the task comes back to run here).
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import secrets
from collections.abc import Callable
from typing import Any

from bar.base.record import field, record
from bar.errors import BarError, ExitCode, NotFound, PushRefused, Unreachable, UsageError
from bar.model import board, placement
from bar.model.placement import Placement
from bar.model.project import Project
from bar.model.tasks import Task, load_task
from bar.redact import is_secret_name
from bar.share import fetch as fetching
from bar.share import push as pushing
from bar.share.remotes import Remote
from bar.step import transaction
from bar.workers import temporal
from bar.workers.contract import Order

POLL = 0.15  # seconds between two looks at a running step's output and outcome


def remote_of(project: Project) -> Remote:
    """Where task histories travel: ``workers.remote``, else ``share.remote``, else
    ``origin``."""
    from bar.share.remotes import resolve

    return resolve(project, project.config.workers.remote)


@record(frozen=True)
class Sent:
    task: Task
    where: Placement
    history: str | None
    started: bool  # its workflow was started now (else it ran already)

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task.id,
            "name": self.task.name,
            "history": self.history,
            "started": self.started,
            **self.where.to_json(),
        }


def send(
    project: Project,
    task: Task,
    queue: str,
    server: str,
    *,
    claim: dict[str, Any] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Sent:
    """Send ``task`` to the workers of ``queue`` (again: nothing but a check)."""
    temporal.require_sdk()
    task.require_own()
    namespace = project.config.workers.namespace
    access = temporal.access_of(project)
    temporal.run(temporal.connect(server, namespace, access))  # the server answers, first
    if not task.active:
        raise BarError(f"task {task.name} ({task.id}) is closed", hint="`bar task reopen` it first")
    where = placement.of(project, task.id)
    if where is not None and where.queue != queue:
        raise UsageError(
            f"task {task.name} runs on queue {where.queue}, not {queue}",
            hint=f"`bar task adopt {task.id}` brings it back here; then send it to {queue}",
        )
    remote = remote_of(project)
    if where is None:
        if not task.pending and task.worktree.is_dir():
            from bar.task.close import remove_worktree

            say(f"task {task.name}: recording what its worktree holds, then removing it here")
            remove_worktree(task, force=True)
            task = load_task(project, task.id)
        say(f"pushing task {task.name}'s history to {remote}")
        _push(project, task, remote)
    history = _history(project, task)
    start = {
        "task_id": task.id,
        "name": task.name,
        "queue": queue,
        "retry": project.config.workers.retry,
        "heartbeat": project.config.workers.heartbeat,
    }
    if claim is not None:
        start["claim"] = _order(
            task, remote.url, history, argv=list(claim.get("argv") or [])
        ).to_wire()
    wid = placement.workflow_id(task.id)
    started = temporal.run(_start(server, namespace, access, wid, start))
    if where is None:
        where = placement.place(project, task.id, queue, server, namespace, remote.url)
        # a planned task waits for a worker to claim it; any other is in progress, on
        # whichever worker runs its next step
        _on_board(project, task.id, board.PENDING if claim is not None else board.IN_PROGRESS)
        task = load_task(project, task.id)
        project.log_event("task.sent", task={**board.task_view(task), "queue": queue})
    return Sent(load_task(project, task.id), where, history, started)


def _on_board(project: Project, task_id: str, status: str) -> None:
    """The board here of a task whose steps run on workers: ``status``, and no worktree
    here (its worktree is on the machine that runs its next step)."""
    task = load_task(project, task_id)
    with transaction.holding(task, "bar: a task on workers, on the board") as task:
        if task.active and (task.board.status, task.board.worktree) != (status, ""):
            task.board.status, task.board.worktree = status, ""
            task.save()


def _push(project: Project, task: Task, remote: Remote) -> None:
    pushed = pushing.push(project, [task], remote)
    one = pushed.tasks[0]
    if one.outcome in (pushing.PUSHED, pushing.UP_TO_DATE):
        return
    if one.outcome == pushing.REFUSED:
        raise PushRefused(
            f"task {task.name}'s history holds what must not leave this machine, so no worker "
            "can take it: "
            + "; ".join(f"{f.kind} in {f.where()} ({f.id})" for f in one.findings[:5]),
            hint=f"see `bar push --dry-run --task {task.id}`; `bar push --allow ID` lets a "
            "finding through once checked",
        )
    raise BarError(f"task {task.name}'s history could not be pushed to {remote}: {one.message}")


def _history(project: Project, task: Task) -> str | None:
    from bar import git
    from bar.share import history_commit

    return git.rev_parse(project.root, history_commit.history_ref(task.id))


async def _start(
    server: str, namespace: str, access: temporal.Access, wid: str, start: dict[str, Any]
) -> bool:
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.common import WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from bar.workers.contract import NAME

    client = await temporal.connect(server, namespace, access)
    try:
        desc = await client.get_workflow_handle(wid).describe()
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return False
    except Exception:
        pass
    try:
        await client.start_workflow(
            NAME,
            start,
            id=wid,
            task_queue=start["queue"],
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


def _order(task: Task, remote: str, history: str | None, **step: Any) -> Order:
    """A new order (its own request id) of a step of ``task``, taken from ``remote``."""
    return Order(
        request=secrets.token_hex(6),
        task_id=task.id,
        name=task.name,
        remote=remote,
        history=history,
        **{"argv": [], **step},
    )


# --- steps ---------------------------------------------------------------------------


@record(frozen=True)
class StepOrder:
    argv: list[str]
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    agent: str | None = None
    sandbox: bool = True
    network: str | None = None  # --network: only ever tightens the worker's own setting
    max_tokens: int | None = None
    max_cost_usd: float | None = None


def order(project: Project, task: Task, step: StepOrder) -> str:
    """Send one step to the task's workers; its request id (what ``follow`` follows)."""
    where = _placed(project, task)
    secret = [name for name in step.env if is_secret_name(name)]
    if secret:
        raise UsageError(
            f"-e {secret[0]}=… would travel through the Temporal server in clear",
            hint="set it in the worker's own environment (bar scrubs it from the record "
            "there) instead of on the command line",
        )
    sent = _order(
        task,
        where.remote,
        _history(project, task),
        argv=list(step.argv),
        cwd=step.cwd,
        env=dict(step.env),
        agent=step.agent,
        sandbox=step.sandbox,
        network=step.network,
        max_tokens=step.max_tokens,
        max_cost_usd=step.max_cost_usd,
    )
    temporal.run(_signal(where, _access(project), "order", sent.to_wire()))
    return sent.request


def _placed(project: Project, task: Task) -> Placement:
    where = placement.of(project, task.id)
    if where is None:
        raise NotFound(
            f"task {task.name} ({task.id}) does not run on workers",
            hint=f"`bar run --on QUEUE -- CMD` sends it a step (or `bar task new {task.name} "
            "--on QUEUE`)",
        )
    return where


def _access(project: Project) -> temporal.Access:
    return temporal.access_of(project)


async def _handle(where: Placement, access: temporal.Access) -> Any:
    client = await temporal.connect(where.server, where.namespace, access)
    return client.get_workflow_handle(where.workflow_id)


async def _signal(where: Placement, access: temporal.Access, name: str, *args: Any) -> None:
    handle = await _handle(where, access)
    try:
        await handle.signal(name, args=list(args))
    except Exception as exc:
        raise Unreachable(
            f"the workflow {where.workflow_id} on {where.server} did not take the {name}: "
            f"{_first_line(exc)}",
            hint="`bar status` says where the task runs; `bar task adopt ID` brings it back",
        ) from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


@record
class Followed:
    """How a step sent to workers ended, as the developer's bar saw it."""

    request: str
    result: dict[str, Any] | None = None
    interim: list[dict[str, Any]] = field(default_factory=list)
    fetched: str = ""  # what bringing the history back said

    @property
    def exit_code(self) -> int:
        r = self.result or {}
        if r.get("status") == "failed" or r.get("pushed") is False:
            return ExitCode.ERROR
        code = r.get("exit_code")
        return int(code) if isinstance(code, int) else ExitCode.ERROR

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "result": self.result,
            "interim": self.interim,
            "fetched": self.fetched,
        }


def follow(
    project: Project,
    task: Task,
    request: str,
    *,
    show: Callable[[str], None],
    say: Callable[[str], None],
) -> Followed:
    """Stream step ``request``'s output until it ends, then bring the history back."""
    where = _placed(project, task)
    followed: Followed = temporal.run(_follow(where, _access(project), request, show, say))
    if followed.result is not None and followed.result.get("pushed"):
        followed.fetched = take_back(project, task.id, say=say)
    return followed


async def _follow(
    where: Placement,
    access: temporal.Access,
    request: str,
    show: Callable[[str], None],
    say: Callable[[str], None],
) -> Followed:
    client = await temporal.connect(where.server, where.namespace, access)
    handle = client.get_workflow_handle(where.workflow_id)
    live = _Live(show, say)
    told, waiting_said = 0, ""
    while True:
        try:
            desc = await handle.describe()
        except Exception as exc:  # the server restarts
            say(f"the server does not answer ({_first_line(exc)}); asking again")
            await asyncio.sleep(2)
            client = await _reconnect(where, access)
            handle = client.get_workflow_handle(where.workflow_id)
            continue
        try:
            got = await asyncio.wait_for(handle.query("outcome", args=[request]), timeout=5)
        except Exception:  # a query is answered by a worker of the queue, and none does
            nobody = (
                f"no worker of queue {where.queue} answers: `bar worker --queue "
                f"{where.queue}` in a clone of the repository serves it"
            )
            if nobody != waiting_said:
                say(nobody)
                waiting_said = nobody
            continue
        for act in getattr(desc.raw_description, "pending_activities", []):
            if act.heartbeat_details.payloads:
                (details, *_) = await client.data_converter.decode(act.heartbeat_details.payloads)
                if isinstance(details, dict) and details.get("request") == request:
                    live.show(details.get("out"), (act.attempt, details.get("started")))
        for r in got["interim"][told:]:
            say(
                f"step {r.get('step_id')} {r.get('status')}: {r.get('message', '')}; "
                "running it again"
            )
        told = len(got["interim"])
        if got["result"] is not None:
            live.show(got["result"].get("out"), live.key)
            live.end()
            result = {k: v for k, v in got["result"].items() if k != "out"}
            return Followed(request, result, got["interim"])
        why = _why(desc)
        if why and why != waiting_said:
            say(why)
            waiting_said = why
        await asyncio.sleep(POLL)


class _Live:
    """The step's output as its heartbeats carry it: each time, what is new since the
    last look (a marker where more came than the heartbeat held)."""

    def __init__(self, show: Callable[[str], None], say: Callable[[str], None]) -> None:
        self._show, self._say = show, say
        self.key: object = None  # the attempt whose output is shown (a retry starts at 0)
        self._seen = 0
        self._decode = codecs.getincrementaldecoder("utf-8")("replace")

    def show(self, out: Any, key: object) -> None:
        if not isinstance(out, dict):
            return
        if key != self.key:
            if self.key is not None:
                self.end()
            self.key, self._seen = key, 0
        end, tail = int(out.get("end", 0)), base64.b64decode(out.get("tail", ""))
        new = end - self._seen
        if new <= 0:
            return
        if new > len(tail):
            self.end()
            self._say(f"{new - len(tail)} bytes of output not shown live (`bar show` has them)")
        self._show(self._decode.decode(tail[-new:] if new < len(tail) else tail))
        self._seen = end

    def end(self) -> None:
        rest = self._decode.decode(b"", final=True)
        if rest:
            self._show(rest)


async def _reconnect(where: Placement, access: temporal.Access) -> Any:
    while True:
        try:
            return await temporal.connect(where.server, where.namespace, access)
        except Unreachable:
            await asyncio.sleep(2)


def _why(desc: Any) -> str:
    """What keeps a step from running, when something does: the worker that took it
    went silent, or could not take it and said why."""
    pending = list(getattr(desc.raw_description, "pending_activities", []))
    if not pending:
        return ""
    act = pending[0]
    failure = act.last_failure.message if act.HasField("last_failure") else ""
    if failure and "heartbeat timeout" in failure.lower():
        return (
            "the worker running it stopped answering: its step is recorded from the "
            "progress it published, on the next worker that takes it"
        )
    if failure and act.attempt > 1:
        return f"waiting (attempt {act.attempt}): {failure}"
    return ""


def take_back(
    project: Project, task_id: str, *, say: Callable[[str], None] = lambda _: None
) -> str:
    """Bring the task's history back from its remote; the steps the workers recorded
    become this machine's (no worktree: the task runs on workers). A base the worker
    moved as it started the task is said (and logged here: ``bar.share.adopt``)."""
    from bar.share.remotes import resolve

    where = placement.of(project, task_id)
    remote = resolve(project, where.remote if where else None)
    fetched = fetching.fetch(project, remote, only=[task_id])
    seen = next((t for t in fetched.tasks if t.task_id == task_id), None)
    if seen is None or seen.outcome != fetching.BEHIND:
        return seen.outcome if seen is not None else "no history there"
    said = came_back(project, task_id)
    if said:
        say(said)
    return fetching.UPDATED


def came_back(project: Project, task_id: str) -> str:
    """The steps the workers recorded, fetched, made this machine's record of the task;
    what a base they moved means, in words ("" when none moved)."""
    from bar.share.adopt import adopt
    from bar.task.start import base_moved_text

    taken = adopt(project, load_task(project, task_id), worktree=False)
    if taken.base_moved is None:
        return ""
    task = taken.task
    return f"task {task.name} does not start from where it was planned: {base_moved_text(task)}"


# --- stopping, answering, asking -------------------------------------------------------


def cancel(project: Project, task: Task, request: str = "") -> None:
    """Stop the task's running step (and drop its waiting ones) wherever it runs."""
    temporal.run(_signal(_placed(project, task), _access(project), "cancel", request))


def answer(project: Project, task: Task, session_id: str, decisions: list[dict[str, Any]]) -> None:
    said = {"decisions": decisions}
    temporal.run(_signal(_placed(project, task), _access(project), "answer", session_id, said))


QUERY_WAIT = 3.0  # seconds a worker has to answer what the workflow holds (none may run)
_STARTED = 2  # PENDING_ACTIVITY_STATE_STARTED: a worker took the activity


def state(project: Project, task: Task) -> dict[str, Any]:
    """What the task's workflow says: the step running and where, those waiting, the
    last results, a question waiting for an answer. What the server knows alone (the
    step a worker runs) is there even when no worker of the queue answers for the rest
    (``answered`` is then false, ``why`` says so)."""
    where = _placed(project, task)
    return dict(temporal.run(_state(where, _access(project))))


async def _state(where: Placement, access: temporal.Access) -> dict[str, Any]:
    client = await temporal.connect(where.server, where.namespace, access)
    handle = client.get_workflow_handle(where.workflow_id)
    seen = await _seen(client, handle)
    if seen.get("ended"):
        return {"running": None, "waiting": [], "results": [], "ended": True, "answered": True}
    try:
        got = dict(await asyncio.wait_for(handle.query("state"), timeout=QUERY_WAIT))
    except Exception as exc:
        from temporalio.client import WorkflowQueryRejectedError

        if isinstance(exc, WorkflowQueryRejectedError):
            return {"running": None, "waiting": [], "results": [], "ended": True, "answered": True}
        # only a worker of the queue answers a query: none runs, or none is free to
        nobody = (
            f"no worker of queue {where.queue} answers: `bar worker --queue {where.queue}` "
            "in a clone of the repository serves it"
        )
        return {
            "task_id": where.task_id,
            "queue": where.queue,
            "running": seen["running"],
            "waiting": [],
            "results": [],
            "question": None,
            "closing": False,
            "claimed": None,
            "answered": False,
            "why": seen["why"] or nobody,
        }
    got["answered"] = True
    got["why"] = seen["why"]
    return got


async def _seen(client: Any, handle: Any) -> dict[str, Any]:
    """What the server alone knows of a task's workflow, with no worker to ask: whether
    it ended, the step a worker runs now (worker, since, command), and why a step waits
    (``sent``: an order no worker has taken yet)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    try:
        desc = await asyncio.wait_for(handle.describe(), timeout=QUERY_WAIT)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return {"ended": True, "running": None, "why": "", "sent": False}
        raise Unreachable(
            f"the Temporal server did not describe {handle.id}: {_first_line(exc)}"
        ) from None
    except TimeoutError:
        raise Unreachable(
            f"the Temporal server did not describe {handle.id} in {QUERY_WAIT:.0f} s"
        ) from None
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return {"ended": True, "running": None, "why": "", "sent": False}
    raw = desc.raw_description
    running: dict[str, Any] | None = None
    for act in raw.pending_activities:
        if act.state != _STARTED:
            continue
        details: Any = {}
        if act.heartbeat_details.payloads:
            (details, *_) = await client.data_converter.decode(act.heartbeat_details.payloads)
        details = details if isinstance(details, dict) else {}
        order = details.get("order") if isinstance(details.get("order"), dict) else {}
        since = details.get("since") or _iso(act.last_started_time)
        running = {
            "request": str(details.get("request") or ""),
            "argv": list(order.get("argv") or []),
            "since": since,
            "worker": act.last_worker_identity or "",
        }
        if details.get("started"):
            running["step_id"] = str(details["started"])
        break
    waiting_task = raw.HasField("pending_workflow_task")
    sent = running is None and (bool(raw.pending_activities) or waiting_task)
    return {"ended": False, "running": running, "why": _why(desc), "sent": sent}


def question(project: Project, task: Task) -> dict[str, Any] | None:
    """The ``decide`` question of the agent of the task's running step, waiting for an
    answer, or None. Only a running step asks: with none (the server says so alone)
    no worker is asked anything."""
    where = _placed(project, task)
    return temporal.run(_question(where, _access(project)))  # type: ignore[no-any-return]


async def _question(where: Placement, access: temporal.Access) -> dict[str, Any] | None:
    client = await temporal.connect(where.server, where.namespace, access)
    handle = client.get_workflow_handle(where.workflow_id)
    if (await _seen(client, handle))["running"] is None:
        return None
    try:
        got = await asyncio.wait_for(handle.query("state"), timeout=QUERY_WAIT)
    except Exception:
        return None
    asked = got.get("question") if isinstance(got, dict) else None
    return asked if isinstance(asked, dict) else None


def _iso(stamp: Any) -> str:
    from bar.base.clock import iso_of

    return iso_of(stamp.ToNanoseconds()) if stamp.ToNanoseconds() else ""


def running_now(
    project: Project, tasks: list[Task]
) -> tuple[dict[str, dict[str, Any]], list[Unreachable]]:
    """What runs now on workers for each of ``tasks`` that runs there, as the server
    alone says it (no worker need answer: an idle task, or a queue no worker serves,
    costs one look): task id to ``{"queue", "running", "sent", "why"}``. A server that
    cannot be reached is said once in the second part (why, with its hint), and its
    tasks are left out."""
    placed = [(t, w) for t in tasks if (w := placement.of(project, t.id)) is not None]
    if not placed:
        return {}, []
    return temporal.run(_running_now(placed, _access(project)))  # type: ignore[no-any-return]


async def _running_now(
    placed: list[tuple[Task, Placement]], access: temporal.Access
) -> tuple[dict[str, dict[str, Any]], list[Unreachable]]:
    by_server: dict[tuple[str, str], list[tuple[Task, Placement]]] = {}
    for task, where in placed:
        by_server.setdefault((where.server, where.namespace), []).append((task, where))
    found: dict[str, dict[str, Any]] = {}
    problems: list[Unreachable] = []
    for (server, namespace), group in by_server.items():
        try:
            client = await temporal.connect(server, namespace, access)
        except Unreachable as exc:
            problems.append(exc)
            continue

        await asyncio.gather(*(_look(client, t, w, found) for t, w in group))
    return found, problems


async def _look(client: Any, task: Task, where: Placement, found: dict[str, Any]) -> None:
    try:
        seen = await _seen(client, client.get_workflow_handle(where.workflow_id))
    except Exception:  # (this one only: the others are still shown)
        return
    found[task.id] = {"queue": where.queue, **seen}


def recall(project: Project, task: Task) -> None:
    """The task stops running on workers (none of its steps may be running or waiting):
    its workflow ends, and it runs here again once adopted."""
    where = placement.of(project, task.id)
    if where is None:
        return
    temporal.run(_recall(task, where, _access(project)))
    placement.forget(project, task.id)
    _on_board(project, task.id, board.PENDING)  # here again, with no worktree yet


async def _recall(task: Task, where: Placement, access: temporal.Access) -> None:
    from temporalio.client import WorkflowExecutionStatus

    busy = BarError(
        f"task {task.name} has a step running or waiting on workers",
        hint=f"wait for it, or `bar cancel --task {task.id}`, then adopt it",
    )
    handle = await _handle(where, access)
    try:
        desc = await handle.describe()
    except Exception:  # no such workflow (any more): nothing to end
        return
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return
    if list(getattr(desc.raw_description, "pending_activities", [])):
        raise busy
    try:
        now = await asyncio.wait_for(handle.query("state"), timeout=5)
    except Exception:  # no worker of the queue answers for it now
        # what waits in it cannot be known, and no worker would run it: it ends here
        await handle.terminate(reason=f"task {task.id} brought back by bar task adopt")
        return
    if now.get("running") or now.get("waiting"):
        raise busy
    await handle.signal("close")
