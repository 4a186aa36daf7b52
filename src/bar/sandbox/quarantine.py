"""New objects of a step wait in quarantine; nothing existing can be changed (docs/sandbox.md).

A confined step sees the repository's git directory through its own mount namespace
(``bar.sandbox.namespace``):

- ``objects`` is the task's quarantine, ``bar-objects`` in the worktree's admin directory
  (the same file system as the store, gone with the worktree). The real store is mounted
  read-only at ``objects-view`` in the task's directory and named there as the
  quarantine's alternate: git in the step reads every object and changes none;
- the directory of the task branch's ref (``refs/heads/bar``), and of its reflog, are
  copies kept in the quarantine too: the step moves its own branch there, and another
  task's branch nowhere.

``settle`` brings in what the step was allowed to do, in bar's process, outside any
namespace, at each checkpoint and when the step is recorded (also by the ``bar`` that
records a step whose ``bar`` died; and, for a step that never ran, whose ``pre_run`` hook
failed, by the next command that changes the task: ``settle_left``):

- loose objects go through ``git unpack-objects --strict`` and packs through
  ``git index-pack --strict``: git names each object by its content and checks its
  format and links, so a file whose name lies, a malformed commit or a tree naming a
  missing blob never reaches the store (they are kept aside, and said);
- the task branch moves to where the step moved it, by compare-and-swap, only once its
  whole history is in the store (``git rev-list --objects``); a link to another ref, or a
  value that is no commit, is refused. What the step did to other refs is said, and
  dropped.

Whatever the step does, ``git fsck`` of the repository stays clean, and the repository
is whole at every moment: a ``bar`` killed mid-step leaves the quarantine to the next.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from pathlib import Path

from bar import git
from bar.base.beneath import replace_at
from bar.base.notices import warn
from bar.base.record import record
from bar.errors import BarError
from bar.model.records import PolicyEventRecord
from bar.model.tasks import Task
from bar.sandbox import namespace
from bar.sandbox.namespace import Bind
from bar.store import below
from bar.store.files import read_json, read_regular, write_bytes_atomic
from bar.worktree.guard import admin_dir, common_dir

QUARANTINE = "bar-objects"  # in the worktree's admin directory
VIEW = "objects-view"  # in the task's directory: where the step sees the real store
ALTERNATES = "objects-alternates"  # in the task's directory: the view's, made absolute
_HEX = frozenset("0123456789abcdef")
_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_BATCH = 64 << 20  # bytes of objects given to one ``unpack-objects``
_LARGEST = 1 << 30  # bytes of one object bar brings in from a quarantine
# an object this large that its file is this many times smaller than is a compression
# bomb (a file of text compresses some 3 to 10 times, of one repeated byte 1000 times):
# refused before it is inflated
_BOMB_SIZE = 64 << 20
_BOMB_RATIO = 100


@record(frozen=True)
class Setup:
    """A step's quarantine: what to mount, and what the step may write there."""

    root: Path
    binds: tuple[Bind, ...]
    writable: tuple[Path, ...]


def place(task: Task) -> Path | None:
    admin = admin_dir(task, common_dir(task))
    return admin / QUARANTINE if admin is not None else None


def setup(task: Task) -> Setup | str:
    """Make the task's quarantine ready for a step; the reason when a step cannot have
    one here. It is made anew: what an earlier step left in it was brought in before the
    command began (``settle_left``, from ``bar.step.transaction``). What it copies (the
    refs and the reflog of the task branch's folder, where the branch is) is read first,
    then written."""
    why = namespace.available(str(task.dir))
    common = common_dir(task)
    admin = admin_dir(task, common)
    if admin is None:
        return "the worktree has no admin directory of its own"
    if why is not None:
        return f"this kernel lets no ordinary user mount a view of the object store ({why})"
    root, view, store = admin / QUARANTINE, task.dir / VIEW, common / "objects"
    ref_dir = Path("refs", "heads", task.branch).parent
    refs, logs = common / ref_dir, common / "logs" / ref_dir
    own = Path(task.branch).name
    real = git.ref_commit(common, task.worktree, _ref(task))
    alternates = git.absolute_alternates(store)
    for folder in (root, view, root / "info", root / "refs", root / "logs"):
        below.real_dir(folder)
    for folder in (refs, logs):
        folder.mkdir(parents=True, exist_ok=True)
    copied = [(rel, data) for rel, data in below.tree(refs) if not rel.endswith(".lock")]
    below.empty(root / "refs")
    below.empty(root / "logs")
    reflog = read_regular(logs / own)
    others = {rel: data.decode(errors="replace") for rel, data in copied if rel != own}
    state = {"ref": real, "log": len(reflog or b""), "others": others}
    made = [
        (root / "info" / "alternates", f"{view}\n".encode()),
        *((root / "refs" / rel, data) for rel, data in copied),
        *([(root / "logs" / own, reflog)] if reflog is not None else []),
        (task.paths.quarantine_state, json.dumps(state).encode()),
        *([(task.dir / ALTERNATES, alternates)] if alternates is not None else []),
    ]
    for path, data in made:  # (none durable: bar makes them again for the next step)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data, durable=False)
    # what git believes about the objects, the quarantine's ``info``, read-only too; where
    # the store names others by relative paths, the view names them by absolute ones
    shown = view / "info" / "alternates"
    binds = (
        Bind(str(store), str(view), read_only=True),
        *([Bind(str(task.dir / ALTERNATES), str(shown), read_only=True)] if alternates else []),
        Bind(str(root), str(store)),
        Bind(str(root / "info"), str(store / "info"), read_only=True),
        Bind(str(root / "refs"), str(refs)),
        Bind(str(root / "logs"), str(logs)),
    )
    return Setup(root, binds, (root, root / "refs", root / "logs"))


