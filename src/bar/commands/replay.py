"""``bar replay STEP``: play back an interactive step's terminal session."""

from __future__ import annotations

import argparse
import sys

from bar.errors import NotFound
from bar.ledger import parse_step_ref
from bar.project import find_project
from bar.tasks import resolve_task


def replay(args: argparse.Namespace) -> int:
    from bar.cast import replay_cast
    from bar.commands.read import _artifact_path

    loc = find_project()
    task = resolve_task(loc.project, args.task, from_cwd=loc.task_id)
    step = task.ledger.get(parse_step_ref(args.step))
    if not step.artifacts.cast:
        raise NotFound(
            f"step {step.step_id} was not interactive and has no recording",
            hint=f"`bar show {step.step_id}` prints its output",
        )
    replay_cast(
        _artifact_path(task, step.artifacts.cast),
        sys.stdout.buffer,
        speed=args.speed,
        max_idle=args.max_idle,
        instant=args.instant,
    )
    return 0
