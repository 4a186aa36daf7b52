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
    from bar.cli.parser import Commands
    from bar.model.project import Project
    from bar.share.fetch import Fetched
    from bar.share.push import Pushed


# --- the command line ------------------------------------------------------------------


def task_options(tsub: Commands) -> None:
    """The command line of ``bar task adopt``: its options and help (``tsub``: the
    actions of ``bar task``)."""
    from bar.cli.parser import Formatter, json_opt, task_ref_opts

    p = tsub.add_parser(
        "adopt",
        help="continue here a task another machine recorded (after bar fetch)",
        formatter_class=Formatter,
        description="Continue a task that another machine recorded and pushed: a read-only\n"
        "copy that bar fetch brought, or a task of this machine that went on elsewhere\n"
        "(bar fetch says 'behind'). The task becomes this machine's: its branch at the\n"
        "head the history names, a worktree at its last recorded state, and the steps\n"
        "recorded next go on from that history (bar push sends them as a fast-forward).\n"
        "A task of this machine is adopted only when nothing was recorded here since its\n"
        "last push and its worktree holds no unrecorded change.",
        epilog="examples:\n"
        "  bar fetch && bar task adopt gVXsTb7x\n"
        "  bar task adopt fix-login --json",
    )
    task_ref_opts(p)
    json_opt(p)
    p.set_defaults(_run=adopt)


def options(sub: Commands) -> None:
    """The command line of ``bar push`` and ``bar fetch``: their options and help."""
    import argparse

    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "push",
        formatter_class=Formatter,
        description="Publish a task's history to a git remote, so a reviewer or a teammate on\n"
        "another machine can read it (bar fetch) and go on with it (bar task adopt). Its\n"
        "record (task.json, ledger, outputs, patches, sessions, checkpoints) goes as one\n"
        "commit on refs/bar/history/<id>, its states on refs/bar/tasks/<id>: one ref per\n"
        "task, fast-forward only, so machines never race.\n\n"
        "Nothing leaves before it is scanned: a secret (a token, or the value of a secret\n"
        "variable you have set), a file your .gitignore ignores or sandbox.deny_read hides,\n"
        "a file of the task's states over share.max_blob: any of them refuses the push\n"
        "(exit 12), naming the file and line and an id; --allow ID lets that one through.\n"
        "Outputs and other record files over share.max_blob (default 10MB) are cut, with a\n"
        "marker, in the pushed copy; yours stay whole.\n\n"
        "REMOTE is a remote's name or a URL; default: share.remote in config.yaml, else\n"
        "origin. It may be a repository of its own for agents' records.",
        epilog="examples:\n"
        "  bar push                         the current task, to origin\n"
        "  bar push --all                   every task of this machine\n"
        "  bar push logs --task fix-login   to the remote named logs\n"
        "  bar push --dry-run               scan and say what would go\n"
        "  bar push --allow 3fa9c2d1e0      after checking that finding is no secret",
    )
    p.add_argument("remote", nargs="?", metavar="REMOTE", help="a remote's name or a URL")
    task_opt(p)
    p.add_argument("--all", action="store_true", help="every task of this machine")
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="ID",
        help="let the finding with this id through (again for more)",
    )
    p.add_argument("--dry-run", action="store_true", help="scan, and push nothing")
    # the pre-push hook's (bar init --share): the remote git pushes to, refs on stdin
    p.add_argument("--hook", metavar="REMOTE", help=argparse.SUPPRESS)
    json_opt(p)
    p.set_defaults(_run=push)

    p = sub.add_parser(
        "fetch",
        formatter_class=Formatter,
        description="Fetch the task histories on a git remote. A task of another machine\n"
        "arrives as a read-only copy: bar task list marks it with its origin, and log,\n"
        "show, diff, blame, show --session and ui read it as any task; nothing changes it\n"
        "but the next fetch. bar task adopt ID continues it here. A task of this machine\n"
        "is never changed: the fetch says if the remote is behind it (bar push), went on\n"
        "with it elsewhere (bar task adopt), or holds another line of work (diverged).",
        epilog="examples:\n"
        "  bar fetch                  from share.remote, else origin\n"
        "  bar fetch logs\n"
        "  bar fetch --json",
    )
    p.add_argument("remote", nargs="?", metavar="REMOTE", help="a remote's name or a URL")
    json_opt(p)
    p.set_defaults(_run=fetch)


# --- the command -----------------------------------------------------------------------


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
