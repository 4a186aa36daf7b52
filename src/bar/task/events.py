"""events.jsonl: the project's lifecycle log (task and worktree created, closed, failed).

The control plane's record: what happened to tasks and worktrees, as opposed to the
ledger, which records what happened inside a task. The caller holds the project lock.
"""

from __future__ import annotations

import json
from pathlib import Path

from bar.base.clock import now_iso
from bar.store.files import append_line


def append(log: Path, event: str, /, **fields: object) -> None:
    record: dict[str, object] = {"version": 1, "ts": now_iso(), "event": event}
    record.update(fields)
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    append_line(log, line.encode("utf-8", "backslashreplace"))
