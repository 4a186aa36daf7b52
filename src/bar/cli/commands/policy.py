"""``bar policy check [-c LINE | -- ARGV...]`` and ``bar policy test``."""

from __future__ import annotations

import shlex
from pathlib import Path

from bar import api
from bar.cli.render import Painter, print_json
from bar.errors import BarError, ExitCode, UsageError
from bar.policy import Policy, check_examples, load_policy

_EXIT = {"allow": 0, "log": 0, "warn": 0, "block": ExitCode.POLICY_BLOCKED}
_COLOR = {"allow": "green", "log": "cyan", "warn": "yellow", "block": "red"}


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
