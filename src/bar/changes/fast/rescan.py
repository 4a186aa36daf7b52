"""What a snapshot must look at: the paths that may have changed since the last stamps.

Three ways to know, cheapest first. The step's watch (``bar.base.inotify.TreeWatch``) names
every path that moved, and nothing is statted. Without one, the stamped directories'
ctimes say which directories gained, lost or renamed an entry (each is rescanned as its
own entries, not everything under it), while ``git diff-files`` on the side index stats
every recorded file for edits in place. When neither can be trusted (no stamps, a
``.gitignore`` changed, the root's stamps are of another index), the answer is None: a
full rescan.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base import speed
from bar.changes.fast import prescan, stamps, watcher
from bar.git import fifos, racy
from bar.git.index_files import identity, keep_private

if TYPE_CHECKING:
    from bar.base.inotify import Seen

_env = git.index_env


def changed_since(worktree: Path, index: Path, recorded: str) -> list[str] | None:
    """The paths to rescan since the side index was stamped at ``recorded`` (empty: none
    changed), or None when only a full scan will do. The task's watcher is asked first
    (``bar.changes.fast.watcher``); this only reads, so it tells the watcher nothing back."""
    sight = watcher.look(index, recorded) if watcher.running(index) else None
    found = scan(worktree, index, recorded, sight.seen() if sight is not None else None)
    return found[0] if found is not None else None


def scan(
    worktree: Path,
    index: Path,
    recorded: str,
    changed: Seen | None = None,
    before_dirs: Callable[[], None] | None = None,
) -> tuple[list[str], dict[str, int]] | None:
    """``changed_since``, with the ctimes of the directories found unchanged.
    ``changed``: every path that changed since the stamps were written, as the kernel
    reported them (``bar.base.inotify.TreeWatch``, watching since then): then no directory
    it watched is statted; those it did not (a partial watch) are, as without a watch.
    Every recorded file is statted whatever the kernel said (``git
    diff-files``): a write through a hard link made from outside the worktree, or
    through a memory map, reaches no watch of the worktree's. ``before_dirs``: called
    while git stats the recorded files, before the first directory is statted."""
    if not speed.fast():
        return None
    noted = _stamps_at(index, recorded)
    if noted is None:
        prescan.cancel(worktree, index)  # (the early look: everything is added instead)
        return None
    dirs, mtimes = noted["dirs"], noted["mtimes"]
    # git stats the recorded files while we look at the directories (it may have begun
    # while the command was loading: ``bar.changes.fast.prescan``)
    diff_files = prescan.claim(worktree, index) or prescan.diff_files(worktree, index)
    since = noted.get("at")
    try:
        if changed is not None:
            found = _watched(worktree, dirs, mtimes, changed, since, before_dirs)
            if found is None:
                return None
            scope, unchanged = found
        else:
            if before_dirs is not None:
                before_dirs()
            since_ns = since - stamps.RACY_NS if isinstance(since, int) else 0
            scope, unchanged = _changed_dirs(worktree, dirs, mtimes, since_ns)
        # (git diff-files reads the attributes of a file its stat cannot judge)
        fifos.refuse(worktree, scope, fifos.noted_rules(index))
        out, _ = diff_files.communicate()
    except _Rescan:
        return None
    finally:
        if diff_files.returncode is None:
            diff_files.kill()
            diff_files.wait()
    if diff_files.returncode == -signal.SIGBUS:
        # (it compares the bytes of a file its stat cannot judge through a mapping of
        # it, and a file cut short meanwhile kills it: the worktree's doing, not a fault)
        speed.fallback("a file changed while git diff-files read it")
        return None
    if diff_files.returncode != 0:
        speed.fallback("git diff-files failed on the side index", unexpected=True)
        return None
    keep_private(index)
    names = [item.decode("utf-8", "surrogateescape") for item in out.split(b"\0") if item]
    names += racy.suspects(index)  # (their stat cannot tell: hashed whatever it says)
    names += stamps.born(worktree, noted)  # (a first commit writes only inside them)
    names += stamps.uprooted(worktree, noted)  # (their .git gone: their files now)
    if any(_is_ignore_file(p) for p in scope):
        return None  # what is ignored may have changed anywhere
    full = _with_files(scope, names)
    if full is None:
        return None
    if len(full) > _MAX_PATHS:
        # git matches every index entry against every pathspec: 20,000 files edited
        # in place, named one by one, made `git add` take a minute where `add -A` of
        # the whole tree takes a second. Their directories cover them (a wider scope
        # is re-added, never missed), or, past that, the whole worktree.
        covered = _collapse(set(full))
        if covered is None:
            return None
        full = covered
    return sorted(set(full)), unchanged


def _stamps_at(index: Path, recorded: str) -> dict[str, Any] | None:
    """The stamps, if they can say what changed in the side index since it held
    ``recorded`` (None: they cannot)."""
    noted = stamps.noted(index)
    if noted is None or noted.get("commit") != recorded:
        return None
    if noted.get("index") != identity(index):
        return None  # someone else wrote the side index (a restore): it is not `recorded`
    dirs, mtimes = noted.get("dirs"), noted.get("mtimes")
    if not isinstance(dirs, list) or not isinstance(mtimes, list) or len(dirs) != len(mtimes):
        return None
    if stamps.rules_moved(noted):
        speed.fallback("the repository's own ignore rules changed")
        return None
    if noted.get("partial") is not False:
        # (more untracked directories than are stamped: a file made in one of the
        # others moves no stamped directory; stamps from before this was noted, too)
        speed.fallback(stamps.PARTIAL)
        return None
    return noted


_MAX_PATHS = 1000  # more changed paths than this are rescanned as their directories


def _watched(
    worktree: Path,
    dirs: list[object],
    mtimes: list[object],
    seen: Seen,
    since: object,
    before_dirs: Callable[[], None] | None,
) -> tuple[list[str], dict[str, int]] | None:
    """The scope of a scan from the paths the kernel reported: those that exist (a
    recorded file that is gone is named by diff-files, which stats them all; an
    unrecorded one that is gone leaves nothing to record), and nothing else (a pathspec
    matching nothing would make git fail). The directories that held none of them keep
    their stamped ctimes; a directory stamped within the racy window is rescanned, as a
    scan that stats would. The stamped directories the watch did not cover (a partial
    watch, or one made after it) are judged by their ctimes, as without a watch."""
    changed = seen.paths
    paths = _collapse(changed)
    if paths is None:
        speed.fallback("more paths changed than are rescanned one by one")
        return None
    prefix = str(worktree) + os.sep
    present = [p for p in paths if os.path.lexists(prefix + p)]
    touched = {p.rpartition("/")[0] for p in changed}  # their ctimes moved
    stamped = {str(d) for d in dirs}
    scope: list[str] = []
    unchanged: dict[str, int] = {}
    racy: list[str] = []
    if seen.watched is not None:
        watched = seen.watched
        blind = [(d, m) for d, m in zip(dirs, mtimes, strict=True) if str(d) not in watched]
        if blind:
            if before_dirs is not None:
                before_dirs()
            since_ns = since - stamps.RACY_NS if isinstance(since, int) else 0
            scope, unchanged = _changed_dirs(
                worktree, [d for d, _ in blind], [m for _, m in blind], since_ns, stamped
            )
            covered = set(unchanged)
            covered.update(str(d) for d, _ in blind)
            pairs = [(d, m) for d, m in zip(dirs, mtimes, strict=True) if str(d) not in covered]
            dirs, mtimes = [d for d, _ in pairs], [m for _, m in pairs]
    for rel, mtime in zip(dirs, mtimes, strict=True):
        name = str(rel)
        if mtime == -1:
            racy.append(name)
        elif name not in touched and isinstance(mtime, int):
            unchanged[name] = mtime
    listed = [_dir_entries(worktree, rel, stamped) for rel in racy]
    if sum(map(len, listed)) > _MAX_SPECS:
        listed = [found if not rel else [rel] for rel, found in zip(racy, listed, strict=True)]
    scope += [p for found in listed for p in found]
    scope += sorted(present)
    return scope, unchanged


def _collapse(changed: set[str]) -> list[str] | None:
    """Fewer than ``_MAX_PATHS`` paths covering ``changed`` (a path under another is
    left out); None when only the whole worktree would cover them."""
    paths = set(changed)
    while len(paths) > _MAX_PATHS:  # the deepest give way to their directories first
        depth = max(p.count("/") for p in paths)
        if depth == 0:
            return None
        paths = {p.rpartition("/")[0] if p.count("/") == depth else p for p in paths}
    ordered = sorted(paths)
    kept: list[str] = []
    for p in ordered:  # sorted: a directory comes right before what is under it
        if kept and p.startswith(kept[-1] + "/"):
            continue
        kept.append(p)
    return kept


_MAX_ENTRIES = 2000  # a changed directory holding more is rescanned whole
_MAX_SPECS = 256  # entries of changed directories named one by one, at most


class _Rescan(Exception):
    """A ``.gitignore`` changed: what is ignored may have changed anywhere."""


def _dir_entries(
    worktree: Path,
    rel: str,
    stamped: set[str],
    since: int | None = None,
) -> list[str]:
    """What to rescan of a directory whose ctime moved: its own entries, one by one, but
    not its subdirectories the stamps know (each is judged by its own ctime). Naming a
    directory that holds stamped ones would make git walk everything under it; a glob
    pathspec would too, and would skip the nested repositories in it. One that holds
    none is named as a whole. A directory that is no longer one, or that
    holds very many entries, is named as a whole; one that is gone, not at all (the
    recorded files it held are found missing one by one: by diff-files or the watch). ``since``: when the
    stamps were taken; a ``.gitignore`` changed after raises ``_Rescan``."""
    path = f"{worktree}/{rel}" if rel else str(worktree)
    if rel and not os.path.lexists(path):
        return []  # gone: the files the side index holds there are found missing by name
    if rel and (os.path.islink(path) or not os.path.isdir(path)):
        return [rel]
    found: list[str] = []
    parent = False  # it holds stamped directories, which must not be rescanned with it
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name == ".git":
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                if child in stamped and entry.is_dir(follow_symlinks=False):
                    parent = True
                    continue
                if (
                    since is not None
                    and entry.name == ".gitignore"
                    and entry.stat(follow_symlinks=False).st_ctime_ns >= since
                ):
                    raise _Rescan
                found.append(child)
                if len(found) > _MAX_ENTRIES and rel:
                    return [rel]
    except OSError:
        return [rel] if rel else []
    # a directory holding none is named whole: one pathspec, where its entries one by
    # one would be many (git matches every index entry against every pathspec)
    return found if parent or not rel else [rel]


def _is_ignore_file(path: str) -> bool:
    return path == ".gitignore" or path.endswith("/.gitignore")


def _with_files(scope: list[str], names: list[str]) -> list[str] | None:
    for name in names:
        if _is_ignore_file(name):
            return None  # what is ignored may have changed anywhere
        scope.append(name)
    return scope


def _changed_dirs(
    worktree: Path,
    dirs: list[object],
    mtimes: list[object],
    since: int,
    stamped: set[str] | None = None,
) -> tuple[list[str], dict[str, int]]:
    """What to rescan of the stamped directories whose ctime moved (their entries, see
    ``_dir_entries``), and the ctimes of those that did not. ``stamped``: every stamped
    directory, if ``dirs`` are not all of them."""
    prefix = str(worktree) + os.sep
    lstat = os.lstat
    moved: list[str] = []
    unchanged: dict[str, int] = {}
    for rel, mtime in zip(dirs, mtimes, strict=True):
        try:
            same = mtime != -1 and lstat(prefix + str(rel)).st_ctime_ns == mtime
        except (OSError, TypeError):
            same = False
        if same:
            unchanged[str(rel)] = int(mtime)  # type: ignore[call-overload]
        else:
            moved.append(str(rel))
    if not moved:
        return [], unchanged
    stamped = stamped if stamped is not None else {str(d) for d in dirs}
    listed = [_dir_entries(worktree, rel, stamped, since) for rel in moved]
    if sum(map(len, listed)) > _MAX_SPECS:
        # git matches every index entry against every pathspec: past a few hundred,
        # naming the directories whole (all but the root) costs less
        listed = [found if not rel else [rel] for rel, found in zip(moved, listed, strict=True)]
    return [p for found in listed for p in found], unchanged


def unchanged_since(worktree: Path, index: Path, recorded: str) -> bool:
    """True only when the worktree certainly still equals the snapshot ``recorded``."""
    return changed_since(worktree, index, recorded) == []
