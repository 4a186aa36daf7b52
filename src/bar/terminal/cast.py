"""asciinema v2 recordings of interactive steps: write, read back, replay.

A cast is JSON lines: a header object, then one ``[seconds, code, data]`` array per event
("o" output, "r" resize as ``"WxH"``). The writer takes the raw bytes a child printed and
passes them through a streaming secret scrubber *before* decoding them, so a secret is
matched in the bytes the program wrote rather than in their JSON escaping, and nothing
unscrubbed is ever written. An event is written (with one ``write()``, so a crash of bar
loses only what the scrubber still holds) as soon as the scrubber lets its bytes go, and
carries the time they were read, not the time they were let go. UTF-8 is decoded
incrementally: a character split across two reads is emitted whole with the second
event; invalid bytes become U+FFFD.

With the step's output file (``text``), a writer keeps the plain text there and the
recording only what the text lacks: each output event refers to the text for the runs it
holds (``bar.terminal.textref``; the header's ``text_file`` names it). The reader puts
every event back whole, so replay, the UI's player and ``full_cast`` (a standalone file
for another player) see the recording as it was printed.

The reader validates every line and names the file and line in ``CorruptFile``; the
header's ``version`` goes through ``bar.base.migrate`` like every versioned file of bar's. Replay
streams events (a long agent session can be large) after a first validating pass, so a
broken file fails before anything is played.
"""

from __future__ import annotations

import codecs
import itertools
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, TypeGuard

from bar.base.migrate import CURRENT, upgrade
from bar.base.record import field, record
from bar.errors import BarError, CorruptFile, NotFound, UsageError
from bar.store.files import create_appending, write_all
from bar.terminal.filters import Stamped, StreamFilter, stamped
from bar.terminal.text import TextCleaner
from bar.terminal.textref import TextFile, TextSource, encode, resolve

CAST_VERSION = CURRENT["cast"][0]
TEXT_FILE = "text_file"  # the header's key naming the output file a cast refers to
_HOLD = 1.0  # seconds an event waits at most for the text it prints (``tick``)
_FRAME = 1 / 60  # seconds: what a program prints within one frame is one event
_HELD_MAX = 1 << 18  # characters of output held at most
_RESIZE = re.compile(r"[1-9][0-9]*x[1-9][0-9]*")
_TEXT_NAME = re.compile(r"[0-9]{4,9}\.output")


@record(frozen=True)
class CastHeader:
    width: int
    height: int
    timestamp: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    text_file: str | None = None  # the output file the events refer to (``textref``)


@record(frozen=True)
class CastEvent:
    time: float
    code: str
    data: str


@record(frozen=True)
class Cast:
    header: CastHeader
    events: tuple[CastEvent, ...]

    @property
    def output(self) -> str:
        """Everything the program printed, escapes included, as one string."""
        return "".join(e.data for e in self.events if e.code == "o")


