"""``bar run [--task T] [--cwd DIR] [-e K=V]... [--pty|--no-pty] [--agent A] -- CMD...``."""

from __future__ import annotations

import argparse
import os
import sys

from bar.errors import UsageError
from bar.project import find_project
from bar.recorder import RunRequest, env_from_pairs, resolve_cwd, run_step
from bar.render import print_json
from bar.tasks import resolve_task


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError("no command given", hint="usage: bar run [options] -- CMD [ARGS...]")
    loc = find_project()
    task = resolve_task(loc.project, args.task, from_cwd=loc.task_id)
    env = env_from_pairs(args.env)
    cwd = resolve_cwd(task, args.cwd)
    pty = args.pty
    if pty is None:
        pty = sys.stdin.isatty() and sys.stdout.isatty() and not args.json
    req = RunRequest(argv=argv, cwd=cwd, env=env, pty=pty, live=not args.json, agent=args.agent)
    step, code = run_step(task, req, wait=not args.no_wait)
    if args.json:
        print_json(step.to_record())
    elif os.environ.get("BAR_QUIET") is None:
        stat = step.diff_stat
        changed = f"{stat.files} file(s) +{stat.additions} -{stat.deletions}" if stat else "-"
        print(
            f"bar: step {step.step_id} recorded: exit {code}, {changed}",
            file=sys.stderr,
        )
    return code
