"""The orders the faces give (``bar.changes.orders``, given through ``bar.step.dispatch``):
``bar decide`` (submit, answer), ``bar flow`` and the board, each to the task's one
writer, here or on the workers the task was sent to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bar.aide import answers, decide
from bar.base.notices import warn
from bar.errors import BarError
from bar.model.tasks import Task
from bar.step.dispatch import order as order  # (the faces give orders here)

# --- the orders of bar decide and bar flow ------------------------------------------


def decide_submit(task: Task, data: object, *, wait: bool = True) -> dict[str, object]:
    """Submit a DecideInput; ``{"session_id", "pending", "replaced"}``."""
    decide.validate(data)  # said before anything is sent
    return order(task, "decide.submit", {"input": data}, wait=wait)


def decide_answer(
    task: Task, decisions: list[dict[str, Any]], *, session_id: str | None = None, wait: bool = True
) -> dict[str, Any]:
    """Answer the pending decision (``session_id``: only if it is still that one); the
    DecisionRecord written."""
    rec = decide_answered(task, decisions, session_id=session_id, wait=wait)["record"]
    assert isinstance(rec, dict)
    return rec


def decide_answered(
    task: Task, decisions: list[dict[str, Any]], *, session_id: str | None = None, wait: bool = True
) -> dict[str, object]:
    """``decide_answer``, with the order's whole result: ``{"session_id", "record", "step"
    (the decision step, None while another step runs), "queued"}``."""
    remote = _on_workers(task) if decide.pending(task) is None else None
    if remote is not None:
        return _answer_on_workers(task, remote, decisions, session_id)
    args: dict[str, object] = {"decisions": decisions}
    if session_id is not None:
        args["session_id"] = session_id
    return order(task, "decide.answer", args, wait=wait)


def decide_take(task: Task) -> dict[str, object] | None:
    """Take the answer to the latest decision that lies on disk with no ``decision`` step
    yet (written by aide's web server where aide's clients look, ``bar.aide.answers``):
    the order's result (``session_id``, ``record``, ``step``, ``queued``, ``from``), or
    None when there is none. ``UntrustedAnswer`` (a step could have written it) or
    ``BadAnswer`` (it answers nothing asked) when it is not taken."""
    got = answers.found(task)
    if got is None:
        return None
    return order(task, "decide.take", {"session_id": got.session_id})


def take_answer(task: Task, said: dict[str, object] | None = None) -> dict[str, object] | None:
    """``decide_take``, for who reads an answer (``bar decide result``, a wait): an answer
    that cannot be taken is said on stderr (once per version of its file, with ``said``
    kept across calls), never an error of the reader's."""
    import os

    got = answers.found(task)
    if got is None:
        return None
    try:
        st = os.stat(got.path, follow_symlinks=False)
        key: object = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if said is not None and said.get(str(got.path)) == key:
        return None  # (refused already, and unchanged since)
    try:
        return order(task, "decide.take", {"session_id": got.session_id})
    except BarError as exc:
        warn(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""))
        if said is not None:
            said[str(got.path)] = key
        return None


def decide_result(task: Task) -> dict[str, Any]:
    """The DecideOutput of the latest decision (``bar.aide.decide.result``), an answer
    another program wrote taken first (``take_answer``)."""
    take_answer(task)
    return decide.result(task)


def decide_wait(task: Task, session_id: str, timeout: float | None = None) -> dict[str, Any]:
    """Wait for the answer to ``session_id`` (``bar.aide.decide.wait``): given with bar, or
    written by another program (taken as it comes, ``take_answer``)."""
    said: dict[str, object] = {}
    return decide.wait(task, session_id, timeout, look=lambda: take_answer(task, said))


def decide_awaited(task: Task, timeout: float | None = None) -> dict[str, Any]:
    """``decide_result``, after waiting for the pending decision's answer if one is
    pending (``decide_wait``)."""
    take_answer(task)
    waiting = decide.pending(task)
    if waiting is None:
        return decide.result(task)
    return decide_wait(task, decide.session_of(waiting), timeout)


def decide_clean(
    task: Task, *, keep: int | None = None, days: float | None = None
) -> dict[str, object]:
    """``bar decide clean``: remove the answered decisions' records but the latest
    submission's, the ``keep`` newest and those answered in the last ``days``
    (``bar.aide.decide.plan_clean``); recorded as a ``decision`` step with ``cleaned``."""
    args: dict[str, object] = {}
    if keep is not None:
        args["keep"] = keep
    if days is not None:
        args["days"] = days
    return order(task, "decide.clean", args)


def pending_decision(task: Task) -> dict[str, Any] | None:
    """The submission waiting for an answer: here, or from an agent on a worker
    (docs/workers.md, "Decisions from an agent on a worker": it waits as a signal of the
    task's workflow); its ``_meta`` says which."""
    waiting = decide.pending(task)
    if waiting is not None:
        return waiting
    return _on_workers(task)


def _on_workers(task: Task) -> dict[str, Any] | None:
    from bar.model import placement

    if placement.of(task.project, task.id) is None:
        return None
    from bar.workers import client

    try:
        question = client.question(task.project, task)
    except BarError:
        return None
    if not isinstance(question, dict) or not isinstance(question.get("input"), dict):
        return None
    meta = {"session_id": str(question.get("session_id", "")), "on_workers": True}
    return {**question["input"], "_meta": meta}


def _answer_on_workers(
    task: Task, waiting: dict[str, Any], decisions: list[dict[str, Any]], session_id: str | None
) -> dict[str, object]:
    from bar.errors import NotFound
    from bar.workers import client

    sid = str(waiting["_meta"]["session_id"])
    if session_id is not None and session_id != sid:
        raise NotFound(
            f"decision {session_id} is no longer pending: {sid} replaced it",
            hint="answer the pending one (`bar decide answer`)",
        )
    data = {k: v for k, v in waiting.items() if k != "_meta"}
    decide.validate(data)
    chosen = decide.check_answers(data, decisions)
    client.answer(task.project, task, sid, chosen)
    return {"session_id": sid, "record": None, "step": None, "queued": True, "on_workers": True}


def flow_act(
    task: Task,
    action: str,
    summary: str,
    *,
    rollback: bool = False,
    phase: str | None = None,
    wait: bool = True,
) -> dict[str, object]:
    """Record a flow action (``start``, ``next-step``, ...) as the task's one writer."""
    args: dict[str, object] = {"action": action, "summary": summary, "rollback": rollback}
    if phase is not None:
        args["phase"] = phase
    return order(task, "flow", args, wait=wait)


def board_order(task: Task, op: str, args: Mapping[str, object]) -> dict[str, object]:
    """A board operation (``bar.api.board_orders``) given from inside a step of ``task``:
    done by that step's ``bar run``, which may write what the step may not."""
    return order(task, "board", {**args, "op": op})