def settle_left(task: Task) -> None:
    """Bring in what a step that bar did not record left in its quarantine (the hooks of
    a step that did not run; a ``bar`` stopped before the step's intent was written),
    each thing refused said."""
    for what in settle(task, final=True):
        warn(f"guard: {what}")


def settle(task: Task, *, final: bool) -> list[str]:
    """Bring into the repository what a step left in its quarantine: its objects, and
    where it moved its branch. ``final``: the step has ended (nothing of it runs); what
    cannot come in is then put aside and said, and the quarantine emptied. One line per
    thing refused."""
    state_path = task.paths.quarantine_state
    if not state_path.exists():
        return []
    root = place(task)
    try:
        fd = os.open(root, below.DIR) if root is not None else -1
    except OSError:
        fd = -1
    found: list[str] = []
    try:
        if fd >= 0:
            found += _bring_objects(task, fd, final)
            found += _bring_packs(task, fd, final)
            found += _bring_branch(task, fd, _state(state_path), final)
    finally:
        if fd >= 0:
            os.close(fd)
    if final:
        state_path.unlink(missing_ok=True)
    return found


def _state(path: Path) -> dict[str, object]:
    try:
        return read_json(path)
    except BarError:  # (unreadable: the branch is then compared with the store alone)
        return {}


def settle_step(task: Task) -> list[PolicyEventRecord]:
    """``settle`` once a step has ended (confined or not), and the worktree's own git
    files checked (``bar.worktree.git_state``): each refusal said, and recorded in the step as
    a ``bar:guard`` policy event."""
    from bar.worktree import git_state as worktree_state

    found = settle(task, final=True) + worktree_state.check(task)
    for what in found:
        warn(f"guard: {what}")
    return [PolicyEventRecord(rule="bar:guard", action="warn", matched=what) for what in found]


# --- objects -------------------------------------------------------------------------


@record(frozen=True)
class _Loose:
    folder: str
    name: str
    kind: bytes
    body: bytes


def _bring_objects(task: Task, root: int, final: bool) -> list[str]:
    found: list[str] = []
    batch: list[_Loose] = []
    size = 0
    for folder in below.names(root):
        if len(folder) != 2 or not set(folder) <= _HEX:
            continue
        for name, data in below.files(root, folder):
            parsed = _parse(data) if len(name) in (38, 62) and set(name) <= _HEX else None
            if parsed is None:
                if final:  # a temporary file git left, or no object at all
                    found += _refuse(
                        task,
                        root,
                        folder,
                        name,
                        data,
                        "is no git object (or one over 1 GiB, or a compression bomb)",
                    )
                continue
            batch.append(_Loose(folder, name, *parsed))
            size += len(parsed[1])
            if size >= _BATCH:
                found += _unpack(task, root, batch, final)
                batch, size = [], 0
    if batch:
        found += _unpack(task, root, batch, final)
    if final:
        for folder in below.names(root):
            if len(folder) == 2 and set(folder) <= _HEX:
                with contextlib.suppress(OSError):
                    os.rmdir(folder, dir_fd=root)
    return found


def _parse(data: bytes) -> tuple[bytes, bytes] | None:
    """A loose object file's (type, content); None if it is not one, or if its content
    is over ``_LARGEST`` or is a compression bomb (``_BOMB_SIZE``: a few kilobytes of a
    step's can claim gigabytes, and minutes of bar's time)."""
    try:
        inflate = zlib.decompressobj()
        head = inflate.decompress(data, 64)
        header, sep, rest = head.partition(b"\0")
        kind, _, size = header.partition(b" ")
        if not sep or kind not in _TYPES or not size.isdigit() or int(size) > _LARGEST:
            return None
        if int(size) > _BOMB_SIZE and int(size) > _BOMB_RATIO * len(data):
            return None
        if len(rest) > int(size):
            return None
        body = rest + inflate.decompress(inflate.unconsumed_tail, int(size) - len(rest) + 1)
    except zlib.error:
        return None
    if int(size) != len(body) or not inflate.eof:
        return None
    return kind, body


