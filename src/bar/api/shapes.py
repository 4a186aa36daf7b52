"""The JSON shapes of what bar shows: a step, a checkpoint, a diff (docs/json.md).

``bar log --json``, ``bar show --json`` and ``bar diff --json`` print them, and the MCP
server (``bar.mcp.tools``) returns the same dicts to an agent, so every face speaks one
format and docs/json.md describes it once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bar import api
from bar.model.records import RunStep, Step

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.history.diffs import Diff
    from bar.model.tasks import Task
    from bar.step.live import Glance, LiveStep


def log_entry(
    task: Task, step: Step, patch: bool, history: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One element of ``bar log --json``: the ledger line, its checkpoints, with
    ``patch`` the text of its patch, and with the flow's ``history`` (if the task has a
    flow) the phase current when the step started."""
    rec = run_entry(task, step)
    if history is not None:
        from bar.aide.flow import phase_of

        rec["phase"] = phase_of(history, rec["started_at"])
    if isinstance(step, RunStep) and step.checkpoints:
        rec["checkpoint_list"] = [c.to_record() for c in api.checkpoints(task, step.step_id)]
    if patch:
        data = api.read_artifact(task, step.artifacts.patch)
        rec["patch_text"] = data.decode("utf-8", "replace") if data is not None else None
    return rec


def step_entry(task: Task, step: Step, taken: list[Checkpoint]) -> dict[str, Any]:
    """``bar show STEP --json``: the ledger line with its patch, output and checkpoints."""
    rec = run_entry(task, step)
    rec["patch_text"] = text(api.read_artifact(task, step.artifacts.patch))
    rec["output_text"] = text(api.read_output(task, step))
    if taken:
        rec["checkpoint_list"] = [c.to_record() for c in taken]
    return rec


def live_entry(task: Task, live: LiveStep, taken: list[Checkpoint] | None) -> dict[str, Any]:
    """A step not recorded yet (``bar log --json``): what its intent says (its ``state``:
    running, recording or interrupted) and its checkpoints so far (``taken``; None: not
    said, as when they follow as events of their own)."""
    rec = live.to_record()
    rec["task_dir"] = str(task.dir)
    if taken is not None:
        rec["checkpoints"] = len(taken)
        if taken:
            rec["checkpoint_list"] = [c.to_record() for c in taken]
    return rec


def live_show_entry(task: Task, live: LiveStep, seen: Glance) -> dict[str, Any]:
    """``bar show STEP --json`` of a step not recorded yet: ``live_entry`` with its output
    so far as ``output_text`` (in the output file's format; null while it printed
    nothing)."""
    rec = live_entry(task, live, seen.checkpoints)
    rec["output_text"] = text(seen.output())
    return rec


def run_entry(task: Task, step: Step) -> dict[str, Any]:
    """The ledger line as every face gives it (``bar run --json`` too): with ``task_dir``,
    and for a ``run`` step its ``ending``, how it ended in the words ``bar log`` shows
    (``exit 0``, ``interrupted``, ...: ``bar.model.endings``)."""
    rec = step.to_record()
    rec["task_dir"] = str(task.dir)  # what the artifacts' paths are relative to
    if isinstance(step, RunStep):
        rec["ending"] = step.ending.word
    return rec


def checkpoint_entry(task: Task, cp: Checkpoint) -> dict[str, Any]:
    """``bar show STEP.N --json``: the checkpoint with the text of its patch."""
    rec = cp.to_record()
    rec["task_dir"] = str(task.dir)
    rec["patch_text"] = text(api.read_artifact(task, cp.patch))
    return rec


def diff_entry(between: Diff, *, stat: bool, unrecorded: bool) -> dict[str, Any]:
    """``bar diff --json``: the two commits, the stat and (unless ``stat``) the patch."""
    rec: dict[str, Any] = {
        "from": between.from_commit,
        "to": between.to_commit,
        "diff_stat": between.stat().to_record(),
    }
    if unrecorded:
        rec["unrecorded"] = True  # "to" is the tree of the worktree, not a snapshot
    if not stat:
        rec["patch"] = between.patch()
    return rec


def text(data: bytes | None) -> str | None:
    return data.decode("utf-8", "replace") if data is not None else None
