"""Nothing destroyed that was not recorded (docs/internals/record.md): the check the oracle
and the crash trials share.

Around a bar command that runs none of the developer's code (the recording of hand
edits, a rollback, an undo, a recovery), ``every_byte`` reads the worktree whole: ignored
files and nested repositories included. ``lost_bytes`` then names each file whose bytes
went (gone, or overwritten) that neither a recorded state nor the task's trash holds.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

NESTED_GIT = "inside a nested repository's .git"


AIDE_COPIES = (".aide/.gitignore", ".aide/flow-status.json")


def every_byte(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (but the worktree's own ``.git`` file), ignored ones and
    nested repositories' included, each as ``-:``/``x:`` and its bytes, or ``-> `` and
    its link's target."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            if rel_dir == "." and name == ".git":
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel in AIDE_COPIES or rel.startswith(".aide/decisions/"):
                continue  # bar's copies for aide's clients, made again from its record
            try:
                if os.path.islink(full):
                    found[rel] = b"-> " + os.fsencode(os.readlink(full))
                else:
                    with open(full, "rb") as f:
                        found[rel] = (b"x:" if os.access(full, os.X_OK) else b"-:") + f.read()
            except OSError:
                continue
    return found


def blob_id(data: bytes) -> str:
    """What git names these bytes as a blob (SHA-1 repositories)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def recorded_blobs(repo: Path, snapshots: Iterable[object]) -> set[str]:
    """The blobs of the snapshot commits ``snapshots`` (None and repeats skipped), and of
    the raw trees beside them (``bar.git.exact``)."""
    blobs: set[str] = set()
    for commit in {c for c in snapshots if isinstance(c, str)}:
        for rev in (commit, f"{commit}^2"):
            out = subprocess.run(
                ["git", "ls-tree", "-r", "-z", rev], cwd=repo, capture_output=True
            ).stdout
            for item in out.split(b"\0"):
                if item:
                    blobs.add(item.split(b"\t", 1)[0].split()[2].decode())
    return blobs


def lost_bytes(
    before: dict[str, bytes],
    after: dict[str, bytes],
    recorded: set[str],
    trash_dir: Path | None,
) -> list[str]:
    """The paths whose bytes a bar command made disappear from the worktree (``before``
    and ``after``: ``every_byte`` around it) that are neither in a recorded state (a blob
    of ``recorded``: the bytes themselves, or with CRLF as LF, which git's checkout
    writes back where it converts) nor in the task's trash (``trash_dir``: any file there
    with the same bytes, wherever it lies). Each as ``path (gone|overwritten)``; a file
    inside a nested repository's ``.git`` says so (``NESTED_GIT``)."""
    kept: set[bytes] = set()
    if trash_dir is not None and trash_dir.is_dir():
        kept = {v if v.startswith(b"-> ") else v[2:] for v in every_byte(trash_dir).values()}
    lost = []
    for path, was in sorted(before.items()):
        if after.get(path) == was:
            continue
        data = was[3:] if was.startswith(b"-> ") else was[2:]
        if data in kept or was in kept:
            continue
        if blob_id(data) in recorded or blob_id(data.replace(b"\r\n", b"\n")) in recorded:
            continue
        how = "gone" if path not in after else "overwritten"
        where = f", {NESTED_GIT}" if "/.git/" in f"/{path}" else ""
        lost.append(f"{path} ({how}{where})")
    return lost