def _unpack(task: Task, root: int, batch: list[_Loose], final: bool) -> list[str]:
    """Write ``batch`` into the store with git's checks; failing that (one bad object
    stops git), one by one, blobs first, until no more come in."""
    if _unpack_one_pack(task, batch):
        _forget(root, batch)
        return []
    order = {b"blob": 0, b"tree": 1, b"commit": 2, b"tag": 3}
    left = sorted(batch, key=lambda o: order[o.kind])
    while left:
        came = [o for o in left if _unpack_one_pack(task, [o])]
        _forget(root, came)
        if not came:
            break
        left = [o for o in left if o not in came]
    found: list[str] = []
    if final:
        for o in left:
            data = zlib.compress(o.kind + b" %d\0" % len(o.body) + o.body)
            found += _refuse(
                task,
                root,
                o.folder,
                o.name,
                data,
                "fails git's checks (a malformed object, or one naming objects that are not there)",
            )
    return found


def _unpack_one_pack(task: Task, objects: list[_Loose]) -> bool:
    res = git.git(
        task.worktree, "unpack-objects", "-q", "--strict", input=_pack(objects), check=False
    )
    return res.returncode == 0


def _pack(objects: list[_Loose]) -> bytes:
    """A pack (version 2, no deltas) of ``objects``."""
    import hashlib

    parts = [b"PACK", struct.pack(">II", 2, len(objects))]
    for o in objects:
        size = len(o.body)
        head = bytearray()
        byte = (_TYPES[o.kind] << 4) | (size & 15)
        size >>= 4
        while size:
            head.append(byte | 0x80)
            byte, size = size & 0x7F, size >> 7
        head.append(byte)
        parts += [bytes(head), zlib.compress(o.body, 1)]
    data = b"".join(parts)
    long_ids = any(len(o.name) == 62 for o in objects)  # (a SHA-256 repository's pack)
    return data + (hashlib.sha256 if long_ids else hashlib.sha1)(data).digest()


def _forget(root: int, objects: list[_Loose]) -> None:
    for o in objects:
        with contextlib.suppress(OSError):
            os.unlink(f"{o.folder}/{o.name}", dir_fd=root)


def _bring_packs(task: Task, root: int, final: bool) -> list[str]:
    """Packs the step made (``git fetch``, ``git gc``): each checked and indexed by
    ``git index-pack --strict`` from a copy of bar's own in the store."""
    found: list[str] = []
    names = set(below.names(root, "pack"))
    store = common_dir(task) / "objects" / "pack"
    for name in sorted(names):
        base = name[: -len(".pack")]
        if not (name.startswith("pack-") and name.endswith(".pack") and f"{base}.idx" in names):
            continue  # (a pack is complete once git has written its index)
        data = below.read_at(root, f"pack/{name}")
        kept = data is not None and _index_pack(task, store, data)
        if kept or final:
            for suffix in (".pack", ".idx", ".rev", ".bitmap", ".keep", ".promisor", ".mtimes"):
                with contextlib.suppress(OSError):
                    os.unlink(f"pack/{base}{suffix}", dir_fd=root)
        if not kept and final and data is not None:
            found.append(
                f"the pack {name} the step made fails `git index-pack --strict`; it "
                "was not brought into the repository"
            )
    if final:
        for name in below.names(root, "pack"):
            with contextlib.suppress(OSError):
                os.unlink(f"pack/{name}", dir_fd=root)
    return found


def _index_pack(task: Task, store: Path, data: bytes) -> bool:
    store.mkdir(exist_ok=True)
    tmp = store / f"tmp_bar_{os.getpid()}.pack"
    write_bytes_atomic(tmp, data, mode=0o444)
    try:
        res = git.git(
            task.worktree,
            "index-pack",
            "--strict",
            "-o",
            str(tmp.with_suffix(".idx")),
            str(tmp),
            check=False,
        )
        name = res.out.strip().split()[-1] if res.returncode == 0 and res.out.strip() else ""
        if not git.is_object_id(name):
            return False
        os.replace(tmp, store / f"pack-{name}.pack")
        os.replace(tmp.with_suffix(".idx"), store / f"pack-{name}.idx")  # (last: now it is seen)
        return True
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_suffix(".idx").unlink(missing_ok=True)


# --- the task branch -----------------------------------------------------------------


def _ref(task: Task) -> str:
    return f"refs/heads/{task.branch}"