class CastWriter:
    """Append events to a new cast file; times are seconds since the writer was made.

    With ``text`` (a pty step's output file), the plain text goes there as it comes and
    the cast refers to it (``bar.terminal.textref``); ``text_scrubber`` scrubs it again,
    as cleaning can join what escapes kept apart."""

    def __init__(
        self,
        path: Path,
        *,
        width: int,
        height: int,
        env: Mapping[str, str] | None = None,
        scrubber: StreamFilter | None = None,
        text: Path | None = None,
        text_scrubber: StreamFilter | None = None,
    ) -> None:
        self._scrubber = stamped(scrubber) if scrubber is not None else None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._last = 0.0
        header: dict[str, object] = {
            "version": CAST_VERSION,
            "width": width,
            "height": height,
            "timestamp": int(time.time()),
            "env": {k: env[k] for k in ("SHELL", "TERM") if env and k in env},
        }
        self._text_file: TextFile | None = None
        if text is not None:
            header[TEXT_FILE] = text.name
            self._text_file = TextFile(text, text_scrubber)
        # output events held until the text they print is written (``textref``)
        self._held: list[tuple[float, str]] = []
        self._held_chars = 0
        self._held_since = 0.0
        try:
            self._fd: int | None = create_appending(path, _encode(header))
        except BaseException:
            if self._text_file is not None:
                self._text_file.abort()
            raise
        self._start = time.monotonic()

    def output(self, data: bytes, read_at: float | None = None) -> None:
        """Record ``data``, read just now (or at ``read_at``, a ``time.monotonic()``)."""
        now = self._clock(read_at)
        if self._scrubber is None:
            self._pieces([(now, data)])
        else:
            self._pieces(self._scrubber.feed_stamped(data, now))

    def kept(self) -> int:
        """The bytes of the recording and its text written so far, and at most what the
        output held back for its events will take (a character escaped in the
        recording's JSON takes up to six bytes)."""
        cast = os.fstat(self._fd).st_size if self._fd is not None else 0
        text = self._text_file.size() if self._text_file is not None else 0
        return cast + text + 6 * self._held_chars

    def resize(self, width: int, height: int, read_at: float | None = None) -> None:
        self._release()  # (what was printed before it comes before it)
        self._line([self._at(self._clock(read_at)), "r", f"{width}x{height}"])

    def release(self) -> None:
        """Write the events held now (``kept`` then counts what they took, not the most
        they could take)."""
        if self._held and self._text_file is not None:
            self._release()

    @property
    def holding(self) -> bool:
        """Whether events wait to be written (``tick`` writes them in time)."""
        return bool(self._held)

    def tick(self) -> None:
        """Write the events whose text is written and whose frame has passed, and those
        held back longer than ``_HOLD`` seconds (a prompt waiting for its answer): a
        recording cut short keeps them."""
        if not self._held or self._text_file is None:
            return
        if time.monotonic() - self._held_since > _HOLD or (
            self._text_file.settled and self._clock() - self._held[-1][0] >= _FRAME
        ):
            self._release()

    def close(self) -> None:
        """Write what the scrubber and decoder still hold, sync the file (and the text), close."""
        if self._fd is None:
            return
        try:
            if self._scrubber is not None:
                self._pieces(self._scrubber.flush_stamped())
            self._text(self._decoder.decode(b"", final=True), self._last)
            if self._text_file is not None:
                self._text_file.finish()
                self._release()
                self._text_file.close()
            if self._fd is not None:
                os.fsync(self._fd)  # on disk before the step that names it is
        finally:
            self.abort()

    def abort(self) -> None:
        """Close without flushing (the recording ends where it was)."""
        if self._text_file is not None:
            self._text_file.abort()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _pieces(self, pieces: Stamped) -> None:
        for at, data in pieces:
            if data.isascii() and not self._decoder.getstate()[0]:
                # (ASCII with no character begun before it: its text is its bytes)
                if not data:
                    continue
                if self._text_file is None:
                    assert self._fd is not None, "cast writer is closed"
                    write_all(self._fd, _output_line(self._at(at), data))
                else:
                    self._text(data.decode("ascii"), at)
            else:
                self._text(self._decoder.decode(data), at)

    def _text(self, text: str, at: float) -> None:
        if not text:
            return
        if self._text_file is None:
            assert self._fd is not None, "cast writer is closed"
            write_all(self._fd, output_line(self._at(at), text))
            return
        self._text_file.feed(text)
        at = self._at(at)
        if not self._held:
            self._held_since = time.monotonic()
        if self._held and at - self._held[-1][0] < _FRAME:  # one frame: one event
            first, before = self._held[-1]
            self._held[-1] = (first, before + text)
        else:
            self._held.append((at, text))
        self._held_chars += len(text)
        if self._held_chars > _HELD_MAX:
            self._release()
        elif self._text_file.settled and len(self._held) > 1:
            self._release(keep=1)  # (the last may take in what the rest of its frame brings)

    def _release(self, keep: int = 0) -> None:
        """Write the held events (but the last ``keep``), each referring to the text
        written for it."""
        if len(self._held) <= keep:
            return
        assert self._fd is not None and self._text_file is not None, "cast writer is closed"
        index = self._text_file.index
        lines = []
        done, self._held = (
            self._held[: len(self._held) - keep],
            self._held[len(self._held) - keep :],
        )
        for at, text in done:
            pieces = encode(index, text)
            if len(pieces) == 1 and isinstance(pieces[0], str):
                lines.append(output_line(at, pieces[0]))  # a plain event, as asciinema's
            else:  # (bar's own: no spaces, as a line of the ledger)
                line = json.dumps([at, "o", pieces], ensure_ascii=False, separators=(",", ":"))
                lines.append(line.encode("utf-8") + b"\n")
        self._held_chars = sum(len(text) for _, text in self._held)
        if self._held:
            self._held_since = time.monotonic()
        write_all(self._fd, b"".join(lines))

    def _clock(self, at: float | None = None) -> float:
        return round((time.monotonic() if at is None else at) - self._start, 6)

    def _at(self, at: float) -> float:
        # Never let times go backwards: bytes held back by the scrubber across a resize
        # come out after it, and rounding or a clock step must not reorder either.
        self._last = max(self._last, at)
        return self._last

    def _line(self, obj: object) -> None:
        assert self._fd is not None, "cast writer is closed"
        write_all(self._fd, _encode(obj))


