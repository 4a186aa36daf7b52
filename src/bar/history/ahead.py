"""Hand edits staged ahead of the command that records them: the record's part of the
watcher's staging (``bar.changes.fast.staging`` says when a command takes it, and why).

The watcher process (``bar.changes.fast.watcher_daemon``) collects the paths a hand edit
touched; once the worktree is quiet it calls ``stage``, handed to it by its entry
(``bar.changes.watching``): this module writes with the record's own writer
(``side_index.write_whole``) and the patch writer the step would use, and the speed layer
never imports the record.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar.base import file_clock
from bar.base.inotify import Seen
from bar.changes import fast
from bar.errors import BarError
from bar.git import exact, patches, racy
from bar.git.index_files import identity, keep_private
from bar.history import side_index


def stage(
    worktree: Path,
    index: Path,
    base: str,
    paths: set[str],
    name: str,
    abandoned: Callable[[], bool] = lambda: False,
) -> dict[str, Any] | None:
    """Add ``paths`` (changed since the side index ``index`` was stamped at ``base``) to
    a copy of it named ``name`` and write its tree; what ``staging.adopt`` needs to take it, or
    None (nothing to add, or not as the command would: a scope it cannot add as such,
    a file it cannot read, which the command reports itself). The copy is removed
    unless returned. ``abandoned``: asked between the stages of the work, whether a
    command took the task meanwhile (it adds by itself then: the rest would be waste)."""
    started_ns = file_clock.floor()
    if racy.suspects(index):
        return None  # (files to hash whatever their stat: the command adds them)
    try:
        found = fast.scan(worktree, index, base, Seen(paths))  # (a watch of it all)
    except BarError:
        return None  # (a named pipe git would wait on: the command says so)
    if found is None or not found[0] or not _small(worktree, found[0]) or abandoned():
        return None
    scope = found[0]
    copy = index.with_name(name)
    left_out = side_index.left_out_file(copy)
    left_out.unlink(missing_ok=True)
    was = identity(index)
    try:
        shutil.copyfile(index, copy)
        racy.keep_time(index, copy)
        keep_private(copy)
        if identity(index) != was:
            raise OSError("the side index changed while it was copied")
        tree, whole, added = side_index.write_whole(
            worktree, copy, scope, left_out=left_out, stamped_as=index, unchanged=found[1]
        )
    except (OSError, BarError):
        fast.discard_staged(copy)
        left_out.unlink(missing_ok=True)
        return None
    if (
        not whole
        or added != scope
        or racy.suspects(copy)
        or os.path.lexists(left_out)
        or abandoned()
    ):
        # (or it left files its next look must hash, ``bar.git.racy``, or left files out,
        # which the command notes and warns of: ``side_index.with_left_out``)
        fast.discard_staged(copy)
        left_out.unlink(missing_ok=True)
        return None
    staged: dict[str, Any] = {
        "file": name,
        "tree": tree,
        "scope": scope,
        "at": started_ns,
        "index": was,
        "copy": identity(copy),
    }
    # the configuration the command reads to record it (``exact.ask``), as of this tree
    staged["config"] = exact.read(worktree)
    # and the patch the command's step would write (``steps.PatchJob``), from the state
    # the side index was stamped at
    patch = copy.with_name(name + fast.STAGED_PATCH)
    try:
        counted = patches.write_patch(worktree, base, tree, patch, points=False)
    except (OSError, BarError):
        with contextlib.suppress(OSError):
            os.unlink(patch)
        return staged
    staged["patch"] = {
        "file": patch.name,
        "base": base,
        "tree": tree,
        "stat": counted.to_record(),
        "ident": identity(patch),
    }
    return staged


def _small(worktree: Path, scope: list[str]) -> bool:
    """Whether adding ``scope`` is quick: no directory (a new tree, of any size), at
    most ``staging.MAX_BYTES`` of files. A staging runs beside the watcher's answers (a
    command asking meanwhile is answered at once, and adds by itself), so this bounds
    only the work a staging may spend that a command may not take."""
    total = 0
    for rel in scope:
        try:
            st = os.lstat(os.path.join(worktree, rel))
        except OSError:
            continue  # (gone: its entries leave the index)
        if stat.S_ISDIR(st.st_mode):
            return False
        total += st.st_size
    return total <= fast.STAGED_MAX_BYTES
