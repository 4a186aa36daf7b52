"""``bar help`` and the commands bar suggests: each one it names exists, and is the one
meant (``bar help`` once suggested ``bar shell``, spelled close to it and meaning else)."""

from __future__ import annotations

import argparse
import re

import pytest
from helpers import ROOT, bar


def test_bar_help_prints_the_help_of_bar_or_of_a_command(
    capfd: pytest.CaptureFixture[str],
) -> None:
    whole = bar(capfd, "help")
    assert whole.code == 0 and whole.out.startswith("usage: bar ")
    assert "help" in whole.out and "shell" in whole.out  # both listed, each for itself
    for words in (["log"], ["task", "new"], ["decide", "answer"]):
        said = bar(capfd, "help", *words)
        assert said.code == 0 and said.out == bar(capfd, *words, "--help").out, words


@pytest.mark.parametrize(
    ("words", "hint"),
    [
        (["hlep"], "did you mean `bar help`?"),
        (["help", "lgo"], "did you mean `bar help log`?"),
        (["help", "task", "nwe"], "did you mean `bar help task new`?"),
        (["help", "commit"], "did you mean `bar help apply`?"),
        (["help", "log", "x"], "`bar log --help` says what it takes"),
        (["commit"], "did you mean `bar apply`?"),
        (["checkout"], "did you mean `bar task switch`?"),
        (["list"], "did you mean `bar task list`?"),
        (["history"], "did you mean `bar log`?"),
        (["rename"], "did you mean `bar task rename`?"),
        (["shel"], "did you mean `bar shell`?"),
        (["stauts"], "did you mean `bar status`?"),
        (["task", "lsit"], "did you mean `bar task list`?"),
        (["xyzzy"], "`bar --help` lists them"),
    ],
)
def test_a_word_that_is_no_command_gets_the_command_meant(
    capfd: pytest.CaptureFixture[str], words: list[str], hint: str
) -> None:
    res = bar(capfd, *words)
    assert res.code == 2 and f"hint: {hint}\n" in res.err, res.err
    suggested = re.search(r"`(bar [a-z -]+?)`\?", res.err)
    if suggested:  # what it suggests runs
        assert bar(capfd, *suggested[1].split()[1:], "--help").code == 0


def commands() -> dict[tuple[str, ...], set[str]]:
    """Each command path of the parser, and its actions."""
    from bar.cli.parser import build_parser

    found: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        found[path] = set(subs[0].choices) if subs else set()
        for sub in subs:
            for name, child in sub.choices.items():
                walk(child, (*path, name))

    walk(build_parser(whole=True), ())
    return found


# a command as a hint, a help text or a document names it: in backquotes, or after
# "Next:", "with:" or "run" (``Record one with: bar run -- CMD``)
_NAMED = re.compile(r"(?:`|(?:Next|with|try|run): )bar ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def test_every_command_bar_names_exists(capfd: pytest.CaptureFixture[str]) -> None:
    """In the help of every command, in each hint and message of the code, and in the
    documents: each ``bar COMMAND [ACTION]`` is one the parser has."""
    known = commands()
    texts: list[tuple[str, str]] = []
    for path in known:
        texts.append((" ".join(path) or "bar", bar(capfd, *path, "--help").out))
    sources = [*sorted((ROOT / "src" / "bar").rglob("*.py")), *sorted((ROOT / "docs").glob("*.md"))]
    texts += [(str(p), p.read_text()) for p in [*sources, ROOT / "README.md"]]
    wrong = []
    for where, text in texts:
        for named in _NAMED.finditer(text):
            command, action = named[1], named[2]
            if command not in known[()] or (
                action and known[(command,)] and action not in known[(command,)]
            ):
                wrong.append((where, named[0]))
    assert not wrong, wrong
    assert len(texts) > 100
