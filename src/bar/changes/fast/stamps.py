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

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bar import git
from bar.errors import BarError
from bar.git import exact
from bar.git.ignored import Asking
from bar.git.index_files import identity
from bar.git.tree_shape import Ahead, Shape, files_in_place, list_tree, subdirs
from bar.store.files import write_bytes_atomic

_env = git.index_env


# A directory changed this close to a snapshot may have changed after the snapshot
# looked at it without its ctime showing it: it is rescanned next time. File systems
# that keep times to the second (or two, FAT) need the wide window; those that keep
# finer times are only as coarse as the kernel's clock tick, a few milliseconds.
RACY_NS = 2_000_000_000
FINE_RACY_NS = 50_000_000


def stamps_path(index: Path) -> Path:
    return index.with_name(index.name + ".stamps")


# The stamps of a large tree are a large JSON document that one step reads several
# times (its watch, the look for hand edits, each snapshot's stamping): parsed once per
# version of the file. Callers must not change what ``noted`` returns.
_NOTED: dict[str, tuple[tuple[int, int, int, int], dict[str, Any]]] = {}


# Stamps held in memory, not yet written: a restore's, until the snapshot recording it
# names its commit (``recommit``), and a checkpoint's, until the step's own snapshot
# writes them (or ``flush``): a large tree's stamps cost milliseconds to write, and would
# be written at every tool call of a session. If they are never written (bar stops
# first), the stamps on disk name another state of the side index than its own, and the
# next look stats everything (``rescan.scan``), as after any crash.
_HELD: dict[str, dict[str, Any]] = {}


def forget(index: Path) -> None:
    """Drop the stamps of ``index`` (held or written): the next look scans everything."""
    path = stamps_path(index)
    _HELD.pop(str(path), None)
    _NOTED.pop(str(path), None)
    path.unlink(missing_ok=True)


def flush(index: Path) -> None:
    """Write the stamps held for ``index``, if any."""
    held = _HELD.get(str(stamps_path(index)))
    if held is not None:
        _write(index, held)


def noted(index: Path) -> dict[str, Any] | None:
    """The last stamps written for ``index`` (None: none, or not readable), or held."""
    path = str(stamps_path(index))
    held = _HELD.get(path)
    if held is not None:
        return held
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            known = _NOTED.get(path)
            if known is not None and known[0] == key:
                return known[1]
            record = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    _NOTED[path] = (key, record)
    return record


def _write(index: Path, record: dict[str, Any], *, hold: bool = False) -> None:
    """Replace the stamps of ``index`` by ``record`` (removed if that fails); ``hold``:
    in memory only, until the next write (see ``_HELD``)."""
    path = stamps_path(index)
    _NOTED.pop(str(path), None)
    if hold:
        _HELD[str(path)] = record
        return
    _HELD.pop(str(path), None)
    try:
        # not synced to disk: stamps that a crash of the machine lost, emptied or left
        # older than the side index are found out by the index's identity they hold
        # (``rescan.scan``), and everything is rescanned
        write_bytes_atomic(path, json.dumps(record).encode(), durable=False)
        st = os.stat(path)
    except (BarError, OSError):
        path.unlink(missing_ok=True)
        return
    _NOTED[str(path)] = ((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns), record)


def tree_of(index: Path, commit: str) -> str | None:
    """The tree of ``commit``, if the stamps of ``index`` were taken of it."""
    record = noted(index)
    tree = record.get("tree") if record is not None and record.get("commit") == commit else None
    return tree if isinstance(tree, str) and git.is_object_id(tree) else None


def stamped_attributes(index: Path) -> bool | None:
    """Whether the tree last stamped holds a ``.gitattributes`` (None: not known)."""
    value = (noted(index) or {}).get("attributes")
    return value if isinstance(value, bool) else None


