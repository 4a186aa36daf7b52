"""A side index's files: kept private, and known by their identity.

An index names every file of a worktree; git rewrites it (and a split index's shared
part) with the umask's mode, so bar sets it back to 0600 after each of its writes. A
file's identity (its modification time, size and inode) says whether it is still the
one something was noted of: the stamps, a staging, the watcher's notes are each valid
only for the index they were made with.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bar import git


def keep_private(index: Path) -> None:
    """git rewrites an index (adding, refreshing stat data, merging) with the umask's
    mode; the side index names every file of the task, so it stays 0600, and so does
    its shared part, which git writes anew from time to time (``side_index.seed_index``)."""
    try:
        os.chmod(index, 0o600)
    except FileNotFoundError:
        pass
    own = git.own_git_dir(index)
    try:
        entries = list(os.scandir(own)) if own is not None else []
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.startswith("sharedindex.") and entry.stat().st_mode & 0o077:
            with contextlib.suppress(OSError):
                os.chmod(entry.path, 0o600)


def identity(path: Path) -> list[int]:
    """``path``'s modification time, size and inode (none: no such file)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    return [st.st_mtime_ns, st.st_size, st.st_ino]
