"""Knowing cheaply what changed in a worktree since its last snapshot.

A full ``git add -A`` pays git's untracked-file scan, the largest part of a snapshot. But
creating, deleting or renaming a file changes its directory's ctime, and ``git
diff-files`` on the side index (a stat of every recorded file) sees every edit of a
recorded file. So after each snapshot ``stamp`` notes the ctime of every directory of its
tree (not the mtime, which a program can set back with utime to hide a file it made) in
``<index>.stamps``; the next snapshot rescans only the directories whose ctime moved,
plus the files diff-files names (``changed_since``). A directory touched within the racy
window of the snapshot (file-system clocks are coarse) is always rescanned; a moved root
directory or an edited .gitignore means a full scan.

The directories of a new tree come from the previous stamps and ``git diff-tree`` between
the two trees (cheap for a small change) rather than a walk of the whole tree.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bar import git
from bar.errors import BarError
from bar.proc import clean_env
from bar.store.files import write_bytes_atomic

_env = git.index_env


def keep_private(index: Path) -> None:
    """git rewrites an index (adding, refreshing stat data, merging) with the umask's
    mode; the side index names every file of the task, so it stays 0600."""
    try:
        os.chmod(index, 0o600)
    except FileNotFoundError:
        pass


# A directory changed this close to a snapshot may have changed after the snapshot
# looked at it without its ctime showing it: it is rescanned next time. File systems
# that keep times to the second (or two, FAT) need the wide window; those that keep
# finer times are only as coarse as the kernel's clock tick, a few milliseconds.
RACY_NS = 2_000_000_000
FINE_RACY_NS = 50_000_000


def _stamps_path(index: Path) -> Path:
    return index.with_name(index.name + ".stamps")


def stamped_attributes(index: Path) -> bool | None:
    """Whether the tree last stamped holds a ``.gitattributes`` (None: not known)."""
    try:
        value = json.loads(_stamps_path(index).read_bytes()).get("attributes")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def stamp(worktree: Path, index: Path, tree: str, commit: str, started_ns: int,
          scope: Sequence[str] | None = (), shape: Shape | None = None,
          known: dict[str, int] | None = None, converts: bool | None = None,
          ) -> None:  # fmt: skip
    """Note the ctime of every directory of ``tree`` (and of the untracked ones around
    it) as of ``started_ns``. ``known``: ctimes the scan before found unchanged, which
    need no second stat. ``converts``: whether git converts files here (None: not known).
    Where it does, the wide racy window holds whatever the file system: git's own check
    of a file written in the second its index was (a racily clean entry) compares
    converted contents, so a change of line endings alone would go unseen."""
    path = _stamps_path(index)
    dirs: list[str] | None = None
    nested: list[str] = []
    extra: list[str] = []
    attributes: bool | None = None
    try:
        old = json.loads(path.read_bytes())
        extra = [str(d) for d in old.get("extra") or []]
        if old.get("tree") == tree and isinstance(old.get("dirs"), list):
            dirs = [str(d) for d in old["dirs"]][: len(old["dirs"]) - len(extra)]
            nested = [str(n) for n in old.get("nested") or []]
            was = old.get("attributes")
            attributes = was if isinstance(was, bool) else None
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    if dirs is None:
        shape = shape or shape_of(worktree, index, tree)
        dirs, nested, attributes = shape.dirs, shape.nested, shape.has_attributes
    extra = _untracked_dirs(worktree, set(dirs), scope, extra)
    dirs = dirs + extra
    mtimes: list[int] = []
    prefix = str(worktree) + os.sep  # plain strings: pathlib costs more than the lstat
    known = known or {}
    for rel in dirs:
        mtime = known.get(rel)
        if mtime is None:
            try:
                mtime = os.lstat(prefix + rel).st_ctime_ns
            except OSError:
                mtime = -1
        mtimes.append(mtime)
    fine = converts is False and any(m % 1_000_000_000 for m in mtimes if m > 0)
    since = started_ns - (min(FINE_RACY_NS, RACY_NS) if fine else RACY_NS)
    mtimes = [-1 if m >= since else m for m in mtimes]
    record = {"version": 1, "tree": tree, "commit": commit, "index": _identity(index), "at": started_ns,
              "dirs": dirs, "mtimes": mtimes, "nested": nested, "extra": extra,
              "attributes": attributes}  # fmt: skip
    try:
        write_bytes_atomic(path, json.dumps(record).encode())
    except BarError:
        path.unlink(missing_ok=True)


_MAX_EXTRA = 2000  # directories outside the tree that are stamped at most


def _untracked_dirs(worktree: Path, tree_dirs: set[str], scope: Sequence[str] | None,
                    old: list[str]) -> list[str]:  # fmt: skip
    """Directories on disk that the tree does not hold (empty ones, ones holding only
    ignored files, new ones under them): their mtimes are stamped too, or a file created
    in one later, under a parent whose mtime did not move, would go unseen. Kept: the
    ones stamped before that still exist; added: those in or under the rescanned
    ``scope`` (None, a full scan: under every directory of the tree)."""
    prefix = str(worktree) + os.sep
    found = [d for d in old if d not in tree_dirs and os.path.isdir(prefix + d)
             and not os.path.islink(prefix + d)]  # fmt: skip
    seen = set(found)
    stack: list[str] = []
    for rel in sorted(tree_dirs) if scope is None else scope:
        if rel not in tree_dirs:
            stack.append(rel)  # a new directory, or a file: checked below
            continue
        for entry in _subdirs(prefix + rel if rel else str(worktree)):
            child = f"{rel}/{entry.name}" if rel else entry.name
            if child not in tree_dirs:
                stack.append(child)
    while stack and len(found) < _MAX_EXTRA:
        rel = stack.pop()
        full = prefix + rel
        if rel in seen or rel in tree_dirs or not os.path.isdir(full) or os.path.islink(full):
            continue
        if os.path.lexists(full + "/.git"):
            continue  # a nested repository: git records it as one entry
        seen.add(rel)
        found.append(rel)
        stack += [f"{rel}/{e.name}" for e in _subdirs(full)]
    return found


def _subdirs(path: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if e.name != ".git" and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


class Shape:
    """What the stamps need of a tree: its directories ("" for the root), its nested
    repositories, whether it holds a ``.gitattributes``."""

    __slots__ = ("dirs", "has_attributes", "nested")

    def __init__(self, dirs: list[str], nested: list[str], has_attributes: bool) -> None:
        self.dirs = dirs
        self.nested = nested
        self.has_attributes = has_attributes


def shape_of(worktree: Path, index: Path, tree: str) -> Shape:
    """The shape of ``tree``: from the last stamps and ``git diff-tree`` from the tree they
    describe (walking only the subtrees that differ), else from a walk of the whole tree."""
    try:
        old = json.loads(_stamps_path(index).read_bytes())
        old_tree, dirs, extra = old["tree"], old["dirs"], old.get("extra") or []
        nested, attributes = list(old.get("nested") or []), old.get("attributes")
        valid = (isinstance(old_tree, str) and isinstance(dirs, list)
                 and isinstance(attributes, bool) and len(extra) <= len(dirs))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        valid = False
    if not valid:
        return list_tree(worktree, tree)
    tree_dirs = [str(d) for d in dirs[: len(dirs) - len(extra)]]
    if old_tree == tree:
        return Shape(tree_dirs, [str(n) for n in nested], attributes)
    res = git.git(worktree, "diff-tree", "-r", "-t", "-z", "--no-renames", old_tree, tree,
                  check=False)  # fmt: skip
    if res.returncode != 0:
        return list_tree(worktree, tree)
    gone: set[str] = set()
    added: list[str] = []
    fields = res.stdout.split(b"\0")
    for head, raw_path in zip(fields[::2], fields[1::2], strict=False):
        old_mode, new_mode = head[1:7], head[8:14]
        path = raw_path.decode("utf-8", "surrogateescape")
        if path == ".gitattributes" or path.endswith("/.gitattributes"):
            if old_mode != b"000000":
                return list_tree(worktree, tree)  # one removed or changed: count them again
            attributes = True
        if old_mode == b"040000" and new_mode != b"040000":
            gone.add(path)
        elif new_mode == b"040000" and old_mode != b"040000":
            added.append(path)
        if old_mode == b"160000" and new_mode != b"160000" and path in nested:
            nested.remove(path)
        elif new_mode == b"160000" and old_mode != b"160000":
            nested.append(path)
    kept = [d for d in tree_dirs if d not in gone] if gone else tree_dirs
    return Shape(kept + added, [str(n) for n in nested], attributes)


class Listing(Shape):
    """One walk of a tree (``git ls-tree -r -t -z``): its directories (with "" for the
    root), its nested repositories (gitlinks: git records which commit they are at, never
    their files), whether it holds a ``.gitattributes``, and (parsed only when asked, in
    a repository where git converts) its files' modes. The walk is searched with regular
    expressions, not a Python loop: a large tree has tens of thousands of entries."""

    __slots__ = ("_modes", "_raw")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw = b"\0" + raw  # every entry now starts after a NUL
        self._modes: dict[str, str] | None = None
        super().__init__(["", *_names(_TREES.findall(raw))], _names(_GITLINKS.findall(raw)),
                         _has_attributes(raw))  # fmt: skip

    @property
    def modes(self) -> dict[str, str]:
        if self._modes is None:
            self._modes = {
                name.decode("utf-8", "surrogateescape"): mode.decode()
                for mode, name in _FILES.findall(self._raw)
            }
        return self._modes


# entries of `ls-tree -z`: "<mode> SP <type> SP <object> TAB <path> NUL"; a pattern that
# starts with a literal NUL is searched for fast
_TREES = re.compile(rb"\x00040000 tree [0-9a-f]+\t([^\x00]*)")
_GITLINKS = re.compile(rb"\x00160000 commit [0-9a-f]+\t([^\x00]*)")
_FILES = re.compile(rb"\x00(100644|100755|120000) blob [0-9a-f]+\t([^\x00]*)")


def _has_attributes(raw: bytes) -> bool:
    """Whether a file named ``.gitattributes`` is among the entries."""
    at = raw.find(b".gitattributes\0")
    while at != -1:
        if raw[at - 1 : at] in (b"\t", b"/"):
            return True
        at = raw.find(b".gitattributes\0", at + 1)
    return False


def _names(raw: list[bytes]) -> list[str]:
    return [n.decode("utf-8", "surrogateescape") for n in raw]


def list_tree(worktree: Path, tree: str) -> Listing:
    # (not --format: git 2.39 quotes its %(path) even with -z)
    return Listing(git.git(worktree, "ls-tree", "-r", "-t", "-z", tree).stdout)


def nested_repositories(index: Path) -> list[str]:
    """The nested repositories (and submodules) of the last snapshot stamped on ``index``:
    their files are not recorded, nor restored by a rollback."""
    try:
        stamps = json.loads(_stamps_path(index).read_bytes())
        return [str(n) for n in stamps.get("nested") or []]
    except (OSError, ValueError, AttributeError, TypeError):
        return []


def stamped_dirs(index: Path) -> list[str] | None:
    """Every directory the last stamps cover (the tree's and the untracked ones)."""
    try:
        dirs = json.loads(_stamps_path(index).read_bytes()).get("dirs")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(d) for d in dirs] if isinstance(dirs, list) else None