# what JSON escapes in a string (json.dumps's own choice): the rest of a step's output,
# by far the most of it, is copied as it is
_SPECIAL = bytes(range(0x20)) + b'"\\'
_PLAIN = bytes(sorted(set(range(256)) - set(_SPECIAL)))
_ESCAPED = {c: b"\\u%04x" % c for c in range(0x20)} | {
    ord(c): b"\\" + bytes((e,)) for c, e in zip('\n\r\t\b\f"', b'nrtbf"', strict=True)
}


def output_line(at: float, text: str) -> bytes:
    """The line of an output event: what ``_encode([at, "o", text])`` writes, made from
    the bytes (escaping only the characters present costs a few passes of ``replace``,
    at GB/s, where the JSON encoder copies a character at a time)."""
    return _output_line(at, text.encode("utf-8"))


def _output_line(at: float, data: bytes) -> bytes:
    """``output_line`` of the text whose UTF-8 is ``data``."""
    present = data.translate(None, _PLAIN)
    if present:
        if b"\\" in present:  # the backslash first: the escapes below bring their own
            data = data.replace(b"\\", b"\\\\")
        for c, escaped in _ESCAPED.items():
            if c in present:
                data = data.replace(bytes((c,)), escaped)
    return b"".join((b"[", repr(at).encode(), b', "o", "', data, b'"]\n'))


def _encode(obj: object) -> bytes:
    """One line of the cast, in the spacing asciinema itself writes."""
    line = json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n"
    return line.encode("utf-8")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _parse_header(obj: object, path: Path) -> CastHeader:
    where = f"recording {path}"
    if not isinstance(obj, dict):
        raise CorruptFile(f"{where}: the header is not a JSON object")
    obj = upgrade("cast", obj, path)
    width, height = obj.get("width"), obj.get("height")
    if not (_is_int(width) and _is_int(height) and width > 0 and height > 0):
        raise CorruptFile(f"{where}: width and height must be positive integers")
    timestamp = obj.get("timestamp")
    if timestamp is not None and not _is_number(timestamp):
        raise CorruptFile(f"{where}: timestamp is not a number")
    env = obj.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise CorruptFile(f"{where}: env must be an object of strings")
    text_file = obj.get(TEXT_FILE)
    if text_file is not None and not (
        isinstance(text_file, str) and _TEXT_NAME.fullmatch(text_file)
    ):
        raise CorruptFile(f"{where}: {TEXT_FILE} must name a step's output file (0001.output)")
    return CastHeader(
        width=width,
        height=height,
        timestamp=None if timestamp is None else int(timestamp),
        env=dict(env),
        text_file=text_file,
    )


def _parse_event(
    obj: object, where: str, previous: float, text: Callable[[], TextSource] | None
) -> CastEvent:
    if not isinstance(obj, list) or len(obj) != 3:
        raise CorruptFile(f"{where}: an event must be a [time, code, data] array")
    at, code, data = obj
    if not _is_number(at) or at < 0:
        raise CorruptFile(f"{where}: event time must be a non-negative number")
    if float(at) < previous:
        raise CorruptFile(f"{where}: event time goes backwards")
    if not isinstance(code, str) or not code:
        raise CorruptFile(f"{where}: event code must be a non-empty string")
    if isinstance(data, list) and code == "o" and text is not None:
        if not all(isinstance(p, str) or (_is_int(p) and p != 0) for p in data):
            raise CorruptFile(f"{where}: an output's pieces must be strings or non-zero counts")
        data = resolve(data, text())
    if not isinstance(data, str):
        raise CorruptFile(f"{where}: event data must be a string")
    if code == "r" and not _RESIZE.fullmatch(data):
        raise CorruptFile(f"{where}: resize event data must look like 80x24")
    return CastEvent(float(at), code, data)


