"""``bar policy check [-c LINE | -- ARGV...]`` and ``bar policy test``."""

from __future__ import annotations

import shlex
from pathlib import Path

from bar import api
from bar.cli.render import Painter, print_json
from bar.errors import BarError, ExitCode, UsageError
from bar.policy import Policy, check_examples, load_policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from bar.cli.parser import Commands

_EXIT = {"allow": 0, "log": 0, "warn": 0, "block": ExitCode.POLICY_BLOCKED}
_COLOR = {"allow": "green", "log": "cyan", "warn": "yellow", "block": "red"}


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar policy``: its options and help."""
    from bar.cli.parser import Formatter, json_opt

    pol = sub.add_parser(
        "policy",
        formatter_class=Formatter,
        description="The policy (.bar/policy.yaml in the repository) blocks, warns about or\n"
        "logs commands. It is read from your checkout, never from a task worktree.",
    )
    psub = pol.add_subparsers(dest="policy_command", metavar="ACTION")
    pol.set_defaults(_help=pol)
    p = psub.add_parser(
        "check",
        help="evaluate a command and print the decision",
        formatter_class=Formatter,
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
    p.set_defaults(_run=check)
    p = psub.add_parser(
        "explain",
        help="say which rules a command meets and why, and what they were tried on",
        formatter_class=Formatter,
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
    p.set_defaults(_run=explain)
    p = psub.add_parser(
        "test",
        help="validate the policy file and run its rules' examples",
        formatter_class=Formatter,
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
    json_opt(p)
    p.set_defaults(_run=test)


def _check_options(p: argparse.ArgumentParser) -> None:
    import argparse

    from bar.cli.parser import json_opt

    p.add_argument("-c", dest="command_line", metavar="LINE", help="a shell command line")
    p.add_argument(
        "--exec",
        dest="at_exec",
        action="store_true",
        help="judge -- ARGV as a confined step's exec check does (docs/policy.md)",
    )
    p.add_argument("--file", metavar="PATH", help="use this policy file instead")
    json_opt(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- ARGV...")


# --- the command -----------------------------------------------------------------------


def _policy(file: str | None) -> Policy:
    """The policy to use: --file, else the project's file (even if switched off), else
    bar's default."""
    policy = load_policy(Path(file)) if file else api.policy_for(even_if_disabled=True)
    assert policy is not None
    return policy


def _color() -> bool:
    """The project's output.color, where there is a project."""
    try:
        return api.open_project().project.config.output.color
    except BarError:
        return True


def _command(
    command_line: str | None, argv: list[str], at_exec: bool, verb: str = "check"
) -> str | list[str]:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if command_line is not None and argv:
        raise UsageError("give either -c 'SHELL LINE' or -- ARGV..., not both")
    if command_line is None and not argv:
        raise UsageError(
            "nothing to check",
            hint=f"bar policy {verb} -c 'rm -rf /'   or   bar policy {verb} -- rm -rf /",
        )
    if at_exec and command_line is not None:
        raise UsageError(
            "--exec judges an argument vector, not a shell line",
            hint=f"bar policy {verb} --exec -- rm -rf /home/me",
        )
    return command_line if command_line is not None else argv


def check(
    *,
    command_line: str | None,
    file: str | None,
    exit_code: bool,
    as_json: bool,
    argv: list[str],
    at_exec: bool = False,
) -> int:
    command = _command(command_line, argv, at_exec)
    decision = api.check_command(command, policy=_policy(file), at_exec=at_exec)
    if as_json:
        print_json(decision.to_json())
    else:
        paint = Painter(_color())
        shown = command if isinstance(command, str) else shlex.join(command)
        print(f"{paint(decision.action, 'bold', _COLOR[decision.action])}  {shown}")
        for e in decision.events:
            print(f"  {e.action:<5} {e.rule}: {e.reason}")
            print(f"        matched: {e.matched}")
    return _EXIT[decision.action]  # --exit-code: accepted for old scripts, now the default


_FORMS = {
    "line": "a shell line: each command it would run is judged",
    "argv": "an argument vector run without a shell",
    "exec": "a program about to start in a confined step (its real arguments)",
}


def explain(
    *, command_line: str | None, file: str | None, as_json: bool, argv: list[str], at_exec: bool
) -> int:
    command = _command(command_line, argv, at_exec, "explain")
    policy = _policy(file)
    said = api.explain_command(command, policy=policy, at_exec=at_exec)
    decision = said.decision
    if as_json:
        data: dict[str, object] = {
            **decision.to_json(),
            "form": said.form,
            "policy": str(policy.path),
            "units": [list(views) for views in said.views],
        }
        if said.words is not None:
            data["words"] = said.words
        print_json(data)
        return _EXIT[decision.action]
    paint = Painter(_color())
    shown = command if isinstance(command, str) else shlex.join(command)
    print(f"{paint(decision.action, 'bold', _COLOR[decision.action])}  {shown}")
    print(f"  judged as {_FORMS[said.form]}, with {policy.path}")
    if said.words is not None and said.words != list(command):
        print(f"  the program's words: {shlex.join(said.words)}")
    print("  what the rules were tried on:")
    for n, views in enumerate(said.views, 1):
        print(f"    {n}. {views[0] if views else ''}")
        for view in views[1:]:
            print(f"       also as: {view}")
    if not decision.events:
        print("  no rule matched: the command is allowed")
        return 0
    for e in decision.events:
        print(f"  rule {e.rule} ({e.action}) matched: {e.matched}")
        print(f"    why: {e.reason}")
    print(
        f"  the strictest action wins: {decision.action}"
        + (" (exit 126, the command does not run)" if decision.blocked else "")
    )
    return _EXIT[decision.action]


def test(*, file: str | None, as_json: bool) -> int:
    policy = _policy(file)
    failures = check_examples(policy)
    examples = sum(len(r.match) + len(r.no_match) for r in policy.rules)
    if as_json:
        print_json(
            {
                "path": str(policy.path),
                "rules": len(policy.rules),
                "examples": examples,
                "failures": [
                    {"rule": f.rule, "command": f.command, "expected": f.expected, "got": f.got}
                    for f in failures
                ],
            }
        )
    else:
        print(f"{policy.path}: {len(policy.rules)} rules, valid")
        for f in failures:
            print(f"  FAIL {f.rule}: {f.command!r}: expected {f.expected}, got {f.got}")
        print(f"{examples - len(failures)} of {examples} examples pass")
    return 1 if failures else 0
