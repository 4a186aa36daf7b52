"""The task's trash: what bar must remove from a worktree that no recorded state holds.

docs/internals/record.md, "Nothing is destroyed that was not recorded": a rollback that
turns a nested repository into a file, a close that removes a worktree holding ignored
files, any command that would unlink bytes no snapshot holds, moves them here first. Each
move is one *entry*, a directory ``tasks/<id>/trash/<UTC time>-<n>/``:

```
manifest.json   when, which command (and step), why, and each path moved: its kind
                (file, dir, nested-repo, symlink), its size, a nested repository's HEAD
files/<path>    what was moved, at its path relative to the worktree, modes kept
```

A move is a rename when the trash is on the worktree's file system; else a full copy,
fsynced, before the original is removed: a crash leaves the bytes in one place or both,
never in neither. The manifest is written before anything moves, so an entry whose
moves were cut short lists paths that are still in the worktree (``bar trash`` shows
only what is there).

On the worktree's side nothing follows a link (``bar.base.beneath``): the directory
holding a path is opened without following any, and the rename is made relative to it.

``bar trash`` lists the entries, ``bar trash restore`` puts paths back (never over
anything that exists), a rollback that brings back a gitlink whose nested repository it
moved puts that repository back by itself (``put_back_nested``), and a worktree made again
(``bar task reopen``, a start of a pending task) gets back what closing moved aside
(``put_back_after_close``). ``bar task delete`` empties it with the task.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from bar.base import beneath
from bar.base.clock import now_iso
from bar.base.notices import note, plural, warn
from bar.base.record import field, record
from bar.errors import BarError, NotFound
from bar.store.files import ensure_dir, fsync_dir, read_json, write_json_atomic

if TYPE_CHECKING:
    from bar.model.tasks import Task

MANIFEST = "manifest.json"
FILES = "files"
VERSION = 1

FILE, DIR, NESTED_REPO, SYMLINK = "file", "dir", "nested-repo", "symlink"
# the reasons a command gives, so that later commands know which entries are theirs
ROLLBACK, CLOSE = "rollback", "close"

_DIR_FLAGS = beneath.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@record(frozen=True)
class Item:
    """One path moved to the trash."""

    path: str  # relative to the worktree, '/'-separated
    kind: str  # FILE, DIR, NESTED_REPO or SYMLINK
    size: int  # bytes (of every file below it, for a directory)
    head: str | None = None  # a nested repository's HEAD commit, when it has one

    @property
    def shown(self) -> str:
        """Its path as a listing shows it: a directory's with a ``/``."""
        return self.path + ("/" if self.kind in (DIR, NESTED_REPO) else "")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "kind": self.kind, "size": self.size}
        if self.head is not None:
            data["head"] = self.head
        return data


@record(frozen=True)
class Entry:
    """One move to the trash: its directory's name, when and why, and what is in it."""

    id: str
    when: str
    command: str
    reason: str
    kind: str  # ROLLBACK, CLOSE or another command's word: who may put it back by itself
    step: str | None = None
    items: list[Item] = field(default_factory=list)
    # the recorded state the worktree held when they were moved (a rollback's)
    state: str | None = None

    @property
    def size(self) -> int:
        return sum(i.size for i in self.items)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "when": self.when,
            "command": self.command,
            "step": self.step,
            "kind": self.kind,
            "reason": self.reason,
            "state": self.state,
            "size": self.size,
            "paths": [i.to_json() for i in self.items],
        }


# --- what is on disk ---------------------------------------------------------------


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _is_repo(dir_fd: int) -> bool:
    return _lstat_at(dir_fd, ".git") is not None


def _open_dir(dir_fd: int, name: str) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def _size_of(dir_fd: int) -> int:
    total = 0
    for name in os.listdir(dir_fd):
        st = _lstat_at(dir_fd, name)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = _open_dir(dir_fd, name)
            except OSError:
                continue
            try:
                total += _size_of(sub)
            finally:
                os.close(sub)
        else:
            total += st.st_size
    return total


def _describe(dir_fd: int, name: str, st: os.stat_result) -> tuple[str, int, str | None]:
    """(kind, size, HEAD) of ``name`` in ``dir_fd``."""
    if stat.S_ISLNK(st.st_mode):
        return SYMLINK, st.st_size, None
    if not stat.S_ISDIR(st.st_mode):
        return FILE, st.st_size, None
    sub = _open_dir(dir_fd, name)
    try:
        if _is_repo(sub):
            return NESTED_REPO, _size_of(sub), _head_of(sub)
        return DIR, _size_of(sub), None
    finally:
        os.close(sub)


