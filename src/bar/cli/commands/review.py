"""``bar review BRANCH [--base BRANCH] [--json]``: the record behind a pushed branch.

``api.review`` finds the tasks the branch's commits name and reads them back; this
prints, per task, the commits that land its states (and whether they still hold them),
then its steps with their sessions and the policy's decisions. A step's policy lines
are the decisions that were not a plain allow: blocks, asks and warnings are what a
reviewer looks for; ``--json`` has every one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bar import api
from bar.base.notices import plural
from bar.cli.pager import paging
from bar.cli.render import (
    Painter,
    describe,
    fit,
    outcome,
    print_json,
    session_text,
    short,
    stat_text,
    terminal_width,
    visible_len,
)
from bar.errors import ExitCode
from bar.model.records import RunStep, Step
from bar.share.review import FETCHED

if TYPE_CHECKING:
    from bar.cli.parser import Commands
    from bar.share.review import Landing, Review, TaskReview


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar review``: its options and help."""
    from bar.cli.parser import Formatter, json_opt

    p = sub.add_parser(
        "review",
        formatter_class=Formatter,
        description="Review a branch someone pushed by the record behind it. bar apply ends\n"
        "each commit it makes with Bar-Task and Bar-Step lines, and a squash merge keeps\n"
        "them; for the commits of BRANCH that the base lacks (what a pull request would\n"
        "merge), bar names each task they come from and shows its steps up to the one\n"
        "landed: command, exit code, changes, the agent's session (model, turns, tool\n"
        "calls, tokens, cost) and what the policy decided (blocks and asks above all).\n"
        "It says too whether the commit holds the task's files as landing that state\n"
        "on the commit's parent gives them (a squash or a rebase of the applied commit\n"
        "does; a fix made on the way does not), and whether the branch changed them since.\n\n"
        "A task of another machine is read from its copy: bar fetch brings it first.\n"
        "BRANCH is a local branch, a remote-tracking one (origin/feature) or any ref\n"
        "(refs/pull/12/head, once fetched). Exit 3: no commit names a task, or none of\n"
        "the tasks named is here.",
        epilog="examples:\n"
        "  bar review feature                 a local branch, against git.default_base\n"
        "  git fetch origin && bar fetch && bar review origin/feature\n"
        "  git fetch origin pull/12/head:refs/pull/12/head && bar review refs/pull/12/head\n"
        "  bar review feature --base release  against another branch\n"
        "  bar review feature --json",
    )
    p.add_argument("branch", metavar="BRANCH", help="the branch (or any ref) to review")
    p.add_argument(
        "--base",
        metavar="BRANCH",
        help="the branch it goes onto: its commits are not reviewed "
        "(default: git.default_base in config.yaml)",
    )
    json_opt(p)
    p.set_defaults(_run=review)


# --- the command -----------------------------------------------------------------------


def review(*, branch: str, base: str | None, as_json: bool) -> int:
    loc = api.open_project()
    result = api.review(loc.project, branch, base)
    if as_json:
        print_json(result.to_json())
    else:
        with paging():
            _print_review(result, Painter(loc.project.config.output.color))
    return ExitCode.OK if result.found else ExitCode.NOT_FOUND


def _print_review(result: Review, paint: Painter) -> None:
    naming = len({x.commit for t in result.tasks for x in t.landings})
    print(
        f"{result.branch} ({short(result.tip)}) against {result.base} "
        f"({short(result.base_commit)}): {plural(result.commits, 'commit')}, "
        f"{naming} naming a bar task"
    )
    for entry in result.tasks:
        print()
        if entry.task is None:
            _print_missing(entry, paint)
        else:
            _print_task(entry, paint)


def _print_missing(entry: TaskReview, paint: Painter) -> None:
    commits = ", ".join(short(x.commit) for x in entry.landings)
    print(paint(f"task {entry.task_id} is not here", "yellow") + f" (named by {commits})")
    print(
        "  hint: `bar fetch` brings it from the remote its history was pushed to "
        f"(bar push on the machine that recorded it); then: bar review again, or "
        f"bar log --task {entry.task_id}"
    )


