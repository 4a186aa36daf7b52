"""``bar task start``: a planned task gets its worktree and is ``in_progress``.

A ``pending`` task (``bar task new --plan``) has its branch and snapshot ref at its base
and no worktree. Starting it (by ``bar task start``, ``bar task claim --start``, its
first ``bar run``, or the worker that takes it) first brings its base up to date: a task
planned on ``main`` yesterday starts from ``main`` as it is now, as long as nothing was
recorded in it, nobody moved its branch (compare-and-swap on both refs), and ``main``
went forward from where it was planned (a clone whose ``main`` is behind, or was
rewritten, never takes a task's base away from under it). A move is never silent: it is
said, logged (``task.base_moved``) and kept in task.json (``base_moved``: from, to, when,
on which machine), which travels with the task's history, so the developer who planned
it on another machine is told when the record comes back. Then the worktree is checked
out on the branch, the board says ``in_progress`` and names it, and the registry and the
event log (``worktree.create.before`` / ``.after`` / ``.failed``, ``task.started``) say
so.

A start that was stopped leaves a worktree the board does not name yet: the next start
throws it away and makes it again (it holds nothing but a checkout: no step could run in
a task the board still calls pending).
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from bar import git
from bar.base import faults
from bar.base.clock import now_iso
from bar.base.ids import short
from bar.base.notices import note
from bar.errors import BarError, UsageError
from bar.git import worktrees
from bar.model import board
from bar.model.project import Project
from bar.model.tasks import Task
from bar.step import transaction
from bar.task import new as task_new
from bar.task import registry


def start(task: Task, *, activate: bool = True, by: str | None = None) -> Task:
    """Make the worktree of the pending ``task`` and bind it; return the task as it is
    now. A task already in progress is returned as it is (a second start is no error);
    a closed one is refused, and so is one that runs on workers. ``activate``: make it
    the project's active task. ``by``: who starts it, as a moved base records it (a
    worker's name; default: this machine's)."""
    project = task.project
    with transaction.holding(task, "bar task start") as task:
        if not task.active:
            raise UsageError(
                f"task {task.name} ({task.id}) is closed",
                hint=f"`bar task reopen {task.id}` makes it active again",
            )
        if task.on_workers:
            raise BarError(
                f"task {task.name} ({task.id}) runs on workers: its worktree is made on the "
                "machine that runs its next step",
                hint=f"`bar task adopt {task.id}` brings it back here, with its worktree",
            )
        if task.pending:
            _bind(project, task, by)
        if activate:
            project.set_active_task(task.id)
    return task


def starting_mark(task: Task) -> Path:
    """Made before a start makes the worktree, removed once the board names it: while
    it is there, what stands at the worktree's place is the start's own (a checkout or
    a restore cut short at any byte), cleared by the next start."""
    return task.paths.dir / "starting"


def _bind(project: Project, task: Task, by: str | None = None) -> None:
    """The worktree made and bound (the caller holds the task lock)."""
    from bar.task import binding

    stopped = binding.read_journal(task)
    if stopped is not None:
        name = stopped["lane"]["name"]
        raise BarError(
            f"a bind of task {task.name} to the worktree {name} was stopped before it was done",
            hint=f"`bar task bind {task.id} {name}` finishes it",
        )
    where = worktrees.holding(project.root, task.branch, task.worktree)
    if where is not None:
        refusal = BarError(
            f"the branch {task.branch} of task {task.name} is checked out in {where}, and git "
            "checks a branch out in one worktree at a time",
            hint=f"switch {where} to another branch, then run `bar task start {task.id}` again",
        )
        board.refused(task, "worktree.create", refusal)
        raise refusal
    if task.worktree.exists() or task.worktree.is_symlink():  # left by a stopped start
        with project.lock("bar task start: remove a half-made worktree"):
            try:
                _refuse_if_holding(project, task)
            except BarError as refusal:
                board.refused(task, "worktree.create", refusal)
                raise
            worktrees.discard(project.root, task.worktree)
    _refresh_base(task, by)
    project.log_event(
        "worktree.create.before",
        task=board.task_view(task),
        worktree=board.worktree_view(task),
    )
    starting_mark(task).touch(mode=0o600)
    try:
        task_new.add_worktree(task, new_branch=False)
        if task.ledger.last() is not None:  # a worktree removed earlier: as recorded
            from bar.changes import rollback

            rollback.restore(task, task.recorded_snapshot())
        faults.point("start: after adding the worktree")
    except BaseException as exc:
        with contextlib.suppress(BarError, OSError):
            project.log_event(
                "worktree.create.failed",
                task=board.task_view(task),
                worktree=board.worktree_view(task),
                error=str(exc) or type(exc).__name__,
            )
        with contextlib.suppress(BarError, OSError), project.lock("bar task start: undo"):
            worktrees.discard(project.root, task.worktree)
        raise
    from bar.changes import trash

    trash.put_back_after_close(task)  # what removing the worktree moved aside, if it did
    task.board.status = board.IN_PROGRESS
    name = registry.name_of(task)
    taken = registry.named(project, name)
    if taken is not None and taken["task_id"] != task.id:
        name = task.id  # the name is another worktree's (one made before its task): the id
    task.board.worktree = name
    task.save()
    starting_mark(task).unlink(missing_ok=True)
    registry.mark(task, registry.ACTIVE)
    project.log_event(
        "worktree.create.after",
        task=board.task_view(task),
        worktree=board.worktree_view(task, registry.ACTIVE),
    )
    project.log_event("task.started", task=board.task_view(task))


def holds_files(project: Project, task: Task) -> bool:
    """What stands where the task's worktree is to be made holds something someone put
    there: anything but a link (removed, never followed), or a directory holding only
    files of the task's branch as it checks out (what a stopped start left, however far
    its checkout got), its ``.git`` file and empty directories."""
    path = task.worktree
    if path.is_symlink() or not path.exists():
        return False
    if not path.is_dir():
        return True
    if starting_mark(task).exists():
        return False  # a start was stopped: all there is its own
    dot = path / ".git"
    if os.path.lexists(dot) and not _links_here(project, dot):
        return True  # a .git of someone's: a repository, or a link to another
    found: list[str] = []
    links: dict[str, bytes] = {}
    for top, dirs, files in os.walk(path):
        rel_top = os.path.relpath(top, path)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if rel == ".git":
                continue
            full = os.path.join(top, name)
            if os.path.islink(full):
                links[rel] = os.fsencode(os.readlink(full))
            else:
                found.append(rel)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    if not found and not links:
        return False
    # a start checks out the branch, then the recorded state (a task whose worktree was
    # removed): a file of either, as either has it, is the start's own
    trees: list[dict[str, tuple[str, str]]] = []
    for ref in (f"refs/heads/{task.branch}", task.snapshot_ref):
        listed = git.git(project.root, "ls-tree", "-r", "-z", ref, check=False)
        if listed.returncode != 0:
            continue
        tree: dict[str, tuple[str, str]] = {}
        for line in listed.out.split("\0"):
            if line:
                meta, _, name = line.partition("\t")
                mode, _, oid = meta.split(" ")
                tree[name] = (mode, oid)
        trees.append(tree)
    if not trees:
        return True
    for rel, target in links.items():
        import hashlib

        blob = hashlib.sha1(b"blob %d\0" % len(target) + target).hexdigest()
        if all(t.get(rel) != ("120000", blob) for t in trees):
            return True
    if not found:
        return False
    if any(all(rel not in t or t[rel][0] == "120000" for t in trees) for rel in found):
        return True
    # hashed as `git add` would hash them there (the repository's filters and attributes)
    hashed = git.git(
        path,
        f"--git-dir={project.common_dir}",
        f"--work-tree={path}",
        "hash-object",
        "--stdin-paths",
        input="".join(f"{rel}\n" for rel in found).encode(),
        check=False,
    )
    oids = hashed.out.split()
    if hashed.returncode != 0 or len(oids) != len(found):
        return True
    return any(
        all(t.get(rel, ("", ""))[1] != oid for t in trees)
        for rel, oid in zip(found, oids, strict=True)
    )


def _links_here(project: Project, dot: Path) -> bool:
    """``dot`` is the ``.git`` file ``git worktree add`` writes: a line naming an admin
    directory of this repository's worktrees."""
    from bar.store.files import read_regular

    said = read_regular(dot)
    if said is None or not said.startswith(b"gitdir: ") or said.count(b"\n") > 1:
        return False
    target = Path(os.fsdecode(said[8:].strip()))
    return target.parent == project.common_dir / "worktrees"


