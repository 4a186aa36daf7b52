"""The strings a regular expression cannot match without: a rule's shortcut.

A rule whose pattern needs one of a few strings (``rm``, ``push``…) is skipped without
running the regex when none of them is in the text. ``required_literals`` finds such
strings by reading the pattern's text, following the syntax of Python's ``re``:

* a sequence needs each of its parts, so any one part's strings will do (the longest
  are the most selective); consecutive literal characters make one string;
* an alternation needs one of its branches, so it gives the union of what its branches
  give, and nothing if any branch gives nothing;
* a repeat needs its body only if it must occur at least once (``+``, ``{2,}``), and a
  repeated character ends the string it belongs to;
* a group needs its body; a positive lookaround needs its body somewhere in the text,
  a negative one gives nothing;
* classes (``[…]``, ``.``, ``\\s``, ``\\d``…), anchors, backreferences and numeric
  escapes give nothing, and so does a part matched without regard to case.

Anything it is unsure of (global flags other than verbose and dot-all style ones,
conditionals, syntax it does not know, an invalid pattern) makes it give up: a rule
without literals is only slower, while a wrong literal would let a dangerous command
through.
"""

from __future__ import annotations

import os

_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_WHITESPACE = frozenset(" \t\n\r\v\f")  # what verbose mode skips, as in `re`
_CONTROL = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_NOT_LITERAL = frozenset("AZbBdDsSwW")  # anchors and classes
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_FLAGS = frozenset("aiLmsux")

# what a quantifier leaves of the atom before it
_ONCE, _OPTIONAL, _REPEATED = 0, 1, 2


class _Unsure(Exception):
    """The pattern holds something the scanner does not read with certainty."""


def required_literals(pattern: str, *, folded: bool = False) -> list[str] | None:
    """Strings of which any text that ``re.search(pattern, text)`` matches contains at
    least one, or None when there are none or the pattern is not understood.

    ``folded``: a pattern matched without regard to case as a whole (``(?i)`` at its
    start) is read too, and its strings are then to be looked for without regard to
    case; only strings of ASCII are given (``re`` folds other letters in ways a plain
    comparison does not)."""
    try:
        found = _Scanner(pattern, folded).pattern()
    except (_Unsure, RecursionError):
        return None
    if folded and found and not all(literal.isascii() for literal in found):
        return None
    return sorted(found) if found else None


