"""``bar push``, ``bar fetch`` and ``bar task adopt``: task histories through git remotes."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from bar import api
from bar.base.notices import plural
from bar.base.progress import Progress
from bar.cli.commands.task import ref
from bar.cli.render import Painter, print_json
from bar.errors import UsageError

if TYPE_CHECKING:
    from bar.model.project import Project
    from bar.share.fetch import Fetched
    from bar.share.push import Pushed


def push(
    *,
    remote: str | None,
    task: str | None,
    all: bool,
    allow: list[str],
    dry_run: bool,
    as_json: bool,
    hook: str | None = None,
) -> int:
    loc = api.open_project()
    project = loc.project
    if hook is not None:
        return _from_hook(project, hook)
    if all and task is not None:
        raise UsageError("--all and --task name different tasks", hint="give one of them")
    tasks = api.own_tasks(project) if all else [api.get_task(loc, task)]
    if all and not tasks:
        raise UsageError("this machine has no task of its own to push")
    to = api.remote(project, remote)
    with Progress("push:") as shown:
        result = api.push(
            project,
            tasks,
            to,
            allow=allow,
            dry_run=dry_run,
            progress=lambda s: shown.update(detail=s),
        )
    if as_json:
        print_json(result.to_json())
    else:
        _print_push(result, Painter(project.config.output.color))
    return _push_code(result)


def _from_hook(project: Project, remote: str) -> int:
    """The pre-push hook: the histories of the tasks behind the pushed commits, to
    ``share.remote`` if set, else where the branch goes; a refusal stops the branch too."""
    lines = sys.stdin.read().splitlines()
    tasks = api.tasks_pushed(project, lines)
    if not tasks:
        return 0
    to = api.remote(project, project.config.share.remote or remote)
    result = api.push(project, tasks, to)
    for t in result.tasks:
        print(f"bar: {t.name} ({t.task_id}): {t.outcome}", file=sys.stderr)
        for f in t.findings:
            print(f"  {f.where()}  {f.kind}: {f.detail}  [--allow {f.id}]", file=sys.stderr)
    code = _push_code(result)
    if code:
        print(
            "bar: the push stops here: a task history it carries could not go (bar push shows "
            "why); `git push --no-verify` pushes the branch alone",
            file=sys.stderr,
        )
    return code


def _push_code(result: Pushed) -> int:
    return result.exit_code


def _print_push(result: Pushed, paint: Painter) -> None:
    out = sys.stdout
    for t in result.tasks:
        head = f"{t.name} ({t.task_id})"
        if t.outcome == "pushed":
            print(f"pushed {head}: {plural(t.steps, 'step')} to {result.remote}", file=out)
        elif t.outcome == "would push":
            print(f"would push {head}: {plural(t.steps, 'step')} to {result.remote}", file=out)
        elif t.outcome == "up to date":
            print(f"{head}: up to date on {result.remote}", file=out)
        elif t.outcome == "behind":
            print(f"{head}: {t.message}", file=out)
        elif t.outcome == "refused":
            print(
                paint(
                    f"refused {head}: {plural(len(t.findings), 'finding')} must not leave "
                    "this machine:",
                    "red",
                ),
                file=sys.stderr,
            )
            for f in t.findings:
                print(f"  {f.where()}  {f.kind}: {f.detail}  [--allow {f.id}]", file=sys.stderr)
        else:
            print(paint(f"{t.outcome} {head}: {t.message}", "red"), file=sys.stderr)
        for c in t.cut:
            print(
                f"  cut in the pushed copy: {c.path} ({c.size} bytes, over share.max_blob)",
                file=out,
            )
    refused = [t for t in result.tasks if t.outcome == "refused"]
    if refused:
        print(
            "hint: the record keeps it here, and no push sends it: revoke a real secret;\n"
            "      let one that is none through by its id: bar push --allow ID",
            file=sys.stderr,
        )


def fetch(*, remote: str | None, as_json: bool) -> int:
    loc = api.open_project()
    source = api.remote(loc.project, remote)
    with Progress("fetch:") as shown:
        result = api.fetch(loc.project, source, progress=lambda s: shown.update(detail=s))
    if as_json:
        print_json(result.to_json())
    else:
        _print_fetch(result)
    return result.exit_code


def _print_fetch(result: Fetched) -> None:
    if not result.tasks:
        print(f"{result.remote} has no task histories (bar push sends them)")
        return
    for t in result.tasks:
        head = f"{t.name} ({t.task_id})"
        if t.outcome == "new":
            print(f"new      {head}: {plural(t.steps, 'step')}, read-only here")
        elif t.outcome == "updated":
            said = f" ({t.message})" if t.message else ""  # (steps from workers: what came)
            print(f"updated  {head}: {plural(t.steps, 'step')}{said}")
        elif t.outcome == "up to date":
            print(f"same     {head}")
        elif t.outcome == "broken":
            print(f"broken   {t.task_id}: {t.message}", file=sys.stderr)
        else:
            print(f"{t.outcome:<8} {head}: {t.message}")


def adopt(*, task_ref: str | None, task: str | None = None, as_json: bool) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, ref(task_ref, task, needed="adopt"))
    done = api.adopt_task(loc.project, the_task)
    if as_json:
        print_json(done.to_json())
        return 0
    print(
        f"Adopted task {done.task.name} ({done.task.id}): {plural(done.steps, 'step')}, "
        f"now this machine's"
    )
    print(f"  worktree: {done.task.worktree}")
    print(f"  branch {done.task.branch}; bar push sends the steps you record next")
    return 0
