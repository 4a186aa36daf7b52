"""What one attempt at a step does to the task, on the worker that takes it
(docs/workers.md); the attempt itself, its heartbeats and its ``bar run``, is the worker's
face (``bar.worker.activities``), which asks for this through ``bar.api.attempts``.

An attempt **takes the task** from the remote (``take``: its history fetched, adopted as
a copy or as this worker's own record; a record this worker left that the remote does not
continue, a step killed with its worker, is dropped and taken again: the remote's history
is the task), **runs it** as ``bar run`` (``bar_run``), then **pushes the history back**
(``push_back``, scanned first as ``bar push`` does) and says how it ended (``outcome``).
An attempt whose predecessor started the step and went silent records that step
``interrupted`` from the progress the lost worker published instead (``record_lost``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from bar import git
from bar.base.clock import now_iso
from bar.base.record import replace
from bar.errors import BarError
from bar.model import journals
from bar.model.config import NETWORK_MODES, tighter_network
from bar.model.project import Project
from bar.model.records import RunStep
from bar.model.tasks import Task, load_task
from bar.redact import known
from bar.share import fetch as fetching
from bar.share import push as pushing
from bar.share.remotes import Remote
from bar.workers import published, temporal
from bar.workers.contract import Order, Outcome


def take(project: Project, remote: Remote, order: Order) -> Task:
    """The task of ``order`` here at the remote's history of it, with a worktree, ready
    for a step."""
    task_id = order.task_id
    for attempt in range(2):
        fetched = fetching.fetch(project, remote, only=[task_id])
        seen = next((t for t in fetched.tasks if t.task_id == task_id), None)
        if seen is None:
            raise BarError(f"{remote} holds no history of task {task_id}")
        if seen.outcome == fetching.BROKEN:
            raise BarError(f"the history of task {task_id} on {remote} is broken: {seen.message}")
        task = load_task(project, task_id)
        expected = order.history
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
            from bar.share.adopt import adopt

            task = adopt(project, task, by=temporal.identity()).task
        elif task.pending or not task.worktree.is_dir():
            from bar.task.start import start

            task = start(task, activate=False, by=temporal.identity())
        return task
    raise BarError(f"task {task_id} could not be taken from {remote}")


def _discard(project: Project, task: Task) -> None:
    """Drop this worker's record of ``task`` (closed, then deleted with its worktree,
    branch and refs): the remote's history is the task, and is taken again."""
    from bar.task.close import close
    from bar.task.delete import delete

    if task.active:
        close(task, force=True)
    delete(project, task.id, force=True)


def owned_by(task: Task, owner: str) -> Task:
    """The claimed task's board names the worker that took it (what the lead's board
    shows once the history comes back)."""
    from bar.model import board
    from bar.step import transaction

    with transaction.holding(task, "bar worker: claiming") as task:
        task.board.owner = board.validate_owner(owner)
        task.save()
    return task


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


def next_step(task: Task) -> str:
    """The id the task's next step is recorded as."""
    return f"{task.ledger_steps() + 1:04d}"


def history_pushed(project: Project, task: Task) -> str | None:
    """The task's history commit as this worker last pushed or took it."""
    from bar.share import history_commit

    return git.rev_parse(project.root, history_commit.history_ref(task.id))


def publisher(task: Task, remote: Remote, pushed: str | None) -> published.Publisher:
    """What publishes the running step's progress to the remote (``pushed``: the history
    the remote has, not scanned again)."""
    return published.Publisher(task, remote, [pushed] if pushed else [])


def bar_run(task: Task, order: Order) -> list[str]:
    """The ``bar run`` of the order's step in this worker's clone: the command, its
    folder and variables, its agent, its confinement (a step sent can reach less of the
    network than the worker lets it, never more), its budget."""
    argv = [sys.executable, "-m", "bar", "run", "--task", task.id, "--no-pty"]
    argv += ["--cwd", order.cwd]
    for name, value in order.env.items():
        argv += ["-e", f"{name}={value}"]
    argv += ["--agent", order.agent] if order.agent else ["--no-agent"]
    if not order.sandbox:
        argv.append("--no-sandbox")
    if order.network in NETWORK_MODES:
        argv += ["--network", tighter_network(order.network, task.project.config.sandbox.network)]
    if order.max_tokens is not None:
        argv += ["--max-tokens", str(order.max_tokens)]
    if order.max_cost_usd is not None:
        argv += ["--max-cost", str(order.max_cost_usd)]
    return [*argv, "--", *order.argv]


def step_environ() -> dict[str, str]:
    """The worker's environment but its key to the server: a step that held it could
    send steps of its own (``bar.workers.temporal.API_KEY_VARS``)."""
    return {k: v for k, v in os.environ.items() if k not in temporal.API_KEY_VARS}


def outcome(project: Project, task_id: str, step_id: str) -> Outcome:
    """How the step ``step_id`` (or the first run step after it: a decision answered
    while it ran is recorded after it) of the task ended, as its record says."""
    task = load_task(project, task_id)
    out = Outcome(task_id=task.id, worker=temporal.identity())
    step = _run_step(task, step_id)
    if step is None:
        return out
    return replace(
        out,
        status="interrupted" if step.extra.get("interrupted") else "recorded",
        step_id=step.step_id,
        exit_code=step.exit_code,
        diff_stat=step.diff_stat.to_record(),
        blocked=step.blocked,
    )


def _run_step(task: Task, step_id: str) -> RunStep | None:
    for step in task.ledger.iter_reverse(warn=False):
        if isinstance(step, RunStep) and step.number >= int(step_id):
            return step
        if step.number < int(step_id):
            break
    return None


def push_back(project: Project, task: Task, remote: Remote, ended: Outcome) -> Outcome:
    """Push the task's history back to the remote (scanned first, as ``bar push``
    does); ``ended`` with what happened."""
    try:
        pushed = pushing.push(project, [task], remote)
    except BarError as exc:
        return replace(ended, pushed=False, push=str(exc))
    one = pushed.tasks[0]
    if one.outcome in (pushing.PUSHED, pushing.UP_TO_DATE):
        with contextlib.suppress(BarError):
            published.clear(task, remote)
        return replace(ended, pushed=True, history=one.history)
    findings = [f"{f.kind} in {f.where()} (--allow {f.id})" for f in one.findings]
    return replace(ended, pushed=False, push=one.message or one.outcome, findings=findings)


def record_lost(project: Project, remote: Remote, order: Order, started: dict[str, object]) -> Task:
    """Record the step a lost worker was running (``started``: its last heartbeat) as
    interrupted, with what it changed up to the progress it published; the task."""
    from bar.step import transaction

    task = take(project, remote, order)
    found = published.fetch(task, remote)
    step_id = published.restore(task, found) if found else None
    if step_id is None:
        _mark_started(task, order, started)
    with transaction.changing(task, "bar worker: recording a lost worker's step", wait=True):
        pass
    return load_task(project, task.id)


def _mark_started(task: Task, order: Order, started: dict[str, object]) -> None:
    """No progress was published: the step is put back from what the order says, with
    the worktree as it was recorded (what it changed before the worker died is lost with
    the worker, and the record says it ran)."""
    step_id = str(started["started"])
    last = task.ledger.last()
    if last is not None and last.number >= int(step_id):
        return
    journals.RUN.write(
        task.paths,
        journals.RunIntent(
            pid=0,
            step_id=step_id,
            started_at=str(started.get("since") or now_iso()),
            cmd=[known.scrub(a) for a in order.argv],
            cwd=order.cwd,
            snapshot_before=task.recorded_snapshot(),
        ),
    )