def _print_task(entry: TaskReview, paint: Painter) -> None:
    task = entry.task
    assert task is not None
    origin = task.origin
    if entry.record == FETCHED:
        remote = (origin or {}).get("remote", "a remote")
        print(paint(f"task {task.name} ({task.id}), as last fetched from {remote}", "bold"))
        if entry.own is not None:
            print(
                f"  read in place: this machine's record of it is behind (steps up to "
                f"{entry.own.ledger_steps():04d} here); `bar task adopt {task.id}` "
                "continues it here"
            )
        else:
            print("  read in place: it is no task here (`bar fetch` makes it one again)")
    else:
        where = f", fetched from {origin.get('remote', 'a remote')}" if origin else ""
        print(paint(f"task {task.name} ({task.id}){where}", "bold"))
    for landing in entry.landings:
        _print_landing(entry, landing, paint)
    print(f"  steps{' up to ' + _last(entry) if _last(entry) else ''}:")
    cells = [(outcome(s, paint), stat_text(s.diff_stat)) for s in entry.steps]
    widths = [max((visible_len(c[i]) for c in cells), default=0) for i in (0, 1)]
    width = terminal_width()
    for step, (result, stat) in zip(entry.steps, cells, strict=True):
        head = (
            f"  {paint(step.step_id, 'bold')}  {step.kind:<8} {paint.pad(result, widths[0])}  "
            f"{paint.pad(stat, widths[1])}  "
        )
        room = None if width is None else max(width - visible_len(head), 10)
        print((head + fit(describe(step, task), room)).rstrip())
        _print_details(step, paint)


def _last(entry: TaskReview) -> str:
    return entry.steps[-1].step_id if entry.steps else ""


def _print_landing(entry: TaskReview, landing: Landing, paint: Painter) -> None:
    print(f"  commit {short(landing.commit)} {landing.subject}")
    what = f"step {landing.state}" if landing.state else "the task (no step named)"
    how = "made by bar apply" if landing.applied else "a copy of its apply (squash, rebase, pick)"
    if not landing.recorded:
        how = "by bar apply, or a copy of it"  # (the record that would say is not here)
    print(f"    lands {what}: {how}")
    if not landing.recorded:
        print(paint("    that state is not in the record here", "yellow") + _bring(entry))
        return
    if landing.differs:
        print(
            paint(
                f"    its files differ from the recorded state: {', '.join(landing.differs)}",
                "yellow",
            )
        )
    else:
        print(paint("    it holds the task's files as that state recorded them", "green"))
    if landing.changed_since:
        print(
            paint(f"    changed since on the branch: {', '.join(landing.changed_since)}", "yellow")
        )


def _bring(entry: TaskReview) -> str:
    """What brings a state the record here lacks (the end of the sentence that says so)."""
    if entry.fetched is None:
        return ": `bar fetch` brings the task's latest history"
    return (
        f", nor in the history last fetched from {entry.fetched.remote} "
        f"({short(entry.fetched.commit)}): the machine that recorded it sends it with "
        "`bar push`, then `bar fetch` here brings it"
    )


def _print_details(step: Step, paint: Painter) -> None:
    if not isinstance(step, RunStep):
        return
    summary = step.extra.get("session")
    if isinstance(summary, dict):
        agent = summary.get("agent")
        text = session_text(summary, calls=True)
        print(paint(f"        {agent}: {text}" if agent else f"        {text}", "dim"))
    for event in step.policy_events:
        if event.action == "allow":
            continue
        source = f" [{event.source}]" if event.source else ""
        fate = f" -> {event.outcome}" if event.outcome else ""
        color = "red" if event.action == "block" else "yellow"
        line = f"policy {event.action} {event.rule or '(no rule)'}: {event.matched}"
        print(f"        {paint(line, color)}{source}{fate}")
