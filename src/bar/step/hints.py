"""Why a step's command failed, when the reason lies outside the command: the sandbox
refused it access, or the file named as the command cannot be executed at all.

Looked at only after a command failed, so it costs a plain step nothing. The two are
told apart because their remedies differ: ``--no-sandbox`` does not make a file without
its execute bit run, and ``chmod +x`` does not open a path the sandbox keeps closed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_REFUSED = (
    b"Permission denied",
    b"Read-only file system",
    b"Operation not permitted",
    b"EACCES",
    b"EPERM",
    b"EROFS",
)


def refused_access(output: Path | None) -> bool:
    """Whether the end of a failed step's output (the file ``output``) shows a refused
    access."""
    if output is None:
        return False
    try:
        with open(output, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
            tail = f.read()
    except OSError:
        return False
    return any(word in tail for word in _REFUSED)


def not_executable(command: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    """Why ``command`` (a step's ``argv[0]``, run in ``cwd`` with ``env``'s PATH) cannot
    be executed, in a sentence; None when it can be, or is not there at all."""
    if "/" in command:
        candidates = [cwd / command]
    else:  # as exec finds it: the first file of that name along PATH
        candidates = [Path(d or ".", command) for d in env.get("PATH", "").split(os.pathsep)]
        candidates = [c if c.is_absolute() else cwd / c for c in candidates]
    for path in candidates:
        if path.is_dir():
            if "/" in command:
                return f"{command} is a directory, not a program"
            continue
        if path.exists():
            if os.access(path, os.X_OK):
                return None
            return f"{command} is not executable (chmod +x, or run it with its interpreter)"
    return None
