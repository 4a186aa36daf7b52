"""The command line of the task board (docs/board.md): ``bar task start|claim``, ``bar worktree
list|keep|remove`` and ``bar events``. Part of ``bar.cli.parser`` (its helpers and rules)."""

from __future__ import annotations

from typing import Any

from bar.cli.parser import _cmd, _Formatter, _json_opt, task_ref_opts


def task_actions(tsub: Any) -> None:
    """``bar task start|claim|bind|unclaim`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "start",
        help="make a planned task's worktree and begin it",
        formatter_class=_Formatter,
        description="Start a planned task (bar task new NAME --plan): its worktree is made on\n"
        "its branch and it moves from pending to in_progress; it becomes the active task\n"
        "unless --no-switch. A task planned on a branch that has moved since starts from\n"
        "where the branch is now, as long as nothing was recorded in it. Its first\n"
        "`bar run` starts it too. Starting a task that is in progress changes nothing.",
        epilog="examples:\n"
        "  bar task new auth-refactor --plan -d 'Move auth to the new API'\n"
        "  bar task start auth-refactor\n"
        "  bar task start auth-refactor --no-switch --json",
    )
    task_ref_opts(p)
    p.add_argument(
        "--no-switch",
        dest="switch",
        action="store_false",
        help="leave the active task as it is",
    )
    _json_opt(p)
    _cmd(p, "board:start")

    p = tsub.add_parser(
        "claim",
        help="take a task for an owner (an agent, a person, a worker)",
        formatter_class=_Formatter,
        description="Claim a task for OWNER: the board records who took it. Of two claims of\n"
        "one task, one wins; the other fails (exit 1) naming the owner. Claiming again\n"
        "under the same name is no error. --start starts it too (see bar task start)\n"
        "without making it the active task. A task a step is running in cannot be\n"
        "claimed until the step ends (exit 7).",
        epilog="examples:\n"
        "  bar task list --pending --json          what nobody has started\n"
        "  bar task claim ui-login --owner agent-b\n"
        "  bar task claim ui-login --owner agent-b --start",
    )
    task_ref_opts(p)
    p.add_argument("--owner", required=True, metavar="NAME", help="who takes it")
    p.add_argument("--start", action="store_true", help="start it too (make its worktree)")
    p.add_argument(
        "--reassign",
        action="store_true",
        help="take it even from another owner (the event names who had it)",
    )
    _json_opt(p)
    _cmd(p, "board:claim")

    p = tsub.add_parser(
        "bind",
        help="make a worktree made with no task the task's worktree",
        formatter_class=_Formatter,
        description="Bind the task to WORKTREE, a worktree made by `bar worktree create` with\n"
        "no task: it becomes the task's worktree (moved under the task, on its branch,\n"
        "its files untouched) and keeps its name; a pending task is in_progress. What\n"
        "its files hold beyond the task's recorded state is recorded at once as a manual\n"
        "step. A task with recorded work takes a clean worktree only. To move a task\n"
        "that has a worktree, remove that one first (bar worktree remove: its record\n"
        "stays).",
        epilog="examples:\n"
        "  bar worktree create ui-login\n"
        "  bar task bind ui-task ui-login\n"
        "  bar task bind 2 ui-login --json      (a number: board.layout: seed)",
    )
    p.add_argument("task_ref", metavar="ID|NAME", help="the task's id, name (or number)")
    p.add_argument("worktree", metavar="WORKTREE", help="the worktree's name")
    _json_opt(p)
    _cmd(p, "board:bind")

    p = tsub.add_parser(
        "unclaim",
        help="put a claimed task back with no owner",
        formatter_class=_Formatter,
        description="Clear the task's owner: it is back on the board for anyone to claim\n"
        "(task.unclaimed in the event log, with who had it). --owner NAME: only if NAME\n"
        "holds it (exit 1 naming the owner otherwise). A task with no owner is no error.",
        epilog="examples:\n"
        "  bar task unclaim ui-login\n"
        "  bar task unclaim ui-login --owner agent-b --json",
    )
    task_ref_opts(p)
    p.add_argument("--owner", metavar="NAME", help="only if NAME holds it")
    _json_opt(p)
    _cmd(p, "board:unclaim")


def commands(sub: Any) -> None:
    """Add ``worktree`` and ``events`` to ``sub``, the commands of ``bar``."""
    wt = sub.add_parser(
        "worktree",
        help="list the task worktrees; keep or remove one",
        formatter_class=_Formatter,
        description="The worktree registry ($BAR_HOME/projects/<p>/workspaces/index.json):\n"
        "each task's worktree, its branch, and whether it is active, kept or removed.\n"
        "A task's worktree is named by the task's name unless made or bound under another\n"
        "(bar worktree create NAME --task T, bar task bind); commands take either.",
    )
    wsub = wt.add_subparsers(dest="worktree_command", metavar="ACTION")
    wt.set_defaults(_help=wt)

    p = wsub.add_parser(
        "create",
        help="make a worktree, for a pending task or for none yet",
        formatter_class=_Formatter,
        description="Make the worktree NAME. With --task, the pending task is started in it\n"
        "(as bar task start, its worktree called NAME). Without, it is made with no task\n"
        "at --base (default: git.default_base) on its own branch <prefix>wt/NAME, to look\n"
        "around in; bar run refuses there until a task is bound to it (bar task bind).",
        epilog="examples:\n"
        "  bar worktree create auth-refactor --task 1\n"
        "  bar worktree create ui-login --base main\n"
        "  bar task bind ui-task ui-login",
    )
    p.add_argument("name", metavar="NAME", help="1 to 40 letters, digits, '.', '_' or '-'")
    p.add_argument(
        "--task", dest="for_task", metavar="ID|NAME", help="a pending task to start in it"
    )
    p.add_argument("--base", metavar="REF", help="where a worktree of no task starts")
    _json_opt(p)
    _cmd(p, "board:worktree_create")

    p = wsub.add_parser(
        "list",
        help="list the worktrees with their state",
        formatter_class=_Formatter,
        description="List the task worktrees: active (in use), kept (to stay when the task\n"
        "closes, or left after it closed) and, with --all, removed ones.",
        epilog="examples:\n  bar worktree list\n  bar worktree list --all --json",
    )
    p.add_argument("--all", "-a", action="store_true", help="include removed worktrees")
    _json_opt(p)
    _cmd(p, "board:worktree_list")

    p = wsub.add_parser(
        "keep",
        help="keep a worktree when its task closes",
        formatter_class=_Formatter,
        description="Mark the task's worktree as kept: closing the task leaves it in place\n"
        "(as bar task close --keep-worktree does). The decision is recorded in the\n"
        "registry and the event log (worktree.keep).",
        epilog="examples:\n  bar worktree keep ui-login",
    )
    task_ref_opts(p)
    _json_opt(p)
    _cmd(p, "board:worktree_keep")

    p = wsub.add_parser(
        "remove",
        help="remove a worktree (--complete: and close its task)",
        formatter_class=_Formatter,
        description="Remove the task's worktree. With --complete the task is closed too\n"
        "(completed; as bar task close). Without it an open task goes back to pending:\n"
        "its record stays whole and bar task start (or its next bar run) makes the\n"
        "worktree again at the last recorded state. Refuses while the worktree holds\n"
        "changes no step recorded, unless --force, which records them as a step first.",
        epilog="examples:\n"
        "  bar worktree remove auth-refactor --complete\n"
        "  bar worktree remove ui-login              back to pending",
    )
    task_ref_opts(p)
    p.add_argument("--complete", action="store_true", help="close the task too")
    p.add_argument("--force", action="store_true", help="record unrecorded changes first")
    _json_opt(p)
    _cmd(p, "board:worktree_remove")

    p = sub.add_parser(
        "events",
        help="the project's task and worktree events",
        formatter_class=_Formatter,
        description="Print the project's lifecycle log (events.jsonl): tasks created,\n"
        "claimed, started, completed; worktrees created, kept, removed, each operation's\n"
        ".before, .after or .failed. --json prints the events as a list (with --follow,\n"
        "one JSON object per line as they come). The shapes are in docs/board.md.",
        epilog="examples:\n"
        "  bar events\n"
        "  bar events -n 100 --json\n"
        "  bar events --follow              new events as they happen (Ctrl-C ends)",
    )
    p.add_argument("-n", type=int, default=20, metavar="N", help="the last N events (default 20)")
    p.add_argument("--all", action="store_true", help="every event")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    _json_opt(p)
    _cmd(p, "board:events")