def restamp(worktree: Path, index: Path, tree: str, commit: str, started_ns: int) -> None:
    """Note that the side index and the worktree hold ``tree`` (of ``commit``) as of
    ``started_ns`` (after a restore wrote them both)."""
    stamp(worktree, index, tree, commit, started_ns)


def _identity(index: Path) -> list[int]:
    try:
        st = os.stat(index)
    except OSError:
        return []
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def changed_since(worktree: Path, index: Path, recorded: str) -> list[str] | None:
    """The paths to rescan since the side index was stamped at ``recorded`` (empty: none
    changed), or None when only a full scan will do."""
    found = scan(worktree, index, recorded)
    return found[0] if found is not None else None


def scan(
    worktree: Path, index: Path, recorded: str, changed: set[str] | None = None
) -> tuple[list[str], dict[str, int]] | None:
    """``changed_since``, with the ctimes of the directories found unchanged.
    ``changed``: every path that changed since the stamps were written, as the kernel
    reported them (``bar.watch.TreeWatch``, watching since then): then neither a file nor
    a directory is statted."""
    try:
        stamps = json.loads(_stamps_path(index).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(stamps, dict) or stamps.get("commit") != recorded:
        return None
    if stamps.get("index") != _identity(index):
        return None  # someone else wrote the side index (a restore): it is not `recorded`
    dirs, mtimes = stamps.get("dirs"), stamps.get("mtimes")
    if not isinstance(dirs, list) or not isinstance(mtimes, list) or len(dirs) != len(mtimes):
        return None
    if changed is not None:
        return _watched(worktree, index, dirs, mtimes, changed)
    # git stats the recorded files while we stat the directories
    diff_files = subprocess.Popen(
        ["git", *git.NO_PROGRAMS, "-C", str(worktree), "diff-files", "--name-only", "-z"],
        env=clean_env(git.pinned_env(worktree, _env(index))),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    since = stamps.get("at")
    try:
        since_ns = since - RACY_NS if isinstance(since, int) else 0
        scope, unchanged = _changed_dirs(worktree, dirs, mtimes, since_ns)
        out, _ = diff_files.communicate()
    except _Rescan:
        return None
    finally:
        if diff_files.returncode is None:
            diff_files.kill()
            diff_files.wait()
    if diff_files.returncode != 0:
        return None
    keep_private(index)  # diff-files may have refreshed the index's stat data
    names = [item.decode("utf-8", "surrogateescape") for item in out.split(b"\0") if item]
    full = _with_files(scope, names)
    return (full, unchanged) if full is not None else None


_MAX_PATHS = 1000  # more changed paths than this are rescanned as their directories


def _watched(worktree: Path, index: Path, dirs: list[object], mtimes: list[object],
             changed: set[str]) -> tuple[list[str], dict[str, int]] | None:  # fmt: skip
    """The scope of a scan from the paths the kernel reported: those that exist, those
    gone that the side index holds (or under which it holds files), and nothing else
    (a pathspec matching nothing would make git fail). The directories that held none of
    them keep their stamped ctimes; a directory stamped within the racy window is
    rescanned, as a scan that stats would."""
    paths = _collapse(changed)
    if paths is None:
        return None
    prefix = str(worktree) + os.sep
    lexists = os.path.lexists
    present = [p for p in paths if lexists(prefix + p)]
    gone = [p for p in paths if not lexists(prefix + p)]
    if gone:
        held = _held(worktree, index, gone)
        if held is None:
            return None
        present += held
    touched = {p.rpartition("/")[0] for p in changed}  # their ctimes moved
    stamped = {str(d) for d in dirs}
    scope: list[str] = []
    unchanged: dict[str, int] = {}
    for rel, mtime in zip(dirs, mtimes, strict=True):
        name = str(rel)
        if mtime == -1:
            scope += _dir_entries(worktree, name, stamped)
        elif name not in touched and isinstance(mtime, int):
            unchanged[name] = mtime
    full = _with_files(scope, sorted(present))
    return (full, unchanged) if full is not None else None


def _collapse(changed: set[str]) -> list[str] | None:
    """Fewer than ``_MAX_PATHS`` paths covering ``changed`` (a path under another is
    left out); None when only the whole worktree would cover them."""
    paths = set(changed)
    while len(paths) > _MAX_PATHS:
        paths = {p.rpartition("/")[0] for p in paths}
        if "" in paths:
            return None
    ordered = sorted(paths)
    kept: list[str] = []
    for p in ordered:  # sorted: a directory comes right before what is under it
        if kept and p.startswith(kept[-1] + "/"):
            continue
        kept.append(p)
    return kept


def _held(worktree: Path, index: Path, gone: list[str]) -> list[str] | None:
    """Of paths no longer on disk, those the side index holds a file at or under."""
    specs = b"".join(f":(top,literal){p}".encode("utf-8", "surrogateescape") + b"\0"
                     for p in gone)  # fmt: skip
    res = git.git(worktree, "ls-files", "-z", "--pathspec-from-file=-", "--pathspec-file-nul",
                  env=_env(index), input=specs, check=False)  # fmt: skip
    if res.returncode != 0:
        return None
    files = [f.decode("utf-8", "surrogateescape") for f in res.stdout.split(b"\0") if f]
    return [p for p in gone if _holds(files, p)]


def _holds(files: list[str], path: str) -> bool:
    """Whether the sorted list ``files`` has ``path`` or something under it."""
    at = bisect.bisect_left(files, path)
    return at < len(files) and (files[at] == path or files[at].startswith(path + "/"))


_MAX_ENTRIES = 2000  # a changed directory holding more is rescanned whole


class _Rescan(Exception):
    """A ``.gitignore`` changed: what is ignored may have changed anywhere."""


def _dir_entries(worktree: Path, rel: str, stamped: set[str], since: int | None = None,
                 ) -> list[str]:  # fmt: skip
    """What to rescan of a directory whose ctime moved: its own entries, one by one, but
    not its subdirectories the stamps know (each is judged by its own ctime). Naming the
    directory would make git walk everything under it; a glob pathspec would too, and
    would skip the nested repositories in it. A directory that is gone (or is no longer
    one), or that holds very many entries, is named as a whole. ``since``: when the
    stamps were taken; a ``.gitignore`` changed after raises ``_Rescan``."""
    path = f"{worktree}/{rel}" if rel else str(worktree)
    if rel and (os.path.islink(path) or not os.path.isdir(path)):
        return [rel]
    found: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name == ".git":
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                if child in stamped and entry.is_dir(follow_symlinks=False):
                    continue
                if (since is not None and entry.name == ".gitignore"
                        and entry.stat(follow_symlinks=False).st_ctime_ns >= since):  # fmt: skip
                    raise _Rescan
                found.append(child)
                if len(found) > _MAX_ENTRIES and rel:
                    return [rel]
    except OSError:
        return [rel] if rel else []
    return found


def _with_files(scope: list[str], names: list[str]) -> list[str] | None:
    for name in names:
        if name == ".gitignore" or name.endswith("/.gitignore"):
            return None  # what is ignored may have changed anywhere
        scope.append(name)
    return scope


def _changed_dirs(worktree: Path, dirs: list[object], mtimes: list[object], since: int
                  ) -> tuple[list[str], dict[str, int]]:  # fmt: skip
    """What to rescan of the stamped directories whose ctime moved (their entries, see
    ``_dir_entries``), and the ctimes of those that did not."""
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
    stamped = {str(d) for d in dirs}
    scope: list[str] = []
    for rel in moved:
        scope += _dir_entries(worktree, rel, stamped, since)
    return scope, unchanged


def unchanged_since(worktree: Path, index: Path, recorded: str) -> bool:
    """True only when the worktree certainly still equals the snapshot ``recorded``."""
    return changed_since(worktree, index, recorded) == []
