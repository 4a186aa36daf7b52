"""The loose objects a task's steps leave, packed between steps.

bar writes every snapshot with git's plumbing (a side index, ``write-tree``,
``commit-tree``), which never runs git's ``gc --auto`` as a porcelain ``git commit`` does.
So the objects a task's history is made of stay loose, one file each, and pile up with its
steps. Each costs at every step: the object guard (``bar.git.object_guard``) watches the
object store's 256 fan-out directories during a step, and the kernel walks every cached
entry of a directory when a watch is added to it or removed. At 250,000 loose objects that
walk took 0.19 s of each step, where a step of a fresh repository takes 0.04 s.

After a step, when git's own estimate of the loose objects (the entries of ``objects/17``,
times 256) passes ``gc.auto`` (git's default of 6,700, or a higher one configured; 0 turns
it off, as for git), bar packs them as git's ``gc --auto`` would, but only them, at a cost
linear in them, not in the repository or its history:

1. ``git pack-objects`` of the loose objects, named by listing the fan-out directories: no
   walk of history, so objects no ref reaches yet are packed too (git's ``gc`` drops an
   unreachable packed object when it would have pruned it loose);
2. ``git verify-pack`` of the new pack, which hashes every object again (see ``_check``:
   a step running meanwhile may rewrite a loose object as it is read);
3. ``git prune-packed`` deletes the loose copies.

The packs so made (one per ~6,700 objects) are merged by git's own gc, as it merges any
once they pass ``gc.autoPackLimit``: a merge here would copy what an older pack holds
unchecked, while another task's step may be rewriting it, and delete the original.

No pack index caches (reverse indexes, bitmaps, multi-pack indexes) are written: the guard
takes one written during a step for a plant, and another task's step may be running.

As git's own, the packing runs in the background unless ``gc.autoDetach`` is off: a
process of its own (``python -m bar.git.packing``, ``nice``), holding the project's pack
lock; a task that finds it held leaves the packing to its holder. Nothing waits for it. A
step running meanwhile loses nothing: git looks among the packs again when a loose object
it was about to read is gone, and the guard checks the new pack as it checks any pack made
during a step (``verify-pack``: 0.2 s for 50,000 objects). A failing git is kept in the
project's ``pack.log``, said at the next step that finds packing due, and tried again; the
step was recorded before any of this. It takes about 0.7 s per 9,000 objects on the
machine it was measured on, a tenth more than ``git gc --auto`` packing as many.
"""

from __future__ import annotations

import os
from pathlib import Path

from bar import git
from bar.base.record import record
from bar.errors import BarError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.errors import GitError

DEFAULT_AUTO = 6700  # git's own gc.auto
_HEX = frozenset("0123456789abcdef")
# what git would trust without checking it, left unwritten (see the module's docstring)
_NO_CACHES = (
    "-c",
    "pack.writeReverseIndex=false",
    "-c",
    "repack.writeBitmaps=false",
    "-c",
    "pack.writeBitmapHashCache=false",
)


@record(frozen=True)
class Packed:
    """What one packing did: the loose objects it found, the index of the pack it made."""

    objects: int
    pack: Path | None


def estimate(store: Path) -> int:
    """Git's estimate of the loose objects in ``store``: those in ``17/``, times 256."""
    try:
        names = os.listdir(store / "17")
    except OSError:
        return 0
    return 256 * sum(1 for n in names if len(n) in (38, 62))


@record(frozen=True)
class Settings:
    """git's own settings for its automatic packing, as the repository configures them."""

    auto: int = DEFAULT_AUTO  # gc.auto: pack past this many loose objects (0: never)
    detach: bool = True  # gc.autoDetach: in the background


def settings(repo: Path) -> Settings:
    """``gc.auto`` and ``gc.autoDetach`` (one git, run only when packing may be due)."""
    res = git.git(
        repo, "config", "--type=bool-or-int", "--get-regexp", r"^gc\.auto(detach)?$", check=False
    )
    found = dict(line.partition(" ")[::2] for line in res.out.splitlines())
    try:
        auto = max(int(found.get("gc.auto", DEFAULT_AUTO)), 0)
    except ValueError:
        auto = DEFAULT_AUTO
    detach = found.get("gc.autodetach", "true").strip().lower() not in _FALSE
    return Settings(auto, detach)