def stamp(
    worktree: Path,
    index: Path,
    tree: str,
    commit: str,
    started_ns: int,
    scope: Sequence[str] | None = (),
    shape: Shape | None = None,
    known: dict[str, int] | None = None,
    converts: bool | None = None,
    settled: dict[str, int] | None = None,
    hold: bool = False,
    ignore_sources: Sequence[str] | None = None,
    ahead: Ahead | None = None,
) -> None:
    """Note the ctime of every directory of ``tree`` (and of the untracked ones around
    it) as of ``started_ns``, and the identity of the files outside the worktree that
    decide what git ignores in it (``ignore_sources``, ``exact.ignore_sources``; None:
    those the last stamps named). ``known``: ctimes the scan before found unchanged, which
    need no second stat. ``converts``: whether git converts files here (None: not known).
    Where it does, the wide racy window holds whatever the file system: git's own check
    of a file written in the second its index was (a racily clean entry) compares
    converted contents, so a change of line endings alone would go unseen.
    ``settled``: ctimes found to hold however recent (``bar.changes.fast.restored``), on a file
    system with fine times where git does not convert. ``hold``: see ``_HELD``.
    ``ahead``: the directories read while git added (a full look's)."""
    dirs: list[str] | None = None
    nested: list[str] = []
    extra: list[str] = []
    ignored: list[str] = []
    attributes: bool | None = None
    old_unborn: list[str] = []
    before: dict[str, int] = {}  # the ctimes stamped last time (not racy)
    was_tree: list[str] = []  # the directories of the tree stamped last time
    try:
        old = noted(index) or {}
        extra = [str(d) for d in old.get("extra") or []]
        ignored = [str(d) for d in old.get("ignored") or []]
        old_unborn = [str(d) for d in old.get("unborn") or []]
        old_dirs, old_mtimes = old.get("dirs"), old.get("mtimes")
        if isinstance(old_dirs, list) and isinstance(old_mtimes, list):
            before = {
                str(d): m
                for d, m in zip(old_dirs, old_mtimes, strict=False)
                if isinstance(m, int) and m != -1
            }
        if isinstance(old_dirs, list) and old.get("tree") != tree:
            was_tree = [str(d) for d in old_dirs][: len(old_dirs) - len(extra)]
        if old.get("tree") == tree and isinstance(old.get("dirs"), list):
            dirs = [str(d) for d in old["dirs"]][: len(old["dirs"]) - len(extra)]
            nested = [str(n) for n in old.get("nested") or []]
            was = old.get("attributes")
            attributes = was if isinstance(was, bool) else None
    except (AttributeError, TypeError):
        pass
    if dirs is None:
        shape = shape or shape_of(worktree, index, tree)
        dirs, nested, attributes = shape.dirs, shape.nested, shape.has_attributes
    fresh = _looked_at(scope, shape)
    read = ahead.subdirs() if ahead is not None and scope is None else None
    repos: list[str] = []  # nested repositories found outside the tree
    extra, ignored, partial = _untracked_dirs(
        worktree, set(dirs), scope, extra, fresh, ignored, read, was_tree, repos
    )
    unborn = _unborn(worktree, scope, old_unborn, repos, nested)
    dirs = dirs + extra
    mtimes: list[int] = []
    prefix = str(worktree) + os.sep  # plain strings: pathlib costs more than the lstat
    known = {**(known or {}), **(settled or {})}
    for rel in dirs:
        mtime = known.get(rel)
        if mtime is None and fresh is not None and rel not in fresh:
            # nothing looked at it: its last ctime stands (if it moved since, the next
            # scan sees that and rescans it, so an old ctime is never a risk)
            mtime = before.get(rel)
        if mtime is None:
            try:
                mtime = os.lstat(prefix + rel).st_ctime_ns
            except OSError:
                mtime = -1
        mtimes.append(mtime)
    if converts is None and attributes is not None:
        converts = exact.converts(worktree, attributes)
    fine = converts is False and any(m % 1_000_000_000 for m in mtimes if m > 0)
    since = started_ns - (min(FINE_RACY_NS, RACY_NS) if fine else RACY_NS)
    if fine and settled:
        mtimes = [
            -1 if m >= since and settled.get(d) != m else m
            for d, m in zip(dirs, mtimes, strict=True)
        ]
    else:
        mtimes = [-1 if m >= since else m for m in mtimes]
    if ignore_sources is None:
        was = (noted(index) or {}).get("ignore_rules")
        ignore_sources = (
            [str(p[0]) for p in was if isinstance(p, list) and p]
            if isinstance(was, list) and was
            else exact.ignore_sources(worktree, None)
        )
    record = {
        "version": 1,
        "tree": tree,
        "commit": commit,
        "index": identity(index),
        "at": started_ns,
        "dirs": dirs,
        "mtimes": mtimes,
        "nested": nested,
        "unborn": unborn,
        "extra": extra,
        "ignored": ignored,
        "partial": partial,
        "attributes": attributes,
        "ignore_rules": [[p, *_rules_id(p, since)] for p in ignore_sources],
    }
    _write(index, record, hold=hold)


