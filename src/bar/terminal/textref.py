"""A pty step's output kept once: its text in ``NNNN.output``, the rest in its cast.

A reader of the seed's storage design finds every step's output in ``NNNN.output``
(``=== STDOUT ===`` ...), so a pty step writes its plain text there as it runs, cleaned
(``TextCleaner``) and scrubbed again, as ``text_of_cast`` derives it. Most of what a
program prints on a terminal is that text; its recording then holds the rest: the
timing, the escape sequences, what a carriage return later overwrote.

An output event of such a cast (its header names the text: ``"text_file": "0003.output"``)
holds, in place of each run of the stream that the text already has, a reference to it.
The text is referred to as a terminal shows it: the output file after its
``=== STDOUT ===`` line, each ``\\n`` as ``\\r\\n`` (what a terminal's line discipline
makes of a newline), so a plain line printed is one reference. The event's data is then
a list of pieces: a string (printed as it stands), a positive count (the next N
characters of that text), a negative count (pass over N characters: text the stream
did not print as such, such as the spaces a tab made, or text already given as a
string). An event with no reference stays a plain asciinema string.

The writer (``bar.terminal.cast.CastWriter``) refers only to text already on disk, so
a recording cut short by a crash still reads back; it holds an event back until the
line it prints is cleaned, so that the line can be referred to (at most a second, or a
quarter of a million characters), and makes what is printed within one frame (a
sixtieth of a second) one event, as no player shows it otherwise: a program printing
line by line costs a line of the recording per frame, not per line. ``TextSource``
reads the text back as far as the events refer, a piece at a time.
"""

from __future__ import annotations

import codecs
import os
import re
from pathlib import Path

from bar.errors import BarError, CorruptFile, NotFound
from bar.store.files import create_appending, write_all
from bar.terminal.filters import StreamFilter
from bar.terminal.pipes import STDERR_HEADER, STDOUT_HEADER
from bar.terminal.text import TextCleaner

Piece = str | int

_LONG = 32  # characters: a match this long is taken wherever it ends
_PROBE = 6  # characters looked for further on in the text...
_WINDOW = 4096  # ...within this many characters
_AHEAD_MAX = 1 << 22  # text not referred to yet, kept at most (characters)
_COMPACT = 1 << 16  # text referred to, dropped from memory past this many characters
_READ = 1 << 16

# an escape sequence (CSI; OSC, DCS and the like to their end; others), or one control
# character: never part of the text, written as it stands
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|[\x00-\x1f\x7f-\x9f]"
)
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f-\x9f]+")


def render(text: str) -> str:
    """Text as the references count it: each newline as a terminal shows it."""
    return text.replace("\n", "\r\n")


