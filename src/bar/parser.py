"""The command line: every command, option and help text, here and in its three parts
(``parser_tasks``, ``parser_steps``, ``parser_tools``), which use this module's helpers.

Kept apart from ``bar.cli`` so that the hot paths (``bar hook``, ``bar --version``) never
import argparse or build the parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, cast

from bar import VERSION_LINE

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
    parser.add_argument("--version", action="version", version=VERSION_LINE)
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        metavar="WHEN", help="colour: auto (default: on a terminal), always "
                        "or never; see 'output' below")  # fmt: skip
    parser.add_argument("-P", "--no-pager", action="store_true",
                        help="print straight to the terminal, not through a pager")  # fmt: skip
    sub = _Commands(parser.add_subparsers(dest="command", metavar="COMMAND"), only)

    from bar import parser_steps, parser_tasks, parser_tools

    parser_tasks.commands(sub)
    parser_steps.commands(sub)
    parser_tools.commands(sub)

    if only is not None and not sub.built:
        return build_parser()
    return parser
