"""The one way a command changes a task: hold its lock, reload it (it may have changed
while the command waited), finish what a stopped bar left, record the edits made by hand
since the last step, then act (``changing``; ``prepare`` is all but the lock, for a
caller that holds it).

This module alone takes a task's lock (``tests/test_architecture.py`` checks it): a
verb that changes only what the task's record says of it (its name, owner, board, the
worktree it is bound to) holds it and reloads the task (``holding``; ``briefly`` for a
change of owner, which a running step must not make wait); a verb that finishes its own
kind of stopped work first (close, delete, start, reopen, ``bar doctor --repair``) holds
the lock alone (``task_lock``, ``id_lock`` for a task whose record is not whole).

A stopped bar leaves an intent journal (``bar.model.journals``); each is completed by the
same code its verb would have run, which the verb registers as its module loads
(``Journal.finished_by``): this module names the verbs, and they are loaded only when a
journal is found. Hand edits are then recorded as a ``manual`` step, so nothing is lost
or mis-attributed. ``finish_pending`` is the first half alone, for ``bar doctor
--repair``, ``bar task close`` and ``bar verify --record``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from bar.base.notices import note
from bar.errors import Locked
from bar.model import journals
from bar.model.project import Project
from bar.model.records import Step
from bar.model.tasks import Task, load_task
from bar.store.lock import FileLock

# The record's modules (``bar.history``, ``bar.step.recovery``, ``bar.worktree.guard``)
# are imported where a task is prepared, not here: a verb that only holds the lock (a
# claim, an edit of the task's metadata) does not load them.


def _verbs() -> None:
    """The verbs whose intents a stopped bar may leave: each registers how its intent
    is finished as its module loads."""
    from bar.changes import apply, rollback, sync  # noqa: F401
    from bar.step import complete  # noqa: F401


journals.verbs_from(_verbs)


def finish_pending(task: Task) -> list[Step]:
    """Complete every intent a stopped bar left, each by its own verb's completion
    (``journals.Journal.finished_by``), then the orders a step answered while it ran and
    a decision answered while no bar was there (the caller holds the task lock); the
    steps recorded."""
    from bar.history import queued as queued_steps
    from bar.step import recovery

    recovery.clear_stale_ref_lock(task)
    recovery.clear_stale_index_lock(task)
    recovery.clear_stale_git_locks(task)
    done: list[Step] = []
    for journal in journals.INTERRUPTED:
        done += journal.finish_left(task)
    if task.paths.quarantine_state.exists():  # (what a step bar did not record left)
        from bar.sandbox import quarantine

        quarantine.settle_left(task)
    done += queued_steps.flush(task)  # orders a step answered while it ran
    done += _answer_taken(task)
    return done


def _answer_taken(task: Task) -> list[Step]:
    """The person's answer to the latest decision, written where aide's clients look (by
    aide's web server) while no bar was there to take it, recorded as its ``decision``
    step before anything else changes the task (``bar.aide.answers``); left as it is,
    silently, when it cannot be the person's or is no answer (``bar decide result`` and
    ``bar doctor`` say why)."""
    from bar.aide import place

    if place.waiting(task) is None:
        return []
    from bar.aide import answers
    from bar.errors import BarError

    try:
        step = answers.take_waiting(task)
    except BarError:
        return []
    if step is None:
        return []
    note(
        f"recorded step {step.step_id} (decision {step.session_id}): the answer written in "
        f"{place.decisions(task)}"
    )
    return [step]


def prepare(
    task: Task,
    meanwhile: Callable[[], object] | None = None,
    before_look: Callable[[], None] | None = None,
) -> None:
    """What every command that changes a task does first, under the task lock.
    ``meanwhile``: called once the intents are finished, before the worktree is looked
    at for hand edits (work that may overlap that look, such as apply's merge);
    ``before_look``: called when the look for hand edits begins (``snapshot.take``)."""
    from bar.history import steps
    from bar.worktree import guard

    task.require_worktree()
    guard.check_link(task)  # before any git operation in the worktree
    finish_pending(task)
    if meanwhile is not None:
        meanwhile()
    steps.record_hand_edits(task, before_look)


def prepare_from_record(task: Task, meanwhile: Callable[[], object] | None = None) -> None:
    """``prepare`` for a task applied from its record alone, without a worktree to look
    at (closed, or its worktree removed: ``bar.changes.apply.from_record``): only an apply
    a stopped bar left is finished. ``meanwhile`` is not called: there is no look."""
    journals.APPLY.finish_left(task)


def task_lock(task: Task, what: str, *, wait: bool = True, copy_ok: bool = False) -> FileLock:
    """The task's lock (``what``: who holds it, as a waiting command is told; ``wait``:
    else ``Locked`` at once if another holds it). A fetched copy (``Task.read_only``) is
    refused unless ``copy_ok`` (fetching it again, deleting it, adopting it, a repair)."""
    if not copy_ok:
        task.require_own()
    return FileLock(task.paths.lock, f"task {task.name} ({task.id})", what=what, wait=wait)


def id_lock(project: Project, task_id: str, what: str, *, wait: bool = True) -> FileLock:
    """The lock of the task ``task_id`` whose record is not whole or not there (one a
    stopped ``bar task new`` or ``bar task delete`` left)."""
    paths = project.paths.task(task_id)
    return FileLock(paths.lock, f"task {task_id}", what=what, wait=wait)


@contextmanager
def holding(task: Task, what: str, *, wait: bool = True, copy_ok: bool = False) -> Iterator[Task]:
    """Hold the task's lock (``task_lock``) and reload the task: it may have changed
    while the command waited; the caller changes the task given."""
    with task_lock(task, what, wait=wait, copy_ok=copy_ok):
        yield load_task(task.project, task.id)


@contextmanager
def briefly(task: Task, what: str, *, busy: Callable[[Task], bool]) -> Iterator[Task]:
    """``holding``, for a change another such change makes wait a moment only (an owner
    claimed): the lock is tried again for a few seconds, but at once ``Locked`` when
    ``busy`` says the holder is one that holds it long (a running step)."""
    deadline = time.monotonic() + 5.0
    with ExitStack() as held:
        while True:
            try:
                held.enter_context(task_lock(task, what, wait=False))
                break
            except Locked as held_long:
                if busy(task) or time.monotonic() > deadline:
                    raise Locked(str(held_long), hint="try again once it is done") from None
            time.sleep(0.05)
        yield load_task(task.project, task.id)


@contextmanager
def changing(task: Task, what: str, *, wait: bool) -> Iterator[Task]:
    """Hold the task's lock, reload the task (``holding``), finish what a crashed bar
    left and record hand edits: then the caller acts on the task given."""
    with holding(task, what, wait=wait) as fresh:
        prepare(fresh)
        yield fresh
