"""What ``bar doctor --repair`` does to each problem it found, without losing anything.

Each repair fixes one thing and returns one sentence saying what it did, or raises a
``BarError`` saying why it could not. Nothing is deleted that holds something bar cannot
get back: an unreadable ledger line or journal is moved aside, never removed; what is
rebuilt (a side index, a patch, a worktree) is rebuilt from the snapshots in git. The
caller (``bar.project.doctor``) holds the task lock around every repair that changes a task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bar import git
from bar.errors import BarError, UnsupportedVersion
from bar.git import patches, worktrees
from bar.model import journals
from bar.model.records import Step
from bar.model.tasks import Task
from bar.step import recovery, transaction
from bar.store.files import FILE_MODE, write_bytes_atomic
from bar.store.layout import TaskPaths

JournalReader = Callable[[TaskPaths], object]


def journals_of(task: Task) -> list[tuple[Path, str, JournalReader]]:
    """Each intent journal of the task: (path, what it is the intent of, its reader)."""
    paths = task.paths
    return [
        (paths.marker, "step", journals.RUN.read),
        (paths.rollback_journal, "rollback", journals.ROLLBACK.read),
        (paths.apply_journal, "apply", journals.APPLY.read),
        (paths.sync_journal, "sync", journals.SYNC.read),
    ]


def then(action: Callable[[], object], said: str) -> Callable[[], str]:
    """A repair that runs ``action`` and says ``said``."""

    def run() -> str:
        action()
        return said

    return run


def quarantine_lines(path: Path, numbers: list[int]) -> str:
    """Move the given lines to ``<file>.corrupt`` (appended) and rewrite the file without them."""
    drop = set(numbers)
    keep: list[bytes] = []
    moved: list[bytes] = []
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            body = line.rstrip(b"\n")
            if not body.strip():
                continue
            (moved if n in drop else keep).append(body)
    side = path.with_name(path.name + ".corrupt")
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.write(fd, b"".join(m + b"\n" for m in moved))
        os.fsync(fd)
    finally:
        os.close(fd)
    write_bytes_atomic(path, b"".join(k + b"\n" for k in keep))
    return f"moved {len(moved)} line(s) to {side.name}"


def journal_problem(task: Task, read: JournalReader) -> str | None:
    """Why the journal cannot be read (garbled), or None if it reads. A journal of a
    newer bar is neither: ``UnsupportedVersion`` propagates (only that bar can finish it)."""
    try:
        read(task.paths)
    except UnsupportedVersion:
        raise
    except BarError as exc:
        return str(exc)
    return None


def quarantine_journal(task: Task, path: Path, read: JournalReader) -> str:
    """Move a garbled intent journal aside (kept as ``<name>.corrupt``) and let the ledger
    be the task's record: what the worktree holds beyond its last step becomes a
    ``manual`` step, as the next command would record it."""
    if not path.exists():
        return "it was gone: another command finished it"
    if journal_problem(task, read) is None:
        return finish_pending(task)  # rewritten since it was checked: finish it instead
    aside = _free_name(path.with_name(path.name + ".corrupt"))
    os.replace(path, aside)
    said = f"moved it to {aside.name} (kept); the ledger is the task's record"
    others_garbled = any(
        other.exists() and _unreadable(task, other_read)
        for other, _, other_read in journals_of(task)
    )  # the repair of the last of them records the worktree
    if task.active and task.worktree.is_dir() and not others_garbled:
        before = task.ledger.last()
        transaction.prepare(task)
        last = task.ledger.last()
        if last is not None and (before is None or last.number > before.number):
            said += f"; recorded the worktree's unrecorded changes as step {last.step_id}"
    return said


def _unreadable(task: Task, read: JournalReader) -> bool:
    try:
        return journal_problem(task, read) is not None
    except UnsupportedVersion:
        return True


def _free_name(path: Path) -> Path:
    n = 1
    candidate = path
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def finish_pending(task: Task) -> str:
    if not any(path.exists() for path, _, _ in journals_of(task)):
        return "already finished"
    done = transaction.finish_pending(task)
    if not done:
        return "nothing had changed; the journal was removed"
    return "recorded " + ", ".join(f"step {step.step_id} ({step.kind})" for step in done)


def remove_ref_lock(task: Task) -> str:
    if not recovery.clear_stale_ref_lock(task):
        return "it was gone"
    return "removed it"


def regenerate_patch(task: Task, step: Step, path: Path) -> str:
    assert step.snapshot_before and step.snapshot
    patches.write_patch(
        task.worktree if task.worktree.is_dir() else task.project.root,
        step.snapshot_before,
        step.snapshot,
        path,
    )
    return "regenerated it from the step's snapshots"


def index_is_readable(task: Task) -> bool:
    """Whether git can read the side index (its checksum is checked on every read). The
    pathspec matches nothing, so nothing is printed however large the index is."""
    res = git.git(
        task.worktree,
        "ls-files",
        "-z",
        "--",
        ":(exclude)*",
        env=git.index_env(task.index),
        check=False,
    )
    return res.returncode == 0


def reseed_index(task: Task) -> str:
    """Rebuild the side index from the last snapshot (it holds nothing else): written
    next to it and moved over it, so a garbled one is never read."""
    seed = task.index.with_name(task.index.name + ".seed")
    seed.unlink(missing_ok=True)
    git.git(task.worktree, "read-tree", task.recorded_snapshot(), env=git.index_env(seed))
    os.chmod(seed, FILE_MODE)
    os.replace(seed, task.index)
    return "rebuilt it from the last snapshot"


def repair_registration(task: Task) -> str:
    res = git.git(task.project.root, "worktree", "repair", str(task.worktree), check=False)
    if worktrees.is_registered(task.project.root, task.worktree):
        return "re-registered it with git"
    raise BarError(f"git could not re-register the worktree: {res.err.strip()}")


def take_answer(task: Task) -> str:
    """Record the person's answer on disk as its decision step (``bar.aide.answers``)."""
    from bar.aide import answers

    step = answers.take_waiting(task)
    if step is None:
        return "nothing to record: it was recorded meanwhile"
    return f"recorded it as step {step.step_id}"
