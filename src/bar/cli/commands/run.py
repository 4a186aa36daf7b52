"""``bar run [--task T] [--cwd DIR] [-e K=V]... [--pty|--no-pty] [--agent A] -- CMD...``."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bar import api
from bar.api import shapes
from bar.cli.render import Painter, print_json, stat_text
from bar.errors import ExitCode, HookFailed, UsageError
from bar.model.config import OutputConfig
from bar.model.records import RunStep
from bar.model.tasks import Task
from bar.step.run import RunRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands

# POSIX's portable names: str.isalnum() would also let 'é' and '²' through
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar run``: its options and help."""
    import argparse

    from bar.agents import AGENTS
    from bar.cli.parser import Formatter, on_opts, task_opt

    p = sub.add_parser(
        "run",
        formatter_class=Formatter,
        description="Run CMD in the task's worktree and record it as a step: the patch it\n"
        "made, what it printed (stdout and stderr apart), how long it took and how it\n"
        "ended. The policy is checked first and hooks run around it. bar exits with\n"
        "CMD's exit code (127: not found, 126: blocked or not executable, 128+N: signal N).\n"
        "A command stopped by a signal (Ctrl-C: SIGINT) is recorded with it and never as a\n"
        "success, even when it catches it and exits 0 as agents do: 'interrupted (SIGINT,\n"
        "exit 130)'.\n\n"
        "CMD and everything it starts are confined by the kernel (Linux Landlock): they\n"
        "can write the worktree, the task branch, TMPDIR, /tmp and sandbox.allow_write,\n"
        "and nothing else; ~/.ssh, ~/.aws, ~/.gnupg and ~/.netrc cannot be read. Its new\n"
        "git objects wait in a quarantine until git has checked them: no existing one can\n"
        "change, and no other branch can move. See docs/sandbox.md.\n\n"
        "It runs in the directory you stand in if that is inside the task's worktree,\n"
        "else at the worktree's root (from your checkout too); --cwd DIR names a directory\n"
        "of the worktree from its root. bar log shows it: (in src/pkg).\n\n"
        "A policy block and a failing pre_run hook are recorded as steps too (nothing ran:\n"
        "'blocked' or 'stopped' in bar log). With --json, stdout carries only the step's\n"
        "record, printed when it ends; the command's own output is shown live on stderr.\n\n"
        "--on QUEUE runs the step on a bar worker serving that Temporal task queue, with\n"
        "the same supervision; its output streams here, and its record is fetched back\n"
        "when it ends (--detach: return at once). The task then runs on workers until\n"
        "`bar task adopt` brings it back. See docs/workers.md.",
        epilog="examples:\n"
        "  bar run -- claude                   # supervised as --agent claude\n"
        "  bar run -- make test\n"
        "  bar run --cwd src -e DEBUG=1 -- python -m app\n"
        "  bar run --agent codex -- ./my-codex-wrapper.sh   # an agent bar cannot see\n"
        "  bar run --no-agent -- claude --version           # a plain command\n"
        "  bar run --no-sandbox -- ./deploy.sh  # with your full rights, this once\n"
        "  bar run --network open -- ./fetch-data.sh   # every host, this once\n"
        "  bar run --max-cost 2 -- claude       # stopped (and recorded so) past $2\n"
        "  bar run --json -- make test > step.json   # make's output still shows\n"
        "  bar run --on builds -- make test     # on a bar worker of queue builds",
    )
    task_opt(p)
    p.add_argument(
        "--cwd",
        metavar="DIR",
        help="directory of the worktree to run in, relative to its root (default: where you "
        "stand, if inside the worktree, else its root)",
    )
    p.add_argument(
        "-e", dest="env", action="append", default=[], metavar="K=V", help="set a variable"
    )
    pty = p.add_mutually_exclusive_group()
    pty.add_argument(
        "--pty",
        dest="pty",
        action="store_true",
        default=None,
        help="run in a pseudo-terminal (default when on a terminal)",
    )
    pty.add_argument(
        "--no-pty",
        dest="pty",
        action="store_false",
        help="run with pipes; stdout and stderr recorded apart",
    )
    agents = p.add_mutually_exclusive_group()
    agents.add_argument(
        "--agent",
        choices=AGENTS,
        help="supervise CMD as this agent: its hooks check and checkpoint every tool call, "
        "from a home of its own for the task (never your ~/.claude, ~/.codex, ~/.gemini); "
        "the default when CMD is claude, codex or gemini, also through env, npx or a path",
    )
    agents.add_argument(
        "--no-agent",
        action="store_true",
        help="run CMD as a plain command even if it starts a known agent",
    )
    p.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="do not confine this run (it can write anything you can; recorded in the step)",
    )
    p.add_argument(
        "--network",
        choices=("open", "allow-list", "none"),
        help="what this run may reach: every host, only sandbox.allow_hosts through bar's "
        "proxy, or nothing (default: sandbox.network; docs/sandbox.md)",
    )
    p.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="stop the agent once its session in this step has used N tokens (input, "
        "output and cache, as its transcript counts them); default: agents.budget",
    )
    p.add_argument(
        "--max-cost",
        type=_positive_float,
        metavar="USD",
        help="stop the agent once its session in this step has cost USD dollars, priced "
        "from agents.prices in config.yaml; default: agents.budget",
    )
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")

    on_opts(p, detach=True)
    p.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="print the step's record as JSON on stdout when it ends "
        "(the command's output goes to stderr)",
    )
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD...")
    p.set_defaults(_run=run)


