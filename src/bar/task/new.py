"""``bar task new``: a task is made behind an intent, so nothing is ever left half-made.

Under the project lock the task directory is made, its lock taken, and ``creating.json``
(``journals.CreateIntent``) written: what bar is about to make outside the directory.
Then come the snapshot ref, the branch and worktree (``git worktree add`` with none of
the developer's hooks: bar runs none of them, as apply does not), the side index, and
task.json last. Removing the intent completes the task; only then does it become the
active task. So state.json never names a task that is not whole, and a directory with
the intent but no task.json is half-made: no listing or lookup sees it.

A failure undoes what was made at once (``undo``). A bar killed partway leaves the
intent behind; the next ``bar task new`` and ``bar doctor --repair`` call ``finish``,
which takes the task lock (free only if its maker is dead: the kernel drops an ``flock``
with its holder) and calls the same ``undo``. Undo deletes only what bar made: the
worktree at the task's own path, and the snapshot ref and the branch only while they
still point at the base commit (a branch someone has committed on is kept). A worktree
holding files no checkout made is kept too, and said so.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from bar import git
from bar.base import faults
from bar.base.clock import now_iso
from bar.base.notices import note, warn
from bar.errors import AlreadyExists, BarError, Locked, NotFound, UsageError
from bar.git import worktrees
from bar.history import side_index
from bar.model import board, journals
from bar.model.board import IN_PROGRESS, PENDING, Board
from bar.model.journals import CreateIntent
from bar.model.project import Project
from bar.model.tasks import Task, load_task, new_id, open_task_named, pin, validate_name
from bar.redact import known as known_secrets
from bar.step import transaction
from bar.store.files import ensure_dir, remove_tree, write_json_atomic
from bar.store.layout import TASK_ID_RE, TaskPaths
from bar.store.lock import is_locked
from bar.task import registry
from bar.task.edit import stored_meta

HALF_MADE = "half-made"  # the intent, no task.json: undone
UNFINISHED = "unfinished"  # task.json and the intent: the task is whole, the intent is dropped
EMPTY = "empty"  # neither: killed before the intent was written, nothing was made outside


def create_task(
    project: Project,
    name: str,
    *,
    base: str | None = None,
    description: str | None = None,
    tags: list[str] | None = None,
    meta: dict[str, str] | None = None,
    plan: bool = False,
) -> Task:
    """Create the task, its branch and worktree, and make it the active task; with
    ``plan``, a ``pending`` task: its branch and snapshot ref at the base, no worktree
    until ``bar task start`` (``bar.task.start``), and the active task left as it was."""
    validate_name(name)
    config = project.config
    base_ref = base or config.git.default_base
    base_commit = git.resolve_commit(project.root, base_ref)
    if base_commit is None:
        # an option-like name is a bad command line; any other is a ref that is not there
        raise (UsageError if base_ref.startswith("-") else NotFound)(
            f"base {base_ref!r} does not name a commit in {project.root}",
            hint="give an existing branch, tag or commit with --base",
        )
    metadata: dict[str, Any] = {}
    # A description is prose someone typed, and may quote a token or a secret value; it
    # reaches task.json and, on apply, a commit message: stored scrubbed, like argv.
    if description:
        metadata["description"] = known_secrets.scrub(description)
    if tags:
        metadata["tags"] = [known_secrets.scrub(tag) for tag in tags]
    metadata.update(stored_meta(meta or {}))
    ensure_dir(project.paths.tasks)
    ensure_dir(project.paths.workspaces)
    with contextlib.ExitStack() as held:
        with project.lock(f"bar task new {name}"):
            clear_leftovers(project)
            _refuse_taken(project, name)
            task = _new_task(project, name, base_ref, base_commit, metadata)
            if plan:
                task.board = Board(PENDING)
            ensure_dir(task.dir)
            intent = CreateIntent(task.id, name, task.branch, base_commit, task.created_at)
            try:
                held.enter_context(transaction.task_lock(task, f"bar task new {name}", wait=False))
                journals.CREATE.write(task.paths, intent)
            except BaseException:
                with contextlib.suppress(OSError):  # nothing else was made yet
                    remove_tree(task.dir)
                raise
        if not plan:
            project.log_event(
                "worktree.create.before",
                task=board.task_view(task),
                worktree=board.worktree_view(task),
            )
        try:
            _make(task, worktree=not plan)
        except BaseException as exc:
            if not plan:
                with contextlib.suppress(BarError, OSError):  # the failure is what matters
                    project.log_event(
                        "worktree.create.failed",
                        task=board.task_view(task),
                        worktree=board.worktree_view(task),
                        error=str(exc) or type(exc).__name__,
                    )
            _undo_after(project, intent, exc)
            raise
    project.log_event("task.created", task=board.task_view(task))
    if plan:
        return task
    registry.mark(task, registry.ACTIVE)
    project.log_event(
        "worktree.create.after",
        task=board.task_view(task),
        worktree=board.worktree_view(task, registry.ACTIVE),
    )
    project.set_active_task(task.id)
    return task


def _refuse_taken(project: Project, name: str) -> None:
    """One open task per name, so that the name alone always finds it. Counted under the
    project lock, with the tasks a live ``bar task new`` is still making (which hold
    their intent, not yet task.json); a closed task's name is free again."""
    other = open_task_named(project, name)
    other_id = other.id if other else _being_made_as(project, name)
    if other_id is not None:
        raise AlreadyExists(
            f"an open task is already named {name!r} ({other_id})",
            hint=f"pick another name, or close that task first (`bar task close {other_id}`)",
        )


