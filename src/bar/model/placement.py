"""Where a task sent to workers runs, as this machine knows it.

``<project>/workers/<id>.json``: the queue, the Temporal server and namespace, the
workflow and the remote its history travels through. It is this machine's alone (never
in the pushed record, so a worker never mistakes a task for one it sent) and beside the
task directory, which ``bar fetch`` and ``bar task adopt`` replace whole.
"""

from __future__ import annotations

import contextlib
from typing import Any

from bar.base.clock import now_iso
from bar.base.record import record
from bar.errors import BarError, CorruptFile
from bar.model.project import Project
from bar.store.files import read_json, write_json_atomic


@record(frozen=True)
class Placement:
    task_id: str
    queue: str
    server: str
    namespace: str
    workflow_id: str
    remote: str  # the URL the workers fetch from and push to
    sent_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "queue": self.queue,
            "server": self.server,
            "namespace": self.namespace,
            "workflow_id": self.workflow_id,
            "remote": self.remote,
            "sent_at": self.sent_at,
        }


def workflow_id(task_id: str) -> str:
    return f"bar-task-{task_id}"


def of(project: Project, task_id: str) -> Placement | None:
    path = project.paths.placement(task_id)
    if not path.exists():
        return None
    data = read_json(path, "placement")
    try:
        return Placement(
            task_id=str(data["task_id"]),
            queue=str(data["queue"]),
            server=str(data["server"]),
            namespace=str(data["namespace"]),
            workflow_id=str(data["workflow_id"]),
            remote=str(data["remote"]),
            sent_at=str(data["sent_at"]),
        )
    except KeyError as exc:
        raise CorruptFile(
            f"{path} lacks {exc.args[0]}", hint="`bar task adopt ID` brings the task back here"
        ) from None


def place(
    project: Project, task_id: str, queue: str, server: str, namespace: str, remote: str
) -> Placement:
    where = Placement(task_id, queue, server, namespace, workflow_id(task_id), remote, now_iso())
    path = project.paths.placement(task_id)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_json_atomic(path, where.to_json())
    return where


def forget(project: Project, task_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        project.paths.placement(task_id).unlink()


def refuse_local(project: Project, task_id: str, name: str) -> None:
    """A task that runs on workers takes its steps there, not here."""
    where = of(project, task_id)
    if where is not None:
        raise BarError(
            f"task {name} ({task_id}) runs on workers (queue {where.queue}): its worktree "
            "is on whichever machine runs its next step",
            hint=f"`bar run --on {where.queue} -- CMD` sends it a step; `bar task adopt "
            f"{task_id}` brings it back to run here",
        )
