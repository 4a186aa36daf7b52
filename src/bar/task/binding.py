"""The intent of a ``bar task bind`` (``bar.task.lanes``), kept in the task's
``binding.json`` from before the worktree is moved until the board names it: a bind that
was stopped is finished by running it again, and a start waits for it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bar.store.files import read_regular

if TYPE_CHECKING:
    from pathlib import Path

    from bar.model.tasks import Task


def journal_of(task: Task) -> Path:
    return task.paths.dir / "binding.json"


def read_journal(task: Task) -> dict[str, Any] | None:
    """The intent of a bind of ``task`` that was stopped (None: there is none)."""
    raw = read_regular(journal_of(task))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    lane = data.get("lane") if isinstance(data, dict) else None
    if not isinstance(lane, dict) or not all(
        isinstance(lane.get(k), str) for k in ("name", "path", "branch")
    ):
        return None
    return dict(data)