class _Scanner:
    def __init__(self, pattern: str, folded: bool = False) -> None:
        self.text = pattern
        self.pos = 0
        self.verbose = False
        self.folded = folded  # a global `i` is read (its strings compared without case)

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def startswith(self, prefix: str) -> bool:
        return self.text.startswith(prefix, self.pos)

    def pattern(self) -> frozenset[str] | None:
        self.global_flags()
        found = self.alternation()
        if self.pos != len(self.text):
            raise _Unsure  # an unbalanced `)`
        return found

    def global_flags(self) -> None:
        """``(?x)``, ``(?s)``… at the start; any case-insensitive flag gives up."""
        while True:
            self.skip()
            if not self.startswith("(?") or self.peek(2) not in _FLAGS:
                return
            end = self.pos + 2
            while end < len(self.text) and self.text[end] in _FLAGS:
                end += 1
            if end >= len(self.text) or self.text[end] != ")":
                return  # a scoped group such as `(?s:…)`, read as an atom
            flags = self.text[self.pos + 2 : end]
            if "i" in flags and not self.folded:
                raise _Unsure
            self.verbose = self.verbose or "x" in flags
            self.pos = end + 1

    def skip(self) -> None:
        """Step over what matches nothing and separates nothing: ``(?#…)`` comments
        and, in verbose mode, whitespace and ``#`` comments. A quantifier after them
        applies to the atom before them, as in ``re``."""
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if self.startswith("(?#"):
                end = self.text.find(")", self.pos)
                if end < 0:
                    raise _Unsure
                self.pos = end + 1
            elif self.verbose and ch in _WHITESPACE:
                self.pos += 1
            elif self.verbose and ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end + 1
            else:
                return

    def alternation(self) -> frozenset[str] | None:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.sequence())
        union: frozenset[str] = frozenset()
        for branch in branches:
            if not branch:
                return None  # some branch needs no string at all
            union |= branch
        return union

    def sequence(self) -> frozenset[str] | None:
        candidates: list[frozenset[str]] = []
        run = ""
        while True:
            self.skip()
            if self.pos >= len(self.text) or self.peek() in "|)":
                break
            atom = self.atom()
            self.skip()
            count = self.quantifier()
            if isinstance(atom, str) and count != _OPTIONAL:
                run += atom
                if count == _REPEATED:  # `ab+c` needs "ab" and "bc", not "abc"
                    candidates.append(frozenset([run]))
                    run = atom
                continue
            if run:
                candidates.append(frozenset([run]))
                run = ""
            if isinstance(atom, frozenset) and count != _OPTIONAL:
                candidates.append(atom)
        if run:
            candidates.append(frozenset([run]))
        if not candidates:
            return None
        return max(candidates, key=lambda s: (min(len(x) for x in s), -len(s)))

    def atom(self) -> str | frozenset[str] | None:
        """A literal character, the strings a group needs, or None (anything else)."""
        ch = self.peek()
        if ch == "\\":
            return self.escape()
        if ch == "[":
            self.char_class()
            return None
        if ch == "(":
            return self.group()
        if ch in "*+?" or self.brace() is not None:
            raise _Unsure  # nothing to repeat: `re` rejects the pattern
        self.pos += 1
        if ch in ".^$":
            return None
        return ch  # `{`, `}` and `]` that do not make syntax are literal too

    def escape(self) -> str | None:
        ch = self.peek(1)
        self.pos += 2
        if not ch:
            raise _Unsure
        if ch in _CONTROL:
            return _CONTROL[ch]
        if ch in _DIGITS:  # a backreference or an octal escape: take every digit
            while self.peek() in _DIGITS:
                self.pos += 1
            return None
        if ch in _HEX_DIGITS:
            for _ in range(_HEX_DIGITS[ch]):
                if self.peek() not in _HEX:
                    break
                self.pos += 1
            return None
        if ch == "N":
            end = self.text.find("}", self.pos)
            if not self.startswith("{") or end < 0:
                raise _Unsure
            self.pos = end + 1
            return None
        if ch in _NOT_LITERAL:
            return None
        if ch in _ASCII_ALNUM:
            raise _Unsure  # an escape `re` does not know
        return ch

    def char_class(self) -> None:
        """Step over ``[…]``; a ``]`` first in the class is one of its characters."""
        self.pos += 1
        if self.peek() == "^":
            self.pos += 1
        if self.peek() == "]":
            self.pos += 1
        while True:
            ch = self.peek()
            if not ch:
                raise _Unsure
            self.pos += 2 if ch == "\\" else 1
            if ch == "]":
                return

    def group(self) -> frozenset[str] | None:
        """The strings a group needs, after stepping over it."""
        self.pos += 1
        keep, verbose = True, self.verbose
        if self.startswith("?P="):  # a named backreference
            end = self.text.find(")", self.pos)
            if end < 0:
                raise _Unsure
            self.pos = end + 1
            return None
        if self.peek() == "?":
            keep = self.group_kind()
        found = self.alternation()
        if self.peek() != ")":
            raise _Unsure
        self.pos += 1
        self.verbose = verbose
        return found if keep else None

    def group_kind(self) -> bool:
        """Step over what follows ``(?``: whether the group's body must occur in the
        text as written (not a negative lookaround, not without regard to case)."""
        for prefix, keep in (
            (":", True),
            ("=", True),
            ("!", False),
            ("<=", True),
            ("<!", False),
            (">", True),
        ):
            if self.startswith("?" + prefix):
                self.pos += 1 + len(prefix)
                return keep
        if self.startswith("?P<"):
            end = self.text.find(">", self.pos)
            if end < 0:
                raise _Unsure
            self.pos = end + 1
            return True
        # scoped flags, `(?s:…)` or `(?-i:…)`; anything else (a conditional `(?(1)…)`,
        # flags not at the start) is not read
        end = self.pos + 1
        while end < len(self.text) and (self.text[end] in _FLAGS or self.text[end] == "-"):
            end += 1
        if end >= len(self.text) or self.text[end] != ":" or end == self.pos + 1:
            raise _Unsure
        on, _, off = self.text[self.pos + 1 : end].partition("-")
        if "x" in on:
            self.verbose = True
        if "x" in off:
            self.verbose = False
        self.pos = end + 1
        return "i" not in on

    def quantifier(self) -> int:
        """Step over a quantifier, if one follows: what it leaves of its atom."""
        ch, brace = self.peek(), self.brace()
        if ch in ("?", "*", "+"):
            low, high, self.pos = int(ch == "+"), -1, self.pos + 1
        elif brace is not None:
            low, high, self.pos = brace
        else:
            return _ONCE
        if self.peek() in ("?", "+"):
            self.pos += 1  # lazy or possessive
        self.skip()
        if self.peek() in ("*", "+", "?") or self.brace() is not None:
            raise _Unsure  # a repeated repeat: `re` rejects the pattern
        if low == 0:
            return _OPTIONAL
        return _ONCE if low == high == 1 else _REPEATED

    def brace(self) -> tuple[int, int, int] | None:
        """A quantifier ``{m}``, ``{m,}``, ``{,n}`` or ``{m,n}`` at the position, as
        (min, max or -1, the position after it); anything else, ``{}`` included, is a
        literal ``{``."""
        if self.peek() != "{":
            return None
        end = self._digits(self.pos + 1)
        low = high = self.text[self.pos + 1 : end]
        if self.text[end : end + 1] == ",":
            start, end = end + 1, self._digits(end + 1)
            high = self.text[start:end] or "-1"
        if self.text[end : end + 1] != "}" or end == self.pos + 1:
            return None
        return int(low or 0), int(high), end + 1

    def _digits(self, at: int) -> int:
        while at < len(self.text) and self.text[at] in _DIGITS:
            at += 1
        return at


