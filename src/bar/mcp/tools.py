"""What ``bar mcp`` offers an agent: its own task's record to read, and orders to give.

Each tool is a plain function over one task (the one ``bar mcp`` serves, fixed when it
starts) that returns a JSON object and raises ``BarError`` with bar's own sentence;
``bar.mcp.server`` turns them into MCP tools and the errors into tool errors. Reads go
through the library (``bar.api``, the shapes of ``bar.api.shapes``: what ``bar status/log/
show/diff --json`` print); every write is an order (``bar.changes.orders``): inside a step the
server runs confined and cannot write bar's files, so the step's ``bar run`` does it.

What an agent may do is narrower than what the developer may: no tool takes a task (the
server serves one), a rollback names a state of that task (``base``, ``STEP``,
``STEP.N``: never a commit or a ref, which could be another task's) and is never hard.
A long patch or output is cut at ``max_bytes`` with a marker that says so, rather than
flood the agent's context.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from bar import api
from bar.api import orders, shapes
from bar.errors import NotFound, UsageError
from bar.model.records import RunStep
from bar.model.tasks import Task

DEFAULT_MAX_BYTES = 40_000  # about 10k tokens of patch: enough to read, not a flood
LOG_DEFAULT = 20  # steps `log` returns unless asked for more
SESSION_DEFAULT = 100  # events `session` returns unless asked for more
_STATE = re.compile(r"(?:base|#?[0-9]{1,9}(?:\.[0-9]{1,9})?)")
_CHECKPOINT = re.compile(r"#?[0-9]+\.[0-9]+")
_STEP = re.compile(r"#?[0-9]{1,9}")


class OwnTask:
    """The task one ``bar mcp`` serves, and the tools over it."""

    def __init__(self, loc: api.Location, task: Task) -> None:
        self._loc = loc
        self._task = task

    @property
    def task(self) -> Task:
        """The task as it is now (a step may have changed it since the last call)."""
        return api.load_task(self._task.project, self._task.id)

    # --- reading -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        rec = api.status(self._loc, self._task.id).to_json()
        if isinstance(rec.get("task"), dict):  # what its agent steps add up to, as the CLI's
            rec["task"]["session_totals"] = api.session_totals(self.task)
            rec["task"]["on_workers"] = api.on_workers(self.task)
        return rec

    def log(self, n: int | None = LOG_DEFAULT) -> dict[str, Any]:
        task = self.task
        steps = api.log(task, n)
        from bar.aide import flow

        history = flow.history(task)
        return {
            "task_id": task.id,
            "steps": [shapes.log_entry(task, s, False, history) for s in steps],
        }

    def show(self, step: str, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
        task = self.task
        if _CHECKPOINT.fullmatch(step.strip()):
            rec = shapes.checkpoint_entry(task, api.checkpoint(task, step))
        else:
            found = api.show(task, step)
            taken = api.checkpoints(task, found.step_id) if isinstance(found, RunStep) else []
            rec = shapes.step_entry(task, found, taken)
        for key in ("patch_text", "output_text"):
            rec[key] = _capped(rec.get(key), max_bytes, rec, key)
        return rec

    def diff(
        self,
        from_: str = "base",
        to: str | None = None,
        stat: bool = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        task = self.task
        rec = shapes.diff_entry(
            api.diff(task, state_name(from_), state_name(to) if to else None),
            stat=stat,
            unrecorded=False,
        )
        if not stat:
            rec["patch"] = _capped(rec["patch"], max_bytes, rec, "patch")
        return rec

    def session(
        self,
        step: str,
        start: int = 0,
        limit: int = SESSION_DEFAULT,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> dict[str, Any]:
        """What the agent said and did in a step (its own or an earlier one): the ledger's
        ``session`` summary and ``limit`` events from index ``start`` (negative: from the
        end), as many as fit in ``max_bytes``; ``next`` is where to go on from."""
        if not _STEP.fullmatch(step.strip()):
            raise UsageError(
                f"{step!r} is not a step of this task",
                hint="name a step (3); a checkpoint's call is in its step's session",
            )
        if limit < 0:
            raise UsageError(f"limit must be 0 or more, not {limit}")
        task = self.task
        found = api.show(task, step.strip())
        summary, events = api.session(task, found.step_id)
        if summary is None and not events:
            raise NotFound(
                f"step {found.step_id} kept no agent session",
                hint="a step run with --agent keeps one; the log tool shows which did",
            )
        total = len(events)
        first = max(0, total + start) if start < 0 else min(start, total)
        chosen = events[first : first + limit]
        shown = _fitted(chosen, max_bytes, keep_end=start < 0)
        if start < 0:
            first += len(chosen) - len(shown)
        rec: dict[str, Any] = {
            "task_id": task.id,
            "step": found.step_id,
            "session": summary,
            "total_events": total,
            "first": first,
            "events": shown,
            "next": first + len(shown) if first + len(shown) < total else None,
        }
        if len(shown) < len(chosen):
            rec["truncated"] = {"events": {"shown": len(shown), "asked": len(chosen)}}
        return rec

    def decide_result(self, wait_seconds: float = 0) -> dict[str, Any]:
        if wait_seconds <= 0:
            return orders.decide_result(self.task)
        return orders.decide_awaited(self.task, wait_seconds)

    def flow_status(self) -> dict[str, Any]:
        from bar.aide import flow

        task = self.task
        found = flow.status(task)
        if found is None:
            raise NotFound(
                f"task {task.name} has no flow yet",
                hint="start it with the flow tool: action start",
            )
        return found

    # --- orders --------------------------------------------------------------------------

    def checkpoint(self, label: str = "") -> dict[str, Any]:
        return self._order("checkpoint", {"label": label})

    def rollback(self, to: str) -> dict[str, Any]:
        return self._order("rollback", {"to": state_name(to)})

    def decide_submit(self, input: dict[str, Any]) -> dict[str, Any]:

        return dict(orders.decide_submit(self.task, input))

    def flow(self, action: str, summary: str, rollback: bool = False) -> dict[str, Any]:
        return self._order("flow", {"action": action, "summary": summary, "rollback": rollback})

    def _order(self, op: str, args: dict[str, object]) -> dict[str, Any]:
        return dict(orders.order(self.task, op, args))


def serving(loc: api.Location, ref: str | None) -> Task:
    """The task ``bar mcp`` serves: ``ref``, else the step's (``BAR_TASK_ID``, set by
    ``bar run``), else the task of the current directory. Inside a step, only that
    step's task: an agent never reaches another task through bar."""
    inside = os.environ.get("BAR_TASK_ID") or None
    task = api.get_task(loc, ref or inside)
    if inside is not None and task.id != inside:
        raise UsageError(
            f"this runs inside a step of task {os.environ.get('BAR_TASK_NAME') or inside}; "
            f"bar mcp serves only that task, not {task.name} ({task.id})",
            hint="leave out --task inside a step, or run bar mcp outside it",
        )
    return task


