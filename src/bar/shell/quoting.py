"""Shell quoting, both ways: reading a word's value from its source text (backslashes,
``$'…'`` strings, brace expansion) and writing words back as one line for display."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

_MAX_BRACE_WORDS = 64
_SPACE = re.compile(r"\s")


def render(words: Iterable[str]) -> str:
    return " ".join(quote(word) for word in words)


def quote(word: str) -> str:
    if not word:
        return "''"
    if _has_blank(word):
        return "'" + word.replace("'", "'\\''") + "'"
    return word


def _has_blank(word: str) -> bool:
    """Whitespace outside ``$(…)``/``<(…)``/``>(…)``: a substitution is shown as its
    rendered commands, whose own words are already quoted."""
    if _SPACE.search(word) is None:
        return False
    depth, k = 0, 0
    while k < len(word):
        ch = word[k]
        if ch in "$<>" and word[k + 1 : k + 2] == "(":
            depth += 1
            k += 2
            continue
        if depth and ch == "(":
            depth += 1
        elif depth and ch == ")":
            depth -= 1
        elif not depth and ch.isspace():
            return True
        k += 1
    return False


# Patterns below are kept as strings and compiled by `re` on first use (it caches
# them): most lines never need them, and compiling costs more than matching.
_ESCAPE = r"\\(.)"
_ESCAPE_DQ = r'\\([$`"\\\n])'


def unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(_ESCAPE, lambda m: "" if m.group(1) == "\n" else m.group(1), text, flags=re.S)


def unescape_dq(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(_ESCAPE_DQ, lambda m: "" if m.group(1) == "\n" else m.group(1), text)


_ANSI_C = r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)"
_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}


def ansi_c(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        esc = match.group(1)
        if esc[0] in "xuU" and len(esc) > 1:
            code = int(esc[1:], 16)
            return chr(code) if code <= 0x10FFFF else ""
        if esc[0] in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if esc[0] == "c" and len(esc) == 2:
            return chr(ord(esc[1]) & 0x1F)
        return _ANSI_SIMPLE.get(esc, esc)

    return re.sub(_ANSI_C, one, text, flags=re.S)


_BRACE = r"\{([^{}]*,[^{}]*)\}"


def expand_braces(word: str) -> list[str]:
    """Comma brace expansion (``/{etc,usr}`` -> ``/etc /usr``), capped in size."""
    out: list[str] = []
    todo = [word]
    while todo:
        current = todo.pop(0)
        match = re.search(_BRACE, current)
        if match is None or len(out) + len(todo) > _MAX_BRACE_WORDS:
            out.append(current)
            continue
        head, tail = current[: match.start()], current[match.end() :]
        todo[0:0] = [head + choice + tail for choice in match.group(1).split(",")]
    return out
