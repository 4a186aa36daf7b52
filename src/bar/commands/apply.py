"""``bar apply [--mode commit|merge] [--target BRANCH] [-m MSG] [--dry-run]``."""

from __future__ import annotations

import argparse
import sys

from bar import apply as core
from bar import git
from bar.project import find_project
from bar.render import Painter, plural, print_json, short
from bar.tasks import resolve_task


def apply(args: argparse.Namespace) -> int:
    loc = find_project()
    task = resolve_task(loc.project, args.task, from_cwd=loc.task_id)
    paint = Painter(loc.project.config.output.color)
    try:
        result = core.apply(
            task,
            mode=args.mode,
            target_branch=args.target,
            message=args.message,
            dry_run=args.dry_run,
            wait=not args.no_wait,
        )
    except core.ConflictError as exc:
        if args.json:
            print_json({**exc.result.to_json(), "conflict": True})
        raise
    if args.json:
        print_json({**result.to_json(), "dry_run": args.dry_run})
        return 0
    stat = result.stat
    summary = f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"
    if result.nothing_to_do:
        print(f"Nothing to apply: {result.target_branch} already has the task's changes.")
        return 0
    if args.dry_run:
        print(f"Applying task {task.name} to {result.target_branch} ({args.mode}) would change "
              f"{summary}; no conflicts.")  # fmt: skip
        if result.checkout:
            print(
                f"  {result.target_branch} is checked out in {result.checkout}; it would be updated"
            )
        assert result.tree is not None
        sys.stdout.write(git.git(task.project.root, "diff", "--stat", "-p", "--no-color",
                                 result.target_before, result.tree, "--").out)  # fmt: skip
        print(paint("(dry run: nothing was changed)", "dim"))
        return 0
    print(f"Applied task {task.name} to {result.target_branch} as {short(result.commit)} "
          f"({args.mode}): {summary}")  # fmt: skip
    if result.checkout:
        print(f"  updated the checkout at {result.checkout}")
    return 0
