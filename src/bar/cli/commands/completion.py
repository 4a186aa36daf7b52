"""``bar completion bash|zsh|fish`` and the hidden ``bar __complete KIND`` it calls.

The script is made from the parser itself: ``describe`` reads its commands, options and
choices, and what a value is from the metavar its help shows (``BY_METAVAR``), so a
command added to parser.py is completed as it is defined, with nothing added here unless
it shows a kind of value no command showed before. ``bar __complete`` runs on each Tab
press: ``bar.cli.main`` hands it over before any parser is built, and it imports
``bar.cli.candidates`` alone.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from bar.cli.completion import Command, Values
    from bar.cli.parser import Commands

# What a value is, by the metavar parser.py shows it as: a task, a step or checkpoint, a
# state (those and base), a ref or branch (asked of `bar __complete` on each Tab), a file,
# a directory, or a command line of its own. Choices complete as themselves.
BY_METAVAR = {
    "ID|NAME": "task",
    "STEP": "step",
    "STEP|STEP.N": "step",
    "STATE": "state",
    "base|STEP|STEP.N": "state",
    "REF": "ref",
    "BRANCH": "branch",
    "FILE": "file",
    "PATH": "file",
    "DIR": "dir",
    "-- CMD...": "command",
    "-- ARGV...": "command",
}


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar completion``: its options and help."""
    from bar.cli.parser import Formatter

    p = sub.add_parser(
        "completion",
        formatter_class=Formatter,
        description="Print a script that completes bar's commands, options, task names, step\n"
        "ids (3, or 3.2 after '3.'), refs and files. Run it again after upgrading bar.",
        epilog="install:\n"
        '  bash  eval "$(bar completion bash)"           (add this line to ~/.bashrc)\n'
        '  zsh   bar completion zsh > "${fpath[1]}/_bar"  (or: source <(bar completion zsh))\n'
        "  fish  bar completion fish > ~/.config/fish/completions/bar.fish",
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete in")
    p.set_defaults(_run=completion)


# --- the command -----------------------------------------------------------------------


def completion(*, shell: str) -> int:
    from bar.cli.completion import render
    from bar.cli.parser import build_parser

    sys.stdout.write(render(shell, describe(build_parser(whole=True))))
    return 0


def describe(parser: argparse.ArgumentParser) -> list[Command]:
    """Every command path of ``parser`` with what completes there."""
    import argparse

    from bar.cli.completion import Command, Option

    found: list[Command] = []

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subcommands: list[tuple[str, str]] = []
        children: list[tuple[str, argparse.ArgumentParser]] = []
        options: list[Option] = []
        positionals: list[Values] = []
        rest: Values | None = None
        for action in p._actions:
            if action.help == argparse.SUPPRESS:
                continue
            if isinstance(action, argparse._SubParsersAction):
                about = {a.dest: a.help or "" for a in action._choices_actions}
                for name, child in action.choices.items():
                    subcommands.append((name, about.get(name, "")))
                    children.append((name, child))
            elif action.option_strings:
                takes = None if action.nargs == 0 else _values(action)
                options.append(Option(tuple(action.option_strings), _about(action), takes))
            elif action.nargs in (argparse.REMAINDER, "*", "+"):
                rest = _values(action)
            else:
                count = action.nargs if isinstance(action.nargs, int) else 1
                positionals += [_values(action)] * count
        implied = getattr(p, "implied", None)  # (``implied_action``: its short form)
        short = dict(children).get(implied[0]) if implied else None
        if short is not None:
            # `bar worker --queue Q` is `bar worker serve --queue Q`: serve's options
            # complete after `bar worker` too
            have = {name for option in options for name in option.names}
            for action in short._actions:
                if action.option_strings and not have & set(action.option_strings):
                    takes = None if action.nargs == 0 else _values(action)
                    options.append(Option(tuple(action.option_strings), _about(action), takes))
        found.append(Command(path, tuple(subcommands), tuple(options), tuple(positionals), rest))
        for name, child in children:
            walk(child, (*path, name))

    walk(parser, ())
    return found


def _about(action: argparse.Action) -> str:
    """The option's help, else what it takes (``commit|merge``)."""
    if action.help:
        return action.help
    if action.choices is not None:
        return "|".join(str(choice) for choice in action.choices)
    return str(action.metavar or "")


def _values(action: argparse.Action) -> Values:
    from bar.cli.completion import Values

    if isinstance(action.metavar, str) and action.metavar in BY_METAVAR:
        return Values(BY_METAVAR[action.metavar])
    if action.choices is not None:
        return Values("choices", tuple(str(choice) for choice in action.choices))
    return Values("none")


def complete_main(argv: list[str]) -> int:
    """``bar __complete KIND [--task T] [-- WORD]``: one candidate a line, as
    ``value<TAB>what it is``; nothing, and exit 0, whatever goes wrong."""
    kind, task, word = (argv[0] if argv else ""), None, ""
    rest = argv[1:]
    try:
        while rest:
            if rest[0] == "--task" and len(rest) > 1:
                task, rest = rest[1], rest[2:]
            elif rest[0] == "--":
                word, rest = (rest[1] if len(rest) > 1 else ""), []
            else:
                return 0
        from bar.cli.candidates import candidates

        lines = [c.line() for c in candidates(kind, word, task)]
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        sys.stdout.flush()
    except Exception:  # a Tab press must never print a traceback into the command line
        return 0
    return 0