def is_empty_dir(root: Path | str, rel: str) -> bool:
    """``root/rel`` is a directory holding nothing (no link on the way)."""
    try:
        fd = beneath.open_beneath(root, rel, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        return not os.listdir(fd)
    finally:
        os.close(fd)


def holds_repo(root: Path | str, rel: str) -> bool:
    """``root/rel`` is a directory with its own ``.git`` (a nested repository)."""
    try:
        fd = beneath.open_beneath(root, rel, beneath.O_PATH | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        return _is_repo(fd)
    finally:
        os.close(fd)


# A nested repository's HEAD, read from its files: git is not run there (its
# configuration is not bar's to run: nested repositories are foreign, docs/internals/record.md)
def _read_small(dir_fd: int, rel: str) -> str | None:
    """A small file at ``rel`` below the directory ``dir_fd``, no link followed."""
    parts = rel.split("/")
    try:
        held = os.dup(dir_fd)
    except OSError:
        return None
    try:
        for name in parts[:-1]:
            step = os.open(name, _DIR_FLAGS, dir_fd=held)
            os.close(held)
            held = step
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=held)
    except OSError:
        return None
    finally:
        os.close(held)
    try:
        return os.read(fd, 65536).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _head_of(repo_fd: int) -> str | None:
    gitdir = _read_small(repo_fd, ".git/HEAD")
    base: str | None = None
    if gitdir is None:  # a file `gitdir: PATH` (a worktree or a submodule's)
        pointer = _read_small(repo_fd, ".git")
        if pointer is None or not pointer.startswith("gitdir:"):
            return None
        target = pointer[len("gitdir:") :].strip()
        if not os.path.isabs(target):
            return None
        base = target
        try:
            with open(os.path.join(target, "HEAD"), encoding="utf-8", errors="replace") as f:
                gitdir = f.read()
        except OSError:
            return None
    head = gitdir.strip()
    if not head.startswith("ref:"):
        return head or None
    ref = head[4:].strip()
    loose = _read_small(repo_fd, f".git/{ref}") if base is None else _read_outside(base, ref)
    if loose and loose.strip():
        return loose.strip()
    packed = _read_small(repo_fd, ".git/packed-refs") if base is None else None
    for line in (packed or "").splitlines():
        parts = line.split(" ")
        if len(parts) == 2 and parts[1] == ref:
            return parts[0]
    return None


def _read_outside(gitdir: str, ref: str) -> str | None:
    try:
        with open(os.path.join(gitdir, ref), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def repo_head(root: Path | str, rel: str) -> str | None:
    """The HEAD commit of the nested repository at ``root/rel`` (None: none, or unborn)."""
    try:
        fd = beneath.open_beneath(root, rel, beneath.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        return _head_of(fd)
    finally:
        os.close(fd)


# --- moving aside --------------------------------------------------------------------


def _trash_dir(task: Task) -> Path:
    return task.paths.trash


def _new_entry_dir(task: Task) -> tuple[str, Path]:
    root = _trash_dir(task)
    ensure_dir(root)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 1
    while True:
        name = f"{stamp}-{n}"
        try:
            os.mkdir(root / name, 0o700)
            return name, root / name
        except FileExistsError:
            n += 1


def move_aside(
    task: Task,
    worktree_root: Path,
    rel_paths: Iterable[str],
    reason: str,
    *,
    command: str,
    kind: str,
    step: str | None = None,
    state: str | None = None,
    quiet: bool = False,
) -> list[Item]:
    """Move each of ``rel_paths`` (files, directories, nested repositories: whatever is
    there) out of ``worktree_root`` into a new entry of the task's trash, saying so on
    stderr (unless ``quiet``). A path that is not there, or that a link leads to, is
    left alone. Returns what was moved."""
    wanted = _outermost(sorted(set(rel_paths)))
    found: list[Item] = []
    for rel in wanted:
        try:
            fd, name = beneath.parent_beneath(worktree_root, rel)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except beneath.LinkOnTheWay:
            warn(f"{rel} is behind a symbolic link: left where it is")
            continue
        try:
            st = _lstat_at(fd, name)
            if st is None:
                continue
            what, size, head = _describe(fd, name, st)
        finally:
            os.close(fd)
        found.append(Item(rel, what, size, head))
    if not found:
        return []
    entry_id, where = _new_entry_dir(task)
    entry = Entry(entry_id, now_iso(), command, reason, kind, step, found, state)
    write_json_atomic(where / MANIFEST, _manifest(entry))
    files = where / FILES
    ensure_dir(files)
    moved: list[Item] = []
    for item in found:
        try:
            _move(worktree_root, item.path, files)
        except beneath.LinkOnTheWay:
            warn(f"{item.path} is behind a symbolic link: left where it is")
            continue
        except OSError as exc:
            warn(f"could not move {item.path} to the trash ({exc.strerror or exc}): left there")
            continue
        moved.append(item)
    if len(moved) != len(found):
        write_json_atomic(where / MANIFEST, _manifest(Entry(**{**_fields(entry), "items": moved})))
    if not moved:
        _remove_entry(where)
        return []
    if not quiet:
        for line in said_moved(moved, entry_id):
            note(line)
    return moved


def said_moved(items: list[Item], entry_id: str) -> list[str]:
    """What a move to the trash says: a line a path, a few of them, then a count."""
    lines = []
    for item in items[:5]:
        lines.append(
            f"moved {_label(item)} to the trash (entry {entry_id}): "
            f"`bar trash restore {item.path}` puts it back"
        )
    if len(items) > 5:
        lines.append(
            f"moved {plural(len(items) - 5, 'more path')} to the trash (entry {entry_id}): "
            f"`bar trash` lists them, `bar trash restore {entry_id}` puts them all back"
        )
    return lines


def _label(item: Item) -> str:
    if item.kind == NESTED_REPO:
        return f"{item.path}/ (a nested git repository)"
    if item.kind == DIR:
        return f"{item.path}/ ({plural(item.size, 'byte')} of files no state holds)"
    if item.kind == SYMLINK:
        return f"{item.path} (a symbolic link no state holds)"
    return f"{item.path} ({plural(item.size, 'byte')} no state holds)"


def _fields(entry: Entry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "when": entry.when,
        "command": entry.command,
        "reason": entry.reason,
        "kind": entry.kind,
        "step": entry.step,
        "items": entry.items,
        "state": entry.state,
    }


def _manifest(entry: Entry) -> dict[str, Any]:
    data = entry.to_json()
    data.pop("size")
    data.pop("id")
    return {"version": VERSION, **data}


def _outermost(paths: list[str]) -> list[str]:
    """``paths`` (sorted) without those inside another of them."""
    kept: list[str] = []
    for p in paths:
        if kept and p.startswith(kept[-1] + "/"):
            continue
        kept.append(p)
    return kept


def _dest_parent(files: Path, rel: str) -> tuple[int, str]:
    """The trash's directory for ``rel`` (made as needed, 0700), opened; and the name."""
    parts = rel.split("/")
    parent = files.joinpath(*parts[:-1])
    os.makedirs(parent, 0o700, exist_ok=True)
    return os.open(parent, _DIR_FLAGS), parts[-1]


def _move(root: Path, rel: str, files: Path) -> None:
    src, name = beneath.parent_beneath(root, rel)
    try:
        dst, dst_name = _dest_parent(files, rel)
        try:
            _rename_or_copy(src, name, dst, dst_name)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _rename_or_copy(src: int, name: str, dst: int, dst_name: str) -> None:
    """Move ``name`` (in ``src``) to ``dst_name`` (in ``dst``), which must not exist, and
    is never replaced: a file or a link is linked there first (a file a save made at
    that path meanwhile stays, and the move fails), then its old name removed; a
    directory is renamed (which replaces nothing but an empty directory). Across file
    systems, it is copied whole and fsynced before the original is removed."""
    st = _lstat_at(src, name)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "not there", name)
    if _lstat_at(dst, dst_name) is not None:
        raise FileExistsError(errno.EEXIST, "already there", dst_name)
    try:
        if stat.S_ISDIR(st.st_mode):
            os.rename(name, dst_name, src_dir_fd=src, dst_dir_fd=dst)
        else:
            os.link(name, dst_name, src_dir_fd=src, dst_dir_fd=dst, follow_symlinks=False)
            os.unlink(name, dir_fd=src)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        copy_then_remove(src, name, dst, dst_name)
        return
    fsync_dir(".", dir_fd=dst)
    fsync_dir(".", dir_fd=src)


def copy_then_remove(src: int, name: str, dst: int, dst_name: str) -> None:
    """The move of ``name`` where no rename can make it (another file system): a full
    copy, every file and directory fsynced, then the original removed."""
    _copy(src, name, dst, dst_name)
    fsync_dir(".", dir_fd=dst)
    _remove(src, name)
    fsync_dir(".", dir_fd=src)


def _copy(src: int, name: str, dst: int, dst_name: str) -> None:
    st = os.stat(name, dir_fd=src, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=src), dst_name, dir_fd=dst)
    elif stat.S_ISDIR(st.st_mode):
        os.mkdir(dst_name, 0o700, dir_fd=dst)
        inner = _open_dir(src, name)
        try:
            out = _open_dir(dst, dst_name)
            try:
                for child in os.listdir(inner):
                    _copy(inner, child, out, child)
                os.fchmod(out, stat.S_IMODE(st.st_mode))
                os.fsync(out)
            finally:
                os.close(out)
        finally:
            os.close(inner)
    elif stat.S_ISREG(st.st_mode):
        fin = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src)
        try:
            fout = os.open(
                dst_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst
            )
            try:
                while True:
                    chunk = os.read(fin, 1 << 20)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fout, view) :]
                os.fchmod(fout, stat.S_IMODE(st.st_mode))
                os.fsync(fout)
            finally:
                os.close(fout)
        finally:
            os.close(fin)
    elif stat.S_ISFIFO(st.st_mode):
        os.mkfifo(dst_name, stat.S_IMODE(st.st_mode), dir_fd=dst)
    else:
        return  # a socket or a device: no bytes of its own to keep
    os.utime(dst_name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst, follow_symlinks=False)