_FALSE = frozenset({"false", "no", "off", "0", ""})


def _rounded(limit: int) -> int:
    """The count git compares with: ``objects/17`` holds more than (limit + 255) / 256."""
    return 256 * ((limit + 255) // 256)


def loose_ids(store: Path) -> list[str]:
    """The ids of every loose object in ``store`` (by name: nothing is read)."""
    ids: list[str] = []
    try:
        folders = [e for e in os.scandir(store) if len(e.name) == 2 and set(e.name) <= _HEX]
    except OSError:
        return ids
    for folder in folders:
        try:
            names = os.listdir(folder.path)
        except OSError:
            continue
        ids += [folder.name + n for n in names if len(n) in (38, 62) and set(n) <= _HEX]
    return ids


def pack(repo: Path, store: Path) -> Packed:
    """Pack every loose object of ``store``, check the pack, then delete the loose copies.
    Raises ``GitError`` if git fails, or ``Unsound`` (nothing deleted, the pack removed) if
    the pack does not hold what its objects' names say."""
    ids = loose_ids(store)
    made = None
    if ids:
        data = "".join(i + "\n" for i in ids).encode()
        base = store / "pack" / "pack"
        done = git.git(
            repo,
            *_NO_CACHES,
            "pack-objects",
            "-q",
            "--incremental",
            "--non-empty",
            "--honor-pack-keep",
            str(base),
            input=data,
            env=_keep_heap(),
        )
        name = done.out.strip()
        if name:  # (none when every object was in a pack already)
            made = base.with_name(f"pack-{name}.idx")
            _check(repo, made)
        git.git(repo, "prune-packed", "-q")
    return Packed(len(ids), made)


class Unsound(BarError):
    """A pack just made does not hold what its objects' names say."""


def _check(repo: Path, idx: Path) -> None:
    """``git verify-pack`` of the pack just made, which hashes every object again.
    ``pack-objects`` takes a loose object's name on trust, and a step running meanwhile
    (another task's, or this task's next) may rewrite a loose object as it is read: its
    content would then be packed under the old name and the loose copy, where the step's
    guard would find it and put it right, deleted. Such a pack is removed instead, and
    the loose objects stay for the guard."""
    res = git.git(repo, "verify-pack", str(idx), check=False)
    if res.returncode == 0:
        return
    for suffix in (".pack", ".idx"):
        idx.with_suffix(suffix).unlink(missing_ok=True)
    raise Unsound(
        f"the new pack {idx.with_suffix('.pack').name} failed `git verify-pack` "
        "(a loose object changed while it was packed?); it was removed"
    )


def _keep_heap() -> dict[str, str]:
    """glibc's malloc told to keep freed memory (64 MiB) rather than hand it back at once.
    ``pack-objects`` reading loose objects allocates and frees a buffer for each: by
    default glibc shrinks and regrows the heap every time, two ``brk`` calls and a
    mapping per object. On a machine where those cost 20-30 µs (a virtual one) that was
    over half the packing (9,000 objects: 1.06 s, 0.44 s with this). Other C libraries
    ignore the variable."""
    mine = "glibc.malloc.trim_threshold=67108864:glibc.malloc.top_pad=67108864"
    theirs = os.environ.get("GLIBC_TUNABLES")
    return {"GLIBC_TUNABLES": f"{theirs}:{mine}" if theirs else mine}


def after_step(common: Path, project: Path) -> None:
    """Pack the loose objects of the repository whose git directory is ``common`` if they
    are due (see the module's docstring): in a process of its own that outlives the
    command, unless ``gc.autoDetach`` is off (then here, with progress on a terminal).
    Skipped while another process packs. Never raises: the step is recorded, and a
    failure is a warning, kept in ``pack.log`` in ``project`` and said again at the next
    step it is due, when it is tried again. (git runs in ``common`` itself: a task's
    worktree may go while it packs.)"""
    store = common / "objects"
    count = estimate(store)
    if count <= _rounded(DEFAULT_AUTO):
        return
    from bar.base.notices import warn

    try:
        _pack_if_due(common, store, count, project)
    except (BarError, OSError) as e:
        warn(f"bar could not pack the repository's loose objects: {e}")


def _pack_if_due(repo: Path, store: Path, count: int, project: Path) -> None:
    from bar.base.notices import warn

    wanted = settings(repo)
    if wanted.auto == 0 or count <= _rounded(wanted.auto):
        return
    lock, log = project / "pack.lock", project / "pack.log"
    fd = _take(lock)
    if fd is None:
        return  # another task packs them
    try:
        failed = _read(log)
        if failed:
            warn(
                "bar could not pack the repository's loose objects last time "
                f"({failed}); trying again"
            )
        if wanted.detach:
            _spawn(repo, store, log, fd)
            return
        from bar.base.progress import Progress

        with Progress("bar: packing the loose objects of the task's steps (git gc's work)"):
            if _pack_logged(repo, store, log) is None:
                warn(f"bar could not pack the repository's loose objects: {_read(log)}")
    finally:
        os.close(fd)  # (a packer started here holds the lock until it is done)


def _take(lock: Path) -> int | None:
    """An open descriptor holding ``lock`` (``flock``: released when every process that
    holds it ends, however it ends); None if another process holds it."""
    import fcntl
    import json

    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": "packing loose objects"}).encode(), 0)
    return fd


def _spawn(repo: Path, store: Path, log: Path, fd: int) -> None:
    """Start ``python -m bar.git.packing`` in a session of its own, holding the lock."""
    import subprocess
    import sys

    subprocess.Popen(
        [sys.executable, "-m", "bar.git.packing", str(repo), str(store), str(log), str(fd)],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _pack_logged(repo: Path, store: Path, log: Path) -> Packed | None:
    """``pack``; its failure written to ``log`` (removed on success)."""
    from bar.errors import GitError

    try:
        done = pack(repo, store)
    except BarError as e:
        from bar.store.files import write_text_atomic

        write_text_atomic(log, (_said(e) if isinstance(e, GitError) else str(e)) + "\n")
        return None
    log.unlink(missing_ok=True)
    return done


def _said(e: GitError) -> str:
    """A failed git in a line: which git, and its last fatal error (``GitError``'s own
    text starts with every ``-c`` bar passes)."""
    verb = next((a for a in e.cmd if a in _VERBS), "")
    lines = [line.strip() for line in e.stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    said = next((line for line in reversed(lines) if line.startswith("fatal:")), None)
    said = said or (lines[-1] if lines else "it said nothing")
    return f"`git {verb}` failed (exit {e.returncode}): {said[:300]}"


_VERBS = frozenset({"pack-objects", "prune-packed", "verify-pack", "config"})


def last_failure(project: Path) -> str:
    """What the last packing of the project's repository said when it failed ("" if it
    did not, or none ran)."""
    return _read(project / "pack.log")


def pack_now(common: Path, project: Path) -> str:
    """Pack the loose objects here and now, due or not (``bar doctor --repair``); what
    was done. Raises ``Locked`` while another process packs, ``BarError`` if it fails."""
    from bar.errors import Locked

    fd = _take(project / "pack.lock")
    if fd is None:
        raise Locked(
            "another process is packing the repository's loose objects",
            hint="run `bar doctor` again once it is done",
        )
    try:
        done = _pack_logged(common, common / "objects", project / "pack.log")
    finally:
        os.close(fd)
    if done is None:
        raise BarError(f"could not pack the loose objects: {last_failure(project)}")
    return f"packed {done.objects} loose objects"


def _read(log: Path) -> str:
    try:
        return log.read_text().strip()
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    """The packer ``after_step`` starts: ``REPO STORE LOG FD`` (it holds the lock on FD)."""
    repo, store, log, _fd = argv
    try:
        os.nice(10)  # (background work: a step's own commands come first)
    except OSError:
        pass
    return 0 if _pack_logged(Path(repo), Path(store), Path(log)) else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
