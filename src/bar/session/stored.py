"""Reading back what ``bar.session.capture`` kept: a step's events, a task's totals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bar.session.events import TYPES, Event
from bar.store.files import read_json_lines

if TYPE_CHECKING:
    from bar.ledger.records import Step
    from bar.task.tasks import Task

# the ledger's ``session`` numbers a task's totals add up
_COUNTS = ("turns", "tool_calls", "input_tokens", "output_tokens", "cache_read_tokens")


def events(task: Task, step: Step) -> list[Event]:
    """The step's session events in order ([] for a step without one). A line a newer
    bar wrote with a type this one does not know reads as ``unknown``."""
    name = getattr(getattr(step, "artifacts", None), "session", None)
    if not name:
        return []
    out: list[Event] = []
    for rec in read_json_lines(task.dir / name):  # (a torn line is skipped)
        if rec.get("type") not in TYPES:
            rec = {"type": "unknown", "agent_type": str(rec.get("type")), "at": rec.get("at")}
        out.append(rec)
    return out


def summary(step: Step) -> dict[str, Any] | None:
    """The step's ``session`` entry, if it has one."""
    found = getattr(step, "extra", {}).get("session")
    return found if isinstance(found, dict) else None


def totals(steps: list[Step]) -> dict[str, Any] | None:
    """What the agent steps of a task add up to: steps, turns, tool calls, tokens, and
    cost (only if every step's cost is known). None: no step had a session."""
    found = [s for step in steps if (s := summary(step)) is not None]
    if not found:
        return None
    total: dict[str, Any] = {"steps": len(found)}
    for key in _COUNTS:
        total[key] = sum(v for s in found if isinstance(v := s.get(key), int))
    costs = [s.get("cost_usd") for s in found]
    if all(isinstance(c, int | float) for c in costs):
        total["cost_usd"] = round(sum(float(c) for c in costs if c is not None), 6)
    models = list(dict.fromkeys(m for s in found if isinstance(m := s.get("model"), str)))
    total["models"] = models
    return total


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
