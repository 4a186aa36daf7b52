"""Which files in a few directories changed while a step ran, from the kernel (inotify).

Statting every file after a step costs microseconds per file; asking the kernel to say
what changed costs nothing per file. A ``Watch`` over some directories (not their
subdirectories) collects the names of entries created, written, moved in or whose
attributes changed, until ``changes`` reads them. It answers None where it cannot be
sure (no inotify, a directory that could not be watched, the kernel's event queue
overflowed): the caller then looks at everything.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct
import threading
from collections.abc import Collection, Iterable

from bar.base.fanotify import Marks
from bar.base.mounts import MountWatch
from bar.base.record import record

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_Q_OVERFLOW = 0x4000
_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE
# every change of an entry, the directory's own included (``Watch.quiet``)
ANY_CHANGE = _MASK | 0x040 | 0x200 | 0x400 | 0x800  # (moved from, deleted, itself too)
_EVENT = struct.Struct("iIII")


class Watch:
    """``Watch(dirs)`` starts watching; ``changes()`` says what changed since (or None).
    ``mask``: which events count (inotify's)."""

    def __init__(self, dirs: Iterable[str], mask: int = _MASK) -> None:
        self._fd = -1
        self._dirs: dict[int, str] = {}
        self._complete = False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        self._fd = fd
        self._complete = True
        for path in dirs:
            wd = libc.inotify_add_watch(fd, os.fsencode(path), mask)
            if wd < 0:
                self._complete = False
                break
            self._dirs[wd] = path

    def quiet(self) -> bool:
        """Whether nothing has happened in its directories since it began; False if it
        cannot say. Nothing is read: it stays so for every process sharing the watch
        (the forks of the resident)."""
        if self._fd < 0 or not self._complete:
            return False
        import select

        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        return not poll.poll(0)

    def changes(self) -> set[str] | None:
        """Paths (``dir/name``) changed since the watch began; None if not known."""
        if self._fd < 0:
            return None
        found: set[str] = set()
        try:
            while True:
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    break
                offset = 0
                while offset + _EVENT.size <= len(data):
                    wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                    offset += _EVENT.size
                    name = data[offset : offset + size].rstrip(b"\0")
                    offset += size
                    if mask & _IN_Q_OVERFLOW:
                        self._complete = False
                    elif wd in self._dirs and name:
                        found.add(os.path.join(self._dirs[wd], os.fsdecode(name)))
        finally:
            self.close()
        return found if self._complete else None

    def close(self) -> None:
        """Let go of the kernel's watch. Closing an inotify descriptor waits for the
        kernel's read-side grace period (often over 10 ms here): a thread does it while
        bar goes on."""
        if self._fd >= 0:
            threading.Thread(target=_close, args=(self._fd,), daemon=True).start()
            self._fd = -1


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


_IN_ISDIR = 0x40000000
_IN_IGNORED = 0x8000
_IN_MOVED_FROM = 0x040
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
# how a watch is added: never through a symbolic link (a directory swapped for a link
# would have the link's target watched under the directory's name), only on a directory,
# and only if the directory is not watched already (under another name: a directory that
# moved, whose old watch must go first)
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_MASK_CREATE = 0x10000000
_ADD_FLAGS = _IN_ONLYDIR | _IN_DONT_FOLLOW | _IN_MASK_CREATE
_EDITS = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE
_NEW_DIRS = _IN_CREATE | _IN_MOVED_TO
_ENTRIES = _IN_CREATE | _IN_MOVED_TO | _IN_DELETE | _IN_MOVED_FROM
_TREE_MASK = _EDITS | _ENTRIES | _IN_DELETE_SELF | _IN_MOVE_SELF
# why a directory may get no fanotify mark and be looked at by its ctime instead: the
# user's marks ran out, or its file system does not name directories by handle
_MARK_LEFT_OUT = (errno.ENOSPC, errno.EOPNOTSUPP, errno.EXDEV, errno.ENODEV, errno.ENOSYS)
_MAX_NEW_DIRS = 20_000  # watched per appearing tree; beyond, they are left unwatched


class Seen:
    """What a ``TreeWatch`` saw since it was last drained: the ``paths`` that changed in
    the directories it watches, and which directories those are (``watched``; None: every
    directory of the worktree). A directory it does not watch (a partial watch: it was
    given fewer watches than directories) must be looked at by the caller, by its ctime
    (``bar.changes.fast.rescan``)."""

    __slots__ = ("paths", "watched")

    def __init__(self, paths: set[str], watched: frozenset[str] | None = None) -> None:
        self.paths, self.watched = paths, watched


Key = int | bytes  # a directory's: its inotify watch, or its fanotify mark (``Marks.add``)


@record(frozen=True)
class Handed:
    """A ``TreeWatch`` given up for another process to ``adopt``: the inotify descriptor
    and what each watch stands for, the fanotify group's (-1: none) and what each mark
    key (hexadecimal) stands for, and whether the watch is partial."""

    fd: int
    dirs: dict[int, str]
    marks_fd: int
    marks: dict[str, str]
    partial: bool
    mounts: list[tuple[int, str]] | None = None  # the mount points noted (``MountWatch``)


class TreeWatch:
    """The paths that changed under a worktree, from the kernel: what a snapshot needs to
    look at, so that it need not list every directory (every recorded file is statted
    all the same: ``bar.changes.fast.rescan``).

    Started on every directory the last snapshot stamped (``bar.changes.fast.stamps``), it collects the
    relative path of every entry created, deleted, moved, written or whose attributes
    changed in them. A directory that appears is one path (git rescans it whole); it is
    watched from the next ``drain`` on, before the snapshot that follows looks at it, so
    nothing written in it later goes unseen. A watched directory that moves away or is
    deleted has its watch, and those of the directories under it, dropped (their names
    would be wrong from then on); where it moved to, if inside the worktree, is a new
    directory. A watch is never added through a symbolic link nor on a directory already
    watched under another name: where that is refused for any reason but the directory
    being gone or the watches running out, and where the kernel's queue overflows,
    ``drain`` answers None and the caller stats everything. A mount or an unmount at, in
    or above the worktree (which no watch hears of) makes it never sure again.

    ``limit``: how many directories it may watch with inotify (its share of the user's
    inotify watches: ``bar.changes.fast.watches``); ``marks``: how many more it may mark
    with fanotify (``bar.base.fanotify``: the user's marks are a budget of their own)
    once those are used up or the kernel has no inotify watch left. Past both, a
    directory is left unwatched and the watch is *partial*: ``look`` names the
    directories it watches, and the caller looks at the others by their ctimes.
    """

    def __init__(
        self,
        root: str,
        dirs: Iterable[str],
        *,
        begin: bool = True,
        limit: int | None = None,
        marks: int = 0,
    ) -> None:
        self._root = root.rstrip(os.sep)
        self._pending: Iterable[str] | None = dirs
        self._fd = -1
        self._dirs: dict[Key, str] = {}
        self._watched: dict[str, Key] = {}
        self._watches = 0  # how many of ``_watched`` are inotify watches (the rest: marks)
        self._marks: Marks | None = None  # (made when the first mark is needed)
        self._mark_limit = marks
        self._complete = False  # no event was lost since the last drain
        self._missing = True  # a directory could not be watched: never sure again
        self._limit = limit
        self._partial = False  # a directory was left unwatched for want of watches
        self._found: set[str] = set()
        self._new_dirs: list[str] = []
        self.snapshot: str | None = None  # the recorded state it began watching at
        self._mounts: MountWatch | None = None
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)
            fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        add = self._libc.inotify_add_watch
        add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._libc.inotify_rm_watch.argtypes = (ctypes.c_int, ctypes.c_int)
        self._fd = fd
        self._complete, self._missing = True, False
        self._mounts = MountWatch(self._root)
        if begin:
            self.begin()

    def begin(self) -> None:
        """Watch the directories it was made for (once): what changes in them from now
        on is reported. Made with ``begin=False``, the watch can start at the moment the
        caller chooses (after it has started a child that stats files, say)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self.cover(pending)

    def cover(self, dirs: Iterable[str]) -> None:
        """Watch these directories too (those a snapshot just stamped, say); begins the
        watch if it was not."""
        self.begin()
        if self._fd >= 0:
            for rel in dirs:
                if rel not in self._watched:
                    self._add(rel)

    def _add(self, rel: str) -> bool:
        path = f"{self._root}/{rel}" if rel else self._root
        if self._limit is None or self._watches < self._limit:
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _TREE_MASK | _ADD_FLAGS)
            if wd >= 0:
                self._dirs[wd] = rel
                self._watched[rel] = wd
                self._watches += 1
                return True
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR):
                return False
            if err != errno.ENOSPC:
                self._missing = True  # watched under another name, or no inotify
                return False
            # (the user's watches ran out: a mark, if bar may have one)
        return self._mark(rel, path)

    def _mark(self, rel: str, path: str) -> bool:
        """Watch ``rel`` with a fanotify mark; where it cannot be, the watch is partial
        (the directory is looked at by its ctime) or, if the directory is marked under
        another name already (it moved), never sure again."""
        if self.marked >= self._mark_limit:
            self._partial = True
            return False
        if self._marks is None:
            self._marks = Marks.open()
            if self._marks is None:  # (no fanotify here, or not for this user)
                self._mark_limit = 0
                self._partial = True
                return False
        try:
            key = self._marks.add(path, _TREE_MASK)
        except OSError as exc:
            if exc.errno in _MARK_LEFT_OUT:
                self._partial = True  # out of marks, or a file system without handles
            elif exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                self._missing = True  # (not readable, say: as for a watch)
            return False
        if self._dirs.get(key, rel) != rel:
            self._missing = True
            return False
        self._dirs[key] = rel
        self._watched[rel] = key
        return True

    def _forget(self, rel: str) -> Key:
        key = self._watched.pop(rel)
        self._dirs.pop(key, None)
        if isinstance(key, int):
            self._watches -= 1
        return key

    def _drop(self, rel: str) -> None:
        """Stop watching ``rel`` and every directory watched under it: they moved away
        or went, and their watches' names no longer say where they are. A fanotify mark
        is only forgotten: its directory can no longer be named to remove it."""
        under = rel + "/"
        for name in [n for n in self._watched if n == rel or n.startswith(under) or not rel]:
            key = self._forget(name)
            if isinstance(key, int):
                self._libc.inotify_rm_watch(self._fd, key)  # (its IN_IGNORED is not ours now)

    def _add_tree(self, rel: str) -> None:
        """A directory that appeared, and the ones already in it (moved in whole)."""
        stack, added = [rel], 0
        while stack:
            here = stack.pop()
            if added >= _MAX_NEW_DIRS or self.full:
                self._partial = True  # (the rest are looked at by their ctimes)
                return
            if here in self._watched:
                self._drop(here)  # a stale name: the directory there is another one now
            if not self._add(here):
                if self._partial and self.full:
                    return
                continue
            added += 1
            try:
                with os.scandir(os.path.join(self._root, here)) as entries:
                    stack += [
                        f"{here}/{e.name}"
                        for e in entries
                        if e.name != ".git" and e.is_dir(follow_symlinks=False)
                    ]
            except OSError:
                continue

    def drain(self, *, last: bool = False) -> set[str] | None:
        """Paths (relative) that changed since the last drain; None if the kernel may have
        missed one since then. Clears what it returns. Unless ``last``, directories that
        appeared are watched from now on (the caller looks at them after this)."""
        if self._fd < 0:
            return None
        if self._mounts is not None and self._mounts.moved():
            self._missing = True  # (what it watches may be under a mount, or gone with one)
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self._complete = False
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = os.fsdecode(data[offset : offset + size].rstrip(b"\0"))
                offset += size
                self._event(wd, mask, name)
        if self._marks is not None:
            try:
                for key, mask, name in self._marks.read():
                    self._event(key, mask & ~_IN_IGNORED, name)  # (0x8000: not fanotify's)
            except OSError:
                self._complete = False
        new_dirs, self._new_dirs = self._new_dirs, []
        if not last:
            for rel in new_dirs:
                self._add_tree(rel)
        found, complete = self._found, self._complete and not self._missing
        self._found, self._complete = set(), True
        return found if complete else None

    def look(self, *, last: bool = False) -> Seen | None:
        """``drain``, with what it covers: the paths, and the directories watched if
        the watch is partial (the caller looks at the others itself)."""
        found = self.drain(last=last)
        if found is None:
            return None
        return Seen(found, frozenset(self._watched) if self._partial else None)

    def _event(self, wd: Key, mask: int, name: str) -> None:
        if mask & _IN_Q_OVERFLOW:
            self._complete = False
            return
        if mask & _IN_IGNORED:
            gone = self._dirs.get(wd)  # the directory went away
            if gone is not None and self._watched.get(gone) == wd:
                self._forget(gone)
            else:
                self._dirs.pop(wd, None)
            return
        parent = self._dirs.get(wd)
        if parent is None:
            return  # a watch dropped since (its queued events are of a stale name)
        if not name:  # the directory itself
            if mask & (_IN_MOVE_SELF | _IN_DELETE_SELF):
                self._found.add(parent)
                self._drop(parent)  # where it went (if in the worktree) is a new directory
            elif mask & _IN_ATTRIB:
                # its mode changed (a directory readable again must be listed again):
                # fanotify says so to a marked directory itself, where inotify tells
                # its parent's watch by name; the root has no parent to rescan it in
                if parent:
                    self._found.add(parent)
                else:
                    self._complete = False
            return
        rel = f"{parent}/{name}" if parent else name
        self._found.add(rel)
        if mask & _IN_ISDIR:
            if mask & _NEW_DIRS:
                self._new_dirs.append(rel)
        elif mask & _NEW_DIRS and rel in self._watched:
            self._drop(rel)  # a directory replaced by a file or a link: its watch is stale

    @property
    def sure(self) -> bool:
        """Whether every directory it was given is watched (it can still say None when
        the kernel's queue overflows)."""
        return self._fd >= 0 and not self._missing

    @property
    def watched(self) -> Collection[str]:
        return self._watched.keys()

    @property
    def partial(self) -> bool:
        """Whether a directory was left unwatched for want of watches (``limit``)."""
        return self._partial

    @property
    def full(self) -> bool:
        """Whether it holds as many watches and marks as its limits allow."""
        return (
            self._limit is not None
            and self._watches >= self._limit
            and self.marked >= self._mark_limit
        )

    @property
    def limit(self) -> int | None:
        return self._limit

    @property
    def mark_limit(self) -> int:
        return self._mark_limit

    @property
    def marked(self) -> int:
        """How many of the directories it watches have a fanotify mark, not a watch."""
        return len(self._watched) - self._watches

    def filenos(self) -> list[int]:
        """The descriptors its events come from (the fanotify group's once it has one)."""
        fds = [self._fd] if self._fd >= 0 else []
        if self._marks is not None and self._marks.fileno() >= 0:
            fds.append(self._marks.fileno())
        return fds

    def hand_over(self) -> Handed | None:
        """Give up the kernel's watch to another process (``bar.changes.fast.watcher``);
        None if it is not sure. The events not yet drained stay queued for the new
        owner."""
        if not self.sure:
            return None
        dirs = {k: rel for k, rel in self._dirs.items() if isinstance(k, int)}
        marks = {k.hex(): rel for k, rel in self._dirs.items() if isinstance(k, bytes)}
        marks_fd = self._marks.give_up() if self._marks is not None else -1
        mounts = None
        if self._mounts is not None:
            points = self._mounts.points
            mounts = sorted(points) if points is not None else None
            self._mounts.close()
            self._mounts = None
        handed = Handed(self._fd, dirs, marks_fd, marks, self._partial, mounts)
        self._fd, self._dirs, self._watched, self._watches = -1, {}, {}, 0
        self._marks = None
        return handed

    @classmethod
    def adopt(
        cls,
        root: str,
        handed: Handed,
        *,
        limit: int | None = None,
        marks: int = 0,
    ) -> TreeWatch:
        """The watch another process handed over (``hand_over``)."""
        watch = cls(root, (), begin=False, limit=limit, marks=marks)
        if watch._fd >= 0:
            _close(watch._fd)
        watch._fd, watch._pending = handed.fd, None
        keyed: dict[Key, str] = dict(handed.dirs.items())
        if handed.marks_fd >= 0:
            watch._marks = Marks.adopt(handed.marks_fd)
            keyed.update({bytes.fromhex(k): rel for k, rel in handed.marks.items()})
        watch._dirs, watch._watched = keyed, {rel: key for key, rel in keyed.items()}
        watch._watches = len(handed.dirs)
        watch._complete, watch._missing = True, watch._marks is None and bool(handed.marks)
        watch._partial = handed.partial
        if watch._mounts is not None:
            watch._mounts.close()
        noted = frozenset((int(i), str(p)) for i, p in handed.mounts or ())
        watch._mounts = MountWatch(root, noted if handed.mounts is not None else frozenset())
        watch._missing = watch._missing or handed.mounts is None
        return watch

    def add(self, rel: str) -> bool:
        """Watch one more directory (its subdirectories are not): False if it could not
        be (gone; out of watches: then it is partial; or watched under another name:
        then it is no longer sure)."""
        return rel in self._watched or self._add(rel)

    def close(self) -> None:
        if self._fd >= 0:
            threading.Thread(target=_close, args=(self._fd,), daemon=True).start()
            self._fd = -1
        if self._marks is not None:
            self._marks.close()
        if self._mounts is not None:
            self._mounts.close()
