"""What the developer's bar, a task's workflow and a worker's attempt pass each other
(docs/workers.md): the names they meet by, an order (one step to run) and the outcome
of one attempt at it.

On the wire both are JSON objects, as docs/json.md (``$worker-result``) shows them; in
bar they are records, made from the wire once, where they arrive (``Order.from_wire``,
which checks every word: an order comes from whoever may signal the workflow, and one it
refuses is refused for good, never retried, so Temporal's own conversion, which fails an
attempt that it would retry, is not asked to make it). Nothing here imports Temporal.
"""

from __future__ import annotations

import re
from typing import Any

from bar.base.record import field, record, replace
from bar.errors import BarError
from bar.git import is_object_id
from bar.store.layout import TASK_ID_RE

NAME = "bar.task"  # the workflow of one task sent to workers
STEP = "bar.step"  # the activity: one step
CLAIM = "bar.claim"  # a planned task, taken by a worker started with --claim
CLAIMS = ".claim"  # ... from the queue <queue>.claim
# an error of the attempt that no retry can help (the step ran, or can never run)
FINAL = "BarStepFinal"
BUSY = "BarWorkerBusy"  # every place of the worker is taken: the step goes elsewhere
NOT_TAKEN = "NotTaken"  # the task could not be taken (a remote out of reach): retried


@record(frozen=True)
class Order:
    """One step for a task's workers: the command and how ``bar run`` runs it there.
    ``claim``: the first step of a planned task, the claiming worker's command;
    ``round``: how often a lost step was run again (``workers.retry``); ``earlier``:
    what an attempt that started it and went silent said last (its heartbeat)."""

    request: str
    task_id: str
    name: str
    remote: str
    argv: list[str]
    history: str | None = None
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    agent: str | None = None
    sandbox: bool = True
    network: str | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    claim: bool = False
    round: int = 0
    earlier: dict[str, Any] | None = None

    @classmethod
    def from_wire(cls, wire: object) -> Order:
        """The order the JSON object ``wire`` says, its words checked before any is
        used (the rest ``bar run`` checks as it checks a command line); ``BarError``
        names the first that is wrong."""
        if not isinstance(wire, dict):
            raise BarError("the order is not an object")
        task_id, argv = wire.get("task_id"), wire.get("argv")
        if not isinstance(task_id, str) or not TASK_ID_RE.fullmatch(task_id):
            raise BarError(f"the order names no valid task id: {task_id!r}")
        if not isinstance(argv, list) or not all(
            isinstance(a, str) and "\0" not in a for a in argv
        ):
            raise BarError("the order's command is not a list of strings")
        claim = wire.get("claim") is True
        if not argv and not claim:  # (a claim's is the claiming worker's command)
            raise BarError("the order's command is empty")
        history = wire.get("history")
        if history is not None and not is_object_id(history):
            raise BarError(f"the order names no valid history commit: {history!r:.80}")
        env = {} if wire.get("env") is None else wire.get("env")
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and _NAME.fullmatch(k) and isinstance(v, str) and "\0" not in v
            for k, v in env.items()
        ):
            raise BarError("the order's variables are not a mapping of names to strings")
        earlier = wire.get("earlier")
        return cls(
            request=_text(wire, "request"),
            task_id=task_id,
            name=_text(wire, "name"),
            remote=_text(wire, "remote"),
            argv=list(argv),
            history=history,
            cwd=_text(wire, "cwd") or ".",
            env=dict(env),
            agent=_text(wire, "agent") or None,
            sandbox=wire.get("sandbox") is not False,
            network=_text(wire, "network") or None,
            max_tokens=_number(wire, "max_tokens", int),
            max_cost_usd=_number(wire, "max_cost_usd", float),
            claim=claim,
            round=_number(wire, "round", int) or 0,
            earlier=earlier if isinstance(earlier, dict) else None,
        )

    def to_wire(self) -> dict[str, Any]:
        """As the workflow keeps it (what ``from_wire`` reads back); the fields a
        first order has not (``claim``, ``round``, ``earlier``) only when set."""
        wire: dict[str, Any] = {
            "request": self.request,
            "task_id": self.task_id,
            "name": self.name,
            "remote": self.remote,
            "history": self.history,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "env": dict(self.env),
            "agent": self.agent,
            "sandbox": self.sandbox,
            "network": self.network,
            "max_tokens": self.max_tokens,
            "max_cost_usd": self.max_cost_usd,
        }
        if self.claim:
            wire["claim"] = True
        if self.round:
            wire["round"] = self.round
        if self.earlier is not None:
            wire["earlier"] = self.earlier
        return wire

    def again_as(self, started: dict[str, Any]) -> Order:
        """This order as the attempt that started it last ran it (a claim's command is
        the worker's, filled in: ``started["order"]``)."""
        said = started.get("order")
        argv = said.get("argv") if isinstance(said, dict) else None
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return replace(self, argv=list(argv))
        return self


def _text(wire: dict[str, Any], key: str) -> str:
    value = wire.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or "\0" in value:
        raise BarError(f"the order's {key} is not a string: {value!r:.80}")
    return value


# a variable's name, as ``bar run -e NAME=VALUE`` reads it back
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# the largest a number of an order may be: a budget, a round of a lost step run again
_MOST = 10**12


def _number(wire: dict[str, Any], key: str, kind: type[int] | type[float]) -> Any:
    """A number of the order: finite, not negative, at most ``_MOST``, whole for an
    ``int`` (JSON on the wire may say ``Infinity``, ``NaN``, ``1e400``)."""
    value = wire.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BarError(f"the order's {key} is not a number: {value!r:.80}")
    if not 0 <= value <= _MOST:  # (NaN is between nothing: refused too)
        raise BarError(f"the order's {key} is out of range: {value!r:.80}")
    if kind is int and value != int(value):
        raise BarError(f"the order's {key} is not a whole number: {value!r}")
    return kind(value)


@record
class Outcome:
    """How one attempt at a step ended, as the workflow keeps it and ``bar run --on``
    shows it (docs/json.md, ``$worker-result``, less the workflow's ``request``,
    ``final`` and ``retried``). ``status``: ``recorded``, ``interrupted`` (``lost``:
    its worker was lost), ``cancelled``; ``pushed``: the history came back to the
    remote (``history``), else ``push`` and ``findings`` say why not; ``out``: the
    newest output (``end``, base64 ``tail``); ``sticky``: the worker's own queue."""

    task_id: str
    worker: str
    status: str = "recorded"
    step_id: str | None = None
    exit_code: int | None = None
    diff_stat: dict[str, Any] | None = None
    blocked: bool | None = None
    out: dict[str, Any] | None = None
    sticky: str | None = None
    message: str | None = None
    lost: bool = False
    pushed: bool | None = None
    history: str | None = None
    push: str | None = None
    findings: list[str] | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "task_id": self.task_id,
            "worker": self.worker,
            "status": self.status,
            "step_id": self.step_id,
            "exit_code": self.exit_code,
        }
        optional = {
            "diff_stat": self.diff_stat,
            "blocked": self.blocked,
            "out": self.out,
            "sticky": self.sticky,
            "message": self.message,
            "lost": self.lost or None,
            "pushed": self.pushed,
            "push": self.push,
            "findings": self.findings,
        }
        wire.update((k, v) for k, v in optional.items() if v is not None)
        if self.pushed:
            wire["history"] = self.history
        return wire
