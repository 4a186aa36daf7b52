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

# POSIX's portable names: str.isalnum() would also let 'é' and '²' through
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    on = _queue(the_task, on)
    if detach and on is None:
        raise UsageError("--detach sends a step to workers: give --on QUEUE")
    limits = max_tokens is not None or max_cost is not None
    if on is not None:
        from bar.cli.commands.workers import run_on
        from bar.workers.client import StepOrder

        step_order = StepOrder(
            argv=argv,
            cwd=cwd or ".",
            env=variables,
            agent=agent if agent is not None or no_agent else api.agent_of(argv),
            sandbox=sandbox,
            network=network,
            max_tokens=max_tokens,
            max_cost_usd=max_cost,
        )
        return run_on(
            queue=on,
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
        agent=_agent(argv, agent, no_agent, limits),
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


def _queue(task: Task, on: str | None) -> str | None:
    """The workers' queue a step goes to: ``--on``, else the task's own if it was sent
    to workers (said), else None (it runs here)."""
    placed = api.placement_of(task)
    if on is not None or placed is None:
        return on
    if os.environ.get("BAR_QUIET") is None:
        print(
            f"bar: task {task.name} runs on queue {placed.queue}: sending the step there",
            file=sys.stderr,
        )
    return placed.queue


def _agent(argv: list[str], agent: str | None, no_agent: bool, limits: bool) -> str | None:
    """The agent bar supervises the step as: ``--agent``, else the one ``argv`` starts
    (said), none with ``--no-agent``; session limits need one."""
    if agent is None and not no_agent:
        agent = api.agent_of(argv)
        if agent is not None and os.environ.get("BAR_QUIET") is None:
            print(
                f"bar: supervising {agent} as --agent {agent} would "
                "(--no-agent: run it as a plain command)",
                file=sys.stderr,
            )
    if agent is None and limits:
        raise UsageError(
            "--max-tokens and --max-cost limit an agent's session, and this command is not "
            "one bar supervises as an agent",
            hint="add --agent claude|codex|gemini if it runs one",
        )
    return agent


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
