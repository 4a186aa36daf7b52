"""Scrubbing output as it streams: each read is written at once, but for the bytes that
could still begin a secret.

``StreamScrubber`` gives exactly what ``Scrubber.scrub_bytes`` gives for the whole
stream. A pass's attempt to match at some offset is final unless it runs into the end
of what was fed: for a literal secret, when the data from there on begins the secret
(``partial_match.prefix_at``); for a shape, when some path of its pattern reads past
the end (``partial_match.unfinished``). Everything before the first unfinished attempt,
less the ``back`` of its pass, can be written. So a line of ordinary output goes out
with the read that brought it, and what is held back is usually nothing or a few bytes
("sk" might start a key), at most the scrubber's ``window`` (a private key block not
closed yet) however long the stream.

Each shape is searched with one regex, ``UNFINISHED()|SHAPE``: at every candidate the
engine first tries whether the attempt is unfinished, then the shape itself, so the data
is skimmed once, nearly as fast as ``scrub_bytes`` does, and each hit is searched once.
A pass that finds a key by a letter in its middle redacts from ``back`` bytes before it,
so the last bytes of a read that could be those (``partial_match.lead_in``: an "s" for
"sk-...") wait too. A shape ``partial_match`` cannot read waits a whole ``window``.

Past its first MiB a stream first asks ``bar.redact.needles`` which passes have one of
their strings in the new data; the others search only its last bytes (the reach of the
longest string), where a string the read cut could begin.
"""

from __future__ import annotations

import re
from collections import deque

from bar.redact import (
    _NOISE_BYTES,
    Scrubber,
    _merge,
    _Pass,
    _render,
    _ShapePass,
    _SplitPass,
    needles,
)
from bar.redact.partial_match import lead_in, prefix_at, unfinished
from bar.redact.patterns import _CONTEXT, _NEEDLES, _SHAPES, _Check

_Pieces = list[tuple[float, bytes]]


class _Watch:
    """One pass of the scrubber as a stream runs it. A shape is searched for together
    with its unfinished attempts (the empty group marks them, and moves the shape's own
    groups, which say where a redaction starts and ends, one up), or alone once the
    stream has ended: ``search``, ``starts`` and ``ends`` are indexed by that."""

    __slots__ = (
        "back",
        "check",
        "ends",
        "lead_in",
        "marked",
        "needle",
        "search",
        "split",
        "starts",
        "windowed",
    )

    def __init__(self, p: _Pass) -> None:
        self.back = 0
        self.check: _Check | None = None
        self.needle: bytes | None = None
        self.split: _SplitPass | None = None  # a split secret's, until noise is seen
        self.lead_in: re.Pattern[bytes] | None = None  # what a match redacts before it
        self.windowed = self.marked = False
        if isinstance(p, _SplitPass):
            self.split = p
            return
        if not isinstance(p, _ShapePass):
            self.needle = p.needle
            return
        self._shape(p)

    def wake(self) -> None:
        """A split secret's watch, once the stream holds noise: its regex from now on."""
        assert self.split is not None
        shape, self.split = self.split.shape, None
        self._shape(shape)

    def _shape(self, p: _ShapePass) -> None:
        self.back, regex, both, self.check = p.back, p.regex, p.regex, p.check
        shift = 0
        try:
            partial = unfinished(regex.pattern, regex.flags)
            self.lead_in = lead_in(regex.pattern, p.back, regex.flags)
            if partial is not None:
                both = re.compile(partial.pattern + b"()|" + regex.pattern, regex.flags)
                shift = 1
        except (ValueError, re.error):  # not understood: the window decides alone
            self.windowed = True
        self.marked = shift == 1
        self.search = (both.search, regex.search)
        self.starts = (tuple(g + shift for g in p.starts), p.starts)
        self.ends = (tuple(g + shift for g in p.ends), p.ends)


def watches_of(scrubber: Scrubber) -> tuple[_Watch, ...]:
    """The stream passes of ``scrubber``, made once per scrubber."""
    made: tuple[_Watch, ...] | None = getattr(scrubber, "_stream_watches", None)
    if made is None:
        made = tuple(_Watch(p) for p in scrubber._byte_passes)
        scrubber._stream_watches = made
    return made


