"""``bar blame FILE [--at STATE]``: each line with the step or tool call that last changed it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bar import api
from bar.cli.pager import paging
from bar.cli.render import Painter, one_line, print_json, visible
from bar.model.tasks import Task

if TYPE_CHECKING:
    from bar.cli.parser import Commands
    from bar.history.blame import Blame


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar blame``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "blame",
        formatter_class=Formatter,
        description="Show each line of FILE with the step or checkpoint that last changed it:\n"
        "the tool and command (or the files an edit tool named) and the agent session.\n"
        "Lines the task never changed are marked 'base'.\n\n"
        "With --rev, FILE is blamed as a branch or commit of the repository has it (main,\n"
        "after the work landed): each line's commit, and where that commit's message links\n"
        "a task (the Bar-Task/Bar-Step lines bar apply writes, which a squash merge keeps),\n"
        "the step, tool call and prompt behind the line, from this machine's tasks or\n"
        "those bar fetch brought.",
        epilog="examples:\n"
        "  bar blame src/app.py             as the task's last recorded state has it\n"
        "  bar blame src/app.py --at 3.2    as it was after step 3's second tool call\n"
        "  bar blame src/app.py --rev main  a line of main -> step -> tool call -> prompt",
    )
    task_opt(p)
    p.add_argument(
        "file", metavar="FILE", help="a path in the task's worktree (with --rev: in the repository)"
    )
    at = p.add_mutually_exclusive_group()
    at.add_argument("--at", metavar="STEP|STEP.N", help="default: the last recorded state")
    at.add_argument(
        "--rev", metavar="REV", help="a branch or commit of the repository instead of a task state"
    )
    json_opt(p)
    p.set_defaults(_run=blame)


# --- the command -----------------------------------------------------------------------


def blame(
    *, task: str | None, file: str, at: str | None, as_json: bool, rev: str | None = None
) -> int:
    if rev is not None:
        return _blame_rev(file, rev, as_json)
    the_task = api.get_task(api.open_project(), task)
    result = api.blame(the_task, _in_worktree(the_task, file), at)
    if as_json:
        print_json(result.to_json())
        return 0
    with paging():
        _print_lines(the_task, result)
    return 0


def _print_lines(the_task: Task, result: Blame) -> None:
    paint = Painter(the_task.project.config.output.color)
    width = len(str(len(result.lines)))
    for line in result.lines:
        o = line.origin
        what = one_line(o.command or "")
        what = what if len(what) <= 28 else what[:25] + "..."
        session = (o.session_id or "")[:8]
        tool = o.tool or ("" if o.kind == "base" else o.kind)
        head = f"{o.state:<9} {tool:<12.12} {session:<8} {what:<28}"
        print(f"{paint(head, 'dim')} {line.number:>{width}}) {line.text}")


def _blame_rev(file: str, rev: str, as_json: bool) -> int:
    project = api.open_project().project
    result = api.blame_rev(project, _in_repository(project.root, file), rev)
    if as_json:
        print_json(result.to_json())
        return 0
    paint = Painter(project.config.output.color)
    width = len(str(len(result.lines)))
    told: dict[tuple[str, str], str | None] = {}
    with paging():
        for line in result.lines:
            t = line.traced
            if t.origin is not None and t.task_id:
                told.setdefault((t.task_id, t.origin.state), t.prompt)
                tool = t.origin.tool or t.origin.kind
                what = one_line(t.origin.command or "")
                what = what if len(what) <= 24 else what[:21] + "..."
                head = f"{t.commit[:8]} {t.task_id} {t.origin.state:<8} {tool:<10.10} {what:<24}"
            elif t.authorship is not None:  # an imported git-ai note's word for it
                a = t.authorship  # (a fetched note's words: no control character shown)
                who = visible((a.tool or "agent") if a.kind == "ai" else "human")
                what = visible(one_line(a.model or a.author or ""))
                what = what if len(what) <= 24 else what[:21] + "..."
                session = visible(a.conversation or "")[:8]
                head = f"{t.commit[:8]} {'git-ai':<8} {session:<8} {who:<10.10} {what:<24}"
            else:
                who = t.task_id or ""
                head = f"{t.commit[:8]} {who:<8} {'':<8} {'':<10} {'':<24}"
            print(f"{paint(head, 'dim')} {line.number:>{width}}) {line.text}")
        if told:
            print()
            for (task_id, state), prompt in told.items():
                said = one_line(prompt) if prompt else "(no prompt recorded)"
                said = said if len(said) <= 100 else said[:97] + "..."
                print(f"{task_id} {state}: {said}")
    for missing in result.missing:
        print(
            f"bar: task {missing} is named by a commit but is not here: `bar fetch` brings "
            "a task another machine pushed",
            file=sys.stderr,
        )
    return 0


def _in_repository(root: Path, file: str) -> str:
    """FILE relative to the repository's root: from where the developer stands when that
    is inside the checkout, else as given."""
    path = Path(file)
    top = os.path.realpath(root)
    full = os.path.realpath(path if path.is_absolute() else Path.cwd() / path)
    if full.startswith(top + os.sep):
        return Path(full).relative_to(top).as_posix()
    return path.as_posix()


def _in_worktree(task: Task, file: str) -> str:
    """FILE as a path relative to the task's worktree: from where the developer stands
    when that is inside the worktree, else as given."""
    path = Path(file)
    root = os.path.realpath(task.worktree)
    here = os.path.realpath(Path.cwd())
    if path.is_absolute():
        full = os.path.realpath(path)
    elif here == root or here.startswith(root + os.sep):
        full = os.path.realpath(Path(here) / path)
    else:
        return path.as_posix()
    if full == root or not full.startswith(root + os.sep):
        return path.as_posix()  # not in the worktree: said so by the lookup
    return Path(full).relative_to(root).as_posix()
