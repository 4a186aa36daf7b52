"""Removing a task's worktree so that a kill at any moment loses nothing and leaves
nothing half done where the developer works.

``git worktree remove`` deletes a worktree file by file: killed midway, it leaves a
worktree with some files gone, which the next look would record as the developer's
deletions, and a hand edit made then is in a directory that is going away. Here the
worktree leaves its place in one ``rename``, first: until then nothing is removed (a kill
leaves the task as it was), and from then on the developer can no longer reach what is
being removed. In order:

1. ``removing.json`` in the task's directory says what is removed, to which state, and
   what the task becomes (closed, or planned again);
2. the worktree is renamed to ``removing/`` in the task's directory (beside the worktree
   when the two are on different file systems);
3. what that moved-aside tree holds that the last recorded state does not, byte for byte
   (nested repositories, ignored and untracked files, a file rewritten after the last look:
   ``bar.history.verify`` hashes every file), goes to the task's trash
   (``bar.changes.trash``), as the worktree's own paths;
4. the rest is deleted (its bytes are in the record), the worktree's git entry pruned,
   and the task, the board and the registry say so; the journal goes last.

A bar killed after 1 leaves the journal: ``resume`` (``bar task close``, ``bar worktree
remove``, ``bar doctor --repair``) does what is left, or drops the journal if the rename
never happened. Whatever stands at the worktree's place after the rename (a directory
made again by hand) goes to the trash too.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base import faults
from bar.base.clock import now_iso
from bar.base.record import record
from bar.errors import BarError, CorruptFile
from bar.git import worktrees
from bar.model import board
from bar.store.files import fsync_dir, read_json, write_json_atomic
from bar.task import registry

if TYPE_CHECKING:
    from bar.model.tasks import Task

# what the task becomes once its worktree is gone
COMPLETED = "completed"  # ``bar task close``
PENDING = "pending"  # ``bar worktree remove`` of an open task: its next start makes it again
UNCHANGED = "unchanged"  # ``bar worktree remove`` of a closed task's kept worktree
_THEN = (COMPLETED, PENDING, UNCHANGED)


@record(frozen=True)
class Removal:
    worktree: str
    moved: str  # where the worktree is renamed to
    gitdir: str  # the worktree's git directory, as its ``.git`` file names it
    snapshot: str  # the last recorded state: what may go without a trace
    then: str
    command: str
    started_at: str

    def to_record(self) -> dict[str, Any]:
        return {"version": 1, **{k: getattr(self, k) for k in _KEYS}}


_KEYS = ("worktree", "moved", "gitdir", "snapshot", "then", "command", "started_at")


def journal(task: Task) -> Path:
    return task.paths.removal_journal


def interrupted(task: Task) -> Removal | None:
    """The removal a stopped bar left of ``task``'s worktree, if any."""
    path = journal(task)
    try:
        rec = read_json(path, "worktree removal journal")
    except FileNotFoundError:
        return None
    if not isinstance(rec, dict) or any(not isinstance(rec.get(k), str) for k in _KEYS):
        raise CorruptFile(f"{path}: not a worktree removal journal")
    if rec["then"] not in _THEN or not git.is_object_id(rec["snapshot"]):
        raise CorruptFile(f"{path}: not a worktree removal journal")
    return Removal(**{k: rec[k] for k in _KEYS})


def remove(task: Task, *, then: str, command: str) -> None:
    """Remove the task's worktree (the caller holds the task lock and recorded every
    change in it) and make the task what ``then`` says."""
    from bar.changes import fast

    wt = task.worktree
    fast.stop_watching(task.index)  # no watch on a tree that is going away
    intent = Removal(
        worktree=str(wt),
        moved=str(_moved_path(task, wt)),
        gitdir=_gitdir_of(wt),
        snapshot=task.recorded_snapshot(),
        then=then,
        command=command,
        started_at=now_iso(),
    )
    write_json_atomic(journal(task), intent.to_record())
    # locked, git's `worktree prune` (any bar command's, in any task) leaves its git
    # directory alone while its path is gone: the moved tree is still compared by it
    _lock(task.project.root, wt)
    faults.point("remove worktree: journal written")
    view = dict(board.task_view(task), status=_board_status(task, then))
    project = task.project
    project.log_event("worktree.remove.before", task=view, worktree=board.worktree_view(task))
    try:
        os.rename(wt, intent.moved)
    except OSError as exc:
        journal(task).unlink(missing_ok=True)
        project.log_event(
            "worktree.remove.failed",
            task=view,
            worktree=board.worktree_view(task),
            error=exc.strerror or str(exc),
        )
        raise BarError(
            f"could not move the worktree {wt} aside to remove it: {exc.strerror or exc}",
            hint="nothing was removed; a worktree that is a mount point cannot be moved",
        ) from exc
    fsync_dir(wt.parent)
    faults.point("remove worktree: moved aside")
    _finish(task, intent)


