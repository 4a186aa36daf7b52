"""``bar undo`` / ``bar redo [--dry-run]``."""

from __future__ import annotations

from bar import api
from bar.cli.render import Painter, describe, plural, print_json, short

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar undo`` and ``bar redo``: their options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    for verb, handler in (("undo", undo), ("redo", redo)):
        p = sub.add_parser(
            verb,
            formatter_class=Formatter,
            description="An editor's undo over the task's steps. `bar undo` returns the worktree\n"
            "to the state before the latest step not undone yet (a run, hand edits, a\n"
            "rollback, a sync); again, and it walks further back. `bar redo` brings back the\n"
            "step undone last; any new step that changes the worktree ends what can be\n"
            "redone. Each is a rollback step marked as an undo or redo, so nothing is lost.\n"
            "Unrecorded changes are recorded first, and are then what undo undoes (and\n"
            "they end what redo could redo); --dry-run says so. Steps that changed\n"
            "nothing (a test run, an apply) are passed over.",
            epilog="examples:\n"
            "  bar undo               back to before the last step\n"
            "  bar undo; bar undo     two steps back\n"
            "  bar redo               forward again\n"
            f"  bar {verb} --dry-run     what would change",
        )
        task_opt(p)
        p.add_argument(
            "--dry-run", action="store_true", help="show what would change; change nothing"
        )
        p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
        json_opt(p)
        p.set_defaults(_run=handler)


# --- the command -----------------------------------------------------------------------


def undo(*, task: str | None, dry_run: bool, no_wait: bool, as_json: bool) -> int:
    return _act(task, redo=False, dry_run=dry_run, no_wait=no_wait, as_json=as_json)


def redo(*, task: str | None, dry_run: bool, no_wait: bool, as_json: bool) -> int:
    return _act(task, redo=True, dry_run=dry_run, no_wait=no_wait, as_json=as_json)


def _act(task: str | None, *, redo: bool, dry_run: bool, no_wait: bool, as_json: bool) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, task)
    paint = Painter(loc.project.config.output.color)
    plan, step = api.undo(the_task, redo=redo, dry_run=dry_run, wait=not no_wait)
    verb = plan.verb
    what = f"step {plan.step.step_id} ({describe(plan.step, the_task)})"
    if as_json:
        print_json(
            {**plan.to_json(), "dry_run": dry_run, "step": step.to_record() if step else None}
        )
        return 0
    if step is None and plan.unrecorded:
        print(
            f"Your unrecorded changes ({plural(len(plan.unrecorded), 'file')}) would be "
            f"recorded as a manual step ({plan.step.step_id}) and undone:"
        )
        for c in plan.unrecorded:
            print(f"  {c.status} {c.path}")
        print(paint("(dry run: nothing was changed)", "dim"))
        return 0
    if step is None:
        print(f"{verb.capitalize()} of {what} would change {plural(len(plan.changes), 'path')}:")
        for c in plan.changes:
            print(f"  {c.status} {c.path}")
        print(paint("(dry run: nothing was changed)", "dim"))
        return 0
    print(
        f"{'Redid' if redo else 'Undid'} {what}: {plural(step.diff_stat.files, 'file')} "
        f"changed (step {step.step_id})"
    )
    if step.base_after:
        print(f"  the task's base is {short(step.base_after)} again")
    if step.hard:
        print(f"  branch {the_task.branch} set to {short(step.head)}")
    print("Redo with: bar redo" if not redo else "Undo again with: bar undo")
    return 0
