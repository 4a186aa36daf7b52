"""``bar rollback [--to base|STEP] [--hard] [--dry-run]``."""

from __future__ import annotations

from bar import api
from bar.cli.render import Painter, plural, print_json, short
from bar.history.checkpoints import Checkpoint

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands

_VERB = {"A": "recreate", "M": "restore", "D": "delete", "T": "restore"}


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar rollback``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "rollback",
        formatter_class=Formatter,
        description="Restore the task's worktree to a recorded state, touching only the files\n"
        "that differ. Unrecorded changes are recorded first, and the rollback is itself a\n"
        "step, so nothing is lost: undo it by rolling back to the step before it.",
        epilog="examples:\n"
        "  bar rollback                 back to the state before the last step\n"
        "  bar rollback --to 3          back to the state after step 3\n"
        "  bar rollback --to 3.2        back to the state after step 3's second tool call\n"
        "  bar rollback --to base       back to where the task started\n"
        "  bar rollback --to 3 --hard   ... and reset the task branch to its HEAD then",
    )
    task_opt(p)
    p.add_argument(
        "--to", metavar="base|STEP|STEP.N", help="default: the state before the last step"
    )
    p.add_argument(
        "--hard", action="store_true", help="also reset the task branch to the HEAD at the target"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    json_opt(p)
    p.set_defaults(_run=rollback)


# --- the command -----------------------------------------------------------------------


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
