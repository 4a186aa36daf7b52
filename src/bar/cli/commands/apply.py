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
    from bar.model.tasks import Task


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
