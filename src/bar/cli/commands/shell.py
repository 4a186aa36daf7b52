"""``bar shell [--task T] [--no-sandbox]``: ``bar run --pty -- $SHELL``, with a banner."""

from __future__ import annotations

import os
import sys

from bar import api
from bar.cli.commands.run import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar shell``: its options and help."""
    from bar.cli.parser import Formatter, task_opt

    p = sub.add_parser(
        "shell",
        formatter_class=Formatter,
        description="Start your shell ($SHELL, else /bin/sh) in the task's worktree, as\n"
        "`bar run --pty -- $SHELL` would: confined like any step, with the hooks around\n"
        "it and the policy checked on the shell itself. The whole session is recorded as\n"
        "ONE step when you exit: the patch of everything changed in it, the terminal\n"
        "recording (bar replay) and the shell's exit code, which bar exits with.\n\n"
        "The lines you type inside are not steps of their own (run `bar run -- CMD` for\n"
        "that), but every program they start is judged by the policy as it starts, with\n"
        "its real arguments (policy.exec_check; not with --no-sandbox).",
        epilog="examples:\n"
        "  bar shell                        look around, fix a test, exit\n"
        "  bar shell --task fix-login\n"
        "  bar shell --no-sandbox           with your full rights, this once",
    )
    task_opt(p)
    p.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="do not confine the shell (it can write anything you can; recorded in the step)",
    )
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    p.set_defaults(_run=shell)


# --- the command -----------------------------------------------------------------------


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
