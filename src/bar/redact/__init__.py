"""Secrets never reach disk: secret-looking names, literal secret values and token shapes.

Three layers, from cheap to thorough:

* ``is_secret_name`` decides from a variable's *name* whether its value is secret, so the
  ``env`` of a ledger line can record ``"***"`` instead of the value.
* ``Scrubber`` replaces secret *values* wherever they appear: the values of secret-named
  variables (given with ``-e`` or inherited), and strings whose shape gives them away as
  credentials (API keys, access tokens, private key blocks, passwords in URLs).
* ``redact_stream.StreamScrubber`` does the same to a stream of output chunks as they
  come, holding back only what could still begin a secret, in bounded memory.

Speed comes from the regex engine's literal-prefix search. One big alternation of every
shape would defeat it (the engine would then try every alternative at almost every
byte, about 35 MB/s); instead each shape, and each literal secret, is its own *pass*
whose pattern starts with a fixed string, so each pass skims the data at 1-2 GB/s and
Python code only runs per match. The passes' matches are united: a byte is redacted if
any pass says so, and every maximal redacted run becomes one ``***``. Because every
pattern has a bounded width, whether a match starts at a given offset is decided by the
``window`` bytes after it, which is what lets the stream commit to its output early.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar, cast

from bar.redact.patterns import (
    _ALL_NEEDLES,
    _CHECKS,
    _CONTEXT,
    _NEEDLES,
    _SHAPE_WIDTH,
    _SHAPES,
    MARK,
    MAX_KEY_BLOCK,
    _Check,
    _scrub_argv,
    is_secret_name,
)

__all__ = [
    "MARK",
    "MAX_KEY_BLOCK",
    "_NEEDLES",
    "_SHAPES",
    "Scrubber",
    "is_secret_name",
    "redact_env",
    "shape_passes",
]

_MARK_BYTES: Final = MARK.encode()

# Shorter values are not scrubbed as literals: a secret variable set to "1", "true" or
# "admin" would otherwise turn every "1" or "true" in the output into "***" and make it
# unreadable, while protecting almost nothing (such values are guessable anyway).
MIN_SECRET_LENGTH: Final = 6


def redact_env(env: Mapping[str, str], scrubber: Scrubber | None = None) -> dict[str, str]:
    """``env`` with the values of secret-looking names replaced by ``***``.

    With a ``scrubber``, the other values are scrubbed too, so a token passed under an
    innocent name (``-e URL=https://user:pw@host``) is not recorded either.
    """
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_secret_name(name):
            out[name] = MARK
        else:
            out[name] = scrubber.scrub_text(value) if scrubber is not None else value
    return out


# A pass yields, for each match from ``pos`` on, leftmost first and not overlapping:
# (match start, match end, redaction start, redaction end).
_Hits = Iterator[tuple[int, int, int, int]]


class _ShapePass:
    # a plain class: `import dataclasses` costs more than this module on the hook path
    __slots__ = ("back", "check", "ends", "regex", "starts")

    def __init__(
        self,
        regex: re.Pattern[bytes],
        back: int,
        starts: tuple[int, ...],  # marker groups: the redaction starts here
        ends: tuple[int, ...],  # marker groups: the redaction ends here
        check: _Check | None = None,
    ) -> None:
        self.regex = regex
        self.back = back
        self.starts = starts
        self.ends = ends
        self.check = check

    @classmethod
    def compile(cls, pattern: str, back: int, check: _Check | None = None) -> _ShapePass:
        regex = re.compile(pattern.encode())
        groups = regex.groupindex
        return cls(
            regex,
            back,
            tuple(index for name, index in groups.items() if name.startswith("s")),
            tuple(index for name, index in groups.items() if name.startswith("e")),
            check,
        )

    def scan(self, data: bytes | bytearray, pos: int) -> _Hits:
        check = self.check
        for m in self.regex.finditer(data, pos):
            start, end = m.span()
            if check is not None and not check(data, start):
                continue
            red_start, red_end = start - self.back, end
            for group in self.starts:
                if (at := m.start(group)) >= 0:
                    red_start = at
                    break
            for group in self.ends:
                if (at := m.start(group)) >= 0:
                    red_end = at
                    break
            yield start, end, red_start, red_end


class _LiteralPass:
    """A literal secret. ``bytes.find`` skips through the data several times faster
    than a regex would for a needle of this length."""

    __slots__ = ("needle",)

    def __init__(self, needle: bytes) -> None:
        self.needle = needle

    def scan(self, data: bytes | bytearray, pos: int) -> _Hits:
        needle, size = self.needle, len(self.needle)
        at = data.find(needle, pos)
        while at >= 0:
            yield at, at + size, at, at + size
            at = data.find(needle, at + size)


# What a terminal's output puts between two letters of a secret without showing it: an
# escape sequence (a colour, a cursor move), a carriage return, a backspace. A secret the
# stream splits so is looked for too (``_split_pass``), in what reaches a file raw.
_NOISE: Final = rb"(?:\x1b\[[0-?]{0,16}[ -/]{0,4}[@-~]|\x1b[0-Z\\-~]|[\r\x08]){0,4}"
_NOISE_BYTES: Final = (b"\x1b", b"\r", b"\x08")
# a secret longer than this is looked for whole only (its split form would be wider than
# what a stream holds back)
MAX_SPLIT_SECRET: Final = 480


class _SplitPass:
    """A known secret with up to four pieces of terminal noise between any two of its
    bytes. Its regex is compiled the first time data with noise is searched (a step
    that prints none, most of them, compiles nothing for it); without noise it finds
    nothing the secret's literal pass does not."""

    __slots__ = ("_compiled", "secret")

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self._compiled: _ShapePass | None = None

    @property
    def shape(self) -> _ShapePass:
        if self._compiled is None:
            pattern = re.escape(self.secret[:1]) + b"".join(
                _NOISE + re.escape(self.secret[i : i + 1]) for i in range(1, len(self.secret))
            )
            self._compiled = _ShapePass(re.compile(pattern), 0, (), ())
        return self._compiled

    def scan(self, data: bytes | bytearray, pos: int) -> _Hits:
        if not any(data.find(noise, pos) >= 0 for noise in _NOISE_BYTES):
            return iter(())
        return self.shape.scan(data, pos)


_Pass = _ShapePass | _LiteralPass | _SplitPass


_compiled: dict[int, _ShapePass] = {}


def _shape_pass(index: int) -> _ShapePass:
    made = _compiled.get(index)
    if made is None:
        name, back, pattern = _SHAPES[index]
        made = _compiled[index] = _ShapePass.compile(pattern, back, _CHECKS.get(name))
    return made


def shape_passes() -> tuple[_Pass, ...]:
    """Every shape's pass, compiled the first time a stream needs them (not on import:
    ``bar status`` and ``bar log`` scrub nothing)."""
    return tuple(_shape_pass(index) for index in range(len(_SHAPES)))


def _shape_passes_for(data: bytes | bytearray) -> tuple[_Pass, ...]:
    """The passes of the shapes ``data`` may hold (see ``_NEEDLES``)."""
    return tuple(
        _shape_pass(index)
        for index, (name, _, _) in enumerate(_SHAPES)
        if any(needle in data for needle in _NEEDLES[name])
    )


def _encode(value: str, errors: str) -> bytes:
    try:
        return value.encode("utf-8", errors)
    except UnicodeEncodeError:  # a lone surrogate that surrogateescape cannot map
        return value.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------ scrubbing

_T = TypeVar("_T")


# an encoded form of a secret shorter than this is not looked for (too many look alike)
MIN_ENCODED_LENGTH: Final = 12


def encodings(value: str) -> set[str]:
    """The forms a known secret takes once a program encodes it: base64 (standard and
    URL-safe, the run of characters that depends on the value alone, whatever bytes
    come before or after it), hex in either case, and JSON's escaping. (No module that
    compiles a regex is loaded for it: a plain step's scrub compiles none.)"""
    import binascii

    raw = value.encode("utf-8", "surrogateescape")
    found = {raw.hex(), raw.hex().upper(), _json_escaped(value, ascii_only=False)}
    found.add(_json_escaped(value, ascii_only=True))
    for before in range(3):  # (where the value falls in base64's groups of three bytes)
        padded = bytes(before) + raw
        encoded = binascii.b2a_base64(padded, newline=False).decode()
        start = 0 if before == 0 else 4
        end = len(encoded) if len(padded) % 3 == 0 else len(encoded) - 4
        core = encoded[start:end]
        found |= {core, core.replace("+", "-").replace("/", "_")}
    return {f for f in found if len(f) >= MIN_ENCODED_LENGTH and f != value}


_JSON_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}