# ------------------------------------------------------- the default policy's, read once

# The strings of the default policy's patterns, read when it was last changed and kept
# beside it: a fresh project's first command then takes them from there, where reading
# its 62 patterns (and compiling them, to check them) costs ~50 ms. The table names each
# pattern whole: a pattern not in it (a rule the developer wrote or changed) is read as
# always. ``tests/policy/test_literals.py`` checks that the table says what reading each
# pattern says; ``python tests/support/default_literals.py`` writes it again.
KNOWN_PATH = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "data", "default_literals.json"
)
KNOWN_TAG = "literals 1"  # (bump with any change to how a pattern is read: the table is void)
_known: dict[str, list[str] | None] | None = None


def known_literals(pattern: str) -> tuple[bool, list[str] | None]:
    """Whether the table of the default policy's patterns holds ``pattern``, and if so
    its literals (None: it has none)."""
    global _known
    if _known is None:
        _known = _read_known()
    return pattern in _known, _known.get(pattern)


def _read_known() -> dict[str, list[str] | None]:
    import json

    try:
        with open(KNOWN_PATH, "rb") as f:
            data = json.load(f)
        if data["tag"] != KNOWN_TAG:
            return {}
        table = data["patterns"]
        if isinstance(table, dict) and all(
            v is None or (isinstance(v, list) and all(isinstance(s, str) and s for s in v))
            for v in table.values()
        ):
            return table
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {}  # (no table: every pattern is read)


def known_table(patterns: list[str]) -> dict[str, object]:
    """What ``KNOWN_PATH`` holds for ``patterns``: each one's literals, read now."""
    return {"tag": KNOWN_TAG, "patterns": {p: required_literals(p) for p in patterns}}
