"""The hooks around a step, as ``bar run`` runs them (docs/sandbox.md, "Hooks around a
step"), and where each comes from.

The repository's hooks (``.bar/config.yaml``, the first ``pre_run_shared`` /
``post_run_shared`` of each phase) are part of the repository: any commit can change
them, an agent's too once its task is applied. So where the step is confined they run
inside the step's own confinement (``Confinement.start``: the worktree, the task's
``TMPDIR`` and ``sandbox.allow_write`` writable, ``sandbox.deny_read`` hidden, the
network as configured), with the environment the step's command gets. The developer's
own hooks, from their config.yaml under ``$BAR_HOME``, keep the developer's rights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from bar.model.tasks import Task
from bar.sandbox import Confinement
from bar.step import user_hooks as hooks
from bar.step.user_hooks import HookFacts, HookResult, Phase

CONFINED_NOTE = "the repository's hooks run confined like the step (docs/sandbox.md)"


def run(
    phase: Phase,
    task: Task,
    facts: HookFacts,
    *,
    env: Mapping[str, str],
    boxed: Mapping[str, str],
    confinement: Confinement,
) -> list[HookResult]:
    """Run the ``phase`` hooks: the repository's first, started through ``confinement``
    with ``boxed`` (the confined step's environment), then the developer's with ``env``.
    ``pre_run`` stops at the first that fails."""
    config = task.project.config.hooks
    commands = config.pre_run if phase == "pre_run" else config.post_run
    shared = shared_count(task, phase)
    start = confinement.start if confinement.enabled else None
    results = hooks.run_hooks(
        phase,
        commands[:shared],
        facts,
        cwd=task.worktree,
        base_env=boxed,
        timeout=config.timeout,
        start=start,
    )
    if phase == "pre_run" and any(not r.ok for r in results):
        return results
    return results + hooks.run_hooks(
        phase, commands[shared:], facts, cwd=task.worktree, base_env=env, timeout=config.timeout
    )


def shared_count(task: Task, phase: str) -> int:
    """How many hooks of ``phase``, at its start, are the repository's."""
    config = task.project.config.hooks
    return config.pre_run_shared if phase == "pre_run" else config.post_run_shared


def source(task: Task, phase: str, index: int) -> Path:
    """The file that holds the ``index``-th hook (from 0) of ``phase``."""
    if index < shared_count(task, phase):
        return task.project.shared_config_path()
    return task.project.paths.config


def describe(
    task: Task,
    result: HookResult,
    index: int,
    confinement: Confinement,
    scrub: Callable[[str], str],
) -> str:
    """``result.describe``; for a failing hook of the repository's that ran confined, with
    a word on why it may have been refused what it tried."""
    said = result.describe(scrub)
    if not result.ok and confinement.enabled and index < shared_count(task, result.phase):
        said += f" ({CONFINED_NOTE})"
    return said