class TextIndex:
    """The rendered text written so far that no event has referred to yet."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._added: list[str] = []  # (joined when an event is encoded: one copy)
        self._ahead = 0  # characters not referred to yet
        self.pos = 0  # where the next reference starts in ``view()``
        self.owed = 0  # characters dropped unreferenced, for the next event to pass over

    def add(self, data: bytes) -> None:
        piece = render(self._decoder.decode(data))
        self._added.append(piece)
        self._ahead += len(piece)
        if self._ahead > _AHEAD_MAX:  # text the stream never printed as such: forget the oldest
            self.view()
            drop = self._ahead - _AHEAD_MAX // 2
            self.owed += drop
            self.pos += drop
            self._ahead -= drop
            self.compact()

    def view(self) -> str:
        """The text, ``pos`` where the next reference starts."""
        if self._added:
            self._text = self._text[self.pos :] + "".join(self._added)
            self.pos = 0
            self._added.clear()
        return self._text

    def moved(self, pos: int) -> None:
        """The next reference starts at ``pos`` of ``view()`` now."""
        self._ahead -= pos - self.pos
        self.pos = pos
        self.compact()

    def compact(self) -> None:
        """Forget the text already referred to (past ``_COMPACT`` characters of it)."""
        if self.pos > _COMPACT:
            self._text = self._text[self.pos :]
            self.pos = 0


class TextFile:
    """Writes a pty step's text to its output file as its stream is recorded."""

    def __init__(self, path: Path, scrubber: StreamFilter | None) -> None:
        self._fd: int | None = create_appending(path, STDOUT_HEADER)
        self._cleaner = TextCleaner()
        self._scrubber = scrubber
        self._last = b"\n"
        self.index = TextIndex()

    @property
    def settled(self) -> bool:
        """Whether everything fed so far is in the text (no line is being drawn)."""
        return not self._cleaner.holding

    def feed(self, text: str) -> None:
        self._write(self._cleaner.feed_str(text).encode("utf-8"))

    def finish(self) -> None:
        """The line still being drawn, and what the scrubber held back."""
        data = self._cleaner.finish().encode("utf-8")
        if self._scrubber is not None:
            data = self._scrubber.feed(data) + self._scrubber.flush()
        self._put(data)

    def close(self) -> None:
        """End the file as a step's output ends: ``=== STDERR ===`` (a pty has one stream),
        synced."""
        if self._fd is None:
            return
        try:
            write_all(self._fd, (b"" if self._last.endswith(b"\n") else b"\n") + STDERR_HEADER)
            os.fsync(self._fd)  # on disk before the step that names it is (as pipe mode's)
        finally:
            self.abort()

    def abort(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def size(self) -> int:
        """The bytes written to the file so far."""
        return os.fstat(self._fd).st_size if self._fd is not None else 0

    def _write(self, data: bytes) -> None:
        if self._scrubber is not None:
            data = self._scrubber.feed(data)
        self._put(data)

    def _put(self, data: bytes) -> None:
        if not data:
            return
        assert self._fd is not None, "text file is closed"
        write_all(self._fd, data)
        self._last = data
        self.index.add(data)


class _Pieces:
    """A list of pieces, each merged with the one before it when it is of its kind."""

    def __init__(self) -> None:
        self.items: list[Piece] = []

    def literal(self, text: str) -> None:
        if self.items and isinstance(self.items[-1], str):
            self.items[-1] += text
        else:
            self.items.append(text)

    def copy(self, n: int) -> None:
        last = self.items[-1] if self.items else None
        if isinstance(last, int) and last > 0:
            self.items[-1] = last + n
        else:
            self.items.append(n)

    def skip(self, n: int) -> None:
        last = self.items[-1] if self.items else None
        if isinstance(last, int) and last < 0:
            self.items[-1] = last - n
        else:
            self.items.append(-n)


def encode(index: TextIndex, data: str) -> list[Piece]:
    """``data``, an output event's text, as pieces referring to ``index``'s text where
    it holds the same characters (and moved past them).

    Greedy, and never wrong, only sometimes longer than it could be: a match is taken
    where it ends with a run of ``data`` (a control character or the end of the event
    follows it) or is long; else the next few characters are looked for a little
    further on in the text, and what lies between is passed over; else the next
    escape, control character or run of text is written as it stands."""
    out = _Pieces()
    if index.owed:
        out.skip(index.owed)
        index.owed = 0
    text, j, i, n = index.view(), index.pos, 0, len(data)
    while i < n:
        k = _common(data, i, text, j)
        if k and (i + k == n or k >= _LONG or _CONTROL.match(data, i + k)):
            out.copy(k)
            i, j = i + k, j + k
            continue
        if data[i] != "\x1b" and n - i >= _PROBE:
            found = text.find(data[i : i + _PROBE], j + 1, j + _WINDOW)
            if found > j:  # further on: what lies between was never printed as such
                out.skip(found - j)
                j = found
                continue
        token = _CONTROL.match(data, i) or _PRINTABLE.match(data, i)
        assert token is not None  # (a character that is no control starts a run)
        out.literal(token.group())
        i = token.end()
    index.moved(j)
    return out.items


def _common(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[i:]`` and ``b[j:]`` have in common at their start: the
    span doubles while it matches, then halves to the first difference, so a long match
    costs a few comparisons of slices, not one per character."""
    limit = min(len(a) - i, len(b) - j)
    if limit <= 0 or a[i] != b[j]:
        return 0
    same, span = 1, 16
    while same < limit:
        upto = min(same + span, limit)
        if a[i + same : i + upto] != b[j + same : j + upto]:
            while upto - same > 1:  # a[..same] matches, a[..upto] does not
                mid = (same + upto) // 2
                if a[i + same : i + mid] == b[j + same : j + mid]:
                    same = mid
                else:
                    upto = mid
            return same
        same, span = upto, span * 4
    return same


class TextSource:
    """The rendered text of a recording's output file, read as far as its events refer."""

    def __init__(self, path: Path, where: str) -> None:
        self._path, self._where = path, where
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise NotFound(
                f"{where} refers to its text {path.name}, which does not exist"
            ) from None
        except OSError as exc:
            raise BarError(f"cannot read {path}: {exc.strerror}") from exc
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._pos = 0
        head = os.read(self._fd, len(STDOUT_HEADER))
        if head != STDOUT_HEADER:
            self.close()
            raise CorruptFile(f"{path} does not begin with {STDOUT_HEADER.decode().strip()}")

    def take(self, n: int) -> str:
        self._fill(n)
        piece = self._text[self._pos : self._pos + n]
        self._pos += n
        return piece

    def skip(self, n: int) -> None:
        while n > 0:
            self._fill(1)
            step = min(n, len(self._text) - self._pos)
            self._pos += step
            n -= step

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _fill(self, n: int) -> None:
        while len(self._text) - self._pos < n:
            chunk = os.read(self._fd, max(_READ, n))
            if not chunk:
                raise CorruptFile(f"{self._where} refers past the end of its text {self._path}")
            self._text = self._text[self._pos :] + render(self._decoder.decode(chunk))
            self._pos = 0


def resolve(pieces: list[Piece], source: TextSource) -> str:
    """An output event's text from its pieces."""
    parts: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            parts.append(piece)
        elif piece > 0:
            parts.append(source.take(piece))
        else:
            source.skip(-piece)
    return "".join(parts)