def name_holder(project: Project, name: str) -> str | None:
    """The id of the open task called ``name``, or of one a live ``bar task new`` is
    making under it (the caller holds the project lock)."""
    other = open_task_named(project, name)
    if other is not None:
        return other.id
    made = _being_made_as(project, name)
    return made if made is not None and is_locked(project.paths.task(made).lock) else None


def _being_made_as(project: Project, name: str) -> str | None:
    """The id of a task called ``name`` that a live ``bar task new`` is making."""
    for entry in sorted(project.paths.tasks.iterdir()):
        if not TASK_ID_RE.match(entry.name) or entry.joinpath("task.json").exists():
            continue
        with contextlib.suppress(BarError):
            intent = journals.CREATE.read(project.paths.task(entry.name))
            if intent is not None and intent.name == name:
                return intent.task_id
    return None


def _new_task(
    project: Project, name: str, base_ref: str, base_commit: str, metadata: dict[str, Any]
) -> Task:
    """The task record, with an id no task, worktree or branch uses (the caller holds
    the project lock, so no other ``bar task new`` can take the same one)."""
    prefix = project.config.git.branch_prefix
    while True:
        task_id = new_id()
        branch = f"{prefix}{name}-{task_id}"
        if not (
            project.paths.task(task_id).dir.exists()
            or os.path.lexists(project.paths.workspace(task_id))
            or git.branch_exists(project.root, branch)
        ):
            break
    if not git.check_branch_name(project.root, branch):
        raise UsageError(f"{branch!r} is not a valid branch name")
    now = now_iso()
    return Task(
        id=task_id,
        name=name,
        repo_root=str(project.root),
        base_ref=base_ref,
        base_commit=base_commit,
        branch=branch,
        workspace_path=f"workspaces/{task_id}",
        status="active",
        created_at=now,
        updated_at=now,
        closed_at=None,
        metadata=metadata,
        snapshot_ref=f"refs/bar/tasks/{task_id}",
        project=project,
        board=Board(IN_PROGRESS, worktree=name),
    )


def _make(task: Task, *, worktree: bool = True) -> None:
    """Everything after the intent, task.json last; removing the intent completes it.
    Without ``worktree`` (a planned task) the branch is made alone, at the base."""
    repo = task.project.root
    ensure_dir(task.paths.artifacts)
    faults.point(f"before moving {task.snapshot_ref}")
    # ("": the ref must not exist yet, whatever the repository's object format)
    git.git(
        repo,
        "update-ref",
        "-m",
        f"bar: task {task.id} created",
        task.snapshot_ref,
        task.base_commit,
        "",
    )
    faults.point(f"after moving {task.snapshot_ref}")
    if worktree:
        add_worktree(task, new_branch=True)
    else:
        git.git(
            repo,
            "update-ref",
            "-m",
            f"bar: task {task.id} planned",
            f"refs/heads/{task.branch}",
            task.base_commit,
            "",
        )
        faults.point("after making the branch")
    write_json_atomic(task.paths.task_json, task.to_record())
    journals.CREATE.clear(task.paths)
    faults.point("after removing creating.json")


