"""A bad command line: bar says what is wrong in its own words (``bar: ...``) and what
to type instead (``hint: ...``), and exits 2; every command's help teaches by example."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from helpers import bar, bar_exe, new_task

from bar.cli.parser import build_parser
from bar.errors import ExitCode


@pytest.fixture
def in_task(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    new_task(capfd)
    return repo


def lines(err: str) -> list[str]:
    out = err.splitlines()
    assert out and all(x.startswith(("bar: ", "hint: ")) for x in out), err
    return out


def hint(err: str) -> str:
    (found,) = [x[len("hint: ") :] for x in lines(err) if x.startswith("hint: ")]
    return found


@pytest.mark.parametrize(
    "argv",
    [
        ("log", "--no-pager"),
        ("log", "-P"),
        ("log", "--color", "always"),
        ("log", "--color=never", "-n", "1"),
        ("log", "--debug"),
        ("--color", "never", "task", "list", "--debug", "--all"),
    ],
)
def test_a_global_option_after_the_command_is_moved_before_it(
    in_task: Path, capfd: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    res = bar(capfd, *argv)
    assert res.code == ExitCode.USAGE and res.out == ""
    assert lines(res.err)[0].startswith("bar: unrecognized arguments: ")
    said = hint(res.err)
    assert said.startswith("global options go before the command: bar ")
    # the oracle: the command line the hint gives is one bar accepts and runs
    fixed = shlex.split(said.split(": ", 1)[1])[1:]
    assert sorted(fixed) == sorted(argv)
    again = bar(capfd, *fixed)
    assert again.code == 0, again.err


def test_the_hint_for_no_pager_reads_as_documented(in_task: Path) -> None:
    res = bar_exe("log", "--no-pager")  # the installed executable, as a user runs it
    assert res.code == ExitCode.USAGE
    assert res.err == (
        "bar: unrecognized arguments: --no-pager\n"
        "hint: global options go before the command: bar --no-pager log\n"
    )


def command_names(parser_path: tuple[str, ...] = ()) -> list[str]:
    parser = build_parser(whole=True)
    for word in parser_path:
        parser = parser._subparsers._group_actions[0].choices[word]  # type: ignore[union-attr]
    return list(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


@pytest.mark.parametrize("where", [(), ("task",), ("policy",)])
def test_a_mistyped_command_gets_the_one_meant(
    capfd: pytest.CaptureFixture[str], where: tuple[str, ...]
) -> None:
    """Every command (and action of task and policy) with two letters swapped, or its
    last letter left off, is named back."""
    for name in command_names(where):
        typos = {name[:-1], name[1] + name[0] + name[2:]} - set(command_names(where))
        for typo in typos:
            res = bar(capfd, *where, typo)
            assert res.code == ExitCode.USAGE, res.err
            what = "a command" if not where else f"an action of bar {where[0]}"
            assert lines(res.err)[0] == f"bar: {typo!r} is not {what}"
            assert hint(res.err) == f"did you mean `{shlex.join(['bar', *where, name])}`?"


def test_nothing_close_lists_the_commands(capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "frobnicate")
    assert res.code == ExitCode.USAGE
    assert hint(res.err) == "`bar --help` lists them"
    res = bar(capfd, "task", "frobnicate")
    assert hint(res.err) == "`bar task --help` lists them"


def test_a_mistyped_option_gets_the_one_meant(capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "log", "--jsn")
    assert res.code == ExitCode.USAGE
    assert lines(res.err)[0] == "bar: unrecognized arguments: --jsn"
    assert hint(res.err) == "did you mean --json? (see `bar log --help`)"
    res = bar(capfd, "task", "list", "--xyzzy")
    assert hint(res.err) == "see `bar task list --help`"
    res = bar(capfd, "apply", "--mode", "comit")
    assert res.code == ExitCode.USAGE and hint(res.err) == "did you mean `commit`?"


def test_other_usage_errors_point_to_the_help(capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "task", "new")
    assert res.code == ExitCode.USAGE
    assert "required" in lines(res.err)[0] and hint(res.err) == "see `bar task new --help`"
    res = bar(capfd, "log", "-n", "x")
    assert res.code == ExitCode.USAGE and hint(res.err) == "see `bar log --help`"


def test_log_takes_zero_steps_but_not_fewer(
    in_task: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    res = bar(capfd, "log", "-n", "0")
    assert res.code == 0 and res.out == ""
    res = bar(capfd, "log", "-n", "-1")
    assert res.code == ExitCode.USAGE
    assert lines(res.err)[0] == "bar: -n takes a number of steps, 0 or more"


def all_parsers() -> dict[str, object]:
    found: dict[str, object] = {}

    def walk(parser: object, prog: str) -> None:
        subs = getattr(parser, "_subparsers", None)
        if subs is None:
            found[prog] = parser
            return
        for name, child in subs._group_actions[0].choices.items():
            walk(child, f"{prog} {name}")

    walk(build_parser(whole=True), "bar")
    return found


def test_every_command_has_a_description_and_examples() -> None:
    missing = [
        prog
        for prog, parser in all_parsers().items()
        if prog not in ("bar hook",)  # run by the agents, documented in docs/agents.md
        and not (
            getattr(parser, "description", None)
            and ("examples:" in (getattr(parser, "epilog", None) or "") or prog == "bar completion")
        )
    ]
    assert not missing, missing


def test_apply_mode_help_says_what_each_mode_does(capfd: pytest.CaptureFixture[str]) -> None:
    out = " ".join(bar(capfd, "apply", "--help").out.split())
    assert "commit: " in out and "merge: " in out