def _positive_int(value: str) -> int:
    import argparse

    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of tokens, not {value!r}"
        ) from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {value}")
    return number


def _positive_float(value: str) -> float:
    import argparse

    try:
        number = float(value.lstrip("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an amount in US dollars, not {value!r}"
        ) from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive amount, not {value}")
    return number


# --- the command -----------------------------------------------------------------------


def env_from_pairs(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME_RE.fullmatch(name) or "\0" in value:
            raise UsageError(f"-e expects NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def run(
    *,
    task: str | None,
    cwd: str | None,
    env: list[str],
    pty: bool | None,
    agent: str | None,
    sandbox: bool,
    no_wait: bool,
    as_json: bool,
    argv: list[str],
    no_agent: bool = False,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    on: str | None = None,
    detach: bool = False,
    server: str | None = None,
    network: str | None = None,
) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError("no command given", hint="usage: bar run [options] -- CMD [ARGS...]")
    loc = api.open_project()
    the_task = api.get_task(loc, task)
    variables = env_from_pairs(env)
    limited = max_tokens is not None or max_cost is not None
    place = api.place_run(
        the_task, argv, on=on, agent=agent, no_agent=no_agent, limited=limited, detach=detach
    )
    if os.environ.get("BAR_QUIET") is None:
        _say_place(the_task, place)
    if place.queue is not None:
        from bar.cli.commands.workers import run_on
        from bar.workers.client import StepOrder

        step_order = StepOrder(
            argv=argv,
            cwd=cwd or ".",
            env=variables,
            agent=place.agent,
            sandbox=sandbox,
            network=network,
            max_tokens=max_tokens,
            max_cost_usd=max_cost,
        )
        return run_on(
            queue=place.queue,
            server=server,
            detach=detach,
            task_ref=the_task.id,
            step=step_order,
            as_json=as_json,
        )
    request = RunRequest(
        argv=argv,
        cwd=api.resolve_cwd(the_task, cwd),
        env=variables,
        pty=sys.stdin.isatty() and sys.stdout.isatty() and not as_json if pty is None else pty,
        live=True,
        agent=place.agent,
        sandbox=sandbox,
        network=network,
        max_tokens=max_tokens,
        max_cost_usd=max_cost,
    )
    try:
        with _stdout_on_stderr(as_json):
            step = api.run(the_task, request, wait=not no_wait)
    except HookFailed as exc:
        if as_json and isinstance(exc.step, RunStep):
            print_json(_json(the_task, exc.step))
        raise
    _say(loc.project.config.output, the_task, step, as_json)
    code = step.exit_code if step.exit_code is not None else 1
    if step.extra.get("stopped") is not None and code == 0:
        code = ExitCode.ERROR  # (the agent ended "well" because bar stopped it)
    return code


def _say_place(task: Task, place: api.RunPlace) -> None:
    """Say what ``bar run`` chose that its options did not name: the task's own queue, or
    the agent it saw in the command (which it says only for a step that runs here)."""
    if place.task_queue:
        print(
            f"bar: task {task.name} runs on queue {place.queue}: sending the step there",
            file=sys.stderr,
        )
    elif place.queue is None and place.agent_seen:
        print(
            f"bar: supervising {place.agent} as --agent {place.agent} would "
            "(--no-agent: run it as a plain command)",
            file=sys.stderr,
        )


def _say(output: OutputConfig, task: Task, step: RunStep, as_json: bool) -> None:
    """What ``bar run`` prints of the step it recorded (``output``: the project's
    output settings)."""
    if as_json:
        print_json(_json(task, step))
    elif step.blocked:
        print(
            f"bar: blocked by policy; nothing ran (step {step.step_id} recorded)", file=sys.stderr
        )
    elif os.environ.get("BAR_QUIET") is None:
        print(
            f"bar: step {step.step_id} recorded: {step.ending.text}, {stat_text(step.diff_stat)}",
            file=sys.stderr,
        )
        if output.verbose and step.diff_stat.file_list:
            paint = Painter(output.color)
            for name in step.diff_stat.file_list:
                print(paint(f"  {name}", "dim"), file=sys.stderr)


def _json(task: Task, step: RunStep) -> dict[str, Any]:
    return shapes.run_entry(task, step)


@contextmanager
def _stdout_on_stderr(active: bool) -> Iterator[None]:
    """With --json, stdout is the record's alone: what the command prints while it runs
    (it writes to bar's file descriptor 1, directly or through a pty) goes to stderr."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