def _json_escaped(value: str, *, ascii_only: bool) -> str:
    """``value`` as it stands inside a JSON string."""
    out = []
    for char in value:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif ord(char) < 0x20 or (ascii_only and ord(char) > 0x7E):
            code = ord(char)
            if code > 0xFFFF:  # (a surrogate pair)
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


class Scrubber:
    """Replaces secret values and token-shaped strings by ``***``.

    Each literal secret is its own pass (see the module docstring): scanning cost grows
    with the number of secrets, which in practice is a handful.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._stream_watches: tuple[Any, ...] | None = None  # bar.redact.stream's
        self._stream_scan: tuple[Any, int] | None = None  # (and its needle scan)
        literals: set[str] = set()
        encoded: set[str] = set()
        for value in secrets:
            for variant in (value, value.strip()):
                if len(variant) >= MIN_SECRET_LENGTH:
                    literals.add(variant)
                    encoded |= encodings(variant)
        self.secrets: tuple[str, ...] = tuple(sorted(literals, key=lambda s: (-len(s), s)))
        every = tuple(sorted(literals | encoded, key=lambda s: (-len(s), s)))
        # Outputs are raw bytes, so secrets are encoded the way the OS encodes
        # environment values; text is scrubbed through a lossless UTF-8 encoding.
        self._byte_literals = tuple(_LiteralPass(_encode(s, "surrogateescape")) for s in every)
        self._text_literals = tuple(_LiteralPass(_encode(s, "surrogatepass")) for s in every)
        self._split_secrets = tuple(
            raw
            for raw in (_encode(s, "surrogateescape") for s in self.secrets)
            if len(raw) <= MAX_SPLIT_SECRET
        )
        self._split_made: tuple[_SplitPass, ...] | None = None
        longest = max((len(_encode(s, "surrogateescape")) for s in every), default=0)
        # How far past a match's start the stream must see before it can decide it.
        self.window: int = max(_SHAPE_WIDTH, longest) + _CONTEXT

    @property
    def pass_count(self) -> int:
        """How many passes a stream runs: one per shape, one per literal secret (and
        encoded form), and one per secret split by terminal noise."""
        return len(_SHAPES) + len(self._byte_literals) + len(self._split_secrets)

    @property
    def _byte_passes(self) -> tuple[_Pass, ...]:
        """Every pass, as a stream runs them (``bar.redact.stream``)."""
        return shape_passes() + self._byte_literals + self._split_passes

    @property
    def _split_passes(self) -> tuple[_SplitPass, ...]:
        """The passes of the secrets split by terminal noise."""
        if self._split_made is None:
            self._split_made = tuple(_SplitPass(raw) for raw in self._split_secrets)
        return self._split_made

    def _split_passes_for(self, data: bytes | bytearray) -> tuple[_Pass, ...]:
        """Those passes, where ``data`` has noise that could split a secret."""
        if not self._split_secrets or not any(n in data for n in _NOISE_BYTES):
            return ()
        return self._split_passes

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str], extra: Mapping[str, str] | None = None
    ) -> Scrubber:
        """A scrubber for the values of secret-named variables in ``environ`` and
        ``extra`` (the ``-e K=V`` of a run)."""
        values = [v for k, v in environ.items() if is_secret_name(k)]
        if extra:
            values += [v for k, v in extra.items() if is_secret_name(k)]
        return cls(values)

    def scrub_bytes(self, data: bytes) -> bytes:
        passes = _shape_passes_for(data) + self._byte_literals + self._split_passes_for(data)
        spans = [hit[2:] for p in passes for hit in p.scan(data, 0)]
        if not spans:
            return data
        return _render(data, 0, 0, _merge(spans), len(data))[0]

    def scrub_values(self, data: bytes) -> bytes:
        """``data`` with the known secret values masked (in any form the scrubber knows),
        but not what merely has a token's shape (which may be the step's own work)."""
        passes = self._byte_literals + self._split_passes_for(data)
        spans = [hit[2:] for p in passes for hit in p.scan(data, 0)]
        if not spans:
            return data
        return _render(data, 0, 0, _merge(spans), len(data))[0]

    def find(self, data: bytes) -> list[tuple[int, int, str]]:
        """Where ``data`` holds a secret: (start, end, what) for each span ``scrub_bytes``
        would replace, ``what`` being the shape's name or ``secret value``. What was
        redacted already (``***``) is not found again."""
        found: list[tuple[int, int, str]] = []
        for index, (name, _, _) in enumerate(_SHAPES):
            if any(needle in data for needle in _NEEDLES[name]):
                found += [(h[2], h[3], name) for h in _shape_pass(index).scan(data, 0)]
        for literal in (*self._byte_literals, *self._split_passes_for(data)):
            found += [(h[2], h[3], "secret value") for h in literal.scan(data, 0)]
        return sorted(f for f in found if f[1] > f[0] and data[f[0] : f[1]].strip(b"*"))

    def scrub_text(self, text: str) -> str:
        # surrogatepass round-trips any str, including the lone surrogates that
        # surrogateescape-decoded output contains; redactions only cut at ASCII
        # characters or at the edges of a whole secret, so decoding cannot fail.
        data = text.encode("utf-8", "surrogatepass")
        passes = _shape_passes_for(data) + self._text_literals
        spans = [hit[2:] for p in passes for hit in p.scan(data, 0)]
        if not spans:
            return text
        out = _render(data, 0, 0, _merge(spans), len(data))[0]
        return out.decode("utf-8", "surrogatepass")

    def scrub_obj(self, obj: _T) -> _T:
        """Scrub every string (keys included) in a JSON-like value; lists, tuples and
        mappings are rebuilt (mappings as dicts), other values are returned as they are.

        A ledger line holds a hundred short strings and, almost always, no secret: their
        text is first searched as one for anything a pass could match (a shape's needle,
        a literal secret), and only if something is found is each string scrubbed. The
        strings are joined with NULs, which no needle holds, so a needle found in the
        whole is in one of them or straddles two (then each is scrubbed: nothing lost).
        A string is then scrubbed only if it holds one of the needles found in the whole
        (a pass matches nothing where none of its needles is), so a line listing ten
        thousand paths costs a few needle searches per path, not every shape's."""
        pieces: list[bytes] = []
        _texts(obj, pieces)
        whole = b"\0".join(pieces)
        found = tuple(n for n in self._needles if n in whole)
        return cast(_T, self._scrub_any(obj, found))

    @property
    def _needles(self) -> tuple[bytes, ...]:
        """Every string a pass needs to find before it can match anything."""
        literals = (p.needle for p in (*self._text_literals, *self._byte_literals))
        return (*_ALL_NEEDLES, *literals)

    def _scrub_any(self, obj: object, found: tuple[bytes, ...]) -> object:
        """``obj`` rebuilt, each string holding one of the needles ``found`` scrubbed."""
        if isinstance(obj, str):
            data = obj.encode("utf-8", "surrogatepass")
            return self.scrub_text(obj) if any(n in data for n in found) else obj
        if isinstance(obj, bytes):
            return self.scrub_bytes(obj) if any(n in obj for n in found) else obj
        if isinstance(obj, Mapping):
            return {self._scrub_any(k, found): self._scrub_any(v, found) for k, v in obj.items()}
        if isinstance(obj, list):
            items = [self._scrub_any(v, found) for v in obj]
            return _scrub_argv(items) if found and obj and isinstance(obj[0], str) else items
        if isinstance(obj, tuple):
            return tuple(self._scrub_any(v, found) for v in obj)
        return obj