def add_worktree(task: Task, *, new_branch: bool) -> None:
    """Check the task's branch out in its worktree (made at the base with ``new_branch``,
    else existing) and seed its side index."""
    project, repo = task.project, task.project.root
    # git does not guard `.git/worktrees` against two `worktree add` at once: a
    # concurrent one reads the other's half-written entry and fails.
    with project.lock(f"bar task new {task.name}: worktree"):
        faults.point("before adding the worktree")
        worktrees.add(repo, task.worktree, task.branch, task.base_commit if new_branch else None)
        faults.point("after adding the worktree")
    pin(task)  # (bar's git in it uses the directories bar found from here on, as once loaded)
    task.index.unlink(missing_ok=True)
    side_index.seed_index(
        task.worktree,
        task.index,
        task.base_commit,
        task.paths.git_dir,
        project.common_dir,
        head=task.base_commit if new_branch else None,
    )
    faults.point("after seeding the side index")


def _undo_after(project: Project, intent: CreateIntent, exc: BaseException) -> None:
    """Undo a creation that failed; if even that fails, the intent stays for ``finish``."""
    with contextlib.suppress(BarError, OSError):  # a full disk must not stop the undo
        project.log_event(
            "task.create.failed",
            task={"id": intent.task_id, "name": intent.name},
            error=str(exc) or type(exc).__name__,
        )
    try:
        for said in undo(project, intent):
            note(said)
    except Exception as undo_exc:  # the failure that matters is the one being raised
        warn(
            f"could not undo the half-made task {intent.name} ({intent.task_id}): {undo_exc}; "
            "`bar doctor --repair` clears it"
        )


def undo(project: Project, intent: CreateIntent) -> list[str]:
    """Remove what ``bar task new`` made for ``intent``, then the task directory; say
    what was kept. The caller holds the task lock. Every part can run again."""
    repo = project.root
    path = project.paths.workspace(intent.task_id)
    kept: list[str] = []
    # `worktree prune` must not see a worktree another process is adding
    with project.lock(f"bar: undo task {intent.task_id}"):
        worktrees.discard(repo, path, unless_work=True)
    faults.point("undo: after removing the worktree")
    branch_ref = f"refs/heads/{intent.branch}"
    if git.rev_parse(repo, branch_ref) is not None:
        checked_out = any(e.get("branch") == branch_ref for e in git.worktree_list(repo))
        # compare-and-delete: a branch that moved since holds someone's commits
        if (
            checked_out
            or git.git(
                repo, "update-ref", "-d", branch_ref, intent.base_commit, check=False
            ).returncode
            != 0
        ):
            kept.append(f"kept branch {intent.branch}: it has moved or is checked out")
    faults.point("undo: after deleting the branch")
    snapshot_ref = f"refs/bar/tasks/{intent.task_id}"
    if git.rev_parse(repo, snapshot_ref) is not None:
        git.git(repo, "update-ref", "-d", snapshot_ref, intent.base_commit, check=False)
    faults.point("undo: after deleting the snapshot ref")
    _remove_task_dir(project.paths.task(intent.task_id))
    with contextlib.suppress(BarError, OSError):  # the undo is done: a full disk can't undo it
        project.log_event("task.undone", task={"id": intent.task_id, "name": intent.name})
    return kept


def _remove_task_dir(paths: TaskPaths) -> None:
    """The intent goes last but for the lock: until then the directory reads as
    half-made, and after it as empty, so a kill in between leaves it to be cleared."""
    journal = journals.CREATE.path(paths)
    for entry in paths.dir.iterdir():
        if entry in (journal, paths.lock):
            continue
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink()
    faults.point("undo: after emptying the task directory")
    journals.CREATE.clear(paths)
    with contextlib.suppress(OSError):
        remove_tree(paths.dir)
    faults.point("undo: after removing the task directory")


