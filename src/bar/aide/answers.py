"""Answers another program wrote: taken as the person's only when no step could have.

aide's web server answers a decision by writing the DecisionRecord
``<session_id>.json`` beside ``pending.json`` (reference 003 §3.2: ``save_result``), in
``.aide/decisions/`` of the project, where bar keeps its copies for aide's clients
(``bar.aide.place``); a client pointed at the task directory writes it into bar's own
``decisions/``. Either way bar finds it (``found``) and takes it (the order
``decide.take``): checks that it answers the pending questions, keeps it as its own
record, copies it back and records the ``decision`` step (``via: "file"``), as if the
person had answered with ``bar decide answer``. That happens whenever bar reads the
answer (``bar decide result``, a waiting ``submit --wait``), before any command changes
the task (``bar.step.transaction``), and in ``bar doctor --repair``.

In aide, the agent asks and the person answers: whoever writes the answer file is
taken for the person. In bar the agent's processes run inside a step, and an answer
they wrote must never pass for the person's. A confined step sees ``.aide/`` read-only
(``bar.sandbox.plan``: a mount of its own namespace) and cannot write bar's directory at
all; where the kernel cannot show it read-only, or the step ran unconfined, it could
have. So an answer is taken only if no step that could write where it lies ran since its
decision was asked (``writers``): the running step included, which is told by its run
journal. An answer file written before its question was asked is never one: a new
session id is never one that has a file there already (``bar.aide.decide``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bar.aide import decide, place
from bar.base.clock import now_iso
from bar.base.record import record
from bar.changes import orders
from bar.errors import BarError, NotFound
from bar.history import queued as queued_steps
from bar.model.records import DecisionStep, RunStep, Step
from bar.model.tasks import Task
from bar.store.files import read_json_lines

WORKTREE = "worktree"  # .aide/decisions in the task's worktree: where aide's clients write
STORE = "store"  # the task directory's decisions/: bar's own


class UntrustedAnswer(BarError):
    """An answer on disk that a step's process could have written: not taken."""


class BadAnswer(BarError):
    """An answer on disk that is no DecisionRecord of the pending questions."""


@record(frozen=True)
class Found:
    """An answer on disk to the latest submission that no step records yet."""

    session_id: str
    where: str  # WORKTREE or STORE
    path: Path
    data: Any  # what the file holds (a DecisionRecord, if it is one)
    asked_at: str  # the submission's ``_meta.created_at``


def found(task: Task) -> Found | None:
    """The answer to the latest submission that is on disk, in bar's directory or where
    aide's clients write, and not yet recorded as a ``decision`` step; None if there is
    none."""
    latest = decide.submitted(task)
    sid = decide.session_of(latest)
    if not sid or "/" in sid or sid.startswith("."):
        return None
    meta = latest.get("_meta") if latest is not None else None
    asked = str(meta.get("created_at") or "") if isinstance(meta, dict) else ""
    name = f"{sid}.json"
    if decide.answered(task, sid):
        if recorded(task, sid, asked):
            return None
        path = decide.directory(task) / name
        return Found(sid, STORE, path, _parsed(path.read_bytes()), asked)
    data = place.read(task, f"decisions/{name}")
    if data is None:
        return None
    return Found(sid, WORKTREE, place.decisions(task) / name, _parsed(data), asked)


