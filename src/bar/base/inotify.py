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
    ``drain`` answers None and the caller stats everything.

    ``limit``: how many directories it may watch (its share of the user's inotify
    watches: ``bar.changes.fast.watches``). Past it, or when the kernel has no watch left,
    a directory is left unwatched and the watch is *partial*: ``look`` names the
    directories it watches, and the caller looks at the others by their ctimes.
    """

    def __init__(
        self, root: str, dirs: Iterable[str], *, begin: bool = True, limit: int | None = None
    ) -> None:
        self._root = root.rstrip(os.sep)
        self._pending: Iterable[str] | None = dirs
        self._fd = -1
        self._dirs: dict[int, str] = {}
        self._watched: dict[str, int] = {}
        self._complete = False  # no event was lost since the last drain
        self._missing = True  # a directory could not be watched: never sure again
        self._limit = limit
        self._partial = False  # a directory was left unwatched for want of watches
        self._found: set[str] = set()
        self._new_dirs: list[str] = []
        self.snapshot: str | None = None  # the recorded state it began watching at
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
        if self._limit is not None and len(self._watched) >= self._limit:
            self._partial = True
            return False
        path = f"{self._root}/{rel}" if rel else self._root
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _TREE_MASK | _ADD_FLAGS)
        if wd < 0:
            err = ctypes.get_errno()
            if err == errno.ENOSPC:
                self._partial = True  # the user's watches ran out: looked at by ctime
            elif err not in (errno.ENOENT, errno.ENOTDIR):
                self._missing = True  # watched under another name, or no inotify
            return False
        self._dirs[wd] = rel
        self._watched[rel] = wd
        return True

    def _drop(self, rel: str) -> None:
        """Stop watching ``rel`` and every directory watched under it: they moved away
        or went, and their watches' names no longer say where they are."""
        under = rel + "/"
        for name in [n for n in self._watched if n == rel or n.startswith(under) or not rel]:
            wd = self._watched.pop(name)
            self._dirs.pop(wd, None)
            self._libc.inotify_rm_watch(self._fd, wd)  # (its IN_IGNORED is not ours now)

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

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & _IN_Q_OVERFLOW:
            self._complete = False
            return
        if mask & _IN_IGNORED:
            gone = self._dirs.pop(wd, None)  # the directory went away
            if gone is not None and self._watched.get(gone) == wd:
                del self._watched[gone]
            return
        parent = self._dirs.get(wd)
        if parent is None:
            return  # a watch dropped since (its queued events are of a stale name)
        if not name:  # the directory itself
            if mask & (_IN_MOVE_SELF | _IN_DELETE_SELF):
                self._found.add(parent)
                self._drop(parent)  # where it went (if in the worktree) is a new directory
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
        """Whether it holds as many watches as its ``limit`` allows."""
        return self._limit is not None and len(self._watched) >= self._limit

    @property
    def limit(self) -> int | None:
        return self._limit

    def fileno(self) -> int:
        return self._fd

    def hand_over(self) -> tuple[int, dict[int, str], bool] | None:
        """Give up the kernel's watch to another process (``bar.changes.fast.watcher``): its
        descriptor, what each watch number stands for and whether it is partial; None if
        it is not sure. The events not yet drained stay queued for the new owner."""
        if not self.sure:
            return None
        fd, dirs = self._fd, self._dirs
        self._fd, self._dirs, self._watched = -1, {}, {}
        return fd, dirs, self._partial

    @classmethod
    def adopt(
        cls,
        root: str,
        fd: int,
        dirs: dict[int, str],
        *,
        limit: int | None = None,
        partial: bool = False,
    ) -> TreeWatch:
        """The watch another process handed over (``hand_over``)."""
        watch = cls(root, (), begin=False, limit=limit)
        if watch._fd >= 0:
            _close(watch._fd)
        watch._fd, watch._pending = fd, None
        watch._dirs, watch._watched = dict(dirs), {rel: wd for wd, rel in dirs.items()}
        watch._complete, watch._missing, watch._partial = True, False, partial
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