# --- what a killed bar left ------------------------------------------------------------


def leftover(project: Project, task_id: str) -> str | None:
    """What a killed ``bar task new`` left in the task directory ``task_id``, if anything:
    ``HALF_MADE``, ``UNFINISHED`` or ``EMPTY``."""
    paths = project.paths.task(task_id)
    has_json = paths.task_json.exists()
    if journals.CREATE.path(paths).exists():
        return UNFINISHED if has_json else HALF_MADE
    if has_json or not paths.dir.is_dir():
        return None
    # killed before the intent was written: only the lock, an empty artifacts directory
    # and a temporary file can be there, and nothing outside (a task that lost its
    # task.json has its side index, its ref, its worktree: it is not this)
    for entry in paths.dir.iterdir():
        empty_dir = entry == paths.artifacts and entry.is_dir() and not any(entry.iterdir())
        if not (entry == paths.lock or empty_dir or entry.name.endswith(".tmp")):
            return None
    if os.path.lexists(project.paths.workspace(task_id)):
        return None
    return EMPTY if git.rev_parse(project.root, f"refs/bar/tasks/{task_id}") is None else None


def describe(project: Project, task_id: str, state: str) -> str:
    """What ``leftover`` found, for ``bar doctor``."""
    if state == EMPTY:
        return "an empty task directory left by a `bar task new` that was stopped"
    if state == UNFINISHED:
        return "a whole task whose creation journal a stopped `bar task new` left"
    try:
        intent = journals.CREATE.read(project.paths.task(task_id))
    except BarError as exc:
        return f"a half-made task whose creation journal is unreadable ({exc})"
    name = f"task {intent.name} ({task_id})" if intent else f"task {task_id}"
    return (
        f"{name} is half-made: bar was stopped while creating it; no command sees it, "
        "but its worktree and branch may be there"
    )


def being_created(project: Project, task_id: str) -> bool:
    """True while a live ``bar task new`` holds the task."""
    return is_locked(project.paths.task(task_id).lock)


def finish(project: Project, task_id: str) -> str:
    """Undo a half-made task, or complete a whole one whose intent was left; raise
    ``Locked`` if a live bar is still creating it. Says what it did."""
    paths = project.paths.task(task_id)
    with project.lock("bar: clear a half-made task"):
        state = leftover(project, task_id)
        if state is None:
            return f"task {task_id}: another command has finished it"
        with transaction.id_lock(project, task_id, "bar: clear a half-made task", wait=False):
            if state == UNFINISHED:
                task = load_task(project, task_id)  # task.json is written last: it is whole
                journals.CREATE.clear(paths)
                return (
                    f"task {task.name} ({task.id}) was whole: removed the journal a stopped "
                    f"`bar task new` left (`bar task switch {task.id}` makes it active)"
                )
            intent = journals.CREATE.read(paths) if state == HALF_MADE else None
            if intent is None:
                remove_tree(paths.dir)
                return f"removed the empty directory {task_id} a stopped `bar task new` left"
            kept = undo(project, intent)
            made = "worktree and snapshot ref" if kept else "worktree, branch and snapshot ref"
            said = (
                f"removed task {intent.name} ({task_id}), left half-made by a stopped "
                f"`bar task new`, with its {made}"
            )
            return "; ".join([said, *kept])


def clear_leftovers(project: Project) -> None:
    """Finish what killed ``bar task new`` commands left (skipping ones still running)."""
    if not project.paths.tasks.is_dir():
        return
    for entry in sorted(project.paths.tasks.iterdir()):
        if not TASK_ID_RE.match(entry.name) or leftover(project, entry.name) is None:
            continue
        try:
            note(finish(project, entry.name))
        except Locked:
            continue  # a live bar is creating it
        except (BarError, OSError) as exc:
            warn(f"could not clear the half-made task {entry.name}: {exc}")
