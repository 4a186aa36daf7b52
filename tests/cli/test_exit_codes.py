"""Exit codes agree with the table the README and `bar --help` print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT, bar, bar_exe, new_task

from bar.cli.parser import EXIT_CODES
from bar.errors import ExitCode

README = ROOT / "README.md"


def readme_table() -> dict[str, str]:
    text = README.read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| ([0-9N+]+) \| (.+?) \|$", text, re.M))


def help_table() -> dict[str, str]:
    return dict(re.findall(r"^  ([0-9N+]+) +(.+)$", EXIT_CODES, re.M))


def test_the_readme_and_help_list_the_same_codes() -> None:
    readme, helped = readme_table(), help_table()
    assert readme and set(readme) == set(helped)
    # every code bar itself defines is in the table
    own = {str(v) for k, v in vars(ExitCode).items() if k.isupper()}
    assert own <= set(readme), own - set(readme)


def test_an_unknown_ref_is_not_found(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "task", "new", "t1", "--base", "no-such-branch")
    assert res.code == ExitCode.NOT_FOUND and "no-such-branch" in res.err
    new_task(capfd)
    for args in (
        ("apply", "--target", "no-such-branch"),
        ("apply", "--dry-run", "--target", "no-such-branch"),
    ):
        res = bar(capfd, *args)
        assert res.code == ExitCode.NOT_FOUND and "no-such-branch" in res.err
    # a name that cannot be a branch at all is a bad command line
    assert bar(capfd, "apply", "--target", "a b").code == ExitCode.USAGE


def test_bar_alone_prints_its_help_and_exits_2() -> None:
    res = bar_exe()
    assert res.code == ExitCode.USAGE and res.out == ""
    assert "usage: bar" in res.err and "exit codes:" in res.err


@pytest.mark.parametrize("args", [("claude", "--help"), ("claude", "-h"), ("--help",), ("-h",)])
def test_hook_help_is_help(args: tuple[str, ...]) -> None:
    # on the agents' hot path: answers with help, not a decision, and exits 0
    res = bar_exe("hook", *args, input=b"")
    assert res.code == 0 and res.out.startswith("usage: bar hook") and res.err == ""


def test_policy_check_exits_with_its_decision(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "policy", "check", "-c", "rm -rf /").code == ExitCode.POLICY_BLOCKED
    assert bar(capfd, "policy", "check", "--", "git", "status").code == 0
    assert bar(capfd, "policy", "check", "-c", "git push --force-with-lease").code == 0
    help_text = bar(capfd, "policy", "check", "--help").out
    assert "126" in help_text and "old scripts" in help_text
