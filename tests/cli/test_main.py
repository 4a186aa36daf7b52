"""The command line read before it is parsed (``bar.cli.main``): the command's word, the
task an early look for hand edits is begun for, and global options given in short."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from helpers import bar

from bar.cli.main import RUN_VALUED, _task_named
from bar.cli.parser import build_parser


def test_the_options_of_bar_run_that_take_a_value_are_the_ones_main_skips() -> None:
    parser = build_parser("run")
    (run,) = (
        a.choices["run"] for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    valued = {
        flag
        for action in run._actions
        if action.option_strings and action.nargs != 0
        for flag in action.option_strings
    }
    assert valued == set(RUN_VALUED)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "--task", "fix", "--", "make"], "fix"),
        (["run", "-t", "fix", "make"], "fix"),
        (["run", "-tfix", "make"], "fix"),
        (["run", "--task=fix", "make"], "fix"),
        (["run", "--ta", "fix", "make"], "fix"),
        (["run", "--cwd", "src", "-t", "fix", "ls", "-t"], "fix"),
        (["run", "ls", "-t", "projects"], None),  # (ls's own -t)
        (["run", "sort", "-t,", "f"], None),
        (["run", "--cwd", "-t", "make"], None),  # (a directory named -t)
        (["run", "-e", "A=1", "--", "ls", "--task", "x"], None),
        (["--color", "never", "run", "-t", "fix", "true"], "fix"),
        (["status", "--task", "fix"], "fix"),
        (["rollback", "3", "-t", "fix"], "fix"),
        (["apply"], None),
    ],
)
def test_the_task_an_early_look_is_begun_for(argv: list[str], named: str | None) -> None:
    command = next(w for w in argv if w in ("run", "status", "rollback", "apply"))
    assert _task_named(command, argv) == named


@pytest.mark.parametrize(
    "argv", [["--no-p", "status"], ["--debu", "status"], ["--col", "never", "status"]]
)
def test_a_global_option_given_in_short_runs_the_command(
    argv: list[str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """argparse takes ``--no-p`` for ``--no-pager``: the command runs (here: no
    repository, exit 4), as with the whole word; it does not print bar's help."""
    monkeypatch.chdir(tmp_path)
    whole = bar(
        capfd,
        *[
            {"--no-p": "--no-pager", "--debu": "--debug", "--col": "--color"}.get(w, w)
            for w in argv
        ],
    )
    short = bar(capfd, *argv)
    assert short.code == whole.code == 4, short.err
    assert "COMMAND" not in short.err
