"""``bar help [COMMAND [ACTION]]``: the help of bar, or of a command, as ``--help`` prints it
(``git help`` and ``pip help`` are read the same way)."""

from __future__ import annotations

import argparse
import sys

from bar.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


def options(sub: Commands) -> None:
    """The command line of ``bar help``: its options and help."""
    from bar.cli.parser import Formatter

    p = sub.add_parser(
        "help",
        formatter_class=Formatter,
        description="Print the help of bar, or of COMMAND (and its ACTION), as --help does.",
        epilog="examples:\n  bar help\n  bar help log\n  bar help task new",
    )
    p.add_argument("words", nargs="*", metavar="COMMAND [ACTION]")
    p.set_defaults(_run=help_)


def help_(*, words: list[str]) -> int:
    from bar.cli.parser import COMMANDS, build_parser, meant

    # (the command named, with its options and actions; else the list of commands)
    parser: argparse.ArgumentParser = build_parser(
        words[0] if words[:1] and words[0] in COMMANDS else None
    )
    for n, word in enumerate(words):
        said = " ".join(["bar", *words[:n]])
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions:
            raise UsageError(
                f"`{said}` has no actions, and {word!r} is none",
                hint=f"`{said} --help` says what it takes",
            )
        choices = actions[0].choices
        if word not in choices:
            what = "a command" if n == 0 else f"an action of {said}"
            close = meant(word, list(choices), said)
            asked = "bar help" + close.removeprefix("bar") if close else None
            raise UsageError(
                f"{word!r} is not {what}",
                hint=f"did you mean `{asked}`?" if asked else f"`{said} --help` lists them",
            )
        parser = choices[word]
    parser.print_help(sys.stdout)
    return 0
