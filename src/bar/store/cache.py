"""A parsed copy of a file, kept as JSON and reused while the file is unchanged.

Parsing YAML (config.yaml, the policy) costs more than the rest of a ``bar hook`` call,
so the parsed and validated form is cached, keyed by the source file's (mtime_ns, size,
inode) and a format tag. A missing or damaged cache is only a slower load.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from bar.errors import BarError
from bar.store.files import ensure_dir, write_bytes_atomic

if TYPE_CHECKING:
    from bar.store.files import StrPath


def stat_key(st: os.stat_result) -> list[int]:
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def read(cache: StrPath, key: list[int], tag: str) -> object | None:
    """The cached data if it was made from the file with ``key`` in format ``tag``."""
    try:
        with open(cache, "rb") as fh:
            entry = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or entry.get("tag") != tag:
        return None
    return entry.get("data")


def write(cache: StrPath, key: list[int], tag: str, data: object) -> None:
    try:
        ensure_dir(os.path.dirname(os.fspath(cache)))
        write_bytes_atomic(cache, json.dumps({"key": key, "tag": tag, "data": data}).encode())
    except (BarError, TypeError, ValueError):
        pass  # the cache is an optimisation only
