"""Hand edits staged ahead: the task's watcher adds what changed while nobody asks, so
that the next command finds that work done.

Between bar commands the watcher (``bar.changes.fast.watcher_daemon``) knows from the kernel which
paths a hand edit touched, well before the next command asks: a developer saves a
file, then types ``bar run``, whose Python alone takes longer to start than git takes
to add the file. So once the worktree has been quiet for a moment (``QUIET_MS``), for at
most ``MAX_PATHS`` changed paths that are files (``MAX_BYTES`` in all), while no bar
command holds the task's lock, the watcher copies the side index to a file of its own in
the task's directory (``index.staged.<pid>.<n>``), adds those paths to the copy and
writes its tree, as the command would (``side_index.write_whole``: bar's pinned git
directories, no hooks, the environment of the ``bar run`` that handed the watch over),
and writes the patch the step would (``patches.write_patch``); that part is the record's
(``bar.history.ahead.stage``), handed to the watcher by its entry. The next look for hand
edits is told of it; the command takes it in place of its own ``git add``, ``git
write-tree`` and ``git diff`` (``adopt``, ``take_patch``) only if:

- nothing changed in the worktree after the staging began: the watcher drains the
  kernel's queue before it answers, and an event throws the staging away;
- the command's scope, computed by itself from the same paths (``rescan.scan``), is
  the staged one, and its snapshot leaves nothing out (no exclusions);
- the side index is still the file that was copied (its identity: mtime, size, inode)
  and the copy is still the file the watcher wrote;
- the command's environment, as git sees it (``bar.git.git_env``), is the one the watcher ran
  git with: a ``HOME`` or ``XDG_CONFIG_HOME`` of its own may name other ignore files.

It then renames the copy over the side index, under the task's lock, and stamps with
the moment the staging began (``stamps``: the racy window runs from when git looked).
Otherwise the copy is left for the watcher to remove and the command adds as it always
did. A command killed after the rename leaves a side index ahead of its stamps, which
their index identity makes the next command rescan whole, as a command killed after
its own ``git add`` does. The watcher's git keeps every shared part of a split index it
finds (``git.index_env``): a copy thrown away must not take a part the side index
still uses with it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from bar.git import DiffStat
from bar.git.index_files import identity

QUIET_MS = 2  # how long the worktree must be still before the watcher stages
MAX_QUIET_MS = 2_000  # after stagings thrown away by new changes, it waits up to this
MAX_PATHS = 64  # more changed paths than this: the command adds them itself
MAX_BYTES = 16 << 20  # files larger than this in all: the command adds them itself
PREFIX = "index.staged."
PATCH = ".patch"  # (beside the copy: ``index.staged.<pid>.<n>.patch``)


def adopt(index: Path, staged: dict[str, Any], scope: list[str] | None) -> tuple[str, int] | None:
    """Take the staged copy ``staged`` (a watcher's answer) as the side index ``index``
    if it holds exactly what adding ``scope`` would (see the module's notes); its tree
    and the moment the staging began, or None. The caller holds the task's lock."""
    name = staged.get("file")
    tree, at = staged.get("tree"), staged.get("at")
    if (
        not isinstance(name, str)
        or not name.startswith(PREFIX)
        or "/" in name
        or not isinstance(tree, str)
        or not isinstance(at, int)
    ):
        return None
    if scope is None or staged.get("scope") != scope:
        return None
    copy = index.with_name(name)
    if identity(index) != staged.get("index") or identity(copy) != staged.get("copy"):
        return None
    try:
        os.replace(copy, index)
    except OSError:
        return None  # (the watcher threw it away meanwhile)
    return tree, at


def take_patch(
    index: Path,
    ready: dict[str, Any],
    before: str,
    tree: str,
    path: Path,
) -> DiffStat | None:
    """Move the patch a staging wrote (``ready``, beside the side index ``index``) to
    ``path`` if it goes from ``before`` to ``tree`` and is still the file the watcher
    wrote; its stat, or None (the caller then writes the patch itself)."""
    name, stat = ready.get("file"), ready.get("stat")
    if (
        not isinstance(name, str)
        or not name.startswith(PREFIX)
        or "/" in name
        or ready.get("base") != before
        or ready.get("tree") != tree
        or not isinstance(stat, dict)
    ):
        return None
    source = index.with_name(name)
    try:
        found = DiffStat(
            int(stat["files"]),
            int(stat["additions"]),
            int(stat["deletions"]),
            tuple(str(p) for p in stat["file_list"]),
        )
        if identity(source) != ready.get("ident"):
            return None
        os.replace(source, path)
    except (OSError, KeyError, TypeError, ValueError):
        return None
    return found


def discard(copy: Path) -> None:
    """Remove a staged copy, the patch beside it, its suspects (``bar.git.racy``), the
    files its look left out (``side_index.with_left_out``) and git's lock (if git was
    killed)."""
    for leftover in (
        copy,
        copy.with_name(copy.name + ".lock"),
        copy.with_name(copy.name + PATCH),
        copy.with_name(copy.name + ".racy"),
        copy.with_name(copy.name + ".left-out"),
        copy.with_name(copy.name + ".rules"),
    ):
        with contextlib.suppress(OSError):
            os.unlink(leftover)


def leftovers(folder: Path, keep: str = "") -> None:
    """Remove the staged copies in a task's directory ``folder`` whose name does not
    begin with ``keep``: a watcher's, killed before it could."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(PREFIX)]
    except OSError:
        return
    for n in names:
        if not keep or not n.startswith(keep):
            discard(folder / n)


def busy(folder: Path) -> bool:
    """Whether a bar command holds the lock of the task whose directory is ``folder``
    (``store.lock``: its holder writes its pid there, and empties it when done). Read,
    never locked: a command taking the lock must not find it taken. A holder killed
    leaves its pid: it counts as busy while that process lives."""
    from bar.store.layout import TaskPaths

    try:
        with open(TaskPaths(folder).lock, "rb") as f:
            said = f.read(4096)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    if not said.strip():
        return False
    import json

    try:
        pid = json.loads(said).get("pid")
    except (ValueError, AttributeError):
        return True
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
