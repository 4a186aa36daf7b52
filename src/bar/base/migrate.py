"""One registry through which every versioned file is read.

Each record kind has a current version. A reader hands the raw JSON object to
``upgrade(kind, data, path)``, which applies the registered one-step migrations in order
and returns data at the current version. A version that is newer than this bar knows, or
not an integer at all, is a clear ``UnsupportedVersion`` naming the file, never a guess.

A version counts the changes that a reader of the one before could not read. Keys
added beside the seed's are not such a change: a reader of the version ignores keys it
does not know (docs/storage.md), so task.json stays at the seed's version 1 with bar's
keys beside its own, and a reader written from the seed's design alone reads it. A
number once written for a layout that turned out to be an addition is *retired*: it is
read as the version it merely extended, and never used again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar.errors import CorruptFile, UnsupportedVersion

Record = dict[str, Any]

# kind -> (current version, file name used in messages)
CURRENT: dict[str, tuple[int, str]] = {
    "config": (1, "config.yaml"),
    "state": (1, "state.json"),
    "task": (1, "task.json"),
    "step": (1, "ledger.jsonl line"),
    "event": (2, "events.jsonl line"),
    "marker": (1, "running marker"),
    "policy": (1, "policy"),
    "rollback-journal": (1, "rollback journal"),
    "cast": (2, "asciinema cast"),
    "apply-journal": (1, "apply journal"),
    "create-journal": (1, "task creation journal"),
    "sync-journal": (1, "sync journal"),
    "delete-journal": (1, "task deletion journal"),
    "flow-states": (1, "flow-states.json"),
    "worktrees": (1, "workspaces/index.json"),
}

# (kind, from_version) -> function producing the record at from_version + 1
_MIGRATIONS: dict[tuple[str, int], Callable[[Record], Record]] = {}

# (kind, retired version) -> the version whose layout it has. task.json 2 was version 1
# with ``board`` beside the seed's keys: an addition, which a version-1 reader ignores
# (the seed's ``migrateTaskJSON`` refuses every version but 1). The next change of
# task.json that a version-1 reader cannot read is version 3.
RETIRED: dict[tuple[str, int], int] = {("task", 2): 1}


def migration(kind: str, from_version: int) -> Callable[[Callable[[Record], Record]], Any]:
    def register(func: Callable[[Record], Record]) -> Callable[[Record], Record]:
        _MIGRATIONS[(kind, from_version)] = func
        return func

    return register


def upgrade(kind: str, data: Record, path: Path | str, *, default: int | None = None) -> Record:
    """Bring ``data`` of ``kind`` to the current version, or raise naming ``path``."""
    current, label = CURRENT[kind]
    version = data.get("version", default)
    if version is None:
        raise CorruptFile(f"{label} in {path} has no version field")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UnsupportedVersion(f"unsupported {label} version {version!r} in {path}")
    if (kind, version) in RETIRED:
        version = RETIRED[(kind, version)]
        data = {**data, "version": version}
    while version < current:
        step = _MIGRATIONS.get((kind, version))
        if step is None:
            raise UnsupportedVersion(f"unsupported {label} version {version} in {path}")
        data = step(data)
        version += 1
        data["version"] = version
    if version > current:
        raise UnsupportedVersion(
            f"unsupported {label} version {version} in {path}",
            hint="this file was written by a newer bar; upgrade bar to read it",
        )
    return data


# --- the migrations ------------------------------------------------------------------


# event names of events.jsonl 1 -> the board's (``bar.model.event_log``)
_EVENT_NAMES = {
    "worktree.created": "worktree.create.after",
    "worktree.removed": "worktree.remove.after",
    "task.closed": "task.completed",
    "task.deleting": "task.delete.before",
    "task.deleted": "task.delete.after",
    "task.failed": "task.create.failed",
}
_WORKTREE_STATUS = {"worktree.create.after": "active", "worktree.remove.after": "removed"}


@migration("event", 1)
def _event_board(rec: Record) -> Record:
    """events.jsonl 2 has the board's shape: epoch ``ts``, ``task`` and ``worktree``
    objects. What a version 1 line held at the top level moves into them."""
    from bar.base.clock import seconds_of

    name = str(rec.get("event", ""))
    event = _EVENT_NAMES.get(name, name)
    task: dict[str, Any] = {}
    worktree: dict[str, Any] = {}
    if isinstance(rec.get("task_id"), str):
        task["id"] = rec["task_id"]
    if isinstance(rec.get("name"), str):
        task["name"] = rec["name"]
    if event == "task.completed":
        task["status"] = "completed"
    if isinstance(rec.get("path"), str):
        worktree["path"] = rec["path"]
    if isinstance(rec.get("branch"), str):
        worktree["branch"] = rec["branch"]
    if event in _WORKTREE_STATUS:
        worktree["status"] = _WORKTREE_STATUS[event]
    try:
        ts: float = seconds_of(str(rec.get("ts", "")))
    except ValueError:
        ts = 0.0
    out: Record = {"version": 1, "event": event, "ts": ts, "task": task, "worktree": worktree}
    if isinstance(rec.get("error"), str):
        out["error"] = rec["error"]
    return out