def resume(task: Task) -> bool:
    """Finish the removal a stopped bar left (the caller holds the task lock). False if
    there was none, or it had not begun (the worktree never moved: the journal goes,
    the task is as it was)."""
    intent = interrupted(task)
    if intent is None:
        return False
    moved, wt = Path(intent.moved), Path(intent.worktree)
    if not os.path.lexists(moved) and (wt / ".git").is_file():
        git.git(task.project.root, "worktree", "unlock", str(wt), check=False)
        journal(task).unlink(missing_ok=True)
        return False
    from bar.base.notices import note

    note(f"finishing the removal of the worktree {wt}, which was interrupted")
    _finish(task, intent)
    return True


def conclude(task: Task, then: str) -> None:
    """Make the task, its board entry and its events say what ``then`` says (the caller
    holds the task lock). ``COMPLETED`` is also a close that keeps the worktree."""
    from bar.changes import fast

    project = task.project
    if then == COMPLETED:
        from bar.sandbox import plan as sandbox_plan

        task.status = "closed"
        task.closed_at = now_iso()
        task.board.status = board.COMPLETED
        task.board.worktree = board.worktree_name(task) if task.worktree.is_dir() else ""
        task.save()
        project.log_event(
            "task.completed",
            task=board.task_view(task),
            worktree={"name": board.worktree_name(task)},
        )
        sandbox_plan.remove_temp_dir(task)
    else:
        from bar.task import seed_board
        from bar.task.start import starting_mark

        if then == PENDING:
            task.board.status = board.PENDING
            starting_mark(task).unlink(missing_ok=True)  # a start's own, if one was stopped
        task.board.worktree = ""
        task.save()
        seed_board.refresh(project)  # the board changed after its last event
    fast.stop_watching(task.index)  # no step will ask it again, until a start
    if then != UNCHANGED and project.active_task_id() == task.id:
        project.set_active_task(None)


def finished_events(task: Task, status: str) -> None:
    """The registry and the log say the worktree is removed."""
    registry.mark(task, registry.REMOVED)
    task.project.log_event(
        "worktree.remove.after",
        task=dict(board.task_view(task), status=status),
        worktree=board.worktree_view(task, registry.REMOVED),
    )


# --- what is left to do -----------------------------------------------------------------


def _finish(task: Task, intent: Removal) -> None:
    from bar.changes import trash

    moved, wt = Path(intent.moved), Path(intent.worktree)
    if os.path.lexists(moved):
        _point_home(moved, intent.gitdir)
        try:
            keep = _not_recorded(task, moved, intent.snapshot)
            why = "no recorded state holds it, and the worktree was removed"
        except BarError:  # (its git directory is gone: nothing can be compared, all is kept)
            keep = sorted(n for n in os.listdir(moved) if n != ".git")
            why = "the worktree was removed and could not be compared with the record"
        faults.point("remove worktree: compared")
        trash.move_aside(
            task,
            moved,
            keep,
            why,
            command=intent.command,
            kind=trash.CLOSE,
            state=intent.snapshot,
        )
        faults.point("remove worktree: what no state holds moved to the trash")
        _delete(moved)
        faults.point("remove worktree: deleted")
    if wt.is_dir() and not wt.is_symlink():
        # made again where the worktree was, after it had moved: nobody's record holds it
        trash.move_aside(
            task,
            wt,
            sorted(os.listdir(wt)),
            "made where the worktree was while its removal was interrupted",
            command=intent.command,
            kind=trash.CLOSE,
            state=intent.snapshot,
        )
        if not any(wt.iterdir()):
            wt.rmdir()
    project = task.project
    with project.lock("bar: remove a worktree"):  # `prune` must not see a worktree being added
        worktrees.forget(project.root, intent.worktree)
    finished_events(task, _board_status(task, intent.then))
    conclude(task, intent.then)
    journal(task).unlink(missing_ok=True)
    faults.point("remove worktree: done")


