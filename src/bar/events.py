"""events.jsonl: the project's lifecycle log (task and worktree created, closed, failed).

The control plane's record: what happened to tasks and worktrees, as opposed to the
ledger, which records what happened inside a task. Appended under the project lock.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bar.store import append_line, now_iso

if TYPE_CHECKING:
    from bar.project import Project


def append_event(project: Project, event: str, **fields: Any) -> None:
    record: dict[str, Any] = {"version": 1, "ts": now_iso(), "event": event}
    record.update(fields)
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    with project.lock(f"log {event}"):
        append_line(project.events_path, line)
