"""The command line: every command, option and help text, in one place.

Kept apart from ``bar.cli`` so that the hot paths (``bar hook``, ``bar --version``) never
import argparse or build the parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, cast

from bar import __version__

EXIT_CODES = """\
exit codes:
  0    success (bar run: the command's own exit code)
  1    error
  2    bad command line
  3    task, step or ref not found
  4    not a git repository, or not registered (run `bar init`)
  5    unrecorded or uncommitted changes are in the way
  6    apply or sync would conflict
  7    another bar process holds the task (see --no-wait)
  8    a file bar reads is broken or of an unknown version (see `bar doctor`)
  9    git failed unexpectedly
  10   a pre_run hook stopped the step
  11   sandbox.required is set and the kernel cannot confine the step
  70   internal error (traceback in $BAR_HOME/logs)
  126  blocked by policy (also: the command could not be executed)
  127  bar run: command not found
  128+N bar run: the command was killed by signal N
  130  interrupted (Ctrl-C)
"""

OUTPUT = """\
output:
  On a terminal, log, show, diff and blame go through a pager: BAR_PAGER, else
  PAGER, else less (LESS=FRX unless LESS is set); `cat` or an empty value, or
  --no-pager, prints straight. Nothing is paged when stdout is not a terminal.
  Colour, the first rule that applies: --color always|never; NO_COLOR set and
  not empty (never); FORCE_COLOR set and not 0 (always); output.color: false in
  config.yaml (never); else colour only on a terminal (the pager's included).
  Global options go before the command: bar --no-pager log, bar --color never show 3.
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        # argparse would import shutil for the width each time an option is added
        super().__init__(prog, max_help_position=32, width=_width())


def _width() -> int:
    """What argparse would wrap help at: the terminal's width less two."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(columns - 2, 11)


def _cmd(parser: argparse.ArgumentParser, target: str) -> None:
    parser.set_defaults(_target=target)


def _task_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task", "-t", metavar="ID|NAME",
        help="the task to act on: its id, the id's first 4+ characters, or its name "
        "(default: the task whose worktree you are in, else the active task)",
    )  # fmt: skip


def _json_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", dest="as_json", action="store_true", help="print machine-readable JSON"
    )


class _Skipped:
    """Stands for the parser of a command that is not the one being run: building every
    command's options costs more than running ``bar run -- true`` does in Python."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


class _Commands:
    """``add_subparsers()``, building only the parser of ``only`` (None: all of them)."""

    def __init__(self, real: Any, only: str | None) -> None:
        self._real, self._only = real, only
        self.built: list[str] = []

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if self._only is not None and name != self._only:
            return cast(argparse.ArgumentParser, _Skipped())
        self.built.append(name)
        parser: argparse.ArgumentParser = self._real.add_parser(name, **kwargs)
        return parser


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, just that command's part of it (when
    ``only`` names no command, the whole, so that the error lists them)."""
    parser = argparse.ArgumentParser(
        prog="bar",
        formatter_class=_Formatter,
        description=(
            "Hand work to AI coding agents without fear.\n\n"
            "Each task gets its own git worktree and branch; every command run in it is a\n"
            "step recorded with the exact patch it made and what it printed. Review the\n"
            "steps, roll back to any of them, and apply the result to a real branch."
        ),
        epilog=(
            "a first session:\n"
            "  bar init                          register this repository\n"
            "  bar task new fix-login            new task, worktree and branch\n"
            "  bar run -- claude                 run an agent as a recorded step\n"
            "  bar log -p                        review the steps and their patches\n"
            "  bar rollback                      undo the last step (itself undoable)\n"
            "  bar apply                         land the work on the base branch\n\n"
            + OUTPUT
            + "\n"
            + EXIT_CODES
        ),
    )
    parser.add_argument("--version", action="version", version=f"bar {__version__}")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        metavar="WHEN", help="colour: auto (default: on a terminal), always "
                        "or never; see 'output' below")  # fmt: skip
    parser.add_argument("-P", "--no-pager", action="store_true",
                        help="print straight to the terminal, not through a pager")  # fmt: skip
    sub = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND"), only)

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
        "it again to finish an adoption that was stopped. See docs/tasks.md.",
        epilog="examples:\n"
        "  bar init                       register this repository\n"
        "  bar init --adopt               after a move: take its tasks along\n"
        "  bar init --adopt shop-1e49     the same, when several projects hold its tasks",
    )
    p.add_argument(
        "--adopt", nargs="?", const="", metavar="PROJECT",
        help="re-attach the tasks this repository left at its old path (the project's\n"
        "directory name is needed only when more than one holds them)",
    )  # fmt: skip
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
        "--task NAME always finds one task.",
        epilog="examples:\n"
        "  bar task new fix-login\n"
        "  bar task new fix-login --base release-2.1 -d 'Fix the login redirect' --tag bug",
    )
    p.add_argument("name", help="task name: letters, digits, '-', '_', '.'; at most 64")
    p.add_argument("--base", metavar="REF", help="start from this ref (default: git.default_base)")
    p.add_argument("-d", "--description", metavar="DESC", help="what the task is for")
    p.add_argument("--tag", action="append", default=[], metavar="T", help="a tag (repeatable)")
    _json_opt(p)
    _cmd(p, "task:new")

    p = tsub.add_parser(
        "list",
        help="list tasks with their state, steps and changes",
        formatter_class=_Formatter,
        description="List the open tasks (--all: closed ones too), the active one marked '*',\n"
        "each with its state, its number of steps and its changes since the base:\n"
        "  active            open, nothing under way\n"
        "  running           a `bar run` is recording a step of it now\n"
        "  applied           its last step applied its last recorded state (bar apply)\n"
        "  missing worktree  open, but its worktree directory is gone: `bar doctor\n"
        "                    --repair` recreates it at its last recorded state\n"
        "  closed            closed with `bar task close`\n"
        "--json gives the same as fields: state (missing-worktree with a dash), running,\n"
        "applied and worktree_missing, beside task.json's own.",
        epilog="examples:\n  bar task list\n  bar task list --all --json",
    )
    p.add_argument("--all", "-a", action="store_true", help="include closed tasks")
    _json_opt(p)
    _cmd(p, "task:list_")

    p = tsub.add_parser(
        "show",
        help="show one task in detail",
        formatter_class=_Formatter,
        description="Show a task: status and state (see `bar task list --help`), base,\n"
        "branch, worktree, snapshots, steps and changes since the base. A task is named by\n"
        "its id, the first 4 or more characters of its id, or its name (an open task\n"
        "before closed ones of the same name).",
        epilog="examples:\n  bar task show\n  bar task show fix-login\n  bar task show gVXs",
    )
    p.add_argument("task_ref", nargs="?", metavar="ID|NAME", help="default: the active task")
    _json_opt(p)
    _cmd(p, "task:show")

    p = tsub.add_parser("switch", help="make a task the active one")
    p.add_argument("task_ref", metavar="ID|NAME")
    _json_opt(p)
    _cmd(p, "task:switch")

    p = tsub.add_parser(
        "close",
        help="close a task (its worktree is removed; branch and history stay)",
        formatter_class=_Formatter,
        description="Close a task. Its worktree is removed unless --keep-worktree; its branch,\n"
        "ledger and snapshots are kept. Refuses when the worktree holds changes no step\n"
        "recorded, unless --force, which records them as a manual step first.",
    )
    p.add_argument("task_ref", nargs="?", metavar="ID|NAME", help="default: the active task")
    p.add_argument("--keep-worktree", action="store_true", help="leave the worktree in place")
    p.add_argument("--force", action="store_true", help="record unrecorded changes and close")
    _json_opt(p)
    _cmd(p, "task:close")
    if only in (None, "task", "shell"):  # path, reopen, delete, prune; and bar shell
        from bar import parser_lifecycle

        parser_lifecycle.task_actions(tsub)
        parser_lifecycle.shell(sub)

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
    p.add_argument("--onto", metavar="BRANCH",
                   help="default: the task's base branch, else git.default_base")  # fmt: skip
    p.add_argument("--allow-conflicts", action="store_true",
                   help="on conflict, record the merge with conflict markers in the files")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _json_opt(p)
    _cmd(p, "sync:sync")

    # --- run ----------------------------------------------------------------------
    p = sub.add_parser(
        "run",
        help="run a command in the task's worktree as a recorded step",
        formatter_class=_Formatter,
        description="Run CMD in the task's worktree and record it as a step: the patch it\n"
        "made, what it printed (stdout and stderr apart), how long it took and how it\n"
        "ended. The policy is checked first and hooks run around it. bar exits with\n"
        "CMD's exit code (127: not found, 126: blocked or not executable, 128+N: signal N).\n\n"
        "CMD and everything it starts are confined by the kernel (Linux Landlock): they\n"
        "can write the worktree, the task branch, TMPDIR, /tmp and sandbox.allow_write,\n"
        "and nothing else; ~/.ssh, ~/.aws and ~/.gnupg cannot be read. See docs/sandbox.md.\n\n"
        "A policy block and a failing pre_run hook are recorded as steps too (nothing ran:\n"
        "'blocked' or 'stopped' in bar log). With --json, stdout carries only the step's\n"
        "record, printed when it ends; the command's own output is shown live on stderr.",
        epilog="examples:\n"
        "  bar run -- claude\n"
        "  bar run -- make test\n"
        "  bar run --cwd src -e DEBUG=1 -- python -m app\n"
        "  bar run --agent claude -- claude     # also check the agent's own shell commands\n"
        "  bar run --no-sandbox -- ./deploy.sh  # with your full rights, this once\n"
        "  bar run --json -- make test > step.json   # make's output still shows",
    )
    _task_opt(p)
    p.add_argument("--cwd", metavar="DIR", help="directory inside the worktree to run in")
    p.add_argument(
        "-e", dest="env", action="append", default=[], metavar="K=V", help="set a variable"
    )
    pty = p.add_mutually_exclusive_group()
    pty.add_argument("--pty", dest="pty", action="store_true", default=None,
                     help="run in a pseudo-terminal (default when on a terminal)")  # fmt: skip
    pty.add_argument("--no-pty", dest="pty", action="store_false",
                     help="run with pipes; stdout and stderr recorded apart")  # fmt: skip
    p.add_argument(
        "--agent",
        choices=("claude", "codex", "gemini"),
        help="install bar's policy hook for this agent in the worktree while it runs",
    )
    p.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="do not confine this run (it can write anything you can; recorded in the step)",
    )
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    p.add_argument("--json", dest="as_json", action="store_true",
                   help="print the step's record as JSON on stdout when it ends "
                   "(the command's output goes to stderr)")  # fmt: skip
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD...")
    _cmd(p, "run:run")

    # --- reading ------------------------------------------------------------------
    p = sub.add_parser(
        "log",
        help="list the task's steps, newest last",
        formatter_class=_Formatter,
        description="List the task's steps, newest last. A step run with --agent holds a\n"
        "checkpoint after each tool call that could change files (STEP.N); they are\n"
        "counted under their step, and listed one per line with --tools.\n\n"
        "Columns: step, kind, outcome (exit N, blocked by policy, stopped by a pre_run\n"
        "hook, interrupted), changes, duration, command. Printed straight to a terminal,\n"
        "the command is cut at its width; through the pager or into a file, it is whole.",
        epilog="examples:\n"
        "  bar log                    every step\n"
        "  bar log -n 5 -p            the last five, each with its patch\n"
        "  bar log --tools            each tool call of an agent's steps\n"
        "  bar log -p --json          records with patch_text; task_dir is where the\n"
        "                             artifacts' relative paths point",
    )
    _task_opt(p)
    p.add_argument("-n", type=int, metavar="N", help="only the last N steps (0: none)")
    p.add_argument("-p", "--patch", action="store_true",
                   help="show each step's patch (--json: as patch_text)")  # fmt: skip
    p.add_argument("--tools", action="store_true", help="list each step's checkpoints")
    _json_opt(p)
    _cmd(p, "log:log")

    p = sub.add_parser(
        "show",
        help="show one step or checkpoint in full with its patch and output",
        formatter_class=_Formatter,
        epilog="examples:\n"
        "  bar show 3        step 0003: command, result, policy, patch, output\n"
        "  bar show 3.2      its second checkpoint: the tool call and what it changed",
    )
    _task_opt(p)
    p.add_argument("step", metavar="STEP|STEP.N", help="a step (3, 0003) or a checkpoint (3.2)")
    _json_opt(p)
    _cmd(p, "show:show")

    p = sub.add_parser(
        "diff",
        help="diff any two recorded states (default: base to now)",
        formatter_class=_Formatter,
        description="Diff two recorded states of the task. STEP means the state after that\n"
        "step, STEP.N after its Nth checkpoint, 'base' the task's base commit.\n"
        "Default: from base to the last step.\n\n"
        "--unrecorded shows what the worktree holds that no step recorded yet (hand edits,\n"
        "what `bar status` reports), from the last recorded state or --from STATE to the\n"
        "files as they are now. It records nothing; the next step records them.",
        epilog="examples:\n"
        "  bar diff --from 2 --to 3        what step 0003 changed\n"
        "  bar diff --from 3.1 --to 3.2    what the second tool call of step 0003 changed\n"
        "  bar diff --unrecorded           changes made since the last step, not recorded\n"
        "  bar diff --unrecorded --stat    ... only which files\n"
        "  bar diff --from base --unrecorded   everything since base, recorded or not",
    )
    _task_opt(p)
    p.add_argument("--from", dest="from_", metavar="STATE",
                   help="base, STEP or STEP.N (default: base; with --unrecorded: the last "
                   "recorded state)")  # fmt: skip
    p.add_argument(
        "--to", metavar="STATE", help="STEP or STEP.N (default: the last recorded state)"
    )
    p.add_argument("--unrecorded", action="store_true",
                   help="to the worktree as it is now: changes no step recorded yet")  # fmt: skip
    p.add_argument("--stat", action="store_true", help="only a summary of changed files")
    _json_opt(p)
    _cmd(p, "diff:diff")

    p = sub.add_parser(
        "status",
        help="project, active task, worktree and unrecorded changes",
        formatter_class=_Formatter,
        description="Where the task stands: its steps, a running or interrupted step, and\n"
        "whether the worktree holds changes no step recorded (see them with\n"
        "`bar diff --unrecorded`; the next step records them).",
    )
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "status:status")

    p = sub.add_parser(
        "blame",
        help="each line of a file with the step or tool call that last changed it",
        formatter_class=_Formatter,
        description="Show each line of FILE with the step or checkpoint that last changed it:\n"
        "the tool and command (or the files an edit tool named) and the agent session.\n"
        "Lines the task never changed are marked 'base'.",
        epilog="examples:\n"
        "  bar blame src/app.py             as the task's last recorded state has it\n"
        "  bar blame src/app.py --at 3.2    as it was after step 3's second tool call",
    )
    _task_opt(p)
    p.add_argument("file", metavar="FILE", help="a path in the task's worktree")
    p.add_argument("--at", metavar="STEP|STEP.N", help="default: the last recorded state")
    _json_opt(p)
    _cmd(p, "blame:blame")

    # --- changing the record -------------------------------------------------------
    p = sub.add_parser(
        "rollback",
        help="restore the worktree to an earlier step (undoable)",
        formatter_class=_Formatter,
        description="Restore the task's worktree to a recorded state, touching only the files\n"
        "that differ. Unrecorded changes are recorded first, and the rollback is itself a\n"
        "step, so nothing is lost: undo it by rolling back to the step before it.",
        epilog="examples:\n"
        "  bar rollback                 back to the state before the last step\n"
        "  bar rollback --to 3          back to the state after step 3\n"
        "  bar rollback --to 3.2        back to the state after step 3's second tool call\n"
        "  bar rollback --to base       back to where the task started\n"
        "  bar rollback --to 3 --hard   ... and reset the task branch to its HEAD then",
    )
    _task_opt(p)
    p.add_argument("--to", metavar="base|STEP|STEP.N",
                   help="default: the state before the last step")  # fmt: skip
    p.add_argument(
        "--hard", action="store_true", help="also reset the task branch to the HEAD at the target"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _json_opt(p)
    _cmd(p, "rollback:rollback")

    for verb, text in (("undo", "undo the last step not undone yet"),
                       ("redo", "redo the step undone last")):  # fmt: skip
        p = sub.add_parser(
            verb,
            help=text + " (itself a step)",
            formatter_class=_Formatter,
            description="An editor's undo over the task's steps. `bar undo` returns the worktree\n"
            "to the state before the latest step not undone yet (a run, hand edits, a\n"
            "rollback, a sync); again, and it walks further back. `bar redo` brings back the\n"
            "step undone last; any new step that changes the worktree ends what can be\n"
            "redone. Each is a rollback step marked as an undo or redo, so nothing is lost.\n"
            "Unrecorded changes are recorded first, and are then what undo undoes. Steps\n"
            "that changed nothing (a test run, an apply) are passed over.",
            epilog="examples:\n"
            "  bar undo               back to before the last step\n"
            "  bar undo; bar undo     two steps back\n"
            "  bar redo               forward again\n"
            f"  bar {verb} --dry-run     what would change",
        )
        _task_opt(p)
        p.add_argument("--dry-run", action="store_true",
                       help="show what would change; change nothing")  # fmt: skip
        p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
        _json_opt(p)
        _cmd(p, f"undo:{verb}")

    p = sub.add_parser(
        "apply",
        help="land the task's work on a branch, as one commit or a merge",
        formatter_class=_Formatter,
        description="Land the task's changes (base -> last recorded state) on a branch.\n"
        "commit: one new commit on the target, merged three-way onto its tip, with\n"
        "  Bar-Task and Bar-Step trailers. merge: commit what the agent left uncommitted\n"
        "  on the task branch, then a --no-ff merge of that branch (agent commits kept).\n"
        "A conflict changes nothing. A checked-out target is updated only if the files\n"
        "the apply changes are clean there. --at lands an earlier recorded state instead\n"
        "(commit mode), e.g. a checkpoint before the agent went astray. A closed task is\n"
        "applied from its record: it needs no worktree (merge mode needs its branch).",
    )
    _task_opt(p)
    p.add_argument("--mode", choices=("commit", "merge"), default="commit")
    p.add_argument("--at", metavar="STEP|STEP.N",
                   help="apply this recorded state (default: the last one)")  # fmt: skip
    p.add_argument("--target", metavar="BRANCH", help="default: git.default_base from config")
    p.add_argument("-m", "--message", metavar="MSG", help="commit message (default: from the task)")
    p.add_argument("--dry-run", action="store_true", help="show the diff and whether it conflicts")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _json_opt(p)
    _cmd(p, "apply:apply")

    # --- policy -----------------------------------------------------------------------
    pol = sub.add_parser(
        "policy",
        help="check commands against the policy; test the policy file",
        formatter_class=_Formatter,
        description="The policy (.bar/policy.yaml in the repository) blocks, warns about or\n"
        "logs commands. It is read from your checkout, never from a task worktree.",
    )
    psub = pol.add_subparsers(dest="policy_command", metavar="ACTION")
    pol.set_defaults(_help=pol)
    p = psub.add_parser(
        "check",
        help="evaluate a command and print the decision",
        formatter_class=_Formatter,
        description="Evaluate a command with the policy and print the decision and the rules\n"
        "that matched. The exit status is the decision: 126 when the command would be\n"
        "blocked, 0 when it would run (allow, log or warn), so scripts can test it.",
        epilog="examples:\n"
        "  bar policy check -c 'cd build && rm -rf /'\n"
        "  bar policy check -- git push --force origin main\n"
        "  bar policy check --json -c 'curl -s https://x.sh | sh'",
    )
    p.add_argument("-c", dest="command_line", metavar="LINE", help="a shell command line")
    p.add_argument("--file", metavar="PATH", help="use this policy file instead")
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="accepted for old scripts; the exit status is always the decision now",
    )
    _json_opt(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- ARGV...")
    _cmd(p, "policy:check")
    p = psub.add_parser("test", help="validate the policy file and run its rules' examples")
    p.add_argument("--file", metavar="PATH", help="test this policy file instead")
    _json_opt(p)
    _cmd(p, "policy:test")

    p = sub.add_parser(
        "doctor",
        help="check every project file, ledger line, ref and worktree; --repair fixes them",
        formatter_class=_Formatter,
        description="Check the project's files, the policy file, every task's ledger, journals,\n"
        "artifacts, snapshot ref, side index, worktree and permissions. --repair fixes what\n"
        "can be fixed without losing anything: unreadable ledger lines are moved to\n"
        "ledger.jsonl.corrupt, interrupted steps are recorded, a journal too garbled to\n"
        "finish is moved aside (<name>.corrupt), a stale git lock on the snapshot ref is\n"
        "removed, a garbled side index is rebuilt, a missing worktree is recreated at its\n"
        "last recorded state. The policy file is yours: a broken one is reported, never\n"
        "rewritten. On a terminal, it says on stderr which task it is checking.\n\n"
        "exit status:\n"
        "  0    nothing remains (warnings alone do not count)\n"
        "  8    a problem remains: check-only, an error was found; with --repair, an error\n"
        '       it could not repair, or a repair that failed (--json: "ok": false and\n'
        '       the problems under "remaining")',
    )
    p.add_argument("--repair", action="store_true", help="fix what can be fixed without loss")
    _json_opt(p)
    _cmd(p, "doctor:doctor")

    # --- agents -----------------------------------------------------------------------
    p = sub.add_parser(
        "replay",
        help="play back an interactive step's terminal session",
        description="Play back the terminal recording (asciinema v2) of a step run in a pty.",
    )
    _task_opt(p)
    p.add_argument("step", metavar="STEP")
    p.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    p.add_argument(
        "--max-idle", type=float, default=2.0, metavar="S", help="cap pauses at S seconds"
    )
    p.add_argument("--instant", action="store_true", help="print everything without pauses")
    _cmd(p, "replay:replay")

    sub.add_parser(
        "hook",
        help="policy check for an agent's shell commands (called by the agent)",
        description="Called by Claude Code, Codex or Gemini CLI before each shell command\n"
        "with the event JSON on stdin; answers in the agent's format. See docs/agents.md.\n"
        "usage: bar hook claude|codex|gemini",
        formatter_class=_Formatter,
    )

    agent = sub.add_parser("agent", help="wire an agent's hooks to bar")
    asub = agent.add_subparsers(dest="agent_command", metavar="ACTION")
    agent.set_defaults(_help=agent)
    p = asub.add_parser(
        "setup",
        help="print (or --write) the agent settings that route its shell commands via bar",
        formatter_class=_Formatter,
        description="Print the project settings that make AGENT call `bar hook AGENT` before\n"
        "each shell command. `bar run --agent AGENT` does this by itself for one run.",
    )
    p.add_argument("agent", choices=("claude", "codex", "gemini"))
    p.add_argument("--write", action="store_true", help="merge it into the file in this repo")
    _cmd(p, "agent:setup")

    p = sub.add_parser(
        "completion", help="print the shell completion script for bash, zsh or fish",
        formatter_class=_Formatter,
        description="Print a script that completes bar's commands, options, task names, step\n"
        "ids (3, or 3.2 after '3.'), refs and files. Run it again after upgrading bar.",
        epilog="install:\n"
        '  bash  eval "$(bar completion bash)"           (add this line to ~/.bashrc)\n'
        '  zsh   bar completion zsh > "${fpath[1]}/_bar"  (or: source <(bar completion zsh))\n'
        "  fish  bar completion fish > ~/.config/fish/completions/bar.fish",
    )  # fmt: skip
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete in")
    _cmd(p, "completion:completion")

    if only is not None and not sub.built:
        return build_parser()
    return parser
