"""``bar task sync [--onto BRANCH] [--allow-conflicts] [--dry-run]``."""

from __future__ import annotations

from bar import api
from bar.cli.render import Painter, plural, print_json, short, stat_text
from bar.errors import Conflict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands

_VERB = {"A": "add", "M": "update", "D": "delete", "T": "update"}


# --- the command line ------------------------------------------------------------------


def task_options(tsub: Commands) -> None:
    """The command line of ``bar task sync``: its options and help (``tsub``: the
    actions of ``bar task``)."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = tsub.add_parser(
        "sync",
        help="bring the task up to date with its base branch (or another)",
        formatter_class=Formatter,
        description="Merge the branch's new commits into the task: the task's last state is\n"
        "merged three-way onto the branch tip (merge base: the task's base), the worktree\n"
        "gets the result (only differing files are touched), and the tip becomes the task's\n"
        "base, so `bar apply` lands just the task's changes again. Unrecorded changes are\n"
        "recorded first; the sync is a step (undo it with `bar undo`). The task branch\n"
        "follows if it can (moved to the tip, or a clean merge commit of it). A conflict\n"
        "changes nothing unless --allow-conflicts, which records the merge with conflict\n"
        "markers in the files, to resolve in the worktree. Earlier states keep the base\n"
        "they were recorded against: diff, apply --at and rollback use it.",
        epilog="examples:\n"
        "  bar task sync                        onto the task's base branch\n"
        "  bar task sync --onto release-2.1     onto another branch (or commit)\n"
        "  bar task sync --dry-run              what would change, and any conflict\n"
        "  bar task sync --allow-conflicts      record conflict markers to fix by hand",
    )
    task_opt(p)
    p.add_argument(
        "--onto",
        metavar="BRANCH",
        help="default: the task's base branch (unless another task's), "
        "else git.default_base: where bar apply lands",
    )
    p.add_argument(
        "--allow-conflicts",
        action="store_true",
        help="on conflict, record the merge with conflict markers in the files",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    json_opt(p)
    p.set_defaults(_run=sync)


# --- the command -----------------------------------------------------------------------


def sync(
    *,
    task: str | None,
    onto: str | None,
    allow_conflicts: bool,
    dry_run: bool,
    no_wait: bool,
    as_json: bool,
) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, task)
    paint = Painter(loc.project.config.output.color)
    try:
        result = api.sync(
            the_task, onto, allow_conflicts=allow_conflicts, dry_run=dry_run, wait=not no_wait
        )
    except Conflict:
        if as_json:
            plan = api.sync(the_task, onto, dry_run=True)
            print_json({**plan.to_json(), "conflict": True, "dry_run": dry_run})
        raise
    refused = Conflict(
        f"syncing onto {result.onto} would conflict in: {', '.join(result.conflicts)}",
        hint="--allow-conflicts records the merge with conflict markers in those files",
    )
    if as_json:
        rec = result.step.to_record() if result.step else None
        print_json(
            {
                **result.to_json(),
                "dry_run": dry_run,
                "step": rec,
                "conflict": bool(result.conflicts),
            }
        )
        if dry_run and result.conflicts:
            raise refused
        return 0
    if result.up_to_date:
        print(
            f"Task {the_task.name} is up to date with {result.onto} "
            f"({short(result.tip)}): nothing to sync."
        )
        return 0
    span = f"{short(result.base_before)} -> {short(result.tip)}"
    if dry_run:
        print(
            f"Syncing task {the_task.name} onto {result.onto} ({span}) would change "
            f"{plural(len(result.changes), 'path')} in the worktree:"
        )
        for c in result.changes:
            print(f"  {_VERB.get(c.status, 'update'):<7} {c.path}")
        if result.conflicts:
            print(
                f"  and conflict in: {', '.join(result.conflicts)} (it would refuse; "
                "--allow-conflicts records the conflict markers)"
            )
        print(paint("(dry run: nothing was changed)", "dim"))
        if result.conflicts:
            raise refused
        return 0
    step = result.step
    assert step is not None
    print(
        f"Synced task {the_task.name} onto {result.onto} ({span}): "
        f"{stat_text(step.diff_stat)} (step {step.step_id})"
    )
    if step.conflicts:
        print(paint(f"  conflict markers in: {', '.join(step.conflicts)}", "yellow"))
        print(
            "  resolve them in the worktree, then record the result with `bar run` or the next step"
        )
    print(f"  the task's base is now {short(result.tip)}; undo with: bar undo")
    return 0
