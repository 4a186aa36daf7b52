"""Compare before replace: writing files into a checkout someone may be editing.

A rollback writes the task's worktree, an apply the developer's checkout, while an editor
may be saving into them. What bar verified before it began (the worktree equal to the
last record, the checkout clean in the paths it writes) can change before bar writes a
path, and a plain overwrite would lose that save: bytes no state holds. So every path is
replaced in three moves, each atomic:

1. ``capture``: the path is renamed aside (into ``aside``, a directory of bar's on the
   same file system). Whatever was there at that instant is now bar's to look at, and a
   save that comes later makes a new file at the path.
2. The captured bytes are hashed and compared with what bar verified there. Equal: they
   are held by a recorded state (or a commit), and are dropped once every path is
   written, hashed once more then: an editor that saves by truncating and writing the
   file in place may have held it open as it was captured, and written a moment later.
   Such a save is the newest of its path: it takes the place of bar's version where
   that is still there as bar wrote it (``_save_stands``). Not equal: they raced bar,
   and are handed to ``keep_raced``, never dropped.
3. ``place``: the new version is linked in without replacing: if a save made a new file
   at the path since step 1, that file stays and the path is reported as raced.

Where the aside directory is on another file system than the checkout (a rename cannot
cross), the bytes are compared in place just before they are replaced, as before.

The guard is the one writer of bytes into a worktree or checkout: every path it
renames, links, makes or removes is reached from the root's descriptor with no link
followed on the way (``bar.base.beneath``). A step may have left a link where a
directory was: bar's own write never lands beyond it. A path with a link on the way
holds nothing of the root's, as for git ("beyond a symbolic link"): nothing is taken
from there, and nothing is written there (the path is said to have raced).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from bar.base import beneath, faults
from bar.base.record import record

ABSENT = "000000"
Blobs = frozenset[str | None] | set[str | None] | tuple[str | None, ...]


@record(frozen=True)
class Raced:
    """A path that changed between bar's check and its write, and what was kept of it:
    ``kept``: where the raced bytes are now (the path itself when they were put back)."""

    path: str
    kept: Path


def by_path(raced: list[Raced]) -> dict[str, list[Path]]:
    """Where the raced saves of each path are kept, paths in the order they raced (a
    path two saves raced is kept in two places: the newest at the path)."""
    kept: dict[str, list[Path]] = {}
    for r in raced:
        kept.setdefault(r.path, []).append(r.kept)
    return kept


def blob_of(path: Path, algo: str = "sha1") -> tuple[str, str] | None:
    """(git mode, blob id) of the file or symlink at ``path`` as git would hash its raw
    bytes; None if nothing (or a directory) is there."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        data = os.readlink(os.fsencode(path))
        mode = "120000"
    elif stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            data = f.read()
        mode = "100755" if st.st_mode & 0o100 else "100644"
    else:
        return None
    return mode, hashlib.new(algo, b"blob %d\0" % len(data) + data).hexdigest()


