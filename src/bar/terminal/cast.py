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

The reader validates every line and names the file and line in ``CorruptFile``; the
header's ``version`` goes through ``bar.ledger.migrate`` like every versioned file of bar's. Replay
streams events (a long agent session can be large) after a first validating pass, so a
broken file fails before anything is played.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, TypeGuard

from bar.base.record import field, record
from bar.errors import BarError, CorruptFile, NotFound, UsageError
from bar.ledger.migrate import CURRENT, upgrade
from bar.store.files import create_file
from bar.terminal.filters import Stamped, StreamFilter, stamped

CAST_VERSION = CURRENT["cast"][0]
_RESIZE = re.compile(r"[1-9][0-9]*x[1-9][0-9]*")


@record(frozen=True)
class CastHeader:
    width: int
    height: int
    timestamp: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)


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


def create_private(path: Path, data: bytes = b"") -> int:
    """Create or truncate ``path`` (0600, never through a link) holding ``data``, and
    return a descriptor that appends to it."""
    create_file(path, data)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many ``write()`` calls that takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class CastWriter:
    """Append events to a new cast file; times are seconds since the writer was made."""

    def __init__(
        self,
        path: Path,
        *,
        width: int,
        height: int,
        env: Mapping[str, str] | None = None,
        scrubber: StreamFilter | None = None,
    ) -> None:
        self._scrubber = stamped(scrubber) if scrubber is not None else None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._last = 0.0
        header = {
            "version": CAST_VERSION,
            "width": width,
            "height": height,
            "timestamp": int(time.time()),
            "env": {k: env[k] for k in ("SHELL", "TERM") if env and k in env},
        }
        self._fd: int | None = create_private(path, _encode(header))
        self._start = time.monotonic()

    def output(self, data: bytes) -> None:
        """Record ``data``, read just now."""
        now = self._clock()
        if self._scrubber is None:
            self._pieces([(now, data)])
        else:
            self._pieces(self._scrubber.feed_stamped(data, now))

    def resize(self, width: int, height: int) -> None:
        self._line([self._at(self._clock()), "r", f"{width}x{height}"])

    def close(self) -> None:
        """Write what the scrubber and decoder still hold, then close the file."""
        if self._fd is None:
            return
        try:
            if self._scrubber is not None:
                self._pieces(self._scrubber.flush_stamped())
            self._text(self._decoder.decode(b"", final=True), self._last)
        finally:
            os.close(self._fd)
            self._fd = None

    def abort(self) -> None:
        """Close without flushing (the recording ends where it was)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _pieces(self, pieces: Stamped) -> None:
        for at, data in pieces:
            if data.isascii() and not self._decoder.getstate()[0]:
                # (ASCII with no character begun before it: its text is its bytes)
                if data:
                    assert self._fd is not None, "cast writer is closed"
                    write_all(self._fd, _output_line(self._at(at), data))
            else:
                self._text(self._decoder.decode(data), at)

    def _text(self, text: str, at: float) -> None:
        if text:
            assert self._fd is not None, "cast writer is closed"
            write_all(self._fd, output_line(self._at(at), text))

    def _clock(self) -> float:
        return round(time.monotonic() - self._start, 6)

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
    return CastHeader(
        width=width,
        height=height,
        timestamp=None if timestamp is None else int(timestamp),
        env=dict(env),
    )


def _parse_event(obj: object, where: str, previous: float) -> CastEvent:
    if not isinstance(obj, list) or len(obj) != 3:
        raise CorruptFile(f"{where}: an event must be a [time, code, data] array")
    at, code, data = obj
    if not _is_number(at) or at < 0:
        raise CorruptFile(f"{where}: event time must be a non-negative number")
    if float(at) < previous:
        raise CorruptFile(f"{where}: event time goes backwards")
    if not isinstance(code, str) or not code:
        raise CorruptFile(f"{where}: event code must be a non-empty string")
    if not isinstance(data, str):
        raise CorruptFile(f"{where}: event data must be a string")
    if code == "r" and not _RESIZE.fullmatch(data):
        raise CorruptFile(f"{where}: resize event data must look like 80x24")
    return CastEvent(float(at), code, data)


def _iter_cast(path: Path) -> Iterator[CastHeader | CastEvent]:
    """Yield the header, then every event, validating each line as it is read."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise NotFound(f"recording {path} does not exist") from None
    except OSError as exc:
        raise BarError(f"cannot read recording {path}: {exc.strerror}") from exc
    with handle:
        previous = 0.0
        number = 0
        for number, raw in enumerate(handle, start=1):
            where = f"recording {path}, line {number}"
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise CorruptFile(f"{where}: not valid JSON") from None
            if number == 1:
                yield _parse_header(obj, path)
            else:
                event = _parse_event(obj, where, previous)
                previous = event.time
                yield event
        if number == 0:
            raise CorruptFile(f"recording {path} is empty")


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
