"""Partial matching for ``re``: could an attempt to match still change with more data?

A filter that searches a stream for a pattern may commit to its output up to the first
position where an attempt to match runs into the end of the data seen so far: there,
the next bytes decide. ``re`` cannot say whether an attempt reached the end of its
input, so ``unfinished`` rewrites a pattern into one that matches at a position exactly
when some path of the original from there reads the byte at the end. For a sequence
``X1 X2 ... Xn`` that is ``partial(X1) | X1 partial(X2 ... Xn)``; a character reads the
end where ``\\Z`` holds; a repeat ``X{m,n}`` is up to ``n - 1`` whole copies and then a
partial one; a lookahead is partial where its body is (and is then consumed, so every
match of the rewritten pattern ends at the end); a lookbehind never is, since it reads
only what came before. Alternatives are all kept, whichever the engine would try first,
so the answer errs only towards "still under way".

Only the syntax the secret shapes use is understood (literals and escapes, classes,
groups, lookarounds, quantifiers, alternation); anything else raises ``ValueError``. A
pattern that starts with a plain character keeps it as a literal prefix, which is what
lets the engine skim for candidates as fast as for the pattern itself.
"""

from __future__ import annotations

import re
from functools import lru_cache

_END = r"\Z"
# Openings of the groups that are kept as they are, longest first.
_OPENINGS = ("(?<=", "(?<!", "(?:", "(?=", "(?!", "(?>")
_QUANTIFIER = re.compile(r"(?:[*+?]|\{(\d*)(?:(,)(\d*))?\})[?+]?")


class _Char:
    """One byte: a literal, an escape, a class or ``.``; or, if ``zero``, an anchor."""

    __slots__ = ("text", "zero")

    def __init__(self, text: str, *, zero: bool = False) -> None:
        self.text = text
        self.zero = zero


class _Group:
    __slots__ = ("branches", "opening")

    def __init__(self, opening: str, branches: list[list[_Node]]) -> None:
        self.opening = opening
        self.branches = branches


class _Repeat:
    __slots__ = ("high", "lazy", "low", "node", "suffix")

    def __init__(self, node: _Node, low: int, high: int | None, suffix: str) -> None:
        self.node = node
        self.low = low
        self.high = high  # None: unbounded
        self.suffix = suffix  # the quantifier as written
        self.lazy = len(suffix) > 1 and suffix.endswith("?")


_Node = _Char | _Group | _Repeat


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0

    def branches(self) -> list[list[_Node]]:
        text = self.text
        out: list[list[_Node]] = [[]]
        while self.at < len(text) and text[self.at] != ")":
            if text[self.at] == "|":
                self.at += 1
                out.append([])
                continue
            out[-1].append(self.quantified(self.atom()))
        return out

    def atom(self) -> _Node:
        text, at = self.text, self.at
        char = text[at]
        if char == "(":
            return self.group()
        if char == "[":
            end = at + 1 + (text.startswith("^", at + 1))
            end += text.startswith("]", end)  # a leading "]" is a member
            while text[end] != "]":
                end += 2 if text[end] == "\\" else 1
            self.at = end + 1
            return _Char(text[at : end + 1])
        if char == "\\":
            escaped = text[at + 1]
            if escaped.isdigit() or escaped in "NuUg":
                raise ValueError(f"unsupported escape \\{escaped} at {at}")
            size = 4 if escaped == "x" else 2
            self.at = at + size
            return _Char(text[at : at + size], zero=escaped in "AZbB")
        if char in "*+?" or (char == "{" and self._counted(at)):
            raise ValueError(f"nothing to repeat at {at}")
        self.at = at + 1
        return _Char(char, zero=char in "^$")

    def group(self) -> _Group:
        text, at = self.text, self.at
        if text.startswith("(?P<", at):
            opening, self.at = "(?:", text.index(">", at) + 1  # names would repeat
        elif text.startswith("(?", at):
            opening = next((o for o in _OPENINGS if text.startswith(o, at)), "")
            if not opening:
                raise ValueError(f"unsupported group at {at}")
            self.at = at + len(opening)
        else:
            opening, self.at = "(?:", at + 1
        branches = self.branches()
        if not text.startswith(")", self.at):
            raise ValueError(f"unbalanced parenthesis at {at}")
        self.at += 1
        return _Group(opening, branches)

    def _counted(self, at: int) -> bool:
        match = _QUANTIFIER.match(self.text, at)
        return match is not None and (match.group(1) != "" or match.group(2) is not None)

    def quantified(self, node: _Node) -> _Node:
        match = _QUANTIFIER.match(self.text, self.at)
        if match is None or (match.group()[0] == "{" and not self._counted(self.at)):
            return node
        self.at = match.end()
        first = match.group()[0]
        low = int(match.group(1) or 0)
        if first in "*+":
            low, high = int(first == "+"), None
        elif first == "?":
            high = 1
        elif match.group(2) is None:
            high = low
        else:
            high = int(match.group(3)) if match.group(3) else None
        return _Repeat(node, low, high, match.group())


