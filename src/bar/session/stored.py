"""Reading back what ``bar.session.capture`` kept: a step's events, a task's totals."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.errors import BarError
from bar.model.agent_names import AGENTS
from bar.session.events import TYPES, Event, answered
from bar.session.found import reader
from bar.store.files import ensure_dir, read_json, read_json_lines, write_json_atomic

if TYPE_CHECKING:
    from bar.model.records import Step
    from bar.model.tasks import Task

# the ledger's ``session`` numbers a task's totals add up
_COUNTS = ("turns", "tool_calls", "input_tokens", "output_tokens", "cache_read_tokens")


def events(task: Task, step: Step) -> list[Event]:
    """The step's session events in order ([] for a step without one). A line a newer
    bar wrote with a type this one does not know reads as ``unknown``; a tool result an
    older bar kept with the agent's framing around its output is read out of it."""
    name = getattr(getattr(step, "artifacts", None), "session", None)
    if not name:
        return []
    agent = (summary(step) or {}).get("agent")
    out: list[Event] = []
    for rec in read_json_lines(task.dir / name):  # (a torn line is skipped)
        if rec.get("type") not in TYPES:
            rec = {"type": "unknown", "agent_type": str(rec.get("type")), "at": rec.get("at")}
        elif rec["type"] == "tool_result" and "exit_code" not in rec and "interrupted" not in rec:
            rec = _unframed(rec, agent)
        out.append(rec)
    if agent in AGENTS:
        reader(str(agent)).settle(out)
    return out


def _unframed(rec: Event, agent: object) -> Event:
    """A tool result as this bar keeps it (``bar.session.events.answered``), from one an
    older bar kept as the agent wrote it: its output, its exit code, whether stopped."""
    text, ok = rec.get("summary"), rec.get("ok") is not False
    if agent not in AGENTS or not isinstance(text, str):
        return rec
    said = reader(str(agent)).answer(text, ok)
    if said.output == text and said.exit_code is None and not said.interrupted:
        return rec
    keep = {k: v for k, v in rec.items() if k not in ("type", "id", "ok", "summary", "at")}
    new = answered(str(rec.get("id") or ""), ok, said, rec.get("at"))
    return {**new, **keep}


def summary(step: Step) -> dict[str, Any] | None:
    """The step's ``session`` entry, if it has one."""
    found = getattr(step, "extra", {}).get("session")
    return found if isinstance(found, dict) else None


def totals(steps: list[Step]) -> dict[str, Any] | None:
    """What the agent steps of a task add up to: steps, turns, tool calls, tokens, and
    cost (only if every step's cost is known). None: no step had a session."""
    sums = _Sums()
    for step in steps:
        if (found := summary(step)) is not None:
            sums.add(found)
    return sums.result()


def task_totals(task: Task) -> dict[str, Any] | None:
    """``totals`` of the task's whole ledger, read only from where the last look ended:
    the sums so far are kept in the project's cache (``cache/session-totals-ID.json``,
    never in the task's own files, which reading commands leave alone) with the ledger's
    length then and its last bytes, so a ledger rewritten since (``bar doctor``) is read
    again whole. ``bar status`` asks on every call; a long ledger must not be read each
    time."""
    ledger = task.paths.ledger
    cache = task.project.paths.cache / f"session-totals-{task.id}.json"
    try:
        size = os.stat(ledger).st_size
    except OSError:
        return None
    sums, offset = _Sums(), 0
    try:
        kept = read_json(cache)
        at = kept.get("offset")
        at = at if kept.get("version") == 1 and isinstance(at, int) and 0 < at <= size else 0
        if at and _mark(ledger, at) == kept.get("mark"):
            sums, offset = _Sums.of(kept.get("sums")), at
    except (BarError, OSError, ValueError):
        pass
    if offset < size:
        with open(ledger, "rb") as f:
            f.seek(offset)
            data = f.read(size - offset)
        whole = data.rfind(b"\n") + 1  # (a line being written is left for the next look)
        for line in data[:whole].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            found = rec.get("session") if isinstance(rec, dict) else None
            if isinstance(found, dict):
                sums.add(found)
        if whole:
            offset += whole
            with contextlib.suppress(BarError, OSError):
                ensure_dir(cache.parent)
                state = {"version": 1, "offset": offset, "mark": _mark(ledger, offset)}
                write_json_atomic(cache, {**state, "sums": sums.to_json()})
    return sums.result()


def _mark(ledger: Path, offset: int) -> str:
    """The ledger's last 64 bytes before ``offset``: what says it is still the file the
    sums were taken from."""
    with open(ledger, "rb") as f:
        f.seek(max(0, offset - 64))
        return f.read(min(64, offset)).hex()


class _Sums:
    def __init__(self) -> None:
        self.steps = 0
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.cost: float | None = 0.0  # None: a step's cost is unknown
        self.models: list[str] = []

    def add(self, s: dict[str, Any]) -> None:
        self.steps += 1
        for key in _COUNTS:
            if isinstance(v := s.get(key), int):
                self.counts[key] += v
        c = s.get("cost_usd")
        self.cost = (
            self.cost + float(c) if isinstance(c, int | float) and self.cost is not None else None
        )
        if isinstance(m := s.get("model"), str) and m not in self.models:
            self.models.append(m)

    def result(self) -> dict[str, Any] | None:
        if not self.steps:
            return None
        total: dict[str, Any] = {"steps": self.steps, **self.counts}
        if self.cost is not None:
            total["cost_usd"] = round(self.cost, 6)
        total["models"] = list(self.models)
        return total

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "counts": self.counts,
            "cost": self.cost,
            "models": self.models,
        }

    @classmethod
    def of(cls, data: object) -> _Sums:
        sums = cls()
        if not isinstance(data, dict) or not isinstance(data.get("steps"), int):
            raise ValueError("not the sums bar keeps")
        sums.steps = data["steps"]
        counts = data.get("counts")
        counts = counts if isinstance(counts, dict) else {}
        for key in _COUNTS:
            if isinstance(v := counts.get(key), int):
                sums.counts[key] = v
        cost = data.get("cost")
        sums.cost = float(cost) if isinstance(cost, int | float) else None
        sums.models = [m for m in data.get("models") or [] if isinstance(m, str)]
        return sums


def tokens_text(s: dict[str, Any]) -> str:
    """``1.2k in, 340 out, 5.0k cached`` for a summary or a total."""
    parts = [
        f"{_short(s.get('input_tokens', 0))} in",
        f"{_short(s.get('output_tokens', 0))} out",
    ]
    if s.get("cache_read_tokens"):
        parts.append(f"{_short(s['cache_read_tokens'])} cached")
    return ", ".join(parts)


def cost_text(s: dict[str, Any]) -> str | None:
    cost = s.get("cost_usd")
    return f"${cost:.4f}" if isinstance(cost, int | float) else None


def _short(n: object) -> str:
    if not isinstance(n, int):
        return "0"
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"