def _looked_at(scope: Sequence[str] | None, shape: Shape | None) -> set[str] | None:
    """The directories a snapshot rescanned or changed, whose ctimes must be read again
    (None: all of them, after a full scan or a walk of the whole tree)."""
    if scope is None or (shape is not None and shape.touched is None):
        return None
    fresh = set(scope) | {p.rpartition("/")[0] for p in scope}
    if shape is not None and shape.touched is not None:
        fresh |= shape.touched
    return fresh


_MAX_EXTRA = 2000  # directories outside the tree that are stamped at most
PARTIAL = (
    f"more than {_MAX_EXTRA:,} directories on disk hold no recorded file (empty ones, ones "
    "of ignored files only): each command looks at the whole worktree"
)


def _untracked_dirs(
    worktree: Path,
    tree_dirs: set[str],
    scope: Sequence[str] | None,
    old: list[str],
    fresh: set[str] | None = None,
    old_ignored: Sequence[str] = (),
    read: dict[str, list[str]] | None = None,
    was_tree: Sequence[str] = (),
    repos: list[str] | None = None,
) -> tuple[list[str], list[str], bool]:
    """Directories on disk that the tree does not hold (empty ones, ones holding only
    ignored files, new ones under them): their mtimes are stamped too, or a file created
    in one later, under a parent whose mtime did not move, would go unseen. Kept (unless
    ``scope`` is None): the ones stamped before that still exist; added: those in or under the rescanned
    ``scope`` (None, a full scan: under every directory of the tree). One that went away
    moved its parent's ctime; only those under a directory in ``fresh`` (what the
    snapshot looked at; None: every one) are checked.

    A directory git ignores is not stamped, nor anything under it: whatever is made in
    it is ignored too (git never takes back a file whose directory it ignores), so it
    would only cost a watch and a stat per step (build output, caches, dependencies:
    thousands of directories). Those found are the second list, kept like the first
    until a full scan (a ``.gitignore`` changed) asks git again. ``read``: the
    subdirectories of directories already read (``tree_shape.Ahead``).

    ``was_tree``: the directories of the tree stamped before. One that left the tree
    (its last recorded file went) but is still on disk is stamped as untracked: no
    rescanned path need lie in it (only its removed files, or none: a subdirectory that
    is named whole), and a file made in it later moves its ctime alone, not its
    parent's; unstamped, it would never be looked at again.

    The third item: more than ``_MAX_EXTRA`` were found, and those past it are not
    stamped; a file made in one would move no stamped directory, so the stamps then
    cannot say what changed (``partial``: every look is whole)."""
    prefix = str(worktree) + os.sep

    def still(d: str) -> bool:
        if fresh is not None and d not in fresh and d.rpartition("/")[0] not in fresh:
            return True
        return os.path.isdir(prefix + d) and not os.path.islink(prefix + d)

    # after a full scan every one is found again (what git ignores may have changed)
    found = [] if scope is None else [d for d in old if d not in tree_dirs and still(d)]
    repositories = _Repositories(prefix)
    if found:  # (one that became a nested repository, or lies in one, is no longer one)
        inside = set(repositories.inside(found))
        if repos is not None:
            repos += [d for d in found if d in inside and os.path.lexists(prefix + d + "/.git")]
        found = [d for d in found if d not in inside]
    ignored = [] if scope is None else [d for d in old_ignored if d not in tree_dirs and still(d)]
    seen = set(found) | set(ignored)
    stack: list[str] = [d for d in was_tree if d not in tree_dirs] if scope is not None else []
    for rel in sorted(tree_dirs) if scope is None else scope:
        if rel not in tree_dirs:
            stack.append(rel)  # a new directory, or a file: checked below
            continue
        names = read.get(rel) if read is not None else None
        if names is None:
            names = subdirs(prefix + rel if rel else str(worktree))
        for name in names:
            child = f"{rel}/{name}" if rel else name
            if child not in tree_dirs:
                stack.append(child)
    with Asking(worktree) as asking:
        while stack and len(found) < _MAX_EXTRA:
            level: list[str] = []  # one level at a time, each a question to one git
            for rel in stack:
                full = prefix + rel
                if rel in seen or rel in tree_dirs or not os.path.isdir(full):
                    continue
                if os.path.islink(full):
                    continue
                if repositories.inside([rel], own=False):
                    continue  # (a directory of a nested repository, its .git's too)
                if os.path.lexists(full + "/.git"):
                    if repos is not None:
                        repos.append(rel)
                    continue  # a nested repository: git records it as one entry
                seen.add(rel)
                level.append(rel)
            stack = []
            said = asking.ignored(level) or set()  # (git cannot say: stamped, never lost)
            for rel in level:
                if rel in said:
                    ignored.append(rel)
                elif len(found) < _MAX_EXTRA:
                    found.append(rel)
                    stack += [f"{rel}/{name}" for name in subdirs(prefix + rel)]
                else:
                    stack.append(rel)  # (not stamped: the stamps say they are partial)
    return found, ignored, bool(stack)