def _parse(pattern: bytes, flags: int) -> list[list[_Node]]:
    if flags & re.VERBOSE:
        raise ValueError("verbose patterns are not understood")
    source = pattern.decode("latin-1")  # one char per byte, whatever the pattern holds
    parser = _Parser(source)
    try:
        branches = parser.branches()
    except IndexError:  # an escape or a class cut short
        raise ValueError("pattern ends too soon") from None
    if parser.at != len(source):
        raise ValueError(f"unbalanced parenthesis at {parser.at}")
    return branches


def _text(node: _Node) -> str:
    if isinstance(node, _Char):
        return node.text
    if isinstance(node, _Repeat):
        return _text(node.node) + node.suffix
    return node.opening + "|".join(_seq_text(b) for b in node.branches) + ")"


def _seq_text(seq: list[_Node]) -> str:
    return "".join(_text(n) for n in seq)


def _either(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


def _options(options: list[str]) -> list[str]:
    """Alternatives, flat and without repeats, with ``\\Z`` last: a branch that starts
    with a literal is one the engine rejects cheaply, and most do."""
    out = [o for i, o in enumerate(options) if o != _END and o not in options[:i]]
    return [*out, _END] if _END in options else out


def _steps(node: _Node, follow: str | None) -> str:
    """``node`` as the engine goes through it when ``follow`` is what comes after it (to
    the end of the pattern): a lazy repeat takes another step only where the rest does
    not match, since where it does the match is over. Unknown ``follow``: as written."""
    if not isinstance(node, _Repeat) or not node.lazy or follow is None:
        return _text(node)
    more = "*" if node.high is None else f"{{0,{node.high - node.low}}}"
    return f"(?:{_text(node.node)}){{{node.low}}}(?:(?!{follow}){_text(node.node)}){more}"


def _partial(node: _Node, follow: str | None) -> list[str]:
    """The paths through ``node`` that read the byte at the end, as alternatives;
    ``follow`` is what comes after ``node`` to the end of the pattern, if known."""
    if isinstance(node, _Char):
        return [_END]  # an anchor such as \b or $ looks at the next byte too
    if isinstance(node, _Repeat):
        inner = _partial(node.node, None)
        if not inner or node.high == 0:
            return []
        if node.high == 1:
            return inner
        if not node.lazy or follow is None:
            count = "*" if node.high is None else f"{{0,{node.high - 1}}}"
            return [f"(?:{_text(node.node)}){count}{_either(inner)}"]
        # the lowest count first, then a step at a time while the rest does not match
        text, low = _text(node.node), node.low
        paths = [f"(?:{text}){{0,{low - 1}}}{_either(inner)}"] if low else []
        more = "*" if node.high is None else f"{{0,{node.high - 1 - low}}}"
        tempered = f"(?:(?!{follow}){text}){more}(?!{follow})"
        return [*paths, f"(?:{text}){{{low}}}{tempered}{_either(inner)}"]
    if node.opening in ("(?<=", "(?<!"):
        return []
    # A lookahead whose body reads past the end is consumed to the end like any group,
    # so that every unfinished path, and so every match, ends at the end. A lookaround
    # is done with its first match (it is atomic): nothing follows inside it.
    inside = "" if node.opening in ("(?=", "(?!") else follow if node.opening == "(?:" else None
    return _options([o for b in node.branches for o in _partial_seq(b, 0, inside)])


def _partial_seq(seq: list[_Node], start: int, follow: str | None) -> list[str]:
    rest: list[str] = []
    for at in range(len(seq) - 1, start - 1, -1):
        after = None if follow is None else _seq_text(seq[at + 1 :]) + follow
        consumed = [_steps(seq[at], after) + _either(rest)] if rest else []
        rest = _options(consumed + _partial(seq[at], after))
    return rest


@lru_cache(maxsize=64)
def unfinished(pattern: bytes, flags: int = 0) -> re.Pattern[bytes] | None:
    """A pattern matching where an attempt of ``pattern`` may read past the end of the
    data, so that more data could change its outcome; None if no attempt ever can.

    Its matches all end at the end of the data. Attempts that start at the very end
    are left out: they hold no data back.
    """
    branches = _parse(pattern, flags)
    options = []
    for seq in branches:  # after a match, nothing follows: the follow is empty
        if seq and isinstance(seq[0], _Char) and not seq[0].zero:
            rest = _partial_seq(seq, 1, "")
            options += [_text(seq[0]) + _either(rest)] if rest else []
        else:
            options += _partial_seq(seq, 0, "")
    options = _options(options)
    return re.compile(_either(options).encode("latin-1"), flags) if options else None


def _lead_ins(seq: list[_Node], consumed: int, back: int) -> list[list[str]]:
    """The ``back`` bytes before a match of ``seq`` (which ``consumed`` bytes into the
    match), as the classes the first positive lookbehind that reaches back there requires
    of them; any byte where no such lookbehind can be found."""
    for at, node in enumerate(seq):
        if isinstance(node, _Char):
            consumed += 0 if node.zero else 1
        elif isinstance(node, _Group) and node.opening == "(?<=":
            body = node.branches[0] if len(node.branches) == 1 else []
            reach = len(body) - consumed  # how far before the match it looks
            if reach >= back and all(isinstance(n, _Char) and not n.zero for n in body):
                return [[_text(n) for n in body[reach - back : reach]]]
        elif isinstance(node, _Group) and node.opening in ("(?:", "(?>"):
            return [x for b in node.branches for x in _lead_ins(b + seq[at + 1 :], consumed, back)]
        elif not isinstance(node, _Group):  # a repeat: the width is no longer known
            break
    return [["(?s:.)"] * back]


@lru_cache(maxsize=64)
def lead_in(pattern: bytes, back: int, flags: int = 0) -> re.Pattern[bytes] | None:
    """For a pattern whose matches are taken to begin ``back`` bytes before where they
    start (a key found by a letter in its middle): a pattern matching the last bytes of
    the data that could be the first of those, before a match that has not started yet.
    None if ``back`` is 0. Its leftmost match is the longest such tail.
    """
    if back <= 0:
        return None
    options = []
    for seq in _parse(pattern, flags):
        for classes in _lead_ins(seq, 0, back):
            options += ["".join(classes[:size]) + _END for size in range(back, 0, -1)]
    return re.compile(_either(_options(options)).encode("latin-1"), flags)


def prefix_at(data: bytes | bytearray, needle: bytes, pos: int) -> int:
    """The first offset from ``pos`` on where the rest of ``data`` is a proper prefix of
    ``needle`` (so the next bytes decide whether ``needle`` starts there), or
    ``len(data)`` if there is none."""
    end = len(data)
    if not needle:
        return end
    first = needle[:1]
    at = data.find(first, max(pos, end - len(needle) + 1))
    while at >= 0:
        if needle.startswith(data[at:]):
            return at
        at = data.find(first, at + 1)
    return end
