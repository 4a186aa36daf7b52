"""``bar rollback [--to base|STEP] [--hard] [--dry-run]``."""

from __future__ import annotations

import argparse

from bar import rollback as core
from bar.project import find_project
from bar.render import Painter, plural, print_json, short
from bar.tasks import resolve_task

_VERB = {"A": "recreate", "M": "restore", "D": "delete", "T": "restore"}


def rollback(args: argparse.Namespace) -> int:
    loc = find_project()
    task = resolve_task(loc.project, args.task, from_cwd=loc.task_id)
    paint = Painter(loc.project.config.output.color)
    if args.dry_run:
        plan = core.plan(task, args.to)
        where = "base" if plan.target.kind == "base" else f"step {plan.target.step_id}"
        if args.json:
            print_json(
                {
                    "dry_run": True,
                    "target": plan.target.kind,
                    "target_step": plan.target.step_id,
                    "snapshot": plan.target.commit,
                    "hard": args.hard,
                    "changes": [{"action": _VERB[c.status], "path": c.path} for c in plan.changes],
                }
            )
            return 0
        print(f"Rolling back to {where} ({short(plan.target.commit)}) would change "
              f"{plural(len(plan.changes), 'path')}:")  # fmt: skip
        for c in plan.changes:
            print(f"  {_VERB[c.status]:<9} {c.path}")
        if args.hard:
            print(f"  and reset branch {task.branch} to {short(plan.target.head)}")
        print(paint("(dry run: nothing was changed)", "dim"))
        return 0
    step = core.rollback(task, args.to, hard=args.hard, wait=not args.no_wait)
    if args.json:
        print_json(step.to_record())
        return 0
    where = "base" if step.target == "base" else f"step {step.target_step}"
    stat = step.diff_stat
    files = stat.files if stat else 0
    print(f"Rolled back to {where}: {plural(files, 'file')} changed (step {step.step_id})")
    if step.hard:
        print(f"  branch {task.branch} reset to {short(step.head)}")
    print(f"Undo with: bar rollback --to {int(step.step_id) - 1}")
    return 0
