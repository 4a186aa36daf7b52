"""The command line of tasks: ``bar init``, ``bar task ...`` and ``bar shell``. Part of
``bar.cli.parser`` (its helpers and rules: every option and help text of these commands is
here), kept apart so that no file grows past what one reader takes in."""

from __future__ import annotations

from typing import Any

from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt, board, task_ref_opts


def commands(sub: Any) -> None:
    """Add ``init``, ``task`` and ``shell`` to ``sub``, the commands of ``bar``."""
    p = sub.add_parser(
        "init",
        help="register this repository with bar",
        formatter_class=_Formatter,
        description="Register the current git repository (it needs at least one commit).\n"
        "Creates the project's config.yaml and state.json under $BAR_HOME and, if absent,\n"
        "a commented default policy at .bar/policy.yaml. Safe to run again.\n\n"
        "A project is found by the repository's path, so a repository moved (mv repo\n"
        "repo2) seems new to bar. Its tasks' snapshot refs (refs/bar/tasks/<id>) move\n"
        "with it, though, and bar init finds the project that holds those tasks under\n"
        "the old path: it then registers nothing and names that project. --adopt\n"
        "re-attaches it here: the project directory takes the new path's name, each\n"
        "task.json the new repository root, and `git worktree repair` relinks the task\n"
        "worktrees; an empty project registered here since the move is replaced. Run\n"
        "it again to finish an adoption that was stopped. A repository that lacks what\n"
        "the tasks' ledgers last recorded (an older copy, cp -a before the last steps)\n"
        "adopts nothing (exit 1); the one that has it adopts, even tasks such a copy\n"
        "took before. See docs/tasks.md.",
        epilog="examples:\n"
        "  bar init                       register this repository\n"
        "  bar init --adopt               after a move: take its tasks along\n"
        "  bar init --adopt shop-1e49     the same, when several projects hold its tasks\n"
        "  bar init --share               git push sends the task histories behind it too",
    )
    p.add_argument(
        "--adopt",
        nargs="?",
        const="",
        metavar="PROJECT",
        help="re-attach the tasks this repository left at its old path (the project's\n"
        "directory name is needed only when more than one holds them)",
    )
    p.add_argument(
        "--share",
        action="store_true",
        help="install a git pre-push hook that pushes the histories of the tasks behind\n"
        "the pushed commits (bar push); a refused history stops the push",
    )
    _json_opt(p)
    _cmd(p, "init:init")

    # --- task ---------------------------------------------------------------------
    task = sub.add_parser(
        "task", help="create, list, inspect, switch and close tasks", formatter_class=_Formatter
    )
    tsub = task.add_subparsers(dest="task_command", metavar="ACTION")
    task.set_defaults(_help=task)

    p = tsub.add_parser(
        "new",
        help="create a task with its own branch and worktree",
        formatter_class=_Formatter,
        description="Create a task: a branch <prefix><name>-<id> from the base, a worktree\n"
        "for it under $BAR_HOME, and an empty ledger. The new task becomes active.\n"
        "No two open tasks share a name (a closed task's name can be used again), so\n"
        "--task NAME always finds one task.\n\n"
        "--plan puts the task on the board without a worktree (pending), for you or an\n"
        "agent or worker to take later (bar task claim, bar task start; its first\n"
        "bar run starts it too); the active task stays as it is. See docs/board.md.",
        epilog="examples:\n"
        "  bar task new fix-login\n"
        "  bar task new fix-login --base release-2.1 -d 'Fix the login redirect' --tag bug\n"
        "  bar task new fix-login --meta ticket=SHOP-142 --meta team=payments\n"
        "  bar task new ui-login --plan -d 'Login page on the new API'\n"
        "  bar task new fix-login --on builds    # its steps run on the builds workers\n"
        "  bar task new ui-login --plan --on team -d '...'   # a bar worker --claim takes it",
    )
    p.add_argument("name", help="task name: letters, digits, '-', '_', '.'; at most 64")
    p.add_argument("--base", metavar="REF", help="start from this ref (default: git.default_base)")
    p.add_argument("-d", "--description", metavar="DESC", help="what the task is for")
    p.add_argument("--tag", action="append", default=[], metavar="T", help="a tag (repeatable)")
    _meta_opt(p)
    p.add_argument(
        "--plan", action="store_true", help="plan it: pending, no worktree until it is started"
    )
    from bar.cli.parser.workers import on_opts

    on_opts(p, detach=False)
    _json_opt(p)
    _cmd(p, "task:new")

    p = tsub.add_parser(
        "list",
        help="list tasks with their state, steps and changes",
        formatter_class=_Formatter,
        description="List the open tasks (--all: closed ones too), the active one marked '*',\n"
        "each with its state, its number of steps, its changes since the base and, when\n"
        "someone claimed it, its owner:\n"
        "  pending           planned (bar task new --plan), no worktree yet\n"
        "  active            open, nothing under way\n"
        "  running           a `bar run` is recording a step of it now\n"
        "  applied           its last step applied its last recorded state (bar apply)\n"
        "  missing worktree  open, but its worktree directory is gone: `bar doctor\n"
        "                    --repair` recreates it at its last recorded state\n"
        "  closed            closed with `bar task close`\n"
        "--json gives the same as fields: state (missing-worktree with a dash; on-workers:\n"
        "its steps run on bar workers, on_workers says where), running,\n"
        "applied and worktree_missing, beside task.json's own (board: status, owner,\n"
        "worktree).",
        epilog="examples:\n"
        "  bar task list\n"
        "  bar task list --all --json\n"
        "  bar task list --pending          the planned tasks nobody started",
    )
    p.add_argument("--all", "-a", action="store_true", help="include closed tasks")
    p.add_argument("--pending", action="store_true", help="only planned tasks not started yet")
    _json_opt(p)
    _cmd(p, "task:list_")

    p = tsub.add_parser(
        "show",
        help="show one task in detail",
        formatter_class=_Formatter,
        description="Show a task: status and state (see `bar task list --help`), base,\n"
        "branch, worktree, snapshots, steps and changes since the base, and what its agent\n"
        "steps add up to (turns, tool calls, tokens, cost when known). A task is named by\n"
        "its id, the first 4 or more characters of its id, or its name (an open task\n"
        "before closed ones of the same name).",
        epilog="examples:\n  bar task show\n  bar task show fix-login\n  bar task show gVXs",
    )
    task_ref_opts(p)
    _json_opt(p)
    _cmd(p, "task:show")

    p = tsub.add_parser(
        "switch",
        help="make a task the active one",
        formatter_class=_Formatter,
        description="Make a task the active one: the task bar acts on (run, log, apply ...)\n"
        "when you are not inside a task's worktree and give no --task. Nothing in any\n"
        "worktree changes; inside a task's worktree, that task still comes first, and\n"
        "switching from there says so (a note on stderr). A closed task is made active\n"
        "with `bar task reopen`.",
        epilog="examples:\n"
        "  bar task switch fix-login      by name\n"
        "  bar task switch gVXs           by the first characters of its id\n"
        '  cd "$(bar task path)"          then into its worktree',
    )
    task_ref_opts(p)
    _json_opt(p)
    _cmd(p, "task:switch")

    p = tsub.add_parser(
        "close",
        help="close a task (its worktree is removed; branch and history stay)",
        formatter_class=_Formatter,
        description="Close a task. Its worktree is removed unless --keep-worktree; its branch,\n"
        "ledger and snapshots are kept. Refuses when the worktree holds changes no step\n"
        "recorded, unless --force, which records them as a manual step first.\n"
        "Work no branch has yet is said (its files and steps; JSON: unapplied), with the\n"
        "bar apply command that lands it: a closed task is applied from its record.",
        epilog="examples:\n"
        "  bar task close                    the active task\n"
        "  bar task close fix-login --keep-worktree\n"
        "  bar task close --force            record hand edits as a step, then close\n"
        "  bar task close --task fix-login --keep-worktree\n"
        "  bar task reopen fix-login         changed your mind: active again",
    )
    task_ref_opts(p)
    p.add_argument("--keep-worktree", action="store_true", help="leave the worktree in place")
    p.add_argument("--force", action="store_true", help="record unrecorded changes and close")
    _json_opt(p)
    _cmd(p, "task:close")
    edit(tsub)
    rename(tsub)
    task_actions(tsub)
    board.task_actions(tsub)
    shell(sub)

    p = tsub.add_parser(
        "sync",
        help="bring the task up to date with its base branch (or another)",
        formatter_class=_Formatter,
        description="Merge the branch's new commits into the task: the task's last state is\n"
        "merged three-way onto the branch tip (merge base: the task's base), the worktree\n"
        "gets the result (only differing files are touched), and the tip becomes the task's\n"
        "base, so `bar apply` lands just the task's changes again. Unrecorded changes are\n"
        "recorded first; the sync is a step (undo it with `bar undo`). The task branch\n"
        "follows if it can (moved to the tip, or a clean merge commit of it). A conflict\n"
        "changes nothing unless --allow-conflicts, which records the merge with conflict\n"
        "markers in the files, to resolve in the worktree. Earlier states keep the base\n"
        "they were recorded against: diff, apply --at and rollback use it.",
        epilog="examples:\n"
        "  bar task sync                        onto the task's base branch\n"
        "  bar task sync --onto release-2.1     onto another branch (or commit)\n"
        "  bar task sync --dry-run              what would change, and any conflict\n"
        "  bar task sync --allow-conflicts      record conflict markers to fix by hand",
    )
    _task_opt(p)
    p.add_argument(
        "--onto",
        metavar="BRANCH",
        help="default: the task's base branch (unless another task's), "
        "else git.default_base: where bar apply lands",
    )
    p.add_argument(
        "--allow-conflicts",
        action="store_true",
        help="on conflict, record the merge with conflict markers in the files",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _json_opt(p)
    _cmd(p, "sync:sync")


def _meta_opt(p: Any) -> None:
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a key of the task's metadata (repeatable)",
    )


