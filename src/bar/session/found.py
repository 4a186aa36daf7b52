"""Finding an agent's transcripts in its home, which the agent writes: bounded; and the
module that reads them.

A step can fill the home with directories and files; looking for transcripts at every
hook event must not cost what they cost. The walk goes ``depth`` levels down, follows no
link, and stops after ``MAX_ENTRIES`` entries (what it found by then is read).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

MAX_ENTRIES = 20_000


def reader(agent: str) -> ModuleType:
    """The module that reads the transcripts of ``agent`` (one of
    ``bar.model.agent_names.AGENTS``): ``bar.session.<agent>``, each with ``transcripts``
    (where they are in its home), ``Reader`` (one file, read as it grows), ``answer`` (a
    tool result's words) and ``settle`` (events an older bar kept)."""
    return importlib.import_module(f"bar.session.{agent}")


def transcripts(root: Path, depth: int, keep: Callable[[str, str], bool]) -> list[Path]:
    """The files under ``root`` (at most ``depth`` directories down) that ``keep``
    (directory name, file name) takes."""
    found: list[Path] = []
    seen = 0
    for top, dirs, files in os.walk(root):  # (links to directories are not entered)
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            break
        if len(Path(top).relative_to(root).parts) >= depth:
            dirs[:] = []
        name = os.path.basename(top)
        found += [Path(top, f) for f in files if keep(name, f)]
    return found