def _lock(repo: Path, wt: Path) -> None:
    git.git(repo, "worktree", "lock", "--reason", "bar: being removed", str(wt), check=False)


def _board_status(task: Task, then: str) -> str:
    return {COMPLETED: board.COMPLETED, PENDING: board.PENDING}.get(then, task.board.status)


def _moved_path(task: Task, wt: Path) -> Path:
    """``removing/`` in the task's directory, or beside the worktree when that is on
    another file system (a rename moves nothing across one)."""
    try:
        same = os.stat(wt).st_dev == os.stat(task.paths.dir).st_dev
    except OSError:
        same = False
    base = task.paths.removing if same else wt.with_name(f".{wt.name}.removing")
    target, n = base, 1
    while os.path.lexists(target):  # never over anything (what could that be? keep it)
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    return target


def _gitdir_of(wt: Path) -> str:
    try:
        text = (wt / ".git").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise BarError(f"{wt} is not a git worktree: {exc.strerror or exc}") from exc
    head, _, rest = text.partition(":")
    if head.strip() != "gitdir" or not rest.strip():
        raise BarError(f"{wt}/.git does not name a git directory")
    gitdir = Path(rest.strip())
    return str(gitdir if gitdir.is_absolute() else (wt / gitdir).resolve())


def _point_home(moved: Path, gitdir: str) -> None:
    """The moved tree's ``.git`` file, written again if a delete cut short took it: git
    must never look for a repository above the tree (a home directory under git)."""
    dot_git = moved / ".git"
    try:
        if dot_git.is_file() and not dot_git.is_symlink():
            return
        if os.path.lexists(dot_git):
            _delete(dot_git)
    except OSError:
        pass
    dot_git.write_text(f"gitdir: {gitdir}\n", encoding="utf-8", errors="surrogateescape")


def _not_recorded(task: Task, moved: Path, snapshot: str) -> list[str]:
    """The paths of the moved-aside worktree whose bytes the state ``snapshot`` does not
    hold: whatever is not in it (nested repositories always), and every file whose bytes,
    type or link differ from it, hashed."""
    from bar.changes import trash
    from bar.history import verify
    from bar.store.layout import AIDE_DIR

    recorded: dict[str, str] = {}
    raw = git.git(task.project.root, "ls-tree", "-r", "-t", "-z", "--full-tree", snapshot).stdout
    for item in raw.split(b"\0"):
        if item:
            meta, _, path = item.partition(b"\t")
            recorded[path.decode("utf-8", "surrogateescape")] = meta.split(b" ")[0].decode()
    found = trash.unrecorded(moved, recorded, skip=(AIDE_DIR,))
    report = verify.check(moved, snapshot, "the last state", scratch=task.paths.dir)
    found += [d.path for d in report.differences if d.kind in (verify.MODIFIED, verify.TYPE)]
    found += report.not_compared
    return sorted(set(found))


def _delete(path: Path) -> None:
    """Delete ``path`` and what it holds, never through a link; its ``.git`` last, so
    that a delete cut short leaves a tree git still knows as the worktree."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    for name in sorted(os.listdir(path), key=lambda n: n == ".git"):
        child = path / name
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, onerror=_writable_and_again)
        else:
            child.unlink(missing_ok=True)
    try:
        path.rmdir()
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise


def _writable_and_again(func: Any, path: str, info: Any) -> None:
    """A directory without write permission cannot lose its entries: give it back."""
    exc, parent = info[1], os.path.dirname(path)
    if not isinstance(exc, PermissionError) or not parent:
        raise exc
    os.chmod(parent, os.lstat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
    func(path)