def edit(tsub: Any) -> None:
    """``bar task edit`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "edit",
        help="change a task's description, tags or metadata",
        formatter_class=_Formatter,
        description="Change what is said about a task: its description, its tags and the\n"
        "keys of its metadata (task.json's `metadata`, where -d and --tag of `bar task\n"
        "new` put theirs). Each key that changes is recorded in the project's events.jsonl\n"
        "(`task.edited`, from what to what; `bar events`); an edit that changes nothing\n"
        "writes nothing. Values are strings, stored with any secret they quote replaced\n"
        "by ***; a key that names a secret (api_key, token) keeps *** alone.\n\n"
        "A task's name, base and status belong to their own commands (bar task rename,\n"
        "close, reopen, sync). A closed task can be edited; a task running a step cannot (exit\n"
        "7): edit it when the step has ended.",
        epilog="examples:\n"
        "  bar task edit -d 'Fix the login redirect on Safari'\n"
        "  bar task edit fix-login --tag urgent --untag later\n"
        "  bar task edit --meta ticket=SHOP-142 --meta reviewer=ana\n"
        "  bar task edit fix-login --unset-meta reviewer\n"
        "  bar task edit -d ''                       remove the description",
    )
    task_ref_opts(p)
    p.add_argument(
        "-d", "--description", metavar="DESC", help="the new description ('' removes it)"
    )
    p.add_argument("--tag", action="append", default=[], metavar="T", help="add a tag (repeatable)")
    p.add_argument(
        "--untag", action="append", default=[], metavar="T", help="remove a tag (repeatable)"
    )
    _meta_opt(p)
    p.add_argument(
        "--unset-meta",
        action="append",
        default=[],
        metavar="KEY",
        help="remove a key of the metadata (repeatable)",
    )
    _json_opt(p)
    _cmd(p, "task:edit")


def rename(tsub: Any) -> None:
    """``bar task rename`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "rename",
        help="give a task another name",
        formatter_class=_Formatter,
        description="Give a task another name: the one --task NAME and bar task list use.\n"
        "Its id, branch and worktree stay as they are (the branch keeps the old name: it\n"
        "may be checked out or pushed; its id still finds the task). The new name follows\n"
        "the rules of `bar task new`, and is refused when an open task has it or when it\n"
        "starts another task's id. Recorded in events.jsonl as `task.renamed` (`bar events`).\n"
        "With one name, the task you are in (else the active one) is renamed.",
        epilog="examples:\n"
        "  bar task rename fix-login fix-auth-redirect\n"
        "  bar task rename fix-auth-redirect        the task you are in, else the active one\n"
        "  bar task rename gVXs fix-auth --json",
    )
    p.add_argument(
        "task_ref", nargs="?", metavar="ID|NAME", help="the task (default: the active task)"
    )
    p.add_argument("new_name", metavar="NEW", help="its new name")
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "task:rename")


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
    task_ref_opts(p)
    _json_opt(p)
    _cmd(p, "task:path")

    p = tsub.add_parser(
        "adopt",
        help="continue here a task another machine recorded (after bar fetch)",
        formatter_class=_Formatter,
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
    _json_opt(p)
    _cmd(p, "share:adopt")

    p = tsub.add_parser(
        "reopen",
        help="make a closed task active again (its worktree recreated)",
        formatter_class=_Formatter,
        description="Reopen a closed task: it is active again and becomes the active task.\n"
        "A worktree removed on closing is recreated on the task branch at the last\n"
        "recorded state, uncommitted changes included; a kept one is used as it is.\n"
        "Refuses when the task is open, when its branch was deleted, or when an open\n"
        "task has taken its name since (one open task per name: close that one first).",
        epilog="examples:\n"
        "  bar task reopen fix-login\n"
        "  bar task reopen gVXsTb7x         by id, when several tasks share the name",
    )
    task_ref_opts(p)
    _json_opt(p)
    _cmd(p, "task:reopen")

    p = tsub.add_parser(
        "delete",
        help="delete a closed task: its worktree, branch, snapshots and record",
        formatter_class=_Formatter,
        description="Delete a closed task for good: its worktree, its branch, every ref of\n"
        "it under refs/bar/ (refs/bar/tasks/<id>, refs/bar/kept/<id>/, refs/bar/bases/<id>/)\n"
        "and its directory under $BAR_HOME (ledger, outputs, patches). An open task is\n"
        "never deleted (exit 1): close it first. Refuses (exit 5) when work would be\n"
        "lost: changes no `bar apply` landed (or whose applied commit its branch no longer\n"
        "has: someone reset it); changes its steps recorded when it ends back at its base\n"
        "(a rollback to base, an undo), which only it can return to; commits of its branch\n"
        "no step recorded and no other branch or ref keeps (its base too, when that was\n"
        "another task's branch since deleted); edits or ignored files (.env, local data) in\n"
        "a kept worktree. --force deletes it anyway. A deletion that was interrupted is\n"
        "finished by running the command again.",
        epilog="examples:\n"
        "  bar task delete fix-login --dry-run   what would go, and what would be lost\n"
        "  bar task delete fix-login\n"
        "  bar task delete gVXsTb7x --force      even though its work was never applied",
    )
    task_ref_opts(p)
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
        "the closed tasks it kept, with why. Each task is judged against what the tasks\n"
        "deleted before it leave (of two tasks that alone hold a commit, one is kept);\n"
        "--dry-run judges as the prune will. Open tasks are never touched. --force also\n"
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
        "The lines you type inside are not steps of their own (run `bar run -- CMD` for\n"
        "that), but every program they start is judged by the policy as it starts, with\n"
        "its real arguments (policy.exec_check; not with --no-sandbox).",
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