def _bring_branch(task: Task, root: int, state: dict[str, object], final: bool) -> list[str]:
    """Move the task branch where the step moved it in its view (compare-and-swap on
    where bar last saw it, ``base``); a branch bar moved meanwhile is shown in the view."""
    own = Path(task.branch).name
    base = state.get("ref") if isinstance(state.get("ref"), str) else None
    real = git.ref_commit(common_dir(task), task.worktree, _ref(task))
    seen = below.read_at(root, f"refs/{own}")
    log = below.read_at(root, f"logs/{own}") or b""
    new = seen.strip().decode(errors="replace") if seen is not None else real
    found: list[str] = []
    if new is not None and new not in (real, base):  # the step moved it
        if not git.is_object_id(new):
            what = "a link to another ref" if new.startswith("ref:") else repr(new[:80])
            found.append(
                f"the step set the task branch {task.branch} to {what}; it stays "
                f"at {git.short(real)}"
            )
        elif real != base:
            found.append(
                f"the task branch {task.branch} was moved outside the step while it "
                f"ran; the step's {git.short(new)} was not kept"
            )
        elif not _whole(task, new, base):
            found.append(
                f"the step moved the task branch {task.branch} to {git.short(new)}, "
                "whose history is not all in the repository; it stays at "
                f"{git.short(real)}"
            )
        else:
            since = state.get("log")
            git.update_ref(
                task.worktree,
                _ref(task),
                new,
                base,
                _message(log, since if isinstance(since, int) else 0),
            )
            real = new
    if final:
        return found + _other_refs(task, root, own, state.get("others"))
    if found:  # (found again, and said, when the step has ended)
        return []
    if real is not None and new == base != real:  # bar moved it: the step sees it
        _put_at(root, f"refs/{own}", f"{real}\n".encode())
    _put(task.paths.quarantine_state, json.dumps({**state, "ref": real, "log": len(log)}).encode())
    return []


def _put_at(root: int, rel: str, data: bytes) -> None:
    """``_put`` below the quarantine held open as ``root``: while the step runs it can
    swap a directory there for a link, and bar writes nothing through one."""
    folder, _, name = rel.rpartition("/")
    with contextlib.suppress(OSError):
        fd = os.open(folder, below.DIR, dir_fd=root)
        try:
            replace_at(fd, name, data, 0o600)
        finally:
            os.close(fd)


def _put(path: Path, data: bytes) -> None:
    """Replace a file bar can make again (not made durable: a crash of the machine
    leaves the old one at worst)."""
    write_bytes_atomic(path, data, durable=False)


def _whole(task: Task, commit: str, base: str | None) -> bool:
    kind = git.git(task.worktree, "cat-file", "-t", commit, check=False).out.strip()
    if kind != "commit":
        return False
    args = ["rev-list", "--objects", "--quiet", commit, *(["--not", base] if base else [])]
    return git.git(task.worktree, *args, check=False).returncode == 0


def _message(log: bytes, since: int) -> str:
    """The reflog message of the step's last move of its branch."""
    lines = [ln for ln in log[since:].split(b"\n") if b"\t" in ln]
    said = lines[-1].partition(b"\t")[2].decode(errors="replace").strip() if lines else ""
    return said or "bar: moved in a step"


def _other_refs(task: Task, root: int, own: str, before: object) -> list[str]:
    """What the step did to its copies of the other refs beside its branch (dropped)."""
    copied = before if isinstance(before, dict) else {}
    seen: dict[str, str] = {}
    with contextlib.suppress(OSError):
        fd = os.open("refs", below.DIR, dir_fd=root)
        try:
            seen = {
                rel: data.decode(errors="replace") for rel, data in below.tree_at(fd) if rel != own
            }
        finally:
            os.close(fd)
    moved = sorted(
        r
        for r in set(copied) | set(seen)
        if copied.get(r) != seen.get(r) and not r.endswith(".lock")
    )
    if not moved:
        return []
    names = ", ".join(str(Path(_ref(task)).parent / r) for r in moved[:5])
    more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
    return [
        f"the step changed {names}{more}; refs other than the task branch are read-only "
        "in a step: nothing was moved"
    ]


def _refuse(task: Task, root: int, folder: str, name: str, data: bytes, why: str) -> list[str]:
    """Put a file of the quarantine aside in the task's ``tampered/``; say it."""
    with contextlib.suppress(OSError):
        os.unlink(f"{folder}/{name}", dir_fd=root)
    if name.startswith("tmp_"):
        return []  # (git's own temporary file, left by a git that was stopped)
    aside = task.dir / "tampered" / f"object-{folder}{name}"
    aside.parent.mkdir(mode=0o700, exist_ok=True)
    write_bytes_atomic(aside, data)
    return [
        f"the object file {folder}/{name} the step wrote {why}; bar kept it in {aside} "
        "and not in the repository"
    ]
