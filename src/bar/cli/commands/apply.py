"""``bar apply [--mode commit|merge] [--target BRANCH [--create [REF]]] [-m MSG] [--dry-run]``."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

from bar import api
from bar.cli.render import Painter, plural, print_json, short
from bar.errors import ApplyConflict
from bar.model.project import AGENT_SETTINGS

if TYPE_CHECKING:
    from bar.changes.apply import ApplyResult
    from bar.cli.parser import Commands
    from bar.model.tasks import Task


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar apply``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "apply",
        formatter_class=Formatter,
        description="Land the task's changes (base -> last recorded state) on a branch: by default\n"
        "the branch the task was created from (task new --base) if it is a local branch\n"
        "and not another task's, else git.default_base (the branch task sync merges in,\n"
        "too). A target checked out in a task's worktree is refused (exit 1): bar never\n"
        "writes into another task's worktree.\n"
        "commit: one new commit on the target, merged three-way onto its tip, with\n"
        "  Bar-Task and Bar-Step trailers (Bar-Step: the step whose state it lands).\n"
        "merge: commit what the agent left uncommitted on the task branch, then a\n"
        "  --no-ff merge of that branch (agent commits kept).\n"
        "A conflict changes nothing (exit 6), nor do conflict markers that a task sync\n"
        "--allow-conflicts left and no step resolved yet. A checked-out target is\n"
        "updated only if the files the apply changes are clean there (else exit 5).\n"
        "--at lands an earlier recorded state instead (commit mode), e.g. a checkpoint\n"
        "before the agent went astray. A task without its worktree (closed, or its\n"
        "worktree removed) is applied from its record: it needs none (merge mode needs\n"
        "its branch). --create makes a target branch that does not exist yet, at the\n"
        "task's base (or at REF), in the same step as the apply.\n"
        "An apply that changes bar's own files in the repository (.bar/config.yaml: the\n"
        "hooks of every step of every task; the policy file) says so on stderr (JSON:\n"
        "changes_bar_settings): review them before the next step.",
        epilog="examples:\n"
        "  bar apply --dry-run                 where it would land, the diff, whether it can\n"
        "  bar apply -m 'Add discounts'        one commit on the branch the task came from\n"
        "  bar apply --target release          onto another branch\n"
        "  bar apply --target feature --create a new branch, at the task's base\n"
        "  bar apply --target fix --create v2  a new branch, at v2\n"
        "  bar apply --mode merge              keep the agent's own commits\n"
        "  bar apply --at 3.2                  an earlier state (a checkpoint)",
    )
    task_opt(p)
    p.add_argument(
        "--mode",
        choices=("commit", "merge"),
        default="commit",
        help="commit (default): the task's changes as one new commit on the "
        "target; merge: a --no-ff merge of the task branch, its commits "
        "kept",
    )
    p.add_argument(
        "--at", metavar="STEP|STEP.N", help="apply this recorded state (default: the last one)"
    )
    p.add_argument(
        "--target",
        metavar="BRANCH",
        help="default: the branch the task was created "
        "from, unless another task's, else git.default_base",
    )
    p.add_argument(
        "--create",
        nargs="?",
        const="",
        metavar="REF",
        help="make the --target branch, which must not exist yet: at REF if given, "
        "else at the task's base",
    )
    p.add_argument("-m", "--message", metavar="MSG", help="commit message (default: from the task)")
    p.add_argument("--dry-run", action="store_true", help="show the diff and whether it conflicts")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    json_opt(p)
    p.set_defaults(_run=apply)


# --- the command -----------------------------------------------------------------------


def apply(
    *,
    task: str | None,
    mode: str,
    target: str | None,
    message: str | None,
    dry_run: bool,
    no_wait: bool,
    as_json: bool,
    at: str | None = None,
    create: str | None = None,
) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, task)
    paint = Painter(loc.project.config.output.color)
    try:
        result = api.apply(
            the_task,
            mode=mode,
            target=target,
            message=message,
            dry_run=dry_run,
            wait=not no_wait,
            at=at,
            preview=dry_run and not as_json,
            create=create is not None,
            start=create or None,
        )
    except ApplyConflict as exc:
        if as_json:
            print_json(
                {
                    "mode": mode,
                    "target_branch": exc.target_branch,
                    "conflicts": exc.paths,
                    "conflict": True,
                }
            )
        raise
    _say_settings(loc.project.settings_files(), result, dry_run=dry_run, as_json=as_json)
    if as_json:
        print_json({**result.to_json(), "dry_run": dry_run})
        if result.refusal is not None:
            raise result.refusal  # the dry run fails as the apply would
        return 0
    stat = result.stat
    summary = f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"
    if result.nothing_to_do:
        if result.created:
            print(
                f"Nothing to apply: {short(result.target_before)} already has the task's "
                f"changes; {result.target_branch} was not made."
            )
        else:
            print(f"Nothing to apply: {result.target_branch} already has the task's changes.")
        return 0
    if result.created:
        at_text = f"{short(result.target_before)}{_start_text(the_task, create)}"
        print(
            f"{result.target_branch} does not exist yet: the apply would make it at {at_text}"
            if dry_run
            else f"Made branch {result.target_branch} at {at_text}"
        )
    if dry_run:
        if result.refusal is not None:
            # why it would refuse goes to stderr once, as the apply itself would say it
            print(
                f"Applying task {the_task.name} to {result.target_branch} ({mode}) would "
                f"merge without conflicts ({summary}), but the apply would be refused "
                "(why: the error below)."
            )
        else:
            print(
                f"Applying task {the_task.name} to {result.target_branch} ({mode}) would "
                f"change {summary}; no conflicts."
            )
        if result.checkout and result.refusal is None:
            print(
                f"  {result.target_branch} is checked out in {result.checkout}; it would be updated"
            )
        text = result.preview
        if text is None:
            text = api.apply_diff(the_task, result).text(with_stat=True)
        sys.stdout.write(text)
        print(paint("(dry run: nothing was changed)", "dim"))
        if result.refusal is not None:
            raise result.refusal  # the dry run fails as the apply would
        return 0
    print(
        f"Applied task {the_task.name} to {result.target_branch} as {short(result.commit)} "
        f"({mode}): {summary}"
    )
    if result.checkout:
        print(f"  updated the checkout at {result.checkout}")
    return 0


def _start_text(task: Task, create: str | None) -> str:
    """What the new branch's start point is, when it is the task's base."""
    if create:
        return f" ({create})"
    return f" (the task's base, {task.base_ref})" if task.base_ref else " (the task's base)"


def _what(what: dict[str, str], path: str) -> str:
    """What the settings file ``path`` decides (its folder's word, for one beneath it)."""
    found = what.get(path)
    if found is None:
        found = next((w for p, w in what.items() if p.endswith("/") and path.startswith(p)), None)
    return found or "bar settings"


def _say_settings(
    what: dict[str, str], result: ApplyResult, *, dry_run: bool, as_json: bool
) -> None:
    """Say on stderr that the apply changes bar's own files in the repository: from the
    next step on, every task runs under what they now say."""
    if not result.settings:
        return
    if not dry_run:
        paths = " ".join(shlex.quote(p) for p in result.settings)
        review = f"review them before the next step: git show {short(result.commit)} -- {paths}"
    elif as_json:
        review = "review them with bar apply --dry-run"
    else:
        review = "review them in the diff below"
    verb = "would change" if dry_run else "changes"
    agents = [p for p in result.settings if _what(AGENT_SETTINGS, p) != "bar settings"]
    bars = [p for p in result.settings if p not in agents]
    for whose, paths_of in (("bar's", bars), ("the agents'", agents)):
        if paths_of:
            listed = ", ".join(f"{path} ({_what(what, path)})" for path in paths_of)
            print(
                f"bar: note: this {verb} {whose} settings for the repository: {listed}; {review}",
                file=sys.stderr,
            )
