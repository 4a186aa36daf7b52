"""``bar rollback [--to base|STEP] [--hard] [--dry-run]``."""

from __future__ import annotations

from bar import api
from bar.cli.render import Painter, plural, print_json, short
from bar.history.checkpoints import Checkpoint

_VERB = {"A": "recreate", "M": "restore", "D": "delete", "T": "restore"}


def rollback(
    *, task: str | None, to: str | None, hard: bool, dry_run: bool, no_wait: bool, as_json: bool
) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, task)
    paint = Painter(loc.project.config.output.color)
    if dry_run:
        plan = api.plan_rollback(the_task, to)
        if as_json:
            print_json(
                {
                    "dry_run": True,
                    "target": plan.target.kind,
                    "target_step": plan.target.step_id,
                    "snapshot": plan.target.commit,
                    "hard": hard,
                    "changes": [{"action": _VERB[c.status], "path": c.path} for c in plan.changes],
                }
            )
            return 0
        print(
            f"Rolling back to {plan.target.describe()} ({short(plan.target.commit)}) would "
            f"change {plural(len(plan.changes), 'path')}:"
        )
        for c in plan.changes:
            print(f"  {_VERB[c.status]:<9} {c.path}")
        if hard:
            print(f"  and reset branch {the_task.branch} to {short(plan.target.head)}")
        if plan.target.base and plan.target.base != the_task.base_commit:
            print(f"  and make {short(plan.target.base)} the task's base again (as it was then)")
        print(paint("(dry run: nothing was changed)", "dim"))
        return 0
    step = api.rollback(the_task, to, hard=hard, wait=not no_wait)
    if isinstance(step, Checkpoint):  # done inside the running step
        if as_json:
            print_json(step.to_record())
            return 0
        print(
            f"Rolled back to {step.target} inside the running step {step.step_id}: "
            f"{plural(step.diff_stat.files, 'file')} changed (checkpoint {step.name})"
        )
        print(f"Undo with: bar rollback --to {step.step_id}.{step.n - 1}")
        return 0
    if as_json:
        print_json(step.to_record())
        return 0
    print(
        f"Rolled back to {step.target_text}: {plural(step.diff_stat.files, 'file')} changed "
        f"(step {step.step_id})"
    )
    if step.hard:
        print(f"  branch {the_task.branch} reset to {short(step.head)}")
    if step.base_after:
        print(f"  the task's base is {short(step.base_after)} again (as it was then)")
    if step.hard:  # undo the branch reset too
        print(f"Undo with: bar rollback --hard --to {int(step.step_id) - 1}")
    else:
        print(f"Undo with: bar undo  (or: bar rollback --to {int(step.step_id) - 1})")
    return 0