class Guard:
    """Replacing paths of ``root`` (a worktree or checkout) with compare-before-replace.

    ``aside``: a directory of bar's to capture paths into (made, emptied by ``close``);
    ``algo``: the repository's hash; ``converted``: the blob git would store for a file
    (path relative to ``root``, the file's current place) where git converts bytes
    (line endings, filters), asked only when the raw hash differs."""

    def __init__(
        self,
        root: Path,
        aside: Path,
        algo: str = "sha1",
        converted: Callable[[str, Path], str | None] | None = None,
        trash: Callable[[str, Path], Path | None] | None = None,
    ) -> None:
        self.root, self.aside, self.algo = root, aside, algo
        self.converted, self.trash = converted, trash
        self.raced: list[Raced] = []
        # captured files held by a recorded state, dropped once the restore is written
        self.dropping: list[tuple[str, Path, Blobs]] = []
        self._drops = 0  # (each held under a name of its own)
        self.placed: list[tuple[str, int]] = []  # (path, inode) linked in: ``settle``
        self.ours: dict[str, tuple[int, str]] = {}  # path: (inode, blob) bar put there
        self.flat = aside / "captured"
        self.flat.mkdir(parents=True, exist_ok=True)
        try:
            self.renames = os.stat(aside).st_dev == os.stat(root).st_dev
        except OSError:
            self.renames = False
        self._root_fd: int | None = None  # the root, held (``_top``)

    def _top(self) -> int | Path:
        """The root, held open from the first write on (``beneath.hold``): a rollback of
        thousands of files does not resolve the root's path again for each; the root
        itself where it cannot be opened (the calls then say why)."""
        if self._root_fd is None:
            try:
                self._root_fd = beneath.hold(self.root)
            except OSError:
                return self.root
        return self._root_fd

    def __del__(self) -> None:
        fd = getattr(self, "_root_fd", None)
        if fd is not None:
            os.close(fd)

    def holds(self, rel: str, file: Path, blobs: Blobs) -> bool:
        """Whether ``file`` (``rel`` captured, or in place) holds one of ``blobs`` (None
        among them: absent will do)."""
        found = blob_of(file, self.algo)
        if found is None:
            return None in blobs or not os.path.lexists(file)
        if found[1] in blobs:
            return True
        if found[0] == "120000" or self.converted is None:
            return False
        return self.converted(rel, file) in blobs

    def remove(self, rel: str, blobs: Blobs) -> bool:
        """Remove the file at ``rel`` if it holds one of ``blobs`` (what bar verified
        there); keep it (``keep_raced``) if not. True if the path is free now."""
        path = self.root / rel
        captured = self._capture(rel)
        if captured is None:
            if self.renames or not self.lexists(rel):
                return not self.lexists(rel)
            # (another file system: compared in place, no link on the way to it)
            if not self.holds(rel, path, blobs):
                self.raced.append(Raced(rel, path))
                return False
            with contextlib.suppress(FileNotFoundError, NotADirectoryError, beneath.LinkOnTheWay):
                beneath.unlink_beneath(self._top(), rel)
            return True
        faults.point("with a file captured")
        if self.holds(rel, captured, blobs):
            self._drop(rel, captured, blobs)
            return True
        self.keep_raced(rel, captured)
        return not self.lexists(rel)

    def _drop(self, rel: str, captured: Path, blobs: Blobs) -> None:
        """Drop the captured ``rel``, held by a recorded state, once the restore is
        written (``verify_dropped``): an editor that saves by truncating and writing the
        file in place may have had it open when it was captured, and its write lands
        in the captured file a moment later."""
        dropping = self.aside / "dropping"
        dropping.mkdir(exist_ok=True)
        self._drops += 1
        later = dropping / str(self._drops)
        os.rename(captured, later)
        self.dropping.append((rel, later, blobs))

    def verify_dropped(self) -> None:
        """Remove what ``_drop`` held, each file hashed again first (a write within
        the clock's coarse tick moves no time): one that changed since is a save, kept
        (``_save_stands``)."""
        while self.dropping:
            rel, held, blobs = self.dropping.pop(0)
            if os.path.lexists(held) and not self.holds(rel, held, blobs):
                self._save_stands(rel, held)
            else:
                held.unlink(missing_ok=True)

    def _save_stands(self, rel: str, held: Path) -> None:
        """A save written into the file at ``rel`` after bar captured it (``held``: an
        editor had it open): the newest save of the path unless another came since.
        Where bar put its own version at ``rel``, that version is captured in turn: if
        it holds what bar wrote, the save takes its place (and bar's is dropped, hashed
        again first like any other); if a save went into it or made a new file there,
        that one is the newest and stays, and ``held`` is kept aside (``keep_raced``)."""
        ours = self.ours.pop(rel, None)
        if ours is not None and (captured := self._capture(rel)) is not None:
            inode, blob = ours
            if os.lstat(captured).st_ino == inode and self.holds(rel, captured, (blob,)):
                self._drop(rel, captured, (blob,))
            else:
                self.keep_raced(rel, captured)  # (back at the path: it is free)
        self.keep_raced(rel, held)

    def replace(self, rel: str, blobs: Blobs, new: Path, blob: str | None = None) -> bool:
        """Put ``new`` (a file or symlink of bar's; ``blob``: the blob it holds, where
        known) at ``rel``, where bar verified one of ``blobs`` (None: nothing). False,
        with the path in ``raced``, when what is there changed since: it is kept and
        ``new`` is not written."""
        if self.lexists(rel) and not self.remove(rel, blobs):
            return False
        faults.point("between a file's removal and its replacement")
        return self.place(rel, new, blob)

    def place(self, rel: str, new: Path, blob: str | None = None) -> bool:
        """Link ``new`` in at ``rel`` without replacing anything there (``blob``: what
        it holds, where known: a save into a file bar captured may take its place)."""
        dest = self.root / rel
        st = os.lstat(new)
        at = self._parent(rel, make=True)
        if at is None:
            self.raced.append(Raced(rel, dest))  # a file or a link where a directory must be
            return False
        fd, name = at
        try:
            if stat.S_ISLNK(st.st_mode):
                try:
                    os.symlink(os.readlink(new), name, dir_fd=fd)
                except FileExistsError:
                    self.raced.append(Raced(rel, dest))  # saved since it was captured
                    return False
                new.unlink()
                return True
            try:
                try:
                    os.link(new, name, dst_dir_fd=fd, follow_symlinks=False)
                    self.placed.append((rel, st.st_ino))
                    inode = st.st_ino
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                        raise
                    inode = _copy_new(new, fd, name, st.st_mode)
            except FileExistsError:
                self.raced.append(Raced(rel, dest))  # saved since it was captured: theirs stays
                return False
            if blob is not None:
                self.ours[rel] = (inode, blob)
        finally:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            new.unlink()
        return True

    def lexists(self, rel: str) -> bool:
        """Whether something (a link included) is at ``rel``, reached with no link on
        the way."""
        return beneath.lstat_beneath(self._top(), rel) is not None

    def make_dir(self, rel: str) -> None:
        """Make the directory ``rel`` (and those above it) where nothing is: what git
        writes for a gitlink. Left alone where a file or a link is on the way."""
        with contextlib.suppress(OSError):
            beneath.makedirs_beneath(self._top(), rel)

    def remove_dir(self, rel: str) -> bool:
        """Remove the directory ``rel`` if it is empty (never a link, nor beyond one);
        True if done."""
        try:
            beneath.rmdir_beneath(self._top(), rel)
        except OSError:
            return False
        return True

    def prune(self, rel: str) -> None:
        """Remove the directories a removed path ``rel`` leaves empty, as git does."""
        parent = os.path.dirname(rel)
        while parent and self.remove_dir(parent):
            parent = os.path.dirname(parent)

    def remove_empty(self, rel: str) -> bool:
        """Remove the directory ``rel`` if it holds only directories (what the removals
        left of a tree that becomes a file), as git would; True if done. Walked from its
        descriptor: no link is followed."""
        try:
            top = beneath.open_beneath(self._top(), rel, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return False
        try:
            for _here, dirs, files, dir_fd in os.fwalk(".", topdown=False, dir_fd=top):
                if files:
                    return False
                for name in dirs:
                    try:
                        os.rmdir(name, dir_fd=dir_fd)  # (a link: ENOTDIR, never followed)
                    except OSError:
                        return False
        finally:
            os.close(top)
        return self.remove_dir(rel)

    def _parent(self, rel: str, make: bool = False) -> tuple[int, str] | None:
        """The directory holding ``rel`` (a descriptor, reached with no link on the way;
        made first where ``make``) and the name in it; None where a file or a link is on
        the way, or the directory is gone. The caller closes the descriptor."""
        try:
            try:
                return beneath.parent_beneath(self._top(), rel)
            except FileNotFoundError:
                if not (make and "/" in rel):
                    raise
            beneath.makedirs_beneath(self._top(), os.path.dirname(rel))
            return beneath.parent_beneath(self._top(), rel)
        except (FileNotFoundError, NotADirectoryError, FileExistsError, beneath.LinkOnTheWay):
            return None

    def settle(self) -> None:
        """Give the files linked in (``place``) the times of a file written now. The
        link and the unlink of their staged name moved their ctime past the mtime git
        gave them, and a ctime newer than the mtime is what a time set back looks like
        (``bar.git.racy``). Done in one pass after all are placed, just before the
        caller notes their stat (a refresh of the index): the files' mtimes and
        the index then fall in as short a time as git's own checkout gives them. A file
        saved over one of them since is left as saved."""
        for rel, ino in self.placed:
            try:  # (a FIFO put there meanwhile must not hold the open)
                fd = beneath.open_beneath(self._top(), rel, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                if os.fstat(fd).st_ino == ino:
                    os.utime(fd)
            finally:
                os.close(fd)
        self.placed.clear()

    def _capture(self, rel: str) -> Path | None:
        """Rename what is at ``rel`` into the aside directory (None: nothing there, or a
        directory, or it cannot be renamed there)."""
        if not self.renames:
            return None
        at = self._parent(rel)
        if at is None:
            return None
        fd, name = at
        try:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                return None
            if stat.S_ISDIR(st.st_mode):
                return None
            held = self._held(rel)
            if held.parent != self.flat:
                held.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(name, held, src_dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                self.renames = False
                return None
            return held
        finally:
            os.close(fd)

    def _held(self, rel: str) -> Path:
        """Where ``rel`` is captured: one name in one directory (``rel`` with ``%`` and
        ``/`` escaped), so that capturing makes and removes no directories; a path too
        long for one name keeps its directories under ``deep``."""
        name = _escaped(rel)
        if len(os.fsencode(name)) <= _NAME_MAX:
            return self.flat / name
        return self.aside / "deep" / rel

    def keep_raced(self, rel: str, captured: Path) -> None:
        """The bytes a save put at ``rel`` after bar verified it, captured at ``captured``:
        never dropped. Put back at ``rel`` if the path is still free (the save stands,
        bar's version is not written), else moved to the task's trash (``trash``, where
        one is given), else kept beside it as ``<name>.bar-raced-<pid>``. Either way the
        path is reported (``raced``)."""
        dest = self.root / rel
        at = self._parent(rel)
        if at is not None:
            fd, name = at
            try:
                os.link(captured, name, dst_dir_fd=fd, follow_symlinks=False)  # (never replaces)
                captured.unlink()
                self.raced.append(Raced(rel, dest))
                return
            except OSError:
                pass
            finally:
                os.close(fd)
        if self.trash is not None:
            kept_in = self.trash(rel, captured)
            if kept_in is not None:
                self.raced.append(Raced(rel, kept_in))
                return
        # beside the path; where a link is on the way to it, at the root, named for it
        at = self._parent(rel)
        where = dest.parent
        if at is None:
            at, where = beneath.parent_beneath(self._top(), _escaped(rel)), self.root
        fd, name = at
        try:
            kept = _link_anew(captured, fd, name)
        finally:
            os.close(fd)
        self.raced.append(Raced(rel, where / kept))

    def hand_back(self) -> None:
        """What an earlier write that was killed left captured: put back (``keep_raced``).
        Also what it was moving to the trash (``to-trash``, the caller's): killed between
        the two moves, or the trash refused it."""
        for name in sorted(os.listdir(self.flat)):
            rel = _ESCAPED.sub(lambda m: "%" if m[1] == "25" else "/", name)
            self.keep_raced(rel, self.flat / name)
        for tree in ("deep", "to-trash"):
            top = self.aside / tree
            for dirpath, dirs, files in os.walk(top):
                links = [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]
                for name in files + links:
                    path = Path(dirpath) / name
                    if os.path.lexists(path):  # (a later one may have moved it on)
                        self.keep_raced(path.relative_to(top).as_posix(), path)
        deep = self.aside / "deep"
        if deep.is_dir():
            import shutil

            shutil.rmtree(deep, ignore_errors=True)

    def close(self) -> None:
        """Remove the aside directory, what ``_drop`` held compared again first (what is
        left in it was handed back already)."""
        import shutil

        self.verify_dropped()

        shutil.rmtree(self.aside, ignore_errors=True)
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None


_NAME_MAX = 240  # bytes of one name a captured path may take (file systems allow 255)
_ESCAPED = re.compile("%(25|2F)")


def _escaped(rel: str) -> str:
    """``rel`` as one name: ``%`` and ``/`` escaped."""
    return rel.replace("%", "%25").replace("/", "%2F")


def _link_anew(captured: Path, dir_fd: int, name: str) -> str:
    """Move ``captured`` into ``dir_fd`` as ``<name>.bar-raced-<pid>`` (``-2``, ``-3``...
    where one is there already: never over earlier kept bytes); a name too long for the
    file system is shortened, its end a hash of it. The name given."""
    base = f"{name}.bar-raced-{os.getpid()}"
    if len(os.fsencode(base)) > _NAME_MAX:
        digest = hashlib.sha1(os.fsencode(name)).hexdigest()[:16]
        keep = os.fsencode(name)[: _NAME_MAX - 64].decode("utf-8", "ignore")
        base = f"{keep}-{digest}.bar-raced-{os.getpid()}"
    for n in range(1, 1000):
        kept = base if n == 1 else f"{base}-{n}"
        try:
            os.link(captured, kept, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            continue
        captured.unlink()
        return kept
    raise FileExistsError(errno.EEXIST, f"no free name beside {name}")


def _copy_new(new: Path, dir_fd: int, name: str, mode: int) -> int:
    """Create ``name`` in ``dir_fd`` (never replacing) with ``new``'s bytes and mode;
    its inode."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, stat.S_IMODE(mode), dir_fd=dir_fd)
    try:
        with open(new, "rb") as src:
            while chunk := src.read(1 << 20):
                os.write(fd, chunk)
        os.fchmod(fd, stat.S_IMODE(mode))
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)
