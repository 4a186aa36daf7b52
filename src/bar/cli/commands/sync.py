"""``bar task sync [--onto BRANCH] [--allow-conflicts] [--dry-run]``."""

from __future__ import annotations

from bar import api
from bar.cli.render import Painter, plural, print_json, short, stat_text
from bar.errors import Conflict

_VERB = {"A": "add", "M": "update", "D": "delete", "T": "update"}


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