class _Repositories:
    """Which directories of the worktree at ``prefix`` are nested repositories or lie in
    one, each directory's ``.git`` looked for once (a chain of thousands of nested
    directories asked of each of its ancestors for each of them took minutes)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._holds: dict[str, bool] = {}
        self._below: dict[str, bool] = {}  # lies below a directory that holds a .git

    def inside(self, dirs: Sequence[str], *, own: bool = True) -> list[str]:
        """Those of ``dirs`` that are nested repositories (``own``) or lie in one, their
        ``.git`` included."""
        return [
            rel
            for rel in dirs
            if ".git" in rel.split("/") or self.below(rel) or (own and self.holds(rel))
        ]

    def holds(self, rel: str) -> bool:
        found = self._holds.get(rel)
        if found is None:
            found = self._holds[rel] = os.path.lexists(self._prefix + rel + "/.git")
        return found

    def below(self, rel: str) -> bool:
        """Whether a directory above ``rel`` (the worktree's own root aside) holds a
        ``.git``."""
        chain: list[str] = []  # rel and those above it not yet known, deepest first
        above = rel
        while above and above not in self._below:
            chain.append(above)
            above = above.rpartition("/")[0]
        known = self._below.get(above, False)
        for d in reversed(chain):
            parent = d.rpartition("/")[0]
            known = known or (bool(parent) and self.holds(parent))
            self._below[d] = known
        return known


def _unborn(
    worktree: Path,
    scope: Sequence[str] | None,
    old: Sequence[str],
    found: Sequence[str],
    nested: Sequence[str],
) -> list[str]:
    """The nested repositories on disk that the tree does not hold: git records nothing
    of one while its HEAD names no commit (``git init`` by hand or by a step), and a
    commit in it later writes only inside it, which no stamp or watch of the worktree
    sees. Each is looked at by every scan until it has a commit (``born``). Those
    stamped before that are still repositories, and those ``found`` now."""
    prefix = str(worktree) + os.sep
    kept = {
        r
        for r in ([] if scope is None else old)
        if os.path.lexists(prefix + r + "/.git") and not os.path.islink(prefix + r)
    }
    return sorted((kept | set(found)) - set(nested))


def born(worktree: Path, record: dict[str, Any]) -> list[str]:
    """The nested repositories the stamps ``record`` found without a commit that have
    one now (git records each as a gitlink from now on), or are none any more (their
    ``.git`` gone: their files are the worktree's now, and no stamp covers them): they
    are rescanned."""
    unborn = record.get("unborn")
    if not isinstance(unborn, list):
        return []
    prefix = str(worktree) + os.sep
    return [
        str(r)
        for r in unborn
        if not git_takes_for_repository(prefix + str(r)) or nested_head(prefix + str(r))
    ]


def git_takes_for_repository(path: str) -> bool:
    """Whether git takes the directory ``path`` for a repository of its own, by what its
    ``is_git_directory`` asks of the ``.git`` there (or of the directory a ``.git`` file
    names): a ``HEAD`` that names a branch or a commit, ``objects`` and ``refs``. A
    ``.git`` that is none of that (an empty directory a step made) is no repository to
    git, which adds the files beside it."""
    dot_git = os.path.join(path, ".git")
    git_dir: str | None = dot_git
    if not os.path.isdir(dot_git) or os.path.islink(dot_git):
        try:
            said = git.read_small(dot_git).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return False
        git_dir = (
            os.path.join(path, said[len("gitdir: ") :]) if said.startswith("gitdir: ") else None
        )
    if git_dir is None or not _head_is_valid(os.path.join(git_dir, "HEAD")):
        return False
    common = git_dir
    try:
        named = git.read_small(os.path.join(git_dir, "commondir")).decode("utf-8").strip()
        common = os.path.join(git_dir, named)
    except (OSError, UnicodeDecodeError):
        pass
    return all(os.access(os.path.join(common, d), os.X_OK) for d in ("objects", "refs"))


def _head_is_valid(head: str) -> bool:
    """git's ``validate_headref``: a link into ``refs/``, or a file that says ``ref:
    refs/...`` or names a commit."""
    if os.path.islink(head):
        return os.readlink(head).startswith("refs/")
    try:
        said = git.read_small(head).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    if said.startswith("ref:"):
        return said[4:].strip().startswith("refs/")
    return git.is_object_id(said)


def uprooted(worktree: Path, record: dict[str, Any]) -> list[str]:
    """The gitlinks of the stamps ``record`` whose directory holds no repository now (its
    ``.git`` gone: moved away, swapped for a plain directory, taken out), but for those
    the worktree's HEAD holds (a submodule not checked out, which git keeps): git would
    keep each as a gitlink, where the record takes the files in its directory, so they
    are rescanned. No watch sees inside a nested repository: one stat each."""
    nested = record.get("nested")
    if not isinstance(nested, list) or not nested:
        return []
    prefix = str(worktree) + os.sep
    found = [str(n) for n in nested if not os.path.lexists(prefix + str(n) + "/.git")]
    head = git.head(worktree) if found else None
    if head is None:
        return found
    held = git.git(
        worktree,
        "ls-tree",
        "-z",
        "--name-only",
        "--full-tree",
        head,
        "--",
        *(f":(literal){n}" for n in found),
        check=False,
    )
    kept = (
        {os.fsdecode(p) for p in held.stdout.split(b"\0") if p} if held.returncode == 0 else set()
    )
    return [n for n in found if n not in kept]


def nested_head(path: str) -> str | None:
    """The commit a nested repository's HEAD names, read from its files (None: no
    commit, or not read that way)."""
    dot_git = os.path.join(path, ".git")
    git_dir = dot_git
    if os.path.isfile(dot_git):  # a submodule's: "gitdir: PATH"
        try:
            said = git.read_small(dot_git).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not said.startswith("gitdir: "):
            return None
        git_dir = os.path.join(path, said[len("gitdir: ") :])
    common = git_dir
    try:
        common = os.path.join(
            git_dir, git.read_small(os.path.join(git_dir, "commondir")).decode("utf-8").strip()
        )
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    return git._read_head(git_dir, common)


def shape_of(
    worktree: Path,
    index: Path,
    tree: str,
    diff: tuple[str, bytes] | None = None,
    scope: Sequence[str] | None = None,
) -> Shape:
    """The shape of ``tree``: from the last stamps and ``git diff-tree`` from the tree they
    describe (walking only the subtrees that differ), else from a walk of the whole tree.
    ``diff``: a tree and the output of ``diff-tree -r -t -z --no-renames`` from it to
    ``tree``, if the caller has it. ``scope``: the paths rescanned into the side index
    since it held the stamped tree (``tree`` differs from it there alone), if known:
    when they are all files in the stamped directories, the directories stand as they
    are (``tree_shape.files_in_place``) and git is not asked."""
    try:
        old: Any = noted(index) or {}
        old_tree, dirs, extra = old["tree"], old["dirs"], old.get("extra") or []
        nested, attributes = list(old.get("nested") or []), old.get("attributes")
        valid = (
            isinstance(old_tree, str)
            and isinstance(dirs, list)
            and isinstance(attributes, bool)
            and len(extra) <= len(dirs)
        )
    except (KeyError, TypeError, AttributeError):
        valid = False
    if not valid:
        return list_tree(worktree, tree)
    tree_dirs = [str(d) for d in dirs[: len(dirs) - len(extra)]]
    if old_tree == tree:
        return Shape(tree_dirs, [str(n) for n in nested], attributes, set())
    if scope is not None and diff is None:
        in_place = files_in_place(worktree, set(tree_dirs), set(nested), scope)
        if in_place is not None:
            return Shape(tree_dirs, [str(n) for n in nested], attributes, in_place)
    if diff is not None and diff[0] == old_tree:
        raw = diff[1]
    else:
        res = git.diff_trees(worktree, old_tree, tree, check=False)
        if res.returncode != 0:
            return list_tree(worktree, tree)
        raw = res.stdout
    gone: set[str] = set()
    added: list[str] = []
    touched: set[str] = set()
    fields = raw.split(b"\0")
    for head, raw_path in zip(fields[::2], fields[1::2], strict=False):
        old_mode, new_mode = head[1:7], head[8:14]
        path = raw_path.decode("utf-8", "surrogateescape")
        touched.add(path.rpartition("/")[0])
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
    return Shape(kept + added, [str(n) for n in nested], attributes, touched)


def nested_repositories(index: Path) -> list[str]:
    """The nested repositories (and submodules) of the last snapshot stamped on ``index``:
    their files are not recorded, nor restored by a rollback."""
    try:
        return [str(n) for n in (noted(index) or {}).get("nested") or []]
    except TypeError:
        return []


def holds_no_gitlink(index: Path) -> bool:
    """Whether the stamps on ``index`` say that their tree holds no gitlink (no nested
    repository, no submodule); False where they do not say."""
    nested = (noted(index) or {}).get("nested")
    return isinstance(nested, list) and not nested


def stamped_dirs(index: Path) -> list[str] | None:
    """Every directory the last stamps cover (the tree's and the untracked ones)."""
    dirs = (noted(index) or {}).get("dirs")
    return [str(d) for d in dirs] if isinstance(dirs, list) else None


def restamp(
    worktree: Path,
    index: Path,
    tree: str,
    commit: str,
    started_ns: int,
    diff: tuple[str, bytes] | None = None,
    settled: dict[str, int] | None = None,
) -> None:
    """Note that the side index and the worktree hold ``tree`` (of ``commit``) as of
    ``started_ns`` (after a restore wrote them both). ``diff``: as for ``shape_of``;
    ``settled``: as for ``stamp``. Held until the snapshot that records the restore
    (``recommit``, or its ``stamp``) writes them."""
    shape = shape_of(worktree, index, tree, diff) if diff is not None else None
    stamp(worktree, index, tree, commit, started_ns, shape=shape, settled=settled, hold=True)


def settled_ctimes(index: Path, tree: str) -> dict[str, int]:
    """The ctimes the stamps hold for ``tree``'s directories, the racy ones left out
    (empty: the stamps are of another tree, or of an index written since)."""
    record = noted(index)
    if record is None or record.get("tree") != tree or record.get("index") != identity(index):
        return {}
    dirs, mtimes = record.get("dirs"), record.get("mtimes")
    if not isinstance(dirs, list) or not isinstance(mtimes, list):
        return {}
    return {str(d): m for d, m in zip(dirs, mtimes, strict=False) if isinstance(m, int) and m != -1}


def recommit(index: Path, tree: str, commit: str) -> bool:
    """The stamps, taken of ``tree`` (after a restore), now stand for the snapshot
    ``commit`` of that tree: True once noted, False if they are of something else."""
    record = noted(index)
    if record is None or record.get("tree") != tree:
        return False
    if record.get("index") != identity(index):
        _HELD.pop(str(stamps_path(index)), None)
        return False
    _write(index, {**record, "commit": commit})
    return stamps_path(index).exists()


def _rules_id(path: str, since: int | None) -> list[int]:
    """What says a file of ignore rules (``stamp``'s ``ignore_sources``) is still as
    it was: its ctime, size and inode (``[-1]`` if it changed within the racy window, so
    the next look trusts nothing; empty if there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    if since is not None and st.st_ctime_ns >= since:
        return [-1]
    return [st.st_ctime_ns, st.st_size, st.st_ino]


def rules_moved(record: dict[str, Any]) -> bool:
    """Whether a file of ignore rules outside the worktree changed since ``record`` (a
    stamps record) was taken: what git ignores may have changed anywhere."""
    rules = record.get("ignore_rules")
    if not isinstance(rules, list):
        return True  # stamps from before they were noted: trust nothing
    for item in rules:
        if not isinstance(item, list) or not item or not isinstance(item[0], str):
            return True
        if item[1:] == [-1] or _rules_id(item[0], None) != item[1:]:
            return True
    return False