def _refuse_if_holding(project: Project, task: Task) -> None:
    """Refuse to throw away what someone put where the worktree is to be made."""
    path = task.worktree
    if holds_files(project, task):
        raise BarError(
            f"{path}, where the worktree of task {task.name} is to be made, holds files bar "
            "did not put there; nothing was removed",
            hint=f"move what you need out of {path} (or remove it), then `bar task start "
            f"{task.id}` again",
        )


def _refresh_base(task: Task, by: str | None = None) -> None:
    """Move an untouched planned task to where its base ref points now (the caller
    holds the task lock), when that ref went forward from the base it was planned on.
    Untouched: no step recorded, and its branch and snapshot ref still at the base
    commit; anything else keeps the base it was planned on. The move is said, logged and
    recorded (task.json's ``base_moved``)."""
    repo = task.project.root
    branch_ref = f"refs/heads/{task.branch}"
    tip = git.rev_parse(repo, branch_ref)
    if tip is None:
        if task.ledger.last() is not None:
            raise BarError(
                f"the branch {task.branch} of task {task.name} was deleted",
                hint=f"its record stays: `bar diff --task {task.id}` shows the work",
            )
        # a planned task's branch holds nothing of its own: made again at the base
        git.git(repo, "update-ref", branch_ref, task.base_commit, "")
        tip = task.base_commit
    if task.ledger.last() is not None or tip != task.base_commit:
        return
    now = git.resolve_commit(repo, task.base_ref)
    if now is None or now == task.base_commit:
        return
    if not git.is_ancestor(repo, task.base_commit, now):
        return  # behind it, or rewritten: what it was planned on is not in it
    if git.rev_parse(repo, task.snapshot_ref) != task.base_commit:
        return
    moved = git.git(
        repo,
        "update-ref",
        "--stdin",
        input=(
            "start\n"
            f"update {branch_ref} {now} {task.base_commit}\n"
            f"update {task.snapshot_ref} {now} {task.base_commit}\n"
            "commit\n"
        ).encode(),
        check=False,
    )
    if moved.returncode != 0:
        return  # one of them moved meanwhile: it keeps the base it was planned on
    planned = task.base_commit
    who = by or socket.gethostname()
    note(
        f"task {task.name} starts from {task.base_ref} as it is now "
        f"({short(now)}; planned on {short(planned)})" + (f" on {who}" if by else "")
    )
    earlier = task.base_moved
    task.base_commit = now
    # (moved again before any step: the base it was planned on stays the first one)
    task.base_moved = {
        "from": earlier["from"] if earlier else planned,
        "to": now,
        "at": now_iso(),
        "by": who,
    }
    task.save()
    task.project.log_event(
        "task.base_moved",
        task=board.task_view(task),
        changed={"base_commit": {"from": planned, "to": now}},
    )


def base_moved_text(task: Task) -> str | None:
    """How a moved base is said where the task is shown (``bar task show``, ``bar
    status``, ``bar log``, the UI), after the base itself: None when the task started
    from the base it was planned on."""
    moved = task.base_moved
    if moved is None:
        return None
    return (
        f"planned on {short(moved['from'])}; {task.base_ref} had moved on to "
        f"{short(moved['to'])} when {moved['by']} started it, at {moved['at']}"
    )