def _iter_cast(path: Path) -> Iterator[CastHeader | CastEvent]:
    """Yield the header, then every event, validating each line as it is read; an
    output that refers to the step's text (``textref``) is read from it."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise NotFound(f"recording {path} does not exist") from None
    except OSError as exc:
        raise BarError(f"cannot read recording {path}: {exc.strerror}") from exc
    opened: list[TextSource] = []
    text: Callable[[], TextSource] | None = None
    with handle:
        try:
            previous = 0.0
            number = 0
            for number, raw in enumerate(handle, start=1):
                where = f"recording {path}, line {number}"
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError):
                    raise CorruptFile(f"{where}: not valid JSON") from None
                if number == 1:
                    header = _parse_header(obj, path)
                    if header.text_file is not None:
                        text = _opener(path.with_name(header.text_file), path, opened)
                    yield header
                else:
                    event = _parse_event(obj, where, previous, text)
                    previous = event.time
                    yield event
            if number == 0:
                raise CorruptFile(f"recording {path} is empty")
        finally:
            for source in opened:
                source.close()


def _opener(text: Path, cast: Path, opened: list[TextSource]) -> Callable[[], TextSource]:
    """The text a recording refers to, opened when an event first refers to it."""

    def source() -> TextSource:
        if not opened:
            opened.append(TextSource(text, f"recording {cast}"))
        return opened[0]

    return source


def full_cast(path: Path) -> Iterator[bytes]:
    """The recording as a whole asciinema v2 file, every output in its events (what
    another player reads), line by line; ``CorruptFile`` at the first bad line."""
    for item in _iter_cast(path):
        if isinstance(item, CastHeader):
            header: dict[str, object] = {
                "version": CAST_VERSION,
                "width": item.width,
                "height": item.height,
            }
            if item.timestamp is not None:
                header["timestamp"] = item.timestamp
            header["env"] = dict(item.env)
            yield _encode(header)
        elif item.code == "o":
            yield output_line(item.time, item.data)
        else:
            yield _encode([item.time, item.code, item.data])


def outputs(path: Path) -> Iterator[str]:
    """The data of every output event, in order, read as the file is (a long recording
    is never held whole); raises ``CorruptFile`` at the first bad line."""
    for item in _iter_cast(path):
        if isinstance(item, CastEvent) and item.code == "o":
            yield item.data


def read_cast(path: Path) -> Cast:
    """Read and validate a whole cast; raises ``CorruptFile`` naming the file."""
    items = iter(_iter_cast(path))
    header = next(items)
    assert isinstance(header, CastHeader)
    events = tuple(e for e in items if isinstance(e, CastEvent))
    return Cast(header, events)


def replay_cast(
    cast_path: Path,
    out: BinaryIO,
    *,
    speed: float = 1.0,
    max_idle: float | None = 2.0,
    instant: bool = False,
) -> CastHeader:
    """Play a cast's output to ``out`` with its original timing.

    ``speed`` divides every pause; ``max_idle`` caps any single pause (before dividing),
    so a recording where the agent waited minutes plays back briskly. ``instant`` writes
    everything without pausing. The whole file is validated before anything is played.
    Returns the header, so a caller can compare the recorded size with the terminal's.
    """
    if not (math.isfinite(speed) and speed > 0):
        raise UsageError(f"replay speed must be a positive number, not {speed}")
    if max_idle is not None and not max_idle >= 0:
        raise UsageError(f"the idle limit must not be negative, not {max_idle}")
    header: CastHeader | None = None
    for item in _iter_cast(cast_path):
        if isinstance(item, CastHeader):
            header = item
    assert header is not None

    start = time.monotonic()
    schedule = 0.0  # when the current event is due, in seconds after start
    previous = 0.0
    for item in _iter_cast(cast_path):
        if not isinstance(item, CastEvent):
            continue
        gap, previous = item.time - previous, item.time
        if max_idle is not None:
            gap = min(gap, max_idle)
        schedule += gap / speed
        if item.code != "o":
            continue
        if not instant:
            # Sleeping until an absolute deadline keeps many short pauses from drifting.
            delay = start + schedule - time.monotonic()
            if delay > 0:
                out.flush()
                time.sleep(delay)
        out.write(item.data.encode("utf-8", "replace"))
        if not instant:
            out.flush()
    out.flush()
    return header


def text_of_cast(path: Path) -> Iterator[bytes]:
    """The output of the pty step recorded in the cast ``path``, in bar's output format
    (``=== STDOUT ===``, the plain text, ``=== STDERR ===``: a pty has one stream), in
    pieces as the recording is read; raises ``CorruptFile`` for a broken recording. For
    a pty step of an earlier bar, which kept no output file: the text is cleaned as a
    step's is when recorded (``TextFile``), and scrubbed again."""
    from bar.redact import Scrubber
    from bar.redact.stream import StreamScrubber
    from bar.terminal.pipes import STDERR_HEADER, STDOUT_HEADER

    events = outputs(path)
    first = next(events, None)  # (a missing or broken recording says so before any output)
    cleaner, scrubber = TextCleaner(), StreamScrubber(Scrubber())
    yield STDOUT_HEADER
    last = b"\n"
    for data in itertools.chain([] if first is None else [first], events):
        if piece := scrubber.feed(cleaner.feed_str(data).encode("utf-8")):
            last = piece
            yield piece
    if piece := scrubber.feed(cleaner.finish().encode("utf-8")) + scrubber.flush():
        last = piece
        yield piece
    yield (b"" if last.endswith(b"\n") else b"\n") + STDERR_HEADER
