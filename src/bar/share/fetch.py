"""``bar fetch``: other machines' task histories arrive as read-only tasks.

One ``git fetch`` brings every ``refs/bar/history/<id>`` of the remote to
``refs/bar/fetched/<id>/<remote>``. Then, for each task:

* not here: it is made from its history commit (``bar.share.history_commit.read`` checks it as
  untrusted input) as a **copy**: ``task.json`` says ``origin`` {remote, url, history,
  fetched_at}, and the task's refs (``refs/bar/tasks/<id>``, the commits it keeps) point
  where the history says. ``log``, ``show``, ``diff``, ``blame``, ``ui`` read it as any
  task; nothing changes it (``Task.require_own``) but a later fetch;
* a copy already: brought up to date the same way;
* a task of this machine: never touched. The fetch says whether the remote is behind it
  (``bar push`` sends the rest), has gone on without it (``bar task adopt`` brings the new
  steps), or holds another line of work (diverged).

A copy is written beside the tasks (``tasks/.fetch-<id>``) and swapped in, under the
project lock, so a reader sees the old record or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar import git
from bar.base.clock import now_iso
from bar.base.record import field, record
from bar.errors import BarError, CorruptFile, TaskNotFound
from bar.model.project import Project
from bar.model.tasks import Task, load_task
from bar.share import history_commit, remotes
from bar.share.remotes import Remote
from bar.store.files import write_json_atomic
from bar.store.layout import TASK_ID_RE

NEW = "new"
UPDATED = "updated"
UP_TO_DATE = "up to date"
AHEAD = "ahead"  # this machine has steps the remote has not: `bar push`
BEHIND = "behind"  # the remote went on with a task of this machine: `bar task adopt`
DIVERGED = "diverged"
BROKEN = "broken"  # the history could not be read


@record
class TaskFetch:
    task_id: str
    name: str
    outcome: str
    steps: int = 0
    history: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "outcome": self.outcome,
            "steps": self.steps,
            "history": self.history,
            "message": self.message,
        }


@record(frozen=True)
class Fetched:
    remote: Remote
    tasks: list[TaskFetch] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when a history could not be taken, else 0."""
        return 1 if any(t.outcome == BROKEN for t in self.tasks) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote.name,
            "url": self.remote.url,
            "tasks": [t.to_json() for t in self.tasks],
        }


def fetch(
    project: Project,
    remote: Remote,
    *,
    progress: Callable[[str], None] | None = None,
    only: list[str] | None = None,
) -> Fetched:
    """``only``: just these tasks' histories (a worker taking one task's step)."""
    repo = project.root
    said = progress or (lambda _: None)
    said(f"fetching task histories from {remote}")
    if only is None:
        remotes.fetch(
            repo, remote, [f"+{history_commit.HISTORY}*:{history_commit.FETCHED}*/{remote.key}"]
        )
    else:
        there = remotes.listed(repo, remote, [history_commit.history_ref(t) for t in only])
        wanted = [t for t in only if history_commit.history_ref(t) in there]
        if wanted:
            remotes.fetch(
                repo,
                remote,
                [
                    f"+{history_commit.history_ref(t)}:{history_commit.fetched_ref(t, remote.key)}"
                    for t in wanted
                ],
            )
    found = tracked(repo, remote)
    if only is not None:
        found = {t: c for t, c in found.items() if t in only}
    results = []
    with project.lock("bar fetch"):
        for task_id, commit in sorted(found.items()):
            results.append(_one(project, remote, task_id, commit))
    return Fetched(remote, results)


def tracked(repo: Path, remote: Remote) -> dict[str, str]:
    """Task id -> the history commit last fetched from ``remote``."""
    listed = git.git(
        repo, "for-each-ref", "--format=%(objectname) %(refname)", history_commit.FETCHED
    )
    out = {}
    for line in listed.out.splitlines():
        sha, name = line.split(" ", 1)
        parts = name.removeprefix(history_commit.FETCHED).split("/")
        if len(parts) == 2 and parts[1] == remote.key and TASK_ID_RE.match(parts[0]):
            out[parts[0]] = sha
    return out


def _one(project: Project, remote: Remote, task_id: str, commit: str) -> TaskFetch:
    repo = project.root
    try:
        local: Task | None = load_task(project, task_id)
    except TaskNotFound:
        local = None
    except BarError as exc:
        return TaskFetch(task_id, "?", BROKEN, message=f"the task here cannot be read: {exc}")
    if local is not None and not local.read_only:
        return _compare(local, remote, commit)
    if local is not None and local.origin and local.origin.get("history") == commit:
        return TaskFetch(task_id, local.name, UP_TO_DATE, local.ledger_steps(), commit)
    try:
        pushed = history_commit.read(repo, commit, task_id)
        task = materialize(project, pushed, origin=_origin(remote, commit))
    except BarError as exc:
        return TaskFetch(task_id, "?", BROKEN, history=commit, message=str(exc))
    return TaskFetch(
        task_id, task.name, NEW if local is None else UPDATED, task.ledger_steps(), commit
    )


def _origin(remote: Remote, commit: str) -> dict[str, Any]:
    return {"remote": remote.name, "url": remote.url, "history": commit, "fetched_at": now_iso()}