def state_name(name: str) -> str:
    """``name`` if it names a recorded state of a task (``base``, ``3``, ``3.2``); a
    commit id, a ref or another task's anything is refused."""
    if not _STATE.fullmatch(name.strip()):
        raise UsageError(
            f"{name!r} is not a state of this task",
            hint="name one as base, a step (3) or a checkpoint (3.2); see the log tool",
        )
    return name.strip()


def _capped(text: object, limit: int, rec: dict[str, Any], key: str) -> Any:
    """``text`` cut to ``limit`` bytes of UTF-8 with a marker line, and the cut noted in
    ``rec["truncated"]`` (``{key: {"shown_bytes", "total_bytes"}}``)."""
    if not isinstance(text, str):
        return text
    if limit < 1:
        raise UsageError(f"max_bytes must be 1 or more, not {limit}")
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    shown = data[:limit].decode("utf-8", "ignore")
    cut = rec.setdefault("truncated", {})
    cut[key] = {"shown_bytes": len(shown.encode()), "total_bytes": len(data)}
    return shown + (
        f"\n[bar: truncated: {len(shown.encode())} of {len(data)} bytes shown; ask with a "
        "larger max_bytes, stat: true, or a narrower pair of states]\n"
    )


def _fitted(events: list[dict[str, Any]], limit: int, *, keep_end: bool) -> list[dict[str, Any]]:
    """As many of ``events`` as fit in ``limit`` bytes of JSON, kept from the start (or
    from the end); one event that alone is too long is given with its texts cut."""
    if limit < 1:
        raise UsageError(f"max_bytes must be 1 or more, not {limit}")
    order = list(reversed(events)) if keep_end else events
    kept: list[dict[str, Any]] = []
    used = 0
    for event in order:
        size = len(json.dumps(event, ensure_ascii=False).encode()) + 2
        if used + size > limit:
            if not kept:
                kept.append(_cut_event(event, limit))
            break
        kept.append(event)
        used += size
    return list(reversed(kept)) if keep_end else kept


def _cut_event(event: dict[str, Any], limit: int) -> dict[str, Any]:
    """``event`` with each of its texts (message, result, input) cut to fit ``limit``."""
    out = dict(event)
    for key in ("text", "summary"):
        if isinstance(out.get(key), str):
            out[key] = _capped(out[key], max(1, limit // 2), out, key)
    if "input" in out and not isinstance(out["input"], str | int | float | bool | None):
        out["input"] = json.dumps(out["input"], ensure_ascii=False)
    if isinstance(out.get("input"), str):
        out["input"] = _capped(out["input"], max(1, limit // 2), out, "input")
    return out
