"""The shape of a tree, as the stamps need it: its directories, its nested repositories
(gitlinks), whether it holds a ``.gitattributes`` (``bar.changes.fast.stamps``).

From one walk of the tree (``list_tree``), or, as the stamps keep it up to date, from the
last shape and what changed (``stamps.shape_of``): a ``git diff-tree`` between the trees,
or nothing at all when every path rescanned is a file in place (``files_in_place``).
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from bar import git


class Shape:
    """What the stamps need of a tree: its directories ("" for the root), its nested
    repositories, whether it holds a ``.gitattributes``."""

    __slots__ = ("dirs", "has_attributes", "nested", "touched")

    def __init__(
        self,
        dirs: list[str],
        nested: list[str],
        has_attributes: bool,
        touched: set[str] | None = None,
    ) -> None:
        self.dirs = dirs
        self.nested = nested
        self.has_attributes = has_attributes
        self.touched = touched  # directories whose entries changed (None: not known)


def files_in_place(
    worktree: Path,
    dirs: set[str],
    nested: set[str],
    scope: Sequence[str],
) -> set[str] | None:
    """The directories whose entries may have changed, when no directory of the tree can
    have come or gone: every rescanned path is now a file or a symbolic link, in a
    directory of the tree, where the tree held no directory, nested repository or
    ``.gitattributes`` (each of those could change the shape: a file gone may leave its
    directory empty, a new one may be in a new directory). None: not so."""
    prefix = str(worktree) + os.sep
    touched: set[str] = set()
    for path in scope:
        parent, _, name = path.rpartition("/")
        if not name or name in (".", "..", ".gitattributes") or parent not in dirs:
            return None
        if path in dirs or path in nested:
            return None
        try:
            mode = os.lstat(prefix + path).st_mode
        except OSError:
            return None  # gone
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            return None
        touched.add(parent)
    return touched


class Listing(Shape):
    """One walk of a tree (``git ls-tree -r -t -z``): its directories (with "" for the
    root), its nested repositories (gitlinks: git records which commit they are at, never
    their files), whether it holds a ``.gitattributes``, and (only when asked, in a
    repository where git converts) its files' modes. The walk is read as git writes it, a
    piece at a time, and searched with regular expressions, not a Python loop: a large tree
    has tens of thousands of entries, a million-file one 140 MB of them, which held whole
    (three times over: the pieces read, joined, then searched) made a step's first look
    at such a tree 470 MB of bar's memory."""

    __slots__ = ("_modes", "_tree", "_worktree")

    def __init__(self, worktree: Path, tree: str, *, modes: bool = False) -> None:
        self._worktree, self._tree = worktree, tree
        self._modes: dict[str, str] | None = {} if modes else None
        dirs, nested, attributes = [""], [], False
        for block in _entries(worktree, tree):
            dirs += _names(_TREES.findall(block))
            nested += _names(_GITLINKS.findall(block))
            attributes = attributes or _ATTRIBUTES.search(block) is not None
            if self._modes is not None:
                self._modes.update(_modes(block))
        super().__init__(dirs, nested, attributes)

    @property
    def modes(self) -> dict[str, str]:
        """Each file's mode, by its path (needed only where git converts): from the walk,
        if it was told (``modes``), else from a second one."""
        if self._modes is None:
            self._modes = {}
            for block in _entries(self._worktree, self._tree):
                self._modes.update(_modes(block))
        return self._modes


def _modes(block: bytes) -> dict[str, str]:
    return {
        name.decode("utf-8", "surrogateescape"): mode.decode()
        for mode, name in _FILES.findall(block)
    }


def _entries(worktree: Path, tree: str) -> Iterator[bytes]:
    # (not --format: git 2.39 quotes its %(path) even with -z)
    return git.entries(worktree, "ls-tree", "-r", "-t", "-z", tree)


# entries of `ls-tree -z`: "<mode> SP <type> SP <object> TAB <path> NUL"; a pattern that
# starts with a literal NUL is searched for fast
_TREES = re.compile(rb"\x00040000 tree [0-9a-f]+\t([^\x00]*)")
_GITLINKS = re.compile(rb"\x00160000 commit [0-9a-f]+\t([^\x00]*)")
_FILES = re.compile(rb"\x00(100644|100755|120000) blob [0-9a-f]+\t([^\x00]*)")
# an entry named ``.gitattributes``, at the top or in a directory
_ATTRIBUTES = re.compile(rb"[\t/]\.gitattributes(?:\x00|\Z)")


def _names(raw: list[bytes]) -> list[str]:
    return [n.decode("utf-8", "surrogateescape") for n in raw]


def list_tree(worktree: Path, tree: str, *, modes: bool = False) -> Listing:
    """The walk of ``tree``; with ``modes``, its files' modes gathered on the way."""
    return Listing(worktree, tree, modes=modes)


class Ahead:
    """What the stamps of a full look need that does not depend on ``git add``: a walk of
    the recorded tree, and the subdirectories on disk of each of its directories (where
    untracked directories are looked for: ``stamps._untracked_dirs``). Made on a thread
    while git adds the whole worktree, on the other core: at a million files that is
    seconds of ``scandir`` git would otherwise wait on, or that would wait on git.

    Reading the directories while git adds is sound: one that gains an entry after it
    was read has a ctime past the look's start, so its stamp is racy, and the next look
    reads it again (``stamps.stamp``)."""

    def __init__(self, worktree: Path, recorded: str) -> None:
        self.recorded = recorded
        self._worktree = str(worktree)
        self._listing: Listing | None = None
        self._subdirs: dict[str, list[str]] = {}
        self._thread = threading.Thread(target=self._walk, daemon=True)
        self._thread.start()

    def _walk(self) -> None:
        try:
            listing = list_tree(Path(self._worktree), self.recorded)
        except Exception:  # (git failed: the look walks by itself)
            return
        self._listing = listing
        prefix = self._worktree + os.sep
        found = self._subdirs
        for rel in listing.dirs:
            found[rel] = subdirs(prefix + rel if rel else self._worktree)

    def listing(self, tree: str, recorded_tree: str) -> Listing | None:
        """The walk of ``tree``, if it is the recorded one (``recorded_tree``)."""
        if tree != recorded_tree:
            return None
        self._thread.join()
        return self._listing

    def subdirs(self) -> dict[str, list[str]]:
        """The names of the subdirectories of each directory of the recorded tree, as
        they were while git added (a directory not among them: not read)."""
        self._thread.join()
        return self._subdirs


def subdirs(path: str) -> list[str]:
    """The names of the directories in ``path`` (not ``.git``, not through links)."""
    try:
        with os.scandir(path) as entries:
            return [e.name for e in entries if e.name != ".git" and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
