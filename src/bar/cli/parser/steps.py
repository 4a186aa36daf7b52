"""The command line of steps: ``bar run``, the commands that read the record (``log``,
``show``, ``diff``, ``status``, ``blame``) and those that change it (``rollback``,
``undo``/``redo``, ``apply``). Part of ``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

import argparse
from typing import Any

from bar.agents import AGENTS
from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt, implied_action


def commands(sub: Any) -> None:
    """Add ``run``, the reading and the changing commands to ``sub``, the commands of ``bar``."""
    # --- run ----------------------------------------------------------------------
    p = sub.add_parser(
        "run",
        help="run a command in the task's worktree as a recorded step",
        formatter_class=_Formatter,
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
    _task_opt(p)
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
    from bar.cli.parser.workers import on_opts

    on_opts(p, detach=True)
    p.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="print the step's record as JSON on stdout when it ends "
        "(the command's output goes to stderr)",
    )
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
        "hook, stopped: budget, interrupted by Ctrl-C or as bar died, terminated, killed),\n"
        "changes, duration, command. Printed straight to a terminal, the command is cut\n"
        "at its width; through the pager or into a file, it is whole. Under an agent\n"
        "step: its model, turns and tokens (and cost, when agents.prices prices its\n"
        "model); `bar show STEP --session` has the conversation.\n\n"
        "--grep, --kind, --agent and --since list only the steps that match every one\n"
        "given; -n then takes the last N of those. --grep searches the command (what the\n"
        "log says of any other step: 'rollback to step 0003') and the step's output.\n\n"
        "A step that is running comes last, marked running (with how long it has run and\n"
        "how to follow its output: bar show --follow); one whose bar run died before it\n"
        "was recorded is marked interrupted. The filters hold it too (--grep: its command\n"
        "and its output so far). --follow keeps the list going as the task goes: a step's\n"
        "line when it starts, a line for each tool call its agent makes as it is\n"
        "checkpointed, the step's line again when it is recorded (with filters: only the\n"
        "steps they let through; a running step whose command --grep does not match is\n"
        "shown once recorded, if its output does); Ctrl-C stops.",
        epilog="examples:\n"
        "  bar log                    every step\n"
        "  bar log -f                 ... and each step and tool call as it comes\n"
        "  bar log -n 5 -p            the last five, each with its patch\n"
        "  bar log --tools            each tool call of an agent's steps\n"
        "  bar log --grep 'FAILED|Error' -i    steps whose command or output says so\n"
        "  bar log --kind run --agent claude --since 2h   Claude's steps of the last 2 hours\n"
        "  bar log --kind rollback --since 2026-11-27     rollbacks, undos, redos since then\n"
        "  bar log -p --json          records with patch_text; task_dir is where the\n"
        "                             artifacts' relative paths point",
    )
    _task_opt(p)
    p.add_argument("-n", type=int, metavar="N", help="only the last N steps (0: none)")
    p.add_argument(
        "-p", "--patch", action="store_true", help="show each step's patch (--json: as patch_text)"
    )
    p.add_argument("--tools", action="store_true", help="list each step's checkpoints")
    from bar.model.records import KINDS

    p.add_argument(
        "--grep",
        metavar="PATTERN",
        help="only steps whose command or output matches PATTERN (a Python regular expression)",
    )
    p.add_argument("-i", "--ignore-case", action="store_true", help="--grep without regard to case")
    p.add_argument(
        "--kind",
        action="append",
        default=[],
        choices=KINDS,
        help="only steps of this kind (repeatable: any of them); undo and redo are rollbacks",
    )
    p.add_argument(
        "--agent", choices=AGENTS, help="only steps that ran this agent (bar run --agent)"
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only steps started since WHEN: a length of time back from now (90s, 30min,\n"
        "2h, 1d, 2w) or a moment (2026-11-27, '2026-11-27 14:00'; local time unless it\n"
        "ends in Z or +HH:MM)",
    )
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing: each step as it starts and is recorded, each tool call as it "
        "is checkpointed (--json: one JSON object a line)",
    )
    _json_opt(p)
    _cmd(p, "log:log")

    p = sub.add_parser(
        "show",
        help="show one step or checkpoint in full with its patch and output",
        formatter_class=_Formatter,
        description="Show one step in full: its command, how it ended, the policy rules and\n"
        "hooks that ran, its patch and what it printed (for a step a pre_run hook\n"
        "stopped, what the hook printed). STEP.N shows a checkpoint: the tool call and\n"
        "what it changed.\n\n"
        "--session shows what the agent of an agent step said and did instead: the\n"
        "prompts and replies, each tool call with what it acted on, the checkpoint it\n"
        "made (→ STEP.N) and how it ended (ok, exit N, interrupted, failed) with the\n"
        "first lines of what it printed and its last, its subagents and interruptions,\n"
        "and the model, turns, tokens and cost. With STEP.N, the conversation up to\n"
        "that checkpoint's tool call. With no STEP, the latest step (as git show shows HEAD):\n"
        "the one running, if a step runs (the last in bar log), else the last recorded\n"
        "(with --session: the last recorded one's conversation).\n\n"
        "A step that is running is shown too: its command, since when it runs, its output\n"
        "and checkpoints so far. --follow then streams the rest as it is written (stdout\n"
        "on stdout, stderr on stderr, each checkpoint on a line of its own) and ends when\n"
        "the step is recorded, with how it ended; or says so if the step's bar run died\n"
        "(exit 1). Following only reads: the step's input stays with the terminal that\n"
        "ran it, and Ctrl-C stops following, never the step. Without STEP it follows the\n"
        "step running now, or waits for the next one. A step already recorded is shown as\n"
        "it is.",
        epilog="examples:\n"
        "  bar show              the latest step (the running one, if a step runs)\n"
        "  bar show --session    the agent's conversation in the last recorded step\n"
        "  bar show 3            step 0003: command, result, policy, patch, output\n"
        "  bar show --follow     the running step's output as it comes, to its end\n"
        "  bar show 7 -f --json  the same as JSON lines: output, checkpoint, then step\n"
        "  bar show 3.2          its second checkpoint: the tool call and what it changed\n"
        "  bar show 3 --session  the agent's conversation in step 0003\n"
        "  bar show 3.2 --session --json   the session's events up to that tool call",
    )
    _task_opt(p)
    p.add_argument(
        "step",
        nargs="?",
        metavar="STEP|STEP.N",
        help="a step (3, 0003) or a checkpoint (3.2); default: the latest step (the one "
        "running, if any); with --follow, the step running, else the next to start",
    )
    p.add_argument(
        "--session",
        action="store_true",
        help="the agent's conversation in the step (to the checkpoint's tool call, with STEP.N)",
    )
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="follow a running step: its output as it is written and its checkpoints as "
        "they are taken, until it is recorded (--json: one JSON object a line)",
    )
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
    p.add_argument(
        "--from",
        dest="from_",
        metavar="STATE",
        help="base, STEP or STEP.N (default: base; with --unrecorded: the last recorded state)",
    )
    p.add_argument(
        "--to", metavar="STATE", help="STEP or STEP.N (default: the last recorded state)"
    )
    p.add_argument(
        "--unrecorded",
        action="store_true",
        help="to the worktree as it is now: changes no step recorded yet",
    )
    p.add_argument("--stat", action="store_true", help="only a summary of changed files")
    _json_opt(p)
    _cmd(p, "diff:diff")

    p = sub.add_parser(
        "status",
        help="project, active task, worktree and unrecorded changes",
        formatter_class=_Formatter,
        description="Where the task stands: its steps, a running or interrupted step, and\n"
        "whether the worktree holds changes no step recorded (see them with\n"
        "`bar diff --unrecorded`; the next step records them); what its agent steps add\n"
        "up to (turns, tool calls, tokens, cost when known).",
        epilog="examples:\n"
        "  bar status                  the task you are in, else the active one\n"
        "  bar status --task fix-login\n"
        "  bar status --json           for scripts: the same as fields",
    )
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "status:status")

    p = sub.add_parser(
        "verify",
        help="prove the worktree holds a recorded state: every file's bytes hashed",
        formatter_class=_Formatter,
        description="Read every file of a recorded state (default: the last) in the task's\n"
        "worktree, hash its bytes as git hashes a blob, and compare them, its type and its\n"
        "mode with the record; list what the worktree holds beside them that the next\n"
        "step would record (not ignored). It writes nothing and gives the same answer\n"
        "whatever the speed settings.\n\n"
        "Why: every other look (bar status, the look for hand edits before each command)\n"
        "trusts what the kernel says changed (a file's size and times, inotify). A write\n"
        "through a shared memory map (mmap MAP_SHARED) to an already-dirty page changes\n"
        "neither and raises no event: only reading the bytes shows it. Where git converts\n"
        "line endings, a file is compared with git's checkout of it (or the raw bytes\n"
        "the snapshot kept); a path a filter attribute names is listed as not compared.\n\n"
        "Each path that differs is listed: modified (other bytes, or a nested repository\n"
        "at another commit), mode (the executable bit), type (a file now a link, a\n"
        "directory or a nested repository, or back), missing, extra (not in the state,\n"
        "not ignored). Exit 0: the worktree holds the state; 1: it differs.\n\n"
        "--record records what differs as a manual step (it reads every file under the\n"
        "task's lock, then has git hash those again whatever their stat says), so a\n"
        "rollback and an undo keep those bytes; it exits 0 once the record holds them.",
        epilog="examples:\n"
        "  bar verify                  the worktree against the last recorded state\n"
        "  bar verify --step 3         ... against the state after step 0003 (or base, 3.2)\n"
        "  bar verify --record         record what differs as a manual step\n"
        "  bar verify --json           for scripts: every difference as fields",
    )
    _task_opt(p)
    p.add_argument(
        "--step",
        metavar="STATE",
        help="the recorded state to compare with: base, STEP or STEP.N (default: the last)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="record what differs from the last state as a manual step",
    )
    _json_opt(p)
    _cmd(p, "verify:verify")

    p = sub.add_parser(
        "blame",
        help="each line of a file with the step or tool call that last changed it",
        formatter_class=_Formatter,
        description="Show each line of FILE with the step or checkpoint that last changed it:\n"
        "the tool and command (or the files an edit tool named) and the agent session.\n"
        "Lines the task never changed are marked 'base'.\n\n"
        "With --rev, FILE is blamed as a branch or commit of the repository has it (main,\n"
        "after the work landed): each line's commit, and where that commit's message links\n"
        "a task (the Bar-Task/Bar-Step lines bar apply writes, which a squash merge keeps),\n"
        "the step, tool call and prompt behind the line, from this machine's tasks or\n"
        "those bar fetch brought.",
        epilog="examples:\n"
        "  bar blame src/app.py             as the task's last recorded state has it\n"
        "  bar blame src/app.py --at 3.2    as it was after step 3's second tool call\n"
        "  bar blame src/app.py --rev main  a line of main -> step -> tool call -> prompt",
    )
    _task_opt(p)
    p.add_argument(
        "file", metavar="FILE", help="a path in the task's worktree (with --rev: in the repository)"
    )
    at = p.add_mutually_exclusive_group()
    at.add_argument("--at", metavar="STEP|STEP.N", help="default: the last recorded state")
    at.add_argument(
        "--rev", metavar="REV", help="a branch or commit of the repository instead of a task state"
    )
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
    p.add_argument(
        "--to", metavar="base|STEP|STEP.N", help="default: the state before the last step"
    )
    p.add_argument(
        "--hard", action="store_true", help="also reset the task branch to the HEAD at the target"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _json_opt(p)
    _cmd(p, "rollback:rollback")

    for verb, text in (
        ("undo", "undo the last step not undone yet"),
        ("redo", "redo the step undone last"),
    ):
        p = sub.add_parser(
            verb,
            help=text + " (itself a step)",
            formatter_class=_Formatter,
            description="An editor's undo over the task's steps. `bar undo` returns the worktree\n"
            "to the state before the latest step not undone yet (a run, hand edits, a\n"
            "rollback, a sync); again, and it walks further back. `bar redo` brings back the\n"
            "step undone last; any new step that changes the worktree ends what can be\n"
            "redone. Each is a rollback step marked as an undo or redo, so nothing is lost.\n"
            "Unrecorded changes are recorded first, and are then what undo undoes (and\n"
            "they end what redo could redo); --dry-run says so. Steps that changed\n"
            "nothing (a test run, an apply) are passed over.",
            epilog="examples:\n"
            "  bar undo               back to before the last step\n"
            "  bar undo; bar undo     two steps back\n"
            "  bar redo               forward again\n"
            f"  bar {verb} --dry-run     what would change",
        )
        _task_opt(p)
        p.add_argument(
            "--dry-run", action="store_true", help="show what would change; change nothing"
        )
        p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
        _json_opt(p)
        _cmd(p, f"undo:{verb}")

    _trash(sub)

    p = sub.add_parser(
        "apply",
        help="land the task's work on a branch, as one commit or a merge",
        formatter_class=_Formatter,
        description="Land the task's changes (base -> last recorded state) on a branch: by default\n"
        "the branch the task was created from (task new --base) if it is a local branch\n"
        "and not another task's, else git.default_base (the branch task sync merges in,\n"
        "too). A target checked out in a task's worktree is refused (exit 1): bar never\n"
        "writes into another task's worktree.\n"
        "commit: one new commit on the target, merged three-way onto its tip, with\n"
        "  Bar-Task and Bar-Step trailers (Bar-Step: the step whose state it lands).\n"
        "merge: commit what the agent left uncommitted on the task branch, then a\n"
        "  --no-ff merge of that branch (agent commits kept).\n"
        "A conflict changes nothing (exit 6), nor do conflict markers that a task sync\n"
        "--allow-conflicts left and no step resolved yet. A checked-out target is\n"
        "updated only if the files the apply changes are clean there (else exit 5).\n"
        "--at lands an earlier recorded state instead (commit mode), e.g. a checkpoint\n"
        "before the agent went astray. A task without its worktree (closed, or its\n"
        "worktree removed) is applied from its record: it needs none (merge mode needs\n"
        "its branch). --create makes a target branch that does not exist yet, at the\n"
        "task's base (or at REF), in the same step as the apply.\n"
        "An apply that changes bar's own files in the repository (.bar/config.yaml: the\n"
        "hooks of every step of every task; the policy file) says so on stderr (JSON:\n"
        "changes_bar_settings): review them before the next step.",
        epilog="examples:\n"
        "  bar apply --dry-run                 where it would land, the diff, whether it can\n"
        "  bar apply -m 'Add discounts'        one commit on the branch the task came from\n"
        "  bar apply --target release          onto another branch\n"
        "  bar apply --target feature --create a new branch, at the task's base\n"
        "  bar apply --target fix --create v2  a new branch, at v2\n"
        "  bar apply --mode merge              keep the agent's own commits\n"
        "  bar apply --at 3.2                  an earlier state (a checkpoint)",
    )
    _task_opt(p)
    p.add_argument(
        "--mode",
        choices=("commit", "merge"),
        default="commit",
        help="commit (default): the task's changes as one new commit on the "
        "target; merge: a --no-ff merge of the task branch, its commits "
        "kept",
    )
    p.add_argument(
        "--at", metavar="STEP|STEP.N", help="apply this recorded state (default: the last one)"
    )
    p.add_argument(
        "--target",
        metavar="BRANCH",
        help="default: the branch the task was created "
        "from, unless another task's, else git.default_base",
    )
    p.add_argument(
        "--create",
        nargs="?",
        const="",
        metavar="REF",
        help="make the --target branch, which must not exist yet: at REF if given, "
        "else at the task's base",
    )
    p.add_argument("-m", "--message", metavar="MSG", help="commit message (default: from the task)")
    p.add_argument("--dry-run", action="store_true", help="show the diff and whether it conflicts")
    p.add_argument("--no-wait", action="store_true", help="fail at once if the task is busy")
    _json_opt(p)
    _cmd(p, "apply:apply")


def _positive_int(value: str) -> int:
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
    try:
        number = float(value.lstrip("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an amount in US dollars, not {value!r}"
        ) from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive amount, not {value}")
    return number


def _trash(sub: Any) -> None:
    """``bar trash`` (list) and ``bar trash restore``."""
    t = sub.add_parser(
        "trash",
        help="what bar moved aside instead of deleting it; put it back",
        formatter_class=_Formatter,
        description="bar never deletes bytes no recorded state holds. When a command must remove\n"
        "some from a task's worktree (a nested git repository where a rollback puts a\n"
        "file, ignored files under a directory that becomes a file, what a closed task's\n"
        "worktree held), it moves them to the task's trash first and says so. Each move\n"
        "is an entry ($BAR_HOME/projects/<p>/tasks/<id>/trash/<UTC time>-<n>/): paths kept\n"
        "relative to the worktree, modes kept, and a manifest of when, which command and\n"
        "why. An undo of that rollback, or a reopen of the closed task, puts them back by\n"
        "itself. `bar trash` lists the entries (short for `bar trash list`), `bar trash\n"
        "restore` puts paths back. `bar task delete` refuses while the trash holds\n"
        "anything; with --force it empties it with the task.",
        epilog="examples:\n"
        "  bar trash                         what is in the active task's trash\n"
        "  bar trash --task fix-login --json\n"
        "  bar trash restore                 put back the newest entry\n"
        "  bar trash restore vendor          the newest vendor/ moved aside\n"
        "  bar trash restore 20261127T101500Z-1 --to /tmp/old   an entry, elsewhere",
    )
    tsub = t.add_subparsers(dest="trash_command", metavar="ACTION")
    t.set_defaults(_help=t, _target="trash:list_", task=None, as_json=False)
    implied_action(t, "list", lambda word: word.startswith("-") and word not in ("-h", "--help"))
    p = tsub.add_parser(
        "list",
        help="list the entries of the task's trash (the default)",
        formatter_class=_Formatter,
        description="List the task's trash, oldest entry first: each entry's name, the command\n"
        "(and step) that moved it and why, then each path with its kind (file, dir,\n"
        "nested-repo, symlink), its size and, for a nested repository, its HEAD.",
        epilog="examples:\n  bar trash list\n  bar trash list --task 2 --json",
    )
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "trash:list_")
    p = tsub.add_parser(
        "restore",
        help="put paths back from the trash",
        formatter_class=_Formatter,
        description="Put back what the trash holds, at its path in the task's worktree (or under\n"
        "--to DIR). Name entries (all their paths) or paths (the newest entry holding\n"
        "each; a directory names everything below it); nothing named: the newest entry.\n"
        "Nothing is ever overwritten: a path that exists (but an empty directory where a\n"
        "directory goes back) stays in the trash, the command says what blocks it and\n"
        "exits 6. What comes back into the worktree is like any hand edit: the next\n"
        "command records it (ignored files excepted).",
        epilog="examples:\n"
        "  bar trash restore\n"
        "  bar trash restore vendor d/cache.log\n"
        "  bar trash restore 20261127T101500Z-1 --to ~/rescued",
    )
    p.add_argument("what", nargs="*", metavar="ENTRY|PATH", help="default: the newest entry")
    p.add_argument("--to", metavar="DIR", help="restore under DIR instead of the worktree")
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "trash:restore")
