"""Worktrees made before their task: ``bar worktree create`` and ``bar task bind``.

In the worktree + task-board design bar follows (reference 002), the two planes are
coupled by the task's id only: a worktree can be made with no task (``worktree create
NAME``), and a task bound to it later (``bind``), which moves the task to
``in_progress``. bar records every change of a task's worktree in that task, so a
worktree of no task is a place to look around in, not to work in: ``bar run`` refuses
there (no task would record it). Binding a task to it makes it the task's worktree:

    workspaces/lanes/<NAME>  (branch <prefix>wt/<NAME>, no task)
        ── bar task bind T NAME ──▶  workspaces/<T's id>  (T's branch, T's record)

The directory is moved (``git worktree move``), its HEAD set to the task's branch
without touching a file, and whatever its files hold beyond the task's recorded state
is recorded at once as a ``manual`` step of the task: nothing in it is lost, nothing
unrecorded. A task with recorded work takes a clean worktree only (its recorded state
is then checked out there, as ``bar task start`` does): the worktree's changes and the
task's work are never set against each other. The worktree keeps its name (the board's ``worktree``, the registry's
``name``). A task already working in a worktree is moved by removing that one first
(``bar worktree remove``: its record stays), then binding.

Events: ``worktree.create.before`` / ``.after`` / ``.failed`` (``task`` ``{}``), and
``task.bound`` (``task.started`` too when the task was pending).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base import faults
from bar.errors import AlreadyExists, BarError, NotFound, UsageError
from bar.git import worktrees
from bar.model import board
from bar.model.tasks import Task, load_task
from bar.step import transaction
from bar.store.files import write_json_atomic
from bar.task import binding, registry

if TYPE_CHECKING:
    from bar.model.project import Project
    from bar.model.records import Step

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,40}")
LANES_DIR = "lanes"


def path_of(project: Project, name: str) -> Path:
    return project.paths.workspaces / LANES_DIR / name


def _check_name(project: Project, name: str, task: Task | None) -> None:
    """A worktree's name is one git takes in a branch name, and names no other task:
    not another task's id, not (for a task's worktree) another task's name, and not a
    number (numbers name tasks in the seed layout). A worktree of no task may share the
    name of a task planned for it (the task bound to it later)."""
    bad = (
        not NAME_RE.fullmatch(name)
        or name.startswith((".", "-"))
        or name.endswith((".", ".lock"))
        or ".." in name
    )
    if bad:
        raise UsageError(
            f"invalid worktree name {name!r}",
            hint="use 1 to 40 letters, digits, '.', '_' or '-', not starting with '.' or "
            "'-', without '..', not ending in '.' or '.lock'",
        )
    if name.isdigit():
        raise UsageError(
            f"a worktree cannot be named {name!r}: a number names a task",
            hint="give it a name with a letter in it",
        )
    from bar.model.tasks import list_tasks

    for other in list_tasks(project):
        if task is not None and other.id == task.id:
            continue
        if other.id == name or (task is not None and other.name == name):
            raise AlreadyExists(
                f"{name!r} is the {'id' if other.id == name else 'name'} of task "
                f"{other.name} ({other.id}): a worktree of that name would be taken for it",
                hint="give the worktree another name",
            )


def create(project: Project, name: str, base: str | None = None) -> dict[str, Any]:
    """Make the worktree ``name`` with no task, at ``base`` (default: the project's
    default base); its registry entry as written."""
    _check_name(project, name, None)
    ref = base or project.config.git.default_base
    commit = git.resolve_commit(project.root, ref)
    if commit is None:
        raise NotFound(f"{ref!r} names no commit here", hint="give --base a branch or commit")
    if registry.named(project, name) is not None:
        raise AlreadyExists(
            f"a worktree is already called {name!r}",
            hint="`bar worktree list` shows the worktrees; pick another name",
        )
    path = path_of(project, name)
    branch = f"{project.config.git.branch_prefix}wt/{name}"
    view = {"name": name, "path": str(path), "branch": branch, "base_ref": ref}
    project.log_event("worktree.create.before", worktree=view)
    try:
        if path.exists() or path.is_symlink():
            raise AlreadyExists(f"{path} is already there; nothing was removed")
        if git.rev_parse(project.root, f"refs/heads/{branch}") is not None:
            raise AlreadyExists(f"the branch {branch} is already there")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # git does not guard `.git/worktrees` against two `worktree add` at once
        with project.lock(f"bar worktree create {name}"):
            worktrees.add(project.root, path, branch, commit)
    except BaseException as exc:
        with contextlib.suppress(BarError, OSError):
            project.log_event(
                "worktree.create.failed", worktree=view, error=str(exc) or type(exc).__name__
            )
        raise
    entry = {
        "name": name,
        "path": str(path),
        "branch": branch,
        "task_id": "",
        "status": registry.ACTIVE,
        "created_at": round(time.time(), 3),
    }
    registry.set_lane(project, entry)
    project.log_event("worktree.create.after", worktree=dict(view, status=registry.ACTIVE))
    return entry


def create_for(task: Task, name: str) -> Task:
    """Start the pending ``task`` with its worktree called ``name`` (``bar worktree create
    NAME --task T``); the task as it is now."""
    from bar.task import start as task_start

    project = task.project
    _check_name(project, name, task)
    with transaction.holding(task, f"bar worktree create {name}") as task:
        if not task.pending:
            raise UsageError(
                f"task {task.name} ({task.id}) is not pending: it "
                + ("has its worktree already" if task.active else "is closed"),
                hint="`bar worktree list` shows the worktrees",
            )
        taken = registry.named(project, name)
        if taken is not None and taken["task_id"] != task.id:
            raise AlreadyExists(
                f"a worktree is already called {name!r}",
                hint=f"`bar task bind {task.id} {name}` binds the task to it",
            )
        task.board.worktree = name
        task.save()
        return task_start.start(task, activate=False)


def bind(task: Task, name: str) -> tuple[Task, list[Step]]:
    """Make the worktree ``name`` (made with no task) the worktree of ``task``; the task
    as it is now, and the step that recorded what the worktree held beyond the task's
    recorded state (none if nothing). A bind that was stopped is finished by running it
    again (its intent is kept in the task's ``binding.json`` until it is done)."""
    from bar.history import steps
    from bar.task.start import holds_files
    from bar.task.state import is_running

    project = task.project
    if is_running(task):
        raise BarError(f"task {task.name} ({task.id}) is running a step")
    with transaction.holding(task, f"bar task bind {name}") as task:
        task.require_own()
        if not task.active:
            raise UsageError(
                f"task {task.name} ({task.id}) is closed",
                hint=f"`bar task reopen {task.id}` first",
            )
        journal = binding.journal_of(task)
        stopped = binding.read_journal(task)
        if stopped is not None and stopped["lane"]["name"] != name:
            raise UsageError(
                f"a bind of task {task.name} to the worktree {stopped['lane']['name']} was "
                "stopped before it was done",
                hint=f"`bar task bind {task.id} {stopped['lane']['name']}` finishes it",
            )
        if stopped is not None:
            lane, worked = stopped["lane"], bool(stopped.get("worked"))
        else:
            found = registry.lane(project, name)
            if found is None:
                bound = registry.named(project, name)
                if bound is not None and bound["task_id"] == task.id:
                    return task, []  # bound already: no error, as claiming again is none
                raise NotFound(
                    f"no worktree {name!r} without a task"
                    + (f" (it is the worktree of task {bound['task_id']})" if bound else ""),
                    hint="`bar worktree create NAME` makes one; `bar worktree list` shows them",
                )
            lane = found
            if not task.pending and task.worktree.is_dir():
                raise UsageError(
                    f"task {task.name} ({task.id}) works in the worktree "
                    f"{board.worktree_name(task)} already",
                    hint=f"`bar worktree remove {task.id}` first (its record stays), then bind",
                )
            worked = task.ledger.last() is not None
            _refuse_unrecordable(lane["path"], name, worked=worked)
        source = Path(lane["path"])
        moved = not source.exists() and task.worktree.is_dir()
        if not moved and holds_files(project, task):
            raise BarError(
                f"{task.worktree} holds files bar did not put there; nothing was moved",
                hint=f"move what you need out of {task.worktree}, then bind again",
            )
        if stopped is None:
            write_json_atomic(journal, {"version": 1, "lane": lane, "worked": worked})
        with project.lock(f"bar task bind {name}"):
            if not moved:
                if task.worktree.exists() or task.worktree.is_symlink():
                    worktrees.discard(project.root, task.worktree)  # empty, or a bare checkout
                faults.point("bind: before moving the worktree")
                git.git(project.root, "worktree", "move", str(source), str(task.worktree))
                faults.point("bind: after moving the worktree")
            _rename_admin(task)
        task = load_task(project, task.id)  # bar's git pinned to the moved worktree's
        _take_branch(task, lane)
        if worked:  # a clean checkout: the task's recorded state, as a start makes it
            from bar.changes import rollback

            rollback.restore(task, task.recorded_snapshot())
        registry.set_lane(project, None, drop=name)
        was_pending = task.pending
        task.board.status = board.IN_PROGRESS
        task.board.worktree = name
        task.save()
        registry.mark(task, registry.ACTIVE)
        if was_pending:
            project.log_event("task.started", task=board.task_view(task))
        project.log_event(
            "task.bound",
            task=board.task_view(task),
            worktree=board.worktree_view(task, registry.ACTIVE),
        )
        recorded: list[Step] = []
        if steps.has_unrecorded_changes(task):
            manual = steps.record_hand_edits(task)
            if manual is not None:
                recorded.append(manual)
        journal.unlink(missing_ok=True)
    return task, recorded


def _refuse_unrecordable(path: str, name: str, *, worked: bool) -> None:
    """What bar cannot record (ignored files, a repository inside, a ``.git`` of its own
    deeper down) is never taken into a task, whose close would then lose it; nor are
    changes taken into a task with recorded work (one set against the other)."""
    entries = _status(path)
    odd = [e[3:] for e in entries if e.startswith("!! ") or e.endswith("/")] + _inner_git(path)
    if odd:
        shown = ", ".join(odd[:3]) + (f" and {len(odd) - 3} more" if len(odd) > 3 else "")
        raise UsageError(
            f"the worktree {name} holds what no step records (ignored files, a repository "
            f"inside): {shown}; nothing was moved",
            hint="move them out of the worktree (or commit a nested repository's work in "
            "it and move it away), then bind again",
        )
    if worked and entries:
        raise UsageError(
            f"the worktree {name} holds changes, and the task has recorded work: binding "
            "would set one against the other",
            hint="bind a task with no steps yet, or commit or move the changes away first",
        )


def _status(path: str) -> list[str]:
    res = git.git(
        path,
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--ignored=matching",
        check=False,
    )
    if res.returncode != 0:
        raise BarError(f"git cannot read the worktree at {path}: {res.err.strip()[:200]}")
    return [e for e in res.out.split("\0") if e]


def _inner_git(path: str) -> list[str]:
    """Entries named ``.git`` below the top of the worktree (git shows none of them)."""
    found = []
    for top, dirs, files in os.walk(path):
        if top != path:
            found += [
                os.path.relpath(os.path.join(top, e), path) for e in dirs + files if e == ".git"
            ]
        dirs[:] = [d for d in dirs if d != ".git"]
    return found


def _rename_admin(task: Task) -> None:
    """The moved worktree's admin directory takes the name git gives a task's (its
    directory's: the task id), which is how bar finds it without reading a file a step
    could write (``bar.model.tasks.admin_dir``)."""
    import os

    from bar.model.tasks import admin_dir
    from bar.store.files import write_bytes_atomic

    common = task.project.common_dir
    old = admin_dir(common, task.worktree)
    new = common / "worktrees" / task.worktree.name
    if old is None or old == new or os.path.lexists(new):
        return
    os.rename(old, new)
    write_bytes_atomic(task.worktree / ".git", f"gitdir: {new}\n".encode(), mode=0o644)


def _holds_changes(path: str) -> bool:
    return bool(_status(path)) or bool(_inner_git(path))


def _take_branch(task: Task, lane: dict[str, Any]) -> None:
    """The moved worktree is on the task's branch, its files as they were, its own
    index the branch's tree and bar's side index the task's (so what the files hold
    beyond the task's record reads as a change not yet recorded)."""
    from bar.history import side_index

    where = task.worktree
    git.git(where, "symbolic-ref", "HEAD", f"refs/heads/{task.branch}")
    git.git(where, "read-tree", f"refs/heads/{task.branch}")
    task.index.unlink(missing_ok=True)
    side_index.seed_index(
        where, task.index, task.base_commit, task.paths.git_dir, task.project.common_dir
    )
    # the worktree's own branch goes when every commit on it is in the task's base
    # (it was only made to check the worktree out); a commit made there keeps it
    repo = task.project.root
    ref = f"refs/heads/{lane['branch']}"
    tip = git.rev_parse(repo, ref)
    if (
        tip is not None
        and (
            git.git(repo, "merge-base", "--is-ancestor", tip, task.base_commit, check=False)
        ).returncode
        == 0
    ):
        git.git(repo, "update-ref", "-d", ref, tip, check=False)


def remove(project: Project, name: str) -> dict[str, Any]:
    """Remove the worktree ``name`` that no task is bound to; refused while it holds
    anything its checkout did not put there (no task records it: removing would lose
    it). Its branch stays. The entry as written."""
    lane = registry.lane(project, name)
    if lane is None:
        raise NotFound(f"no worktree {name!r} without a task")
    view = {"name": name, "path": lane["path"], "branch": lane["branch"]}
    project.log_event("worktree.remove.before", worktree=view)
    if _holds_changes(lane["path"]):
        refusal = BarError(
            f"the worktree {name} holds files its checkout did not put there, and no task "
            "records them; nothing was removed",
            hint=f"bind a task to it (`bar task bind TASK {name}`) to record them, or move "
            "them away",
        )
        project.log_event("worktree.remove.failed", worktree=view, error=str(refusal))
        raise refusal
    with project.lock(f"bar worktree remove {name}"):
        worktrees.remove(project.root, lane["path"])
    entry = dict(lane, status=registry.REMOVED, removed_at=round(time.time(), 3))
    registry.set_lane(project, entry)
    project.log_event("worktree.remove.after", worktree=dict(view, status=registry.REMOVED))
    return entry