_NO_SCAN: tuple[None, int] = (None, 0)


def scan_of(scrubber: Scrubber) -> tuple[needles.Scan | None, int]:
    """The needle scan of ``scrubber``'s passes and the length of their longest string,
    made once per scrubber; (None, 0) where there is none."""
    made: tuple[needles.Scan | None, int] | None = getattr(scrubber, "_stream_scan", None)
    if made is None:
        strings = [_NEEDLES[name] for name, _, _ in _SHAPES]
        strings += [(p.needle,) for p in scrubber._byte_literals]
        # (a secret split by noise begins with some of its first bytes and then noise)
        strings += [
            (secret, *(secret[:i] + n for i in range(1, len(secret)) for n in _NOISE_BYTES))
            for secret in scrubber._split_secrets
        ]
        assert len(strings) == scrubber.pass_count
        scan = needles.scanner(strings)
        made = (scan, max(len(s) for group in strings for s in group)) if scan else _NO_SCAN
        scrubber._stream_scan = made
    return made


class StreamScrubber:
    """Scrubs a byte stream chunk by chunk (see the module docstring).

    ``feed_stamped`` tags each chunk (with the time it was read, say) and returns the
    output cut where chunks met, each piece with the tag of the chunk it starts in.
    After ``flush`` the object can be used for a new stream.
    """

    def __init__(self, scrubber: Scrubber, *, scan_from: int = needles.FROM) -> None:
        self._scrubber = scrubber
        self._passes = scrubber.pass_count
        self._window = scrubber.window
        self._scan_from = scan_from  # stream offset from which ``bar.redact.needles`` is asked
        self._reset()

    @property
    def _watches(self) -> tuple[_Watch, ...]:
        """The passes as a stream runs them, made when the first byte arrives: their
        regexes take some 20 ms to compile, which a silent command should not pay. A
        scrubber's streams (stdout, stderr) share them."""
        return watches_of(self._scrubber)

    def _reset(self) -> None:
        self._buf = bytearray()
        self._base = 0  # stream offset of _buf[0]
        self._emitted = 0  # stream offset up to which output has been returned
        self._open_mark = False  # the output so far ends with a *** reaching _emitted
        self._resume = [0] * self._passes  # where each pass searches next
        self._pending: list[tuple[int, int]] = []  # decided spans not yet written
        self._stamps: deque[tuple[int, float]] = deque()  # (chunk's stream offset, tag)

    def feed(self, chunk: bytes) -> bytes:
        """Take the next chunk; return the scrubbed output that is now final."""
        self._buf += chunk
        return b"".join(piece for _, piece in self._advance(final=False))

    def feed_stamped(self, chunk: bytes, stamp: float) -> _Pieces:
        """``feed``, with the output split where chunks met and tagged by chunk."""
        if chunk:
            self._stamps.append((self._base + len(self._buf), stamp))
            self._buf += chunk
        return self._advance(final=False)

    def flush(self) -> bytes:
        """End of stream: return everything still held back."""
        return b"".join(piece for _, piece in self.flush_stamped())

    def flush_stamped(self) -> _Pieces:
        pieces = self._advance(final=True)
        self._reset()
        return pieces

    def _advance(self, *, final: bool) -> _Pieces:
        if not self._buf and not self._pending:
            return []
        buf, base, n = self._buf, self._base, len(self._buf)
        floor = n - self._window  # attempts before this are final whatever comes
        spans, cut = self._pending, base + n
        hits, reach = self._hits()
        for i, watch in enumerate(self._watches):
            pos = self._resume[i] - base
            if hits is not None and i not in hits and not watch.windowed:
                # none of its strings in the data: only where one could begin at the end
                pos = max(pos, n - reach)
            split = watch.split
            if split is not None:
                if not any(buf.find(noise, pos) >= 0 for noise in _NOISE_BYTES):
                    # no noise yet: what it could find is its literal's, but for an
                    # attempt begun at the end, which noise may go on
                    busy = n if final else prefix_at(buf, split.secret, pos)
                    self._resume[i] = base + busy
                    cut = min(cut, base + busy)
                    continue
                watch.wake()
            needle = watch.needle
            if needle is not None:  # a literal: only a prefix of it at the end waits
                busy = n if final else prefix_at(buf, needle, pos)
                at = buf.find(needle, pos)
                while 0 <= at < busy:
                    spans.append((base + at, base + at + len(needle)))
                    pos = at + len(needle)
                    at = buf.find(needle, pos)
            else:
                busy = max(pos, floor) if watch.windowed and not final else n
                pos, busy = self._take(watch, pos, busy, spans, final=final)
            # Every attempt from pos up to busy has been made and is final.
            self._resume[i] = base + max(pos, busy)
            if busy < n:  # a match from busy on may redact from busy - back
                cut = min(cut, base + busy - watch.back)
            elif watch.lead_in is not None and not final:  # ... and one yet to start, too
                m = watch.lead_in.search(buf, max(n - watch.back, 0))
                cut = cut if m is None else min(cut, base + m.start())
        if spans:
            merged = _merge(spans)
            self._pending = [s for s in merged if s[0] >= cut]
            spans = [s for s in merged if s[0] < cut]
        pieces = self._release(spans, cut)
        # Keep what is not written yet, and context for the passes' lookbehinds.
        keep_from = max(base, min(self._emitted, min(self._resume, default=cut) - _CONTEXT))
        del buf[: keep_from - base]
        self._base = keep_from
        return pieces

    def _hits(self) -> tuple[set[int] | None, int]:
        """Which passes have one of their strings in what they have yet to search, and
        the longest string's length; (None, 0): every pass searches everything."""
        buf, base = self._buf, self._base
        if base + len(buf) < self._scan_from:
            return None, 0
        scan, reach = scan_of(self._scrubber)
        if scan is None:
            return None, 0
        start = max(0, min(self._resume) - base - reach)
        view = memoryview(buf)
        part = view[start:]
        try:
            return scan(part), reach
        finally:
            part.release()
            view.release()

    def _take(
        self, watch: _Watch, pos: int, busy: int, spans: list[tuple[int, int]], *, final: bool
    ) -> tuple[int, int]:
        """Take a shape's matches from ``pos`` on that start before ``busy`` and are
        final; return where the pass goes on and where its first unfinished attempt is."""
        buf, base = self._buf, self._base
        search, starts, ends = watch.search[final], watch.starts[final], watch.ends[final]
        m = search(buf, pos)
        while m is not None and m.start() < busy:
            start, stop = m.span()
            if watch.check is not None and not watch.check(buf, start):
                pos = start + 1  # (a check reads only what is before the match)
                m = search(buf, pos)
                continue
            if watch.marked and not final and m.start(1) >= 0:
                return pos, start  # the marker: an attempt more data could change
            red_start, red_end = start - watch.back, stop
            for group in starts:
                if (at := m.start(group)) >= 0:
                    red_start = at
                    break
            for group in ends:
                if (at := m.start(group)) >= 0:
                    red_end = at
                    break
            spans.append((base + red_start, base + red_end))
            pos = max(stop, start + 1)  # shapes never match empty; never loop if one did
            m = search(buf, pos)
        return pos, busy

    def _release(self, spans: list[tuple[int, int]], cut: int) -> _Pieces:
        """Render up to ``cut``, one piece per chunk (a ``***`` goes with the chunk it
        starts in)."""
        stamps, pieces, done = self._stamps, [], 0
        while True:
            pos = self._emitted
            while len(stamps) > 1 and stamps[1][0] <= pos:
                stamps.popleft()
            to = min(cut, stamps[1][0]) if len(stamps) > 1 else cut
            upto = done
            while upto < len(spans) and spans[upto][0] < to:
                upto += 1
            out, self._emitted, self._open_mark = _render(
                self._buf, self._base, pos, spans[done:upto], to, open_mark=self._open_mark
            )
            done = upto
            if out:
                pieces.append((stamps[0][1] if stamps else 0.0, out))
            if to >= cut:
                return pieces
