"""What a worker's attempt at a step asks of bar (``bar.worker.activities``; the work
itself is ``bar.workers.attempt``): take the task from the remote, run its step as
``bar run``, say how it ended, push the history back, or record the step a lost worker
was running. A face names these through here, as it gives orders through
``bar.api.orders``."""

from __future__ import annotations

from bar.model.project import Project
from bar.model.tasks import Task, load_task
from bar.redact import known
from bar.redact.stream import StreamScrubber
from bar.share import remotes
from bar.share.remotes import Remote
from bar.workers.attempt import bar_run as bar_run
from bar.workers.attempt import claim_command as claim_command
from bar.workers.attempt import history_pushed as history_pushed
from bar.workers.attempt import next_step as next_step
from bar.workers.attempt import outcome as outcome
from bar.workers.attempt import owned_by as owned_by
from bar.workers.attempt import publisher as publisher
from bar.workers.attempt import push_back as push_back
from bar.workers.attempt import record_lost as record_lost
from bar.workers.attempt import step_environ as step_environ
from bar.workers.attempt import take as take


def remote(project: Project, url: str) -> Remote:
    """The remote an order names (its URL, as the developer's bar knows it)."""
    return remotes.resolve(project, url)


def reload(task: Task) -> Task:
    """The task as it is now (a step ran in it since it was loaded)."""
    return load_task(task.project, task.id)


def output_scrubber() -> StreamScrubber:
    """What takes out of a step's output every secret this worker knows, as it streams."""
    return StreamScrubber(known.scrubber())
