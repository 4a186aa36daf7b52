"""Shell completion scripts, written from a description of the command line.

The description (``Command`` records, one per command path: ``()``, ``("task",)``,
``("task", "new")`` ...) is made from the argparse parser by ``bar completion``, so a
command or option added there is completed without a change here. A script is that
description as a lookup table in the shell's own language (``__bar_spec KEY``) followed by
a fixed driver (``data/completion.<shell>``) that walks the words typed so far with it.
The three drivers walk the same way, so the shells agree on what they offer.

Keys of the table (a path is the command's words joined by spaces; the root's is empty):

    S:<path>           sub-commands, one ``word<TAB>help`` a line
    O:<path>           option names, one ``name<TAB>help`` a line
    V:<path> <option>  what the option's value takes (absent: a flag)
    P:<path> <n>       what the n-th positional (from 0) takes; ``P:<path> rest``: any later

What a value takes is its kind on the first line: ``none``, ``choices`` (the choices on
the following lines), ``file``, ``dir``, ``command`` (a command line of its own, as after
``bar run --``), or anything else, which the driver asks of ``bar __complete KIND``
(``bar.cli.candidates``) with the word typed so far and the task the line names.
"""

from __future__ import annotations

import os

from bar.base.record import record

SHELLS = ("bash", "zsh", "fish")
DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


@record(frozen=True)
class Values:
    """What an option's value or a positional takes."""

    kind: str  # none | choices | file | dir | command | a kind of `bar __complete`
    choices: tuple[str, ...] = ()


@record(frozen=True)
class Option:
    names: tuple[str, ...]  # --task, -t
    help: str
    values: Values | None  # None: a flag, which takes no value


@record(frozen=True)
class Command:
    path: tuple[str, ...]  # () for bar itself
    subcommands: tuple[tuple[str, str], ...]  # (name, help)
    options: tuple[Option, ...]
    positionals: tuple[Values, ...]
    rest: Values | None = None  # what every positional past ``positionals`` takes


def table(commands: list[Command]) -> dict[str, list[str]]:
    """The lookup table the drivers read (see the module docstring)."""
    found: dict[str, list[str]] = {}
    for command in commands:
        path = " ".join(command.path)
        if command.subcommands:
            found[f"S:{path}"] = [_entry(name, text) for name, text in command.subcommands]
        names = [_entry(name, opt.help) for opt in command.options for name in opt.names]
        if names:
            found[f"O:{path}"] = names
        for opt in command.options:
            for name in opt.names:
                if opt.values is not None:
                    found[f"V:{path} {name}"] = _values(opt.values)
        for n, values in enumerate(command.positionals):
            found[f"P:{path} {n}"] = _values(values)
        if command.rest is not None:
            found[f"P:{path} rest"] = _values(command.rest)
    return found


def render(shell: str, commands: list[Command]) -> str:
    """The completion script for ``shell``: its table, then its driver."""
    if shell not in SHELLS:
        raise ValueError(f"no completion for {shell!r}")
    entries = table(commands)
    with open(os.path.join(DATA, f"completion.{shell}"), encoding="utf-8") as f:
        driver = f.read()
    lookup = _fish_table(entries) if shell == "fish" else _sh_table(entries)
    return driver.replace("@TABLE@\n", lookup, 1)


def _entry(word: str, text: str) -> str:
    # one line per entry, a tab between word and help: neither may hold either
    text = " ".join(text.split())
    return f"{_one_line(word)}\t{text}" if text else _one_line(word)


def _one_line(word: str) -> str:
    return " ".join(word.split())


def _values(values: Values) -> list[str]:
    if values.kind == "choices":
        return ["choices", *(_one_line(c) for c in values.choices)]
    return [values.kind]


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _sh_table(entries: dict[str, list[str]]) -> str:
    """``__bar_spec KEY`` for bash and zsh: sets REPLY to the entries of KEY, one a line."""
    lines = ["__bar_spec() {", "    case $1 in"]
    for key, values in entries.items():
        lines.append(f"    {_sh_quote(key)}) REPLY={_sh_quote(chr(10).join(values))} ;;")
    lines += ["    *) REPLY='' ;;", "    esac", "}", ""]
    return "\n".join(lines) + "\n"


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_table(entries: dict[str, list[str]]) -> str:
    """``__bar_spec KEY`` for fish: prints the entries of KEY, one a line."""
    lines = ["function __bar_spec", "    switch $argv[1]"]
    for key, values in entries.items():
        # (a case pattern is a wildcard even quoted; command and option names hold none)
        lines.append(f"        case {_fish_quote(key)}")
        lines.append("            printf '%s\\n' " + " ".join(_fish_quote(v) for v in values))
    lines += ["    end", "end", ""]
    return "\n".join(lines) + "\n"
