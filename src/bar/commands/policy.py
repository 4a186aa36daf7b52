"""``bar policy check [-c LINE | -- ARGV...]`` and ``bar policy test``."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from bar.errors import UsageError
from bar.render import Painter, print_json

_EXIT = {"allow": 0, "log": 0, "warn": 0, "block": 126}


def _policy(args: argparse.Namespace) -> Any:
    """The policy to use: --file, else the project's, else bar's default."""
    from bar.errors import NotARepository, NotInitialized
    from bar.policy import default_policy, load_policy
    from bar.store import bar_home, ensure_dir

    if args.file:
        return load_policy(args.file)
    try:
        from bar.policy_gate import load_project_policy
        from bar.project import find_project

        return load_project_policy(find_project().project)
    except (NotARepository, NotInitialized):
        return default_policy(cache_dir=ensure_dir(bar_home() / "cache"))


def check(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if args.command_line is not None and argv:
        raise UsageError("give either -c 'SHELL LINE' or -- ARGV..., not both")
    if args.command_line is None and not argv:
        raise UsageError(
            "nothing to check",
            hint="bar policy check -c 'rm -rf /'   or   bar policy check -- rm -rf /",
        )
    policy = _policy(args)
    if args.command_line is not None:
        decision = policy.evaluate_line(args.command_line)
        shown = args.command_line
    else:
        decision = policy.evaluate_argv(argv)
        shown = shlex.join(argv)
    if args.json:
        print_json(decision.to_json())
    else:
        paint = Painter()
        color = {"allow": "green", "log": "cyan", "warn": "yellow", "block": "red"}
        print(f"{paint(decision.action, 'bold', color[decision.action])}  {shown}")
        for e in decision.events:
            print(f"  {e.action:<5} {e.rule}: {e.reason}")
            print(f"        matched: {e.matched}")
    return _EXIT[decision.action] if args.exit_code else 0


def test(args: argparse.Namespace) -> int:
    from bar.policy import check_examples

    policy = _policy(args)
    failures = check_examples(policy)
    examples = sum(len(r.match) + len(r.no_match) for r in policy.rules)
    if args.json:
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