def _compare(task: Task, remote: Remote, commit: str) -> TaskFetch:
    """Where a task of this machine stands against the remote's history of it."""
    repo = task.project.root
    mine = git.rev_parse(repo, history_commit.history_ref(task.id))
    steps = task.ledger_steps()
    result = TaskFetch(task.id, task.name, UP_TO_DATE, steps, commit)
    if mine == commit:
        ledger_now = git.git(repo, "hash-object", "--stdin", input=_complete(task)).out.strip()
        if ledger_now != git.rev_parse(repo, f"{commit}:ledger.jsonl"):
            result.outcome = AHEAD
            result.message = f"steps recorded here since: `bar push {remote}` sends them"
        return result
    if mine is not None and git.is_ancestor(repo, commit, mine):
        result.outcome = AHEAD
        result.message = f"`bar push {remote}` sends what this machine recorded since"
        return result
    if mine is not None and git.is_ancestor(repo, mine, commit) and unpushed(task, mine) == 0:
        theirs = _steps_in(repo, commit)
        result.outcome = BEHIND
        result.message = (
            f"it went on on another machine ({theirs - steps} new step"
            f"{'s' * (theirs - steps != 1)} there): `bar task adopt {task.id}` brings them here"
        )
        return result
    result.outcome = DIVERGED
    result.message = (
        "this machine and the remote each recorded steps the other has not; both stay as "
        "they are (apply yours to a branch to keep it)"
    )
    return result


def _complete(task: Task) -> bytes:
    data = task.paths.ledger.read_bytes() if task.paths.ledger.exists() else b""
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


def unpushed(task: Task, commit: str) -> int:
    """How many ledger lines this machine has beyond those in history ``commit`` (0 when
    the ledger here is what it holds, -1 when it is no continuation of it)."""
    repo = task.project.root
    there = history_commit.read_blob(repo, git.rev_parse(repo, f"{commit}:ledger.jsonl") or "")
    here = _complete(task)
    if not here.startswith(there):
        return -1
    return here[len(there) :].count(b"\n")


def _steps_in(repo: Path, commit: str) -> int:
    blob = git.rev_parse(repo, f"{commit}:ledger.jsonl")
    return history_commit.read_blob(repo, blob).count(b"\n") if blob else 0


def materialize(
    project: Project,
    pushed: history_commit.Pushed,
    *,
    origin: dict[str, Any] | None,
    adopted: dict[str, Any] | None = None,
) -> Task:
    """Write the task of ``pushed`` into the project (replacing what is there) and point
    its refs where the history says. The caller holds the project lock."""
    repo = project.root
    tasks = project.paths.tasks
    tasks.mkdir(mode=0o700, parents=True, exist_ok=True)
    final = project.paths.task(pushed.task_id).dir
    temp = tasks / f".fetch-{pushed.task_id}"
    old = tasks / f".old-{pushed.task_id}"
    for left in (temp, old):
        if left.exists():
            shutil.rmtree(left)
    temp.mkdir(mode=0o700)
    write_record(project, pushed, temp, origin=origin, adopted=adopted)
    if final.exists():
        os.replace(final, old)
    os.replace(temp, final)
    try:
        task = load_task(project, pushed.task_id)
        _point_refs(repo, task, pushed)
    except BarError:
        shutil.rmtree(final, ignore_errors=True)
        if old.exists():
            os.replace(old, final)
        raise
    except Exception as exc:  # a record no bar wrote: refused, never half-taken
        shutil.rmtree(final, ignore_errors=True)
        if old.exists():
            os.replace(old, final)
        raise CorruptFile(
            f"the shared history of task {pushed.task_id} cannot be used: {exc}"
        ) from exc
    if old.exists():
        _keep_own_files(old, final)
        shutil.rmtree(old, ignore_errors=True)
    return task


def write_record(
    project: Project,
    pushed: history_commit.Pushed,
    into: Path,
    *,
    origin: dict[str, Any] | None,
    adopted: dict[str, Any] | None = None,
) -> None:
    """The task directory of ``pushed`` written in ``into`` (made by the caller): its
    ledger, artifacts and ``task.json``, placed in this project."""
    history_commit.write_files(project.root, pushed, into)
    rec = dict(pushed.task)
    rec["repo_root"] = str(project.root)
    rec["workspace_path"] = f"workspaces/{pushed.task_id}"
    rec.pop("origin", None)
    if origin is not None:
        rec["origin"] = origin
    if adopted is not None:
        rec["adopted"] = adopted
    write_json_atomic(into / "task.json", rec)


def _keep_own_files(old: Path, new: Path) -> None:
    """What a task directory holds of this machine alone (its side index, its own git
    directory) stays with the new record."""
    for name in ("index", "index.stamps", "index.left-out", "git", "task.lock"):
        src = old / name
        if src.exists() and not (new / name).exists():
            with contextlib.suppress(OSError):
                os.replace(src, new / name)


def _point_refs(repo: Path, task: Task, pushed: history_commit.Pushed) -> None:
    refs = pushed.refs
    lines = [f"update refs/bar/tasks/{task.id} {refs['snapshot']}\n"]
    wanted = {f"refs/bar/{name}" for name in refs if "/" in name}
    for name in wanted:
        lines.append(f"update {name} {refs[name.removeprefix('refs/bar/')]}\n")
    patterns = [f"refs/bar/{kind}/{task.id}/" for kind in history_commit.KEPT_KINDS]
    listed = git.git(repo, "for-each-ref", "--format=%(refname)", *patterns).out.split()
    lines += [f"delete {name}\n" for name in listed if name not in wanted]
    git.git(repo, "update-ref", "--stdin", input=("start\n" + "".join(lines) + "commit\n").encode())
    last = task.ledger.last_snapshot() or task.base_commit
    if last != refs["snapshot"]:
        raise CorruptFile(
            f"the shared history of task {task.id} names state {refs['snapshot'][:12]}, "
            f"its ledger {last[:12]}"
        )