def _remove(dir_fd: int, name: str) -> None:
    st = _lstat_at(dir_fd, name)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        inner = _open_dir(dir_fd, name)
        try:
            for child in os.listdir(inner):
                _remove(inner, child)
        finally:
            os.close(inner)
        os.rmdir(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _remove_entry(where: Path) -> None:
    fd = os.open(where.parent, _DIR_FLAGS)
    try:
        _remove(fd, where.name)
    finally:
        os.close(fd)


# --- reading the trash -----------------------------------------------------------------


def entries(task: Task) -> list[Entry]:
    """The task's trash, oldest entry first; each with only the paths still in it."""
    root = _trash_dir(task)
    try:
        names = sorted(os.listdir(root), key=_order)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        entry = _read_entry(root / name)
        if entry is not None and entry.items:
            found.append(entry)
    return found


def _order(name: str) -> tuple[str, int]:
    stamp, _, n = name.rpartition("-")
    return (stamp, int(n) if n.isdigit() else 0)


def _read_entry(where: Path) -> Entry | None:
    try:
        data = read_json(where / MANIFEST, "a trash manifest")
    except (BarError, OSError):
        return None
    items = [
        Item(str(p["path"]), str(p["kind"]), int(p.get("size", 0)), p.get("head"))
        for p in data.get("paths", [])
        if os.path.lexists(where / FILES / p["path"])
    ]
    return Entry(
        where.name,
        str(data.get("when", "")),
        str(data.get("command", "")),
        str(data.get("reason", "")),
        str(data.get("kind", "")),
        data.get("step"),
        items,
        data.get("state"),
    )


def size(task: Task) -> int:
    """Bytes held in the task's trash."""
    return sum(e.size for e in entries(task))


# --- putting back ------------------------------------------------------------------------


@record(frozen=True)
class Restored:
    """What ``restore`` put back (entry, item, where), and what it could not."""

    put_back: list[tuple[str, Item, Path]] = field(default_factory=list)
    blocked: list[tuple[str, Item, str]] = field(default_factory=list)  # (entry, item, why)


def select(task: Task, wanted: list[str]) -> list[tuple[Entry, Item]]:
    """The items ``wanted`` names: entry ids (all of an entry), paths (the newest entry
    holding it; a directory names every item below it). None named: the newest entry."""
    all_entries = entries(task)
    if not all_entries:
        raise NotFound(f"the trash of task {task.name} is empty", hint="nothing to restore")
    if not wanted:
        last = all_entries[-1]
        return [(last, i) for i in last.items]
    chosen: list[tuple[Entry, Item]] = []
    by_id = {e.id: e for e in all_entries}
    for word in wanted:
        if word in by_id:
            chosen += [(by_id[word], i) for i in by_id[word].items]
            continue
        rel = word.strip("/")
        hit = _newest_holding(all_entries, rel)
        if not hit:
            raise NotFound(
                f"nothing in the trash of task {task.name} is named {word!r}",
                hint="`bar trash` lists the entries and their paths",
            )
        chosen += hit
    seen: set[tuple[str, str]] = set()
    unique = []
    for e, i in chosen:
        if (e.id, i.path) not in seen:
            seen.add((e.id, i.path))
            unique.append((e, i))
    return unique


def _newest_holding(all_entries: list[Entry], rel: str) -> list[tuple[Entry, Item]]:
    for entry in reversed(all_entries):
        hits = [i for i in entry.items if i.path == rel or i.path.startswith(rel + "/")]
        if hits:
            return [(entry, i) for i in hits]
    return []


def restore(
    task: Task, chosen: list[tuple[Entry, Item]], to: Path | None = None, *, quiet: bool = False
) -> Restored:
    """Put each chosen item back at its path under ``to`` (default: the task's worktree),
    never over anything there (an empty directory is no obstacle to a directory)."""
    root = to if to is not None else task.worktree
    if not root.is_dir():
        raise NotFound(
            f"{root} is no directory",
            hint="a task without a worktree gets one back with `bar task start`/`reopen`; "
            "or restore elsewhere with --to DIR",
        )
    result = Restored()
    for entry, item in chosen:
        why = _put_back(task, entry, item, root)
        if why is None:
            result.put_back.append((entry.id, item, root / item.path))
            if not quiet:
                note(f"put back {_label(item)} from the trash (entry {entry.id})")
        else:
            result.blocked.append((entry.id, item, why))
    _tidy(task, {e.id for e, _ in chosen})
    return result


def _put_back(task: Task, entry: Entry, item: Item, root: Path) -> str | None:
    """Move ``item`` of ``entry`` back under ``root``; None, or what blocks it."""
    where = _trash_dir(task) / entry.id / FILES
    parts = item.path.split("/")
    try:
        parent = _make_parents(root, parts[:-1])
    except _Blocked as blocked:
        return str(blocked)
    except beneath.LinkOnTheWay:
        return f"a symbolic link is on the way to {item.path}"
    name = parts[-1]
    try:
        there = _lstat_at(parent, name)
        if there is not None:
            empty_dir = stat.S_ISDIR(there.st_mode) and item.kind in (DIR, NESTED_REPO)
            if empty_dir:
                inner = _open_dir(parent, name)
                try:
                    empty_dir = not os.listdir(inner)
                finally:
                    os.close(inner)
            if not empty_dir:
                return f"{item.path} exists"
            os.rmdir(name, dir_fd=parent)
        src, src_name = beneath.parent_beneath(where, item.path)
        try:
            _rename_or_copy(src, src_name, parent, name)
        finally:
            os.close(src)
    except OSError as exc:
        return f"{item.path}: {exc.strerror or exc}"
    finally:
        os.close(parent)
    return None


class _Blocked(Exception):
    pass


def _make_parents(root: Path, parts: list[str]) -> int:
    """The directory ``root/parts...``, each missing one made (0755 before the umask),
    none followed through a link; a file on the way is ``_Blocked``."""
    held = os.open(root, _DIR_FLAGS)
    done: list[str] = []
    try:
        for name in parts:
            done.append(name)
            st = _lstat_at(held, name)
            if st is None:
                os.mkdir(name, 0o755, dir_fd=held)
            elif stat.S_ISLNK(st.st_mode):
                raise beneath.LinkOnTheWay(errno.ELOOP, "/".join(done))
            elif not stat.S_ISDIR(st.st_mode):
                raise _Blocked(f"{'/'.join(done)} is a file where a directory is needed")
            step = os.open(name, _DIR_FLAGS, dir_fd=held)
            os.close(held)
            held = step
    except BaseException:
        os.close(held)
        raise
    return held


def _tidy(task: Task, ids: set[str]) -> None:
    """Rewrite the manifests of ``ids`` to what is still in them; remove the empty ones."""
    root = _trash_dir(task)
    for entry_id in ids:
        where = root / entry_id
        entry = _read_entry(where)
        if entry is None:
            continue
        if not entry.items:
            _remove_entry(where)
        else:
            write_json_atomic(where / MANIFEST, _manifest(entry))
            fsync_dir(root)


# --- what commands put back by themselves ---------------------------------------------------


def put_back_nested(task: Task, gitlinks: dict[str, str]) -> list[Item]:
    """After a rollback wrote ``gitlinks`` (path -> commit): where the worktree has
    nothing at such a path (or an empty directory) and the trash holds a nested
    repository moved from it (the newest whose HEAD is that commit, else the newest),
    put it back and say so."""
    if not gitlinks:
        return []
    all_entries = entries(task)
    if not all_entries:
        return []
    chosen: list[tuple[Entry, Item]] = []
    for path, commit in sorted(gitlinks.items()):
        there = beneath.lstat_beneath(task.worktree, path)
        if there is not None and not is_empty_dir(task.worktree, path):
            continue
        held = [
            (e, i) for e in all_entries for i in e.items if i.path == path and i.kind == NESTED_REPO
        ]
        if not held:
            continue
        same = [(e, i) for e, i in held if i.head == commit]
        chosen.append((same or held)[-1])
    if not chosen:
        return []
    done = restore(task, chosen, quiet=True)
    for entry_id, item, _where in done.put_back:
        note(
            f"put back {_label(item)} from the trash (entry {entry_id}), where the state "
            "restored has it"
        )
    return [item for _e, item, _w in done.put_back]


def put_back_of_state(
    task: Task, target_commit: str, now_tree: str, take_out: Callable[[str, str], bool]
) -> list[Item]:
    """After a rollback restored the state ``target_commit``: what a rollback moved aside
    while the worktree held that very state (an undo of that rollback) goes back, where
    the worktree has nothing, or a file the state just left records (which git's ignore
    rules had kept on disk: ``bar.git.ignored.keep_ignored``). ``take_out(path, blob)``
    removes such a file if it holds that blob, compared before removed (the rollback's
    guard: ``bar.changes.guarded``); True if the path is free then. A file saved since
    stays, and the trash keeps its own."""
    chosen = [
        (e, i)
        for e in reversed(entries(task))
        if e.kind == ROLLBACK and e.state == target_commit
        for i in e.items
    ]
    if not chosen:
        return []
    free: list[tuple[Entry, Item]] = []
    taken: set[str] = set()
    for entry, item in chosen:
        if item.path in taken:
            continue
        there = beneath.lstat_beneath(task.worktree, item.path)
        if there is not None and stat.S_ISDIR(there.st_mode):
            if not is_empty_dir(task.worktree, item.path):
                continue
        elif there is not None:
            held = _held_at(task.worktree, now_tree, item.path)
            if held is None or held[0] not in _FILE_MODES:
                continue
            if not take_out(item.path, held[1]):
                continue  # (saved since that state was recorded: it stays, the trash's too)
        free.append((entry, item))
        taken.add(item.path)
    done = restore(task, free, quiet=True)
    for entry_id, item, _where in done.put_back:
        note(
            f"put back {_label(item)} from the trash (entry {entry_id}): the state restored held it"
        )
    return [item for _e, item, _w in done.put_back]


def _held_at(worktree: Path, tree: str, rel: str) -> tuple[str, str] | None:
    """(mode, object) of what ``tree`` holds at ``rel``; None: nothing."""
    return _listed(worktree, tree, rel, under=False).get(rel)


def put_back_after_close(task: Task) -> list[Item]:
    """In a worktree made again: what closing (or removing the worktree) moved aside,
    put back wherever the new worktree has nothing at its path, and said."""
    chosen = [(e, i) for e in reversed(entries(task)) if e.kind == CLOSE for i in e.items]
    free: list[tuple[Entry, Item]] = []
    taken: set[str] = set()
    for entry, item in chosen:
        if item.path in taken:
            continue
        there = beneath.lstat_beneath(task.worktree, item.path)
        empty = there is not None and is_empty_dir(task.worktree, item.path)
        if there is None or (empty and item.kind in (DIR, NESTED_REPO)):
            free.append((entry, item))
            taken.add(item.path)
    if not free:
        return []
    done = restore(task, free, quiet=True)
    items = [item for _e, item, _w in done.put_back]
    for line in _said_put_back(items):
        note(line)
    return items


def _said_put_back(items: list[Item]) -> Iterator[str]:
    for item in items[:5]:
        yield f"put back {_label(item)} from the trash, as it was when the worktree was removed"
    if len(items) > 5:
        yield f"put back {plural(len(items) - 5, 'more path')} from the trash the same way"


# --- what a removal of the worktree would destroy ----------------------------------------


def unrecorded(worktree: Path, recorded: dict[str, str], skip: Iterable[str] = ()) -> list[str]:
    """The paths of ``worktree`` that hold bytes no recorded state does, outermost first:
    whatever is not in ``recorded`` (path -> mode of the recorded tree, trees included:
    ``git ls-tree -r -t``), and every nested repository (a gitlink records its commit,
    not its files). ``skip``: top-level names that are bookkeeping, not the task's."""
    found: list[str] = []
    skipped = {".git", *skip}
    try:
        top = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        _walk(top, "", recorded, skipped, found)
    finally:
        os.close(top)
    return found


def _walk(
    fd: int, prefix: str, recorded: dict[str, str], skipped: set[str], out: list[str]
) -> None:
    for name in sorted(os.listdir(fd)):
        rel = prefix + name
        if not prefix and name in skipped:
            continue
        mode = recorded.get(rel)
        st = _lstat_at(fd, name)
        if st is None:
            continue
        if mode is None:
            if not (stat.S_ISDIR(st.st_mode) and _empty(fd, name)):
                out.append(rel)
            continue
        if mode == "160000":
            if stat.S_ISDIR(st.st_mode) and not _empty(fd, name):
                out.append(rel)
            continue
        if mode == "040000" and stat.S_ISDIR(st.st_mode):
            sub = _open_dir(fd, name)
            try:
                if _is_repo(sub):
                    out.append(rel)  # a repository made where a recorded directory was
                else:
                    _walk(sub, rel + "/", recorded, skipped, out)
            finally:
                os.close(sub)


def _empty(fd: int, name: str) -> bool:
    try:
        inner = _open_dir(fd, name)
    except OSError:
        return False
    try:
        return not os.listdir(inner)
    finally:
        os.close(inner)


def leaves_under(worktree: Path, rel: str) -> list[str]:
    """Every file, symbolic link and nested repository under ``worktree/rel`` (a
    directory), no link followed; ``rel`` itself if it is no directory."""
    st = beneath.lstat_beneath(worktree, rel)
    if st is None:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return [rel]
    try:
        fd = beneath.open_beneath(worktree, rel, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []
    out: list[str] = []
    try:
        if _is_repo(fd):
            return [rel]
        _leaves(fd, rel + "/", out)
    finally:
        os.close(fd)
    return out


def _leaves(fd: int, prefix: str, out: list[str]) -> None:
    for name in sorted(os.listdir(fd)):
        st = _lstat_at(fd, name)
        if st is None:
            continue
        if not stat.S_ISDIR(st.st_mode):
            out.append(prefix + name)
            continue
        sub = _open_dir(fd, name)
        try:
            if _is_repo(sub):
                out.append(prefix + name)
            else:
                _leaves(sub, prefix + name + "/", out)
        finally:
            os.close(sub)


def ancestors(rel: str) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b"]``."""
    parents = [str(p) for p in PurePosixPath(rel).parents]
    return [p for p in reversed(parents) if p != "."]


# --- what a rollback's git would remove ---------------------------------------------------

TREE, GITLINK = "040000", "160000"


def _modes(worktree: Path, now_tree: str, target_tree: str) -> dict[str, tuple[str, str, str]]:
    """Every path (trees included) that differs between the two trees: (old mode, new
    mode, new object), mode ``000000`` where it is absent."""
    from bar import git

    raw = git.diff_trees(worktree, now_tree, target_tree).stdout
    parts = raw.split(b"\0")
    found: dict[str, tuple[str, str, str]] = {}
    i = 0
    while i + 1 < len(parts):
        meta = parts[i].decode()
        if not meta.startswith(":"):
            i += 1
            continue
        old, new, _old_sha, sha = meta[1:].split(" ")[:4]
        path = parts[i + 1].decode("utf-8", "surrogateescape")
        was = found.get(path)
        if was is not None:  # a type change is given as a removal and an addition
            old = old if old != "000000" else was[0]
            new, sha = (new, sha) if new != "000000" else (was[1], was[2])
        found[path] = (old, new, sha)
        i += 2
    return found


def _entries_under(worktree: Path, tree: str, rel: str) -> dict[str, str]:
    """path -> mode of everything ``tree`` holds at and under ``rel``."""
    return {path: mode for path, (mode, _) in _listed(worktree, tree, rel, under=True).items()}


def _listed(worktree: Path, tree: str, rel: str, *, under: bool) -> dict[str, tuple[str, str]]:
    """path -> (mode, object) of what ``tree`` holds at ``rel`` (``under``: and at every
    path beneath it, directories included), the path taken literally."""
    from bar import git

    deep = ("-r", "-t") if under else ()
    args = ("ls-tree", *deep, "-z", "--full-tree", tree, "--", rel)
    raw = git.git(worktree, *args, env={"GIT_LITERAL_PATHSPECS": "1"}).stdout
    found: dict[str, tuple[str, str]] = {}
    for item in raw.split(b"\0"):
        meta, _, path = item.partition(b"\t")
        if item:
            mode, _type, sha = meta.decode().split(" ")
            found[path.decode("utf-8", "surrogateescape")] = (mode, sha)
    return found


@record(frozen=True)
class Way:
    """What a rollback's write of a tree needs around it: the paths to move aside before,
    and the gitlinks it writes (path -> commit), whose repositories may be put back."""

    aside: list[str]
    gitlinks: dict[str, str]


def clear_the_way(
    task: Task,
    now_commit: str,
    now_tree: str,
    target_tree: str,
    *,
    command: str,
    step: str | None,
) -> Way:
    """Move to the trash what writing ``target_tree`` over ``now_tree`` would destroy
    (``in_the_way``); what was moved, and the gitlinks the write brings."""
    changed = _modes(task.worktree, now_tree, target_tree)
    gitlinks = {p: sha for p, (_old, new, sha) in changed.items() if new == GITLINK}
    paths = _in_the_way(task.worktree, now_tree, target_tree, changed)
    moved = move_aside(
        task,
        task.worktree,
        paths,
        f"in the way of the state {command} restored",
        command=command,
        kind=ROLLBACK,
        step=step,
        state=now_commit,
    )
    return Way([i.path for i in moved], gitlinks)


def in_the_way(worktree: Path, now_tree: str, target_tree: str) -> list[str]:
    """What writing ``target_tree`` over ``now_tree`` (which the worktree holds) would
    remove that no recorded state holds, outermost paths:

    - a nested repository at a gitlink the target removes, or makes a file or a tree;
    - under a directory the target makes a file (a link, a gitlink), whatever is not a
      recorded file there: ignored files, nested repositories;
    - at a path where the target puts what the current tree does not have, whatever
      is on disk there (an ignored file, an ignored directory's files that collide).
    """
    return _in_the_way(worktree, now_tree, target_tree, _modes(worktree, now_tree, target_tree))


def _in_the_way(
    worktree: Path, now_tree: str, target_tree: str, changed: dict[str, tuple[str, str, str]]
) -> list[str]:
    added_trees = {p for p, (old, new, _) in changed.items() if old == "000000" and new == TREE}
    out: list[str] = []
    for path, (old, new, _sha) in sorted(changed.items()):
        if old == TREE and new not in (TREE, "000000"):
            recorded = _entries_under(worktree, now_tree, path)
            out += [
                leaf
                for leaf in leaves_under(worktree, path)
                if recorded.get(leaf) not in _FILE_MODES
            ]
        elif old == GITLINK and new != GITLINK:
            st = beneath.lstat_beneath(worktree, path)
            if st is not None and not is_empty_dir(worktree, path):
                out.append(path)
        elif old == "000000" and new != "000000":
            if any(a in added_trees for a in ancestors(path)):
                continue  # looked at from the outermost added directory
            out += _collisions(worktree, target_tree, path, new)
    return _outermost(sorted(set(out)))


_FILE_MODES = ("100644", "100755", "120000")


def _collisions(worktree: Path, target_tree: str, path: str, new: str) -> list[str]:
    """What is on disk at ``path``, which the current tree does not hold and the target
    does (with ``new``), that git would overwrite or remove."""
    st = beneath.lstat_beneath(worktree, path)
    if st is None:
        return []
    if new == GITLINK and stat.S_ISDIR(st.st_mode) and is_empty_dir(worktree, path):
        return []
    if new != TREE or not stat.S_ISDIR(st.st_mode):
        return [path]
    # an unrecorded directory (ignored) where the target makes one: only what collides
    wanted = _entries_under(worktree, target_tree, path)
    leaves = {p for p, m in wanted.items() if m != TREE}
    return [
        leaf
        for leaf in leaves_under(worktree, path)
        if leaf in wanted or any(a in leaves for a in ancestors(leaf))
    ]


def before_removal(task: Task, command: str) -> list[Item]:
    """Move to the trash what removing the task's worktree would destroy that no
    recorded state holds: nested repositories (their files, history, uncommitted work),
    ignored files, anything else no snapshot has. The caller recorded the hand edits."""
    paths = would_go_on_removal(task)
    return move_aside(
        task,
        task.worktree,
        paths,
        "no recorded state holds it, and the worktree was removed",
        command=command,
        kind=CLOSE,
        state=task.recorded_snapshot(),
    )


def would_go_on_removal(task: Task) -> list[str]:
    """What ``before_removal`` would move to the trash now (read-only)."""
    if not task.worktree.is_dir():
        return []
    from bar import git
    from bar.store.layout import AIDE_DIR

    recorded: dict[str, str] = {}
    raw = git.git(
        task.worktree, "ls-tree", "-r", "-t", "-z", "--full-tree", task.recorded_snapshot()
    ).stdout
    for item in raw.split(b"\0"):
        if item:
            meta, _, path = item.partition(b"\t")
            recorded[path.decode("utf-8", "surrogateescape")] = meta.split(b" ")[0].decode()
    return unrecorded(task.worktree, recorded, skip=(AIDE_DIR,))
