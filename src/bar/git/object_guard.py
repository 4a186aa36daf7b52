"""The object store after a step: every object the step wrote or touched must hold what
its name says.

A step commits on its task branch, so the repository's object store is writable in it,
and the kernel cannot tell a new object from an old one rewritten in place. An object
whose content no longer matches its id is worse than a missing one: git does not check
on reading, so ``bar apply`` (or the developer's next checkout) would write the new
content as if it were what was reviewed. So after each step bar hashes every loose object
file changed since the step began, and verifies every pack changed since then; a loose
object that fails is moved aside (git then reports it missing, loudly, instead of using
it) and the step records it. Which files changed, the kernel says (``bar.base.inotify``); only
where it cannot is every object file's ctime read.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from bar import git
from bar.base.inotify import Watch

_HEX = frozenset("0123456789abcdef")


def watch(store: Path) -> Watch:
    """Start watching the object store's directories (before the step)."""
    dirs = [str(store), str(store / "pack")]
    try:
        dirs += [e.path for e in os.scandir(store) if len(e.name) == 2 and set(e.name) <= _HEX]
    except OSError:
        pass
    return Watch(dirs)


def changed(store: Path, seen: Watch, since_ns: int) -> tuple[list[Path], list[Path]]:
    """What ``changed_since`` finds, from what the watch saw where it can say."""
    paths = seen.changes()
    if paths is None:
        return changed_since(store, since_ns)
    loose: list[Path] = []
    packs: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.parent == store and len(path.name) == 2 and set(path.name) <= _HEX:
            loose += [Path(e.path) for e in _entries(raw)]  # a directory made in the step
        elif path.parent.name == "pack" and path.suffix in (".pack", ".idx"):
            packs.add(path.with_suffix(".idx"))
        elif path.parent.parent == store:
            loose.append(path)
    return loose, sorted(packs)


def changed_since(store: Path, since_ns: int) -> tuple[list[Path], list[Path]]:
    """Loose object files and pack indexes under ``store`` changed at or after
    ``since_ns`` (ctime, which no program can set back)."""
    loose: list[Path] = []
    packs: list[Path] = []
    try:
        folders = list(os.scandir(store))
    except OSError:
        return loose, packs
    for folder in folders:
        if folder.name == "pack":
            for entry in _entries(folder.path):
                if entry.name.endswith((".pack", ".idx")) and _ctime(entry) >= since_ns:
                    packs.append(Path(entry.path).with_suffix(".idx"))
        elif len(folder.name) == 2 and set(folder.name) <= _HEX:
            loose += [Path(e.path) for e in _entries(folder.path) if _ctime(e) >= since_ns]
    return loose, sorted(set(packs))


# what git reads as the truth about packed objects without checking it against them: a
# multi-pack index (which pack and offset holds an object), reachability bitmaps and
# reverse indexes. A step's commit never writes them; gc and repack do, and make them again.
_PACK_CACHES = (".bitmap", ".rev")


def planted_caches(store: Path, since_ns: int) -> list[Path]:
    """Files of ``_PACK_CACHES`` and multi-pack indexes in ``store/pack`` changed at or
    after ``since_ns``."""
    found = []
    for entry in _entries(str(store / "pack")):
        cache = entry.name.startswith("multi-pack-index") or entry.name.endswith(_PACK_CACHES)
        if cache and _ctime(entry) >= since_ns:
            found.append(Path(entry.path))
    return found


def bad_objects(repo: Path, loose: list[Path], packs: list[Path]) -> list[str]:
    """What fails: loose objects whose content does not hash to their name, packs that
    ``git verify-pack`` rejects."""
    bad = []
    for path in loose:
        if not os.path.lexists(path):
            continue  # a temporary file git has moved on from
        name = path.parent.name + path.name
        if len(name) not in (40, 64) or not set(name) <= _HEX:
            continue  # git's own temporary file, or not an object at all
        if not _matches(path, name):
            bad.append(str(path))
    for idx in packs:
        res = git.git(repo, "verify-pack", str(idx), check=False)
        # a pack git's gc removed meanwhile (its .pack and .idx go one after the other)
        # is missing, not false
        if res.returncode != 0 and idx.exists() and idx.with_suffix(".pack").exists():
            bad.append(str(idx.with_suffix(".pack")))
    return bad


def _matches(path: Path, name: str) -> bool:
    """Whether the loose object at ``path`` holds what ``name`` says; one gone since it
    was found does (git's gc, perhaps still running in the background after the step,
    packs loose objects and then deletes them: a missing object is git's loud error, never
    content taken for another's)."""
    import hashlib

    try:
        if path.is_symlink():
            return False
        data = path.read_bytes()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        body = zlib.decompress(data)
    except zlib.error:
        return False
    algo = hashlib.sha1 if len(name) == 40 else hashlib.sha256
    return algo(body).hexdigest() == name


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _ctime(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_ctime_ns
    except OSError:
        return 0
