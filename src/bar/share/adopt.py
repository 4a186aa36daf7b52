"""``bar task adopt ID``: continue here a task another machine recorded.

Two cases, one result: the task is this machine's, its record the remote's latest, and a
worktree at its last recorded state on its branch at the recorded head.

* a **copy** (fetched, read-only): its branch is made at the head the history names, the
  copy becomes the task (``origin`` becomes ``adopted``) and it starts.
* a task of **this machine** that went on elsewhere (``bar fetch`` says *behind*): only
  when nothing was recorded here since the history it continued from, and its worktree
  holds nothing unrecorded. Its record is replaced by the remote's, its branch moved
  (compare-and-swap) and its worktree made again at the new last state.

Either way ``refs/bar/history/<id>`` here becomes the history adopted, so the steps
recorded next are pushed as a fast-forward of it.
"""

from __future__ import annotations

from typing import Any

from bar import git
from bar.base.clock import now_iso
from bar.base.record import record
from bar.errors import BarError, DirtyWorktree, NotFound
from bar.model import board
from bar.model.project import Project
from bar.model.tasks import Task
from bar.share import fetch as fetching
from bar.share import history_commit
from bar.step import transaction


@record(frozen=True)
class Adopted:
    task: Task
    history: str
    steps: int
    remote: str
    # the task's base moved on the machine that started it, and this one learns it now
    # (``bar.task.start``: task.json's ``base_moved``); logged here as ``task.base_moved``
    base_moved: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task.id,
            "name": self.task.name,
            "history": self.history,
            "steps": self.steps,
            "remote": self.remote,
            "worktree": str(self.task.worktree),
            "branch": self.task.branch,
        }


def adopt(project: Project, task: Task, *, worktree: bool = True, by: str | None = None) -> Adopted:
    """``worktree=False``: the record alone (a task that runs on workers, brought back
    for review: its next step makes a worktree where it runs; the board says
    ``in_progress``, as it does where its steps ran). ``by``: who starts it (a worker's
    name), for a base its start moves (``bar.task.start``)."""
    from bar.task.start import start

    known = task.base_moved
    if task.read_only:
        origin = dict(task.origin or {})
        commit = str(origin.get("history") or "")
        remote = str(origin.get("remote") or "")
        with (
            project.lock(f"bar task adopt {task.id}"),
            transaction.holding(task, "bar task adopt", copy_ok=True) as task,
        ):
            pushed = history_commit.read(project.root, commit, task.id)
            _branch_at(task, pushed.refs.get("head") or task.base_commit, None)
            task = _own(project, pushed, remote, commit, here=worktree)
    else:
        commit, remote = _newest(task)
        if task.worktree.is_dir() and not task.pending:
            from bar.task.close import remove_worktree

            try:
                remove_worktree(task)
            except DirtyWorktree as exc:
                raise DirtyWorktree(
                    f"{exc}; adopting would replace the worktree",
                    hint="record them first (`bar run -- true` records hand edits) and push, "
                    "or remove them; then adopt again",
                ) from None
        with (
            project.lock(f"bar task adopt {task.id}"),
            transaction.holding(task, "bar task adopt") as task,
        ):
            mine = git.rev_parse(project.root, history_commit.history_ref(task.id))
            if mine is not None and fetching.unpushed(task, mine) != 0:
                raise BarError(  # a crash's step, finished as the worktree went
                    f"task {task.name} recorded a step here just now; adopting would drop it",
                    hint="`bar log` shows it; push it, or apply it to a branch",
                )
            pushed = history_commit.read(project.root, commit, task.id)
            _branch_at(task, pushed.refs.get("head") or task.base_commit, _branch_tip(task))
            task = _own(project, pushed, remote, commit, here=worktree)
    learned = task.base_moved if task.base_moved not in (None, known) else None
    if learned is not None:
        project.log_event(
            "task.base_moved",
            task=board.task_view(task),
            changed={"base_commit": {"from": learned["from"], "to": learned["to"]}},
        )
    if worktree:
        task = start(task, activate=True, by=by)
    project.log_event("task.adopted", task=board.task_view(task))
    return Adopted(task, commit, task.ledger_steps(), remote, learned)


def _own(
    project: Project, pushed: history_commit.Pushed, remote: str, commit: str, *, here: bool = True
) -> Task:
    """The record of ``pushed`` made this machine's task, pending (its worktree next);
    or, not ``here`` (its steps run on workers), as far on the board as the machine that
    ran them left it (``in_progress`` once one started it), with no worktree here."""
    adopted = {"remote": remote, "history": commit, "adopted_at": now_iso()}
    task = fetching.materialize(project, pushed, origin=None, adopted=adopted)
    git.git(project.root, "update-ref", history_commit.history_ref(task.id), commit)
    if here or task.board.status != board.IN_PROGRESS:
        task.board.status = board.PENDING
    task.board.worktree = ""
    if not task.active:
        task.status = "active"
        task.closed_at = None
    task.save()
    return task


def _branch_tip(task: Task) -> str | None:
    return git.rev_parse(task.project.root, f"refs/heads/{task.branch}")


def _branch_at(task: Task, head: str, expected: str | None) -> None:
    """The task branch at ``head``: made, or moved from ``expected`` (compare-and-swap)."""
    repo = task.project.root
    now = _branch_tip(task)
    if now == head:
        return
    if now is not None and now != expected:
        raise BarError(
            f"a branch {task.branch} already exists here, at {now[:12]}, and the task's "
            f"history has it at {head[:12]}",
            hint=f"rename or delete that branch (`git branch -m {task.branch} OTHER`), then "
            "adopt again",
        )
    git.git(repo, "update-ref", f"refs/heads/{task.branch}", head, expected or "")


def _newest(task: Task) -> tuple[str, str]:
    """The fetched history a task of this machine can take: the one that continues
    what this machine pushed, with nothing recorded here since."""
    repo = task.project.root
    mine = git.rev_parse(repo, history_commit.history_ref(task.id))
    listed = git.git(
        repo,
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        f"{history_commit.FETCHED}{task.id}/",
    ).out.splitlines()
    candidates = [
        (line.split(" ", 1)[0], line.split(" ", 1)[1].rsplit("/", 1)[-1]) for line in listed
    ]
    ahead = [
        (sha, key)
        for sha, key in candidates
        if sha != mine and (mine is None or git.is_ancestor(repo, mine, sha))
    ]
    if not ahead:
        # a history that neither continues this machine's nor is behind it: both went on
        # (this machine's ref moves when a push builds its record, even one refused)
        if mine is not None and any(
            sha != mine and not git.is_ancestor(repo, sha, mine) for sha, _ in candidates
        ):
            raise BarError(
                f"task {task.name} went on both here and on another machine: each has steps "
                "the other has not; adopting would drop this machine's",
                hint="apply them to a branch first (`bar apply --target NAME`), or keep this "
                "machine's line of work and leave the remote's",
            )
        raise NotFound(
            f"task {task.name} ({task.id}) is this machine's, and no remote has gone on with it",
            hint="`bar fetch` first; a task fetched from another machine is adopted the same way",
        )
    ahead.sort(key=lambda c: int(git.git(repo, "rev-list", "--count", c[0]).out.strip() or 0))
    sha, key = ahead[-1]
    if mine is not None and fetching.unpushed(task, mine) != 0:
        raise BarError(
            f"task {task.name} has steps recorded here that the remote's history does not "
            "have; adopting would drop them",
            hint="apply them to a branch first (`bar apply --target NAME`), or keep this "
            "machine's line of work and leave the remote's",
        )
    return sha, key
