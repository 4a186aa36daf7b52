"""Snapshots: the full state of a task worktree as a git commit, fast.

Each task has a persistent side index (``tasks/<id>/index``, used as ``GIT_INDEX_FILE``),
never the worktree's own index, so the agent's staging area is left alone. ``git add -A``
against it re-hashes only files whose stat changed, so a snapshot costs about one
``git status``. The resulting tree is wrapped in a commit whose parent is the previous
snapshot, and ``refs/bar/tasks/<id>`` is moved to it with a compare-and-swap; the chain
starts at the task's base commit, so ``git log <base>..refs/bar/tasks/<id>`` is the task's
history and git's gc never drops a step.

The side index is seeded from the index that ``git worktree add`` just wrote for the base
commit: it holds the same entries ``read-tree <base>`` would, plus valid stat data, so the
first snapshot does not re-hash every file of the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bar import exact, faults, git
from bar.errors import BarError, GitError, SnapshotFailed
from bar.git import BAR_IDENTITY, DiffStat
from bar.notices import warn
from bar.proc import clean_env, run_to_file
from bar.store.files import write_bytes_atomic

_env = git.index_env


def keep_private(index: Path) -> None:
    """git rewrites an index (adding, refreshing stat data, merging) with the umask's
    mode; the side index names every file of the task, so it stays 0600."""
    try:
        os.chmod(index, 0o600)
    except FileNotFoundError:
        pass


def seed_index(worktree: Path, index: Path, base_commit: str) -> None:
    """Create the side index for a new task worktree."""
    own = Path(git.out(worktree, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    tmp = index.with_name(index.name + ".seed")
    if own.is_file():
        shutil.copyfile(own, tmp)
    else:
        git.git(worktree, "read-tree", base_commit, env=_env(tmp))
    os.chmod(tmp, 0o600)
    os.replace(tmp, index)


def write_tree(
    worktree: Path, index: Path, excludes: Sequence[str] = (), recorded: str | None = None
) -> str:
    """Stage the worktree's full state (tracked + untracked, not ignored) and write a tree.

    With ``recorded`` (the snapshot the side index was last stamped at), only what can
    have changed since is rescanned: see ``_changed_since``.
    """
    return _write(
        worktree, index, excludes, _changed_since(worktree, index, recorded) if recorded else None
    )


def _write(worktree: Path, index: Path, excludes: Sequence[str], scope: list[str] | None) -> str:
    """Rescan ``scope`` (None: everything) into the side index and write its tree."""
    if scope is None or (scope and not _add(worktree, index, scope, excludes)):
        _add(worktree, index, ["."], excludes)
    tree = git.out(worktree, "write-tree", env=_env(index))  # may store its cache-tree
    keep_private(index)
    return tree


# What `git add --ignore-errors` says about a file it could not read (and so left out);
# any other complaint means the snapshot itself could not be written.
_UNREADABLE = re.compile(
    rb"^(error: open\(.*\): .*|error: unable to index file .*|error: read error while indexing .*"
    rb"|error: .*: can only add regular files, symbolic links or git-directories"
    rb"|error: '.*' does not have a commit checked out"
    rb"|fatal: adding files failed|warning: .*)$"
)


def _add(worktree: Path, index: Path, paths: Sequence[str], excludes: Sequence[str]) -> bool:
    """``git add -A`` the given paths ("." everything).

    Returns False when a partial scope cannot be added as such (a pathspec matching
    nothing, a path now beyond a symbolic link): the caller then scans everything. Files
    that cannot be read are left out with a warning naming them; any other failure (a full
    disk, an object that cannot be written) raises, so a step is never recorded as "no
    changes" when its changes simply could not be stored.
    """
    specs = [":(top)" if p == "." else f":(top,literal){p}" for p in paths]
    specs += [f":(top,exclude,literal){p}" for p in excludes]
    res = git.git(
        worktree,
        "add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
        env=_env(index),
        input=b"\0".join(s.encode("utf-8", "surrogateescape") for s in specs) + b"\0",
        check=False,
    )  # fmt: skip
    if res.returncode == 0:
        return True
    # a path of the scope that is ignored is not added (the rest is): git says so in a
    # closing block of path names and hints, which is no failure
    said = res.stderr.split(b"The following paths are ignored by one of your .gitignore")[0]
    said_lines = [line for line in said.splitlines() if line.strip()]
    if not said_lines and said != res.stderr and res.returncode == 1:
        return True
    if paths != ["."] and any(b"pathspec" in line or b"beyond a symbolic link" in line
                              for line in said_lines):  # fmt: skip
        return False
    if said_lines and all(_UNREADABLE.match(line) for line in said_lines):
        warn(f"some files were not recorded: {said.decode('utf-8', 'replace').strip()}")
        return True
    raise SnapshotFailed(
        "the worktree's state could not be stored in git: "
        + (res.err.strip() or f"git add exited with {res.returncode}"),
    )


@dataclass(frozen=True)
class Snapshot:
    commit: str  # the snapshot commit (== previous when nothing changed)
    tree: str
    changed: bool


def take(
    worktree: Path,
    index: Path,
    ref: str,
    recorded: str,
    message: str,
    excludes: Sequence[str] = (),
    *,
    stamped_at: str | None = None,
) -> Snapshot:
    """Snapshot the worktree against ``recorded`` (the last snapshot the ledger knows).

    When the tree equals the recorded one nothing is written and ``recorded`` is returned.
    Otherwise a commit is chained onto the ref's current value when that descends from
    ``recorded`` (ahead of the ledger after a crash: that orphan is kept in the chain, never
    dropped), and onto ``recorded`` itself when the ref was moved elsewhere (by a command
    run in the task): the chain always holds every snapshot the ledger names.
    """
    started_ns = time.time_ns()
    stamped = stamped_at or recorded  # the state the side index was last noted at
    scope = _changed_since(worktree, index, stamped)
    if scope == [] and stamped == recorded:
        # nothing changed since the last stamps, which therefore still hold
        return Snapshot(recorded, git.tree_of(worktree, recorded), False)
    tree = _write(worktree, index, excludes, scope)
    recorded_tree = git.tree_of(worktree, recorded)
    same = tree == recorded_tree
    listing = None if same else _listing(worktree, tree)
    raw_changed, raw = _raw_parent(worktree, index, tree, recorded, recorded_tree, listing, scope)
    if same and not raw_changed:
        _stamp(worktree, index, tree, recorded, started_ns, scope)
        return Snapshot(recorded, tree, False)
    now = git.rev_parse(worktree, ref)
    parent = recorded
    if now is not None and now != recorded:
        if git.is_ancestor(worktree, recorded, now):
            parent = now  # a snapshot a crash left unrecorded: kept in the chain
        else:
            warn(f"{ref} was moved off the task's snapshots (to {now[:10]}); bar chains the "
                 "new snapshot onto the last one the ledger names")  # fmt: skip
    parents = [parent] if raw is None else [parent, raw]
    commit = git.commit_tree(worktree, tree, parents, message, identity=BAR_IDENTITY)
    git.update_ref(worktree, ref, commit, now, f"bar: {message.splitlines()[0]}")
    _stamp(worktree, index, tree, commit, started_ns, scope, listing)
    return Snapshot(commit, tree, True)


# --- knowing cheaply what changed ----------------------------------------------------
#
# A full `git add -A` pays git's untracked-file scan, the largest part of a snapshot. But
# creating, deleting or renaming a file changes its directory's ctime, and `git
# diff-files` on the side index (a stat of every recorded file) sees every edit of a
# recorded file. So after each snapshot we note the ctime of every directory of its
# tree (not the mtime, which a program can set back with utime to hide a file it made);
# the next snapshot rescans only the directories whose ctime moved, plus the files
# diff-files names. A directory touched within the racy window of the snapshot
# (file-system clocks are coarse) is always rescanned; a moved root directory or an
# edited .gitignore means a full scan.

_RACY_NS = 2_000_000_000


def _stamps_path(index: Path) -> Path:
    return index.with_name(index.name + ".stamps")


def _raw_parent(worktree: Path, index: Path, tree: str, recorded: str, recorded_tree: str,
                listing: _Listing | None, scope: Sequence[str] | None,
                ) -> tuple[bool, str | None]:  # fmt: skip
    """The raw-bytes parent of a new snapshot (``bar.exact``) where git converts: whether
    the raw bytes differ from ``recorded``'s (a line-ending change alone leaves the tree
    as it was, yet must be kept), and the parent (None: no file needs raw bytes)."""
    attributes = listing.has_attributes if listing else _stamped_attributes(index)
    if attributes is None:
        listing = _listing(worktree, tree)
        attributes = listing.has_attributes
    if not exact.converts(worktree, attributes):
        return False, None  # git stores the bytes as they are
    listing = listing or _listing(worktree, tree)
    before = exact.raw_entries(worktree, exact.raw_tree_of(worktree, recorded))
    changed = [] if tree == recorded_tree else [
        c.path for c in git.diff_tree_raw(worktree, recorded_tree, tree)]  # fmt: skip
    candidates = [*changed, *(p for p in scope or () if p in listing.modes)]
    entries = exact.next_entries(worktree, index, listing.modes, before, candidates)
    if entries == before:
        return False, git.rev_parse(worktree, f"{recorded}^2") if before else None
    return True, exact.raw_parent(worktree, entries)


def _stamped_attributes(index: Path) -> bool | None:
    """Whether the tree last stamped holds a ``.gitattributes`` (None: not known)."""
    try:
        value = json.loads(_stamps_path(index).read_bytes()).get("attributes")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def _stamp(worktree: Path, index: Path, tree: str, commit: str, started_ns: int,
           scope: Sequence[str] | None = (), listing: _Listing | None = None) -> None:  # fmt: skip
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
        listing = listing or _listing(worktree, tree)
        dirs, nested, attributes = listing.dirs, listing.nested, listing.has_attributes
    extra = _untracked_dirs(worktree, set(dirs), scope, extra)
    dirs = dirs + extra
    mtimes: list[int] = []
    prefix = str(worktree) + os.sep  # plain strings: pathlib costs more than the lstat
    for rel in dirs:
        try:
            mtime = os.lstat(prefix + rel).st_ctime_ns
        except OSError:
            mtime = -1
        mtimes.append(-1 if mtime >= started_ns - _RACY_NS else mtime)
    record = {"version": 1, "tree": tree, "commit": commit, "index": _identity(index),
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


class _Listing:
    """One walk of a tree (``git ls-tree -r -t -z``): its directories (with "" for the
    root), its nested repositories (gitlinks: git records which commit they are at, never
    their files), whether it holds a ``.gitattributes``, and (parsed only when asked, in
    a repository where git converts) its files' modes. The walk is searched with regular
    expressions, not a Python loop: a large tree has tens of thousands of entries."""

    __slots__ = ("_modes", "_raw", "dirs", "has_attributes", "nested")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw = b"\0" + raw  # every entry now starts after a NUL
        self._modes: dict[str, str] | None = None
        self.dirs = ["", *_names(_TREES.findall(raw))]
        self.nested = _names(_GITLINKS.findall(raw))
        self.has_attributes = _has_attributes(raw)

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


def _listing(worktree: Path, tree: str) -> _Listing:
    # (not --format: git 2.39 quotes its %(path) even with -z)
    return _Listing(git.git(worktree, "ls-tree", "-r", "-t", "-z", tree).stdout)


def nested_repositories(index: Path) -> list[str]:
    """The nested repositories (and submodules) of the last snapshot stamped on ``index``:
    their files are not recorded, nor restored by a rollback."""
    try:
        stamps = json.loads(_stamps_path(index).read_bytes())
        return [str(n) for n in stamps.get("nested") or []]
    except (OSError, ValueError, AttributeError, TypeError):
        return []


def restamp(worktree: Path, index: Path, tree: str, commit: str, started_ns: int) -> None:
    """Note that the side index and the worktree hold ``tree`` (of ``commit``) as of
    ``started_ns`` (after a restore wrote them both)."""
    _stamp(worktree, index, tree, commit, started_ns)


def _identity(index: Path) -> list[int]:
    try:
        st = os.stat(index)
    except OSError:
        return []
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _changed_since(worktree: Path, index: Path, recorded: str) -> list[str] | None:
    """The paths to rescan since the side index was stamped at ``recorded`` (empty: none
    changed), or None when only a full scan will do."""
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
    # git stats the recorded files while we stat the directories
    diff_files = subprocess.Popen(
        ["git", *git.NO_PROGRAMS, "-C", str(worktree), "diff-files", "--name-only", "-z"],
        env=clean_env(git.pinned_env(worktree, _env(index))),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        prefix = str(worktree) + os.sep
        lstat = os.lstat
        scope: list[str] = []
        for rel, mtime in zip(dirs, mtimes, strict=True):
            try:
                same = mtime != -1 and lstat(prefix + rel).st_ctime_ns == mtime
            except (OSError, TypeError):
                same = False
            if not same:
                scope.append(str(rel))
        if "" in scope:
            # the root moved: rescan its own files and any top-level directory the stamps
            # do not know (new ones); known ones are judged by their own mtime. Its files
            # are named one by one (deleted ones come from diff-files below): a glob
            # pathspec beside a directory's makes git skip the nested repositories in it
            scope.remove("")
            known = {str(d) for d in dirs if d and "/" not in str(d)}
            with os.scandir(worktree) as entries:
                for entry in entries:
                    if entry.name == ".git":
                        continue
                    if not entry.is_dir(follow_symlinks=False) or entry.name not in known:
                        scope.append(entry.name)
        out, _ = diff_files.communicate()
    finally:
        if diff_files.returncode is None:
            diff_files.kill()
            diff_files.wait()
    if diff_files.returncode != 0:
        return None
    keep_private(index)  # diff-files may have refreshed the index's stat data
    for item in out.split(b"\0"):
        if item:
            name = item.decode("utf-8", "surrogateescape")
            if name == ".gitignore" or name.endswith("/.gitignore"):
                return None  # what is ignored may have changed anywhere
            scope.append(name)
    return scope


def unchanged_since(worktree: Path, index: Path, recorded: str) -> bool:
    """True only when the worktree certainly still equals the snapshot ``recorded``."""
    return _changed_since(worktree, index, recorded) == []


def write_patch(repo: Path, a: str, b: str, path: Path) -> DiffStat:
    """Write the replayable patch from ``a`` to ``b`` into ``path``; return its stat."""
    faults.point(f"before writing {path.name}")
    run_to_file(["git", *git.NO_PROGRAMS, "-C", str(repo), *git.diff_patch_args(a, b)], path,
                env=git.pinned_env(repo), error=GitError)  # fmt: skip
    faults.point(f"after writing {path.name}")
    return git.numstat(repo, a, b)