def _texts(obj: object, into: list[bytes]) -> None:
    """The strings of a JSON-like value (keys included) as ``Scrubber`` scans them."""
    if isinstance(obj, str):
        into.append(obj.encode("utf-8", "surrogatepass"))
    elif isinstance(obj, bytes):
        into.append(obj)
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            _texts(key, into)
            _texts(value, into)
    elif isinstance(obj, list | tuple):
        for value in obj:
            _texts(value, into)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted union of ``spans``; touching spans merge too, so secrets written back to
    back become one ``***`` wherever a stream happens to be cut."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _render(
    data: bytes | bytearray,
    base: int,
    pos: int,
    spans: list[tuple[int, int]],
    cut: int,
    *,
    open_mark: bool = False,
) -> tuple[bytes, int, bool]:
    """Write ``data`` (which starts at offset ``base``) from ``pos`` to ``cut`` with
    ``spans`` (merged, all starting before ``cut``) replaced by ``***``; a span that
    reaches past ``cut`` is written whole, so a redaction is never split.

    ``open_mark`` says the output so far ended with a ``***`` that reached ``pos``: a
    span starting there continues it. Returns the output, the new position and whether
    it ends in such a mark.
    """
    parts: list[bytes | memoryview] = []
    # Slices of a memoryview are not copies; the view is released before the caller
    # resizes ``data``.
    with memoryview(data) as view:
        for start, end in spans:
            if start <= pos and open_mark:
                pos = max(pos, end)
                continue
            start = max(start, pos)
            parts.append(view[pos - base : start - base])
            parts.append(_MARK_BYTES)
            pos = end
            open_mark = True
        if cut > pos:
            parts.append(view[pos - base : cut - base])
            pos = cut
            open_mark = False
        out = b"".join(parts)
        parts.clear()
    return out, pos, open_mark
