"""A command's words as a person reads them, and can paste back into a shell.

A step keeps its command as the words the program was given (``argv``), not the line
typed to start it, so the line is written back from them. ``shlex.join`` quotes a word
holding a single quote as ``'"'"'``, which no one reads easily (``sh -c 'echo
'"'"'on'"'"''``); here each word takes the plainest quoting that gives it back
exactly: none for a word of safe characters, single quotes when it has no single quote,
else double quotes (a backslash before ``$``, a backquote, ``"`` and ``\\``), and only
for a word holding ``!`` as well, which double quotes do not keep from an interactive
bash's history, single quotes with each quote written ``'\\''``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_IN_DOUBLE = re.compile(r'([$`"\\])')


def quote(word: str) -> str:
    """``word`` quoted for a POSIX shell, as plainly as it can be."""
    if _SAFE.fullmatch(word):
        return word
    if "'" not in word:
        return f"'{word}'"
    if "!" not in word:
        return '"' + _IN_DOUBLE.sub(r"\\\1", word) + '"'
    return "'" + word.replace("'", "'\\''") + "'"


def line_of(argv: Iterable[str]) -> str:
    """The words as one shell line that runs them again."""
    return " ".join(quote(word) for word in argv)
