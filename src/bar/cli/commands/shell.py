"""``bar shell [--task T] [--no-sandbox]``: ``bar run --pty -- $SHELL``, with a banner."""

from __future__ import annotations

import os
import sys

from bar import api
from bar.cli.commands.run import run


def shell(*, task: str | None, sandbox: bool, no_wait: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    if the_task.pending:  # its first step starts it, as `bar run` does
        the_task = api.start_task(the_task, activate=False)
    the_task.require_worktree()  # before the banner: a closed task gets the error alone
    program = os.environ.get("SHELL") or "/bin/sh"
    print(
        f"bar: shell in task {the_task.name} (worktree {the_task.worktree}); "
        "exit to record the step",
        file=sys.stderr,
    )
    return run(
        task=the_task.id,
        cwd=None,
        env=[],
        pty=True,
        agent=None,
        sandbox=sandbox,
        no_wait=no_wait,
        as_json=False,
        argv=[program],
    )