def _parsed(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _moment(text: str) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo is not None else moment.astimezone()


# a submission's time is kept to the second: the steps that ended this long before it
# are looked at too
_MARGIN = dt.timedelta(seconds=2)


def recorded(task: Task, session_id: str, asked_at: str = "") -> bool:
    """Whether a ``decision`` step records the answer to ``session_id``, in the ledger or
    queued to follow the running step. (The ledger is read back to the step before the
    submission at ``asked_at``, which no answer precedes.)"""
    since = _moment(asked_at)
    for step in task.ledger.iter_reverse(warn=False):
        if isinstance(step, DecisionStep) and step.session_id == session_id:
            return True
        ended = _moment(step.ended_at)
        if since is not None and ended is not None and ended < since - _MARGIN:
            break
    queued = queued_steps.path(task)
    if queued.exists():
        for rec in read_json_lines(queued):
            if rec.get("kind") == "decision" and rec.get("session_id") == session_id:
                return True
    return False


def could_write(task: Task, sandbox: object, where: str) -> bool:
    """Whether a step confined as its ``sandbox`` record says could write the answer's
    place: anything, unconfined; bar's directory never, confined; aide's place in the
    worktree unless the step saw it read-only."""
    if not isinstance(sandbox, dict) or sandbox.get("enabled") is not True:
        return True
    if where == STORE:
        return False
    shown = sandbox.get("read_only")
    return not (isinstance(shown, list) and str(place.root(task)) in shown)


def writers(task: Task, asked_at: str, where: str) -> list[str]:
    """The steps that could have written an answer in ``where`` since the question was
    asked at ``asked_at`` (the running one first), each said as the reason; [] when
    none could."""
    from bar.model import journals

    found: list[str] = []
    running = journals.RUN.read(task.paths)
    if running is not None and could_write(task, running.sandbox, where):
        found.append(f"step {running.step_id}, running, {_how(running.sandbox)}")
    since = _moment(asked_at)  # (None: a question of unknown time; every step counts)
    for step in task.ledger.iter_reverse(warn=False):
        ended = _moment(step.ended_at)
        if since is not None and ended is not None and ended < since - _MARGIN:
            break
        if not isinstance(step, RunStep) or step.blocked:
            continue  # (nothing of a blocked step ran)
        sandbox = step.extra.get("sandbox")
        if could_write(task, sandbox, where):
            found.append(f"step {step.step_id}, {_how(sandbox)}")
    return found


def _how(sandbox: object) -> str:
    if not isinstance(sandbox, dict) or sandbox.get("enabled") is not True:
        why = sandbox.get("reason") if isinstance(sandbox, dict) else None
        return f"unconfined ({why})" if why else "unconfined"
    return "confined, but with .aide/ writable (no mount namespace of its own)"


def check(task: Task, got: Found) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the pending DecideInput, the DecisionRecord bar keeps) for the answer ``got``, if
    it can be the person's and answers those questions; else ``UntrustedAnswer`` or
    ``BadAnswer``, saying why."""
    who = writers(task, got.asked_at, got.where)
    if who:
        more = f"; and {len(who) - 3} more" if len(who) > 3 else ""
        raise UntrustedAnswer(
            f"an answer to decision {got.session_id} is in {got.path}, but a step could have "
            f"written it since the question was asked ({'; '.join(who[:3])}{more}): bar does "
            "not take it as the person's",
            hint="the person answers with `bar decide answer` (or in bar ui); "
            "docs/decide-flow.md says who may write where",
        )
    latest = decide.submitted(task) or {}
    asked = {k: v for k, v in latest.items() if k != "_meta"}
    decide.validate(asked)
    data = got.data
    output = data.get("output") if isinstance(data, dict) else None
    if not isinstance(output, dict):
        raise BadAnswer(
            f'{got.path} is not a DecisionRecord (no "output" object): not taken',
            hint='aide writes {"input": ..., "output": {"decisions": [{"id": 1, "chosen": '
            '"jwt"}]}, "completed_at": ...}; or answer with `bar decide answer`',
        )
    given = data.get("input")
    if isinstance(given, dict) and {k: v for k, v in given.items() if k != "_meta"} != asked:
        raise BadAnswer(
            f"{got.path} answers other questions than decision {got.session_id} asks: not taken",
            hint="`bar decide answer` shows the questions and takes your choices",
        )
    try:
        chosen = decide.check_answers(asked, output.get("decisions"))
    except decide.BadDecideInput as exc:
        raise BadAnswer(f"{got.path}: {exc}: not taken", hint=exc.hint) from None
    completed = data.get("completed_at")
    if not isinstance(completed, str) or _moment(completed) is None:
        completed = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    return asked, {"input": asked, "output": {"decisions": chosen}, "completed_at": completed}


def take(ctx: orders.Context, got: Found) -> tuple[dict[str, Any], Step | None]:
    """Take the answer ``got`` (``check``), keep it as bar's record and record its
    ``decision`` step: (the record, the step, or None while a step runs: it follows)."""
    _, rec = check(ctx.task, got)
    decide.keep_record(ctx.task, got.session_id, rec)
    started = now_iso()
    step = DecisionStep(
        step_id="0001",
        started_at=started,
        ended_at=now_iso(),
        duration_ms=0,
        session_id=got.session_id,
        decisions=rec["output"]["decisions"],
        via="file",
    )
    return rec, ctx.add_step(step)


@orders.register("decide.take", "any")
def _take(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    wanted = args.get("session_id")
    got = found(ctx.task)
    if got is None or (wanted is not None and got.session_id != wanted):
        sid = str(wanted or "")
        if sid and recorded(ctx.task, sid):  # (taken meanwhile: by this command's prologue)
            rec = decide.record(ctx.task, sid)
            return {"session_id": sid, "record": rec, "step": None, "queued": False}
        raise NotFound(
            f"there is no answer to decision {sid or '(none)'} to take",
            hint="`bar decide list` shows the pending decision",
        )
    rec, added = take(ctx, got)
    return {
        "session_id": got.session_id,
        "record": rec,
        "step": added.to_record() if added is not None else None,
        "queued": added is None,
        "from": str(got.path),
    }


def take_waiting(task: Task) -> DecisionStep | None:
    """Take the answer on disk to the latest submission, if there is one and it can be
    the person's (the caller holds the task's lock, and no step runs): the decision step
    recorded, or None. ``UntrustedAnswer`` or ``BadAnswer`` when it cannot be taken."""
    got = found(task)
    step = take(orders.LocalContext(task), got)[1] if got is not None else None
    return step if isinstance(step, DecisionStep) else None
