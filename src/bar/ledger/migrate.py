"""One registry through which every versioned file is read.

Each record kind has a current version. A reader hands the raw JSON object to
``upgrade(kind, data, path)``, which applies the registered one-step migrations in order
and returns data at the current version. A version that is newer than this bar knows, or
not an integer at all, is a clear ``UnsupportedVersion`` naming the file, never a guess.
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
    "event": (1, "events.jsonl line"),
    "marker": (1, "running marker"),
    "policy": (1, "policy"),
    "rollback-journal": (1, "rollback journal"),
    "cast": (2, "asciinema cast"),
    "apply-journal": (1, "apply journal"),
    "create-journal": (1, "task creation journal"),
    "sync-journal": (1, "sync journal"),
    "delete-journal": (1, "task deletion journal"),
}

# (kind, from_version) -> function producing the record at from_version + 1
_MIGRATIONS: dict[tuple[str, int], Callable[[Record], Record]] = {}


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
