"""The command line of a task's later life: ``bar task path|reopen|delete|prune`` and
``bar shell``. Part of ``bar.parser`` (its helpers, its rules: every option and help
text of these commands is here), kept apart so that neither file grows past what one
reader takes in; ``bar.parser`` imports it only when it builds these commands.
"""

from __future__ import annotations

from typing import Any

from bar.parser import _cmd, _Formatter, _json_opt, _task_opt


def task_actions(tsub: Any) -> None:
    """``bar task path|reopen|delete|prune`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "path",
        help="print the task's worktree path (for cd)",
        formatter_class=_Formatter,
        description="Print the path of the task's worktree and nothing else. If the worktree\n"
        "is gone (a closed task, or one deleted by hand), the path is still printed, but\n"
        "bar exits 1 and says how to bring it back.",
        epilog="examples:\n"
        '  cd "$(bar task path)"            into the task you are in, else the active one\n'
        '  cd "$(bar task path fix-login)"  into another task\n'
        "  bar task path --json             {task_id, name, worktree, exists}",
    )
    p.add_argument("task_ref", nargs="?", metavar="ID|NAME", help="default: the active task")
    _json_opt(p)
    _cmd(p, "task:path")

    p = tsub.add_parser(
        "reopen",
        help="make a closed task active again (its worktree recreated)",
        formatter_class=_Formatter,
        description="Reopen a closed task: it is active again and becomes the active task.\n"
        "A worktree removed on closing is recreated on the task branch at the last\n"
        "recorded state, uncommitted changes included; a kept one is used as it is.\n"
        "Refuses when the task is open, or when its branch was deleted.",
        epilog="examples:\n"
        "  bar task reopen fix-login\n"
        "  bar task reopen gVXsTb7x         by id, when several tasks share the name",
    )
    p.add_argument("task_ref", metavar="ID|NAME")
    _json_opt(p)
    _cmd(p, "task:reopen")

    p = tsub.add_parser(
        "delete",
        help="delete a closed task: its worktree, branch, snapshots and record",
        formatter_class=_Formatter,
        description="Delete a closed task for good: its worktree, its branch, its snapshot\n"
        "refs (refs/bar/tasks/<id>, refs/bar/kept/<id>/) and its directory under\n"
        "$BAR_HOME (ledger, outputs, patches). An open task is never deleted: close it\n"
        "first. Refuses (exit 5) when work would be lost: changes no `bar apply` landed,\n"
        "commits on the branch no step recorded and no other branch has, or edits in a\n"
        "kept worktree; --force deletes it anyway. A deletion that was interrupted is\n"
        "finished by running the command again.",
        epilog="examples:\n"
        "  bar task delete fix-login --dry-run   what would go, and what would be lost\n"
        "  bar task delete fix-login\n"
        "  bar task delete gVXsTb7x --force      even though its work was never applied",
    )
    p.add_argument("task_ref", metavar="ID|NAME")
    p.add_argument("--force", action="store_true", help="delete even if work would be lost")
    p.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    _json_opt(p)
    _cmd(p, "task:delete")

    p = tsub.add_parser(
        "prune",
        help="delete every closed task whose work was applied (or that changed nothing)",
        formatter_class=_Formatter,
        description="Delete every closed task that is safe to delete, as `bar task delete`\n"
        "would: its work was applied, or it changed nothing. Lists what it deleted and\n"
        "the closed tasks it kept, with why. Open tasks are never touched. --force also\n"
        "deletes closed tasks whose work would be lost.",
        epilog="examples:\n"
        "  bar task prune --dry-run   what would be deleted and what kept\n"
        "  bar task prune\n"
        "  bar task prune --force     every closed task, applied or not",
    )
    p.add_argument("--force", action="store_true", help="also delete closed tasks never applied")
    p.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    _json_opt(p)
    _cmd(p, "task:prune")


def shell(sub: Any) -> None:
    """``bar shell`` (``sub``: the commands of ``bar``)."""
    p = sub.add_parser(
        "shell",
        help="an interactive shell in the task's worktree, recorded as one step",
        formatter_class=_Formatter,
        description="Start your shell ($SHELL, else /bin/sh) in the task's worktree, as\n"
        "`bar run --pty -- $SHELL` would: confined like any step, with the hooks around\n"
        "it and the policy checked on the shell itself. The whole session is recorded as\n"
        "ONE step when you exit: the patch of everything changed in it, the terminal\n"
        "recording (bar replay) and the shell's exit code, which bar exits with.\n\n"
        "The commands you type inside are NOT checked one by one by the policy, and\n"
        "are not steps of their own: run `bar run -- CMD` for that.",
        epilog="examples:\n"
        "  bar shell                        look around, fix a test, exit\n"
        "  bar shell --task fix-login\n"
        "  bar shell --no-sandbox           with your full rights, this once",
    )
    _task_opt(p)
    p.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="do not confine the shell (it can write anything you can; recorded in the step)",
    )
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _cmd(p, "shell:shell")
