"""The one interface through which recorded output passes on its way to disk."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

Stamped = list[tuple[float, bytes]]


class StreamFilter(Protocol):
    """A streaming filter such as the secret scrubber.

    ``feed`` may hold back bytes (the start of what could be a secret) until a later call
    shows what they are; ``flush`` returns whatever is still held at the end of the stream.
    """

    def feed(self, chunk: bytes, /) -> bytes: ...

    def flush(self) -> bytes: ...


@runtime_checkable
class StampedFilter(Protocol):
    """A filter that keeps each byte's tag (when it was read) through what it holds back:
    its output comes in pieces, each with the tag of the chunk it came from."""

    def feed_stamped(self, chunk: bytes, stamp: float, /) -> Stamped: ...

    def flush_stamped(self) -> Stamped: ...


class _Stamping:
    """A plain filter as a ``StampedFilter``: what it returns gets the time of the chunk
    that released it, and what it held to the end the time of the last chunk."""

    def __init__(self, inner: StreamFilter) -> None:
        self._inner = inner
        self._last = 0.0

    def feed_stamped(self, chunk: bytes, stamp: float, /) -> Stamped:
        self._last = stamp
        return [(stamp, self._inner.feed(chunk))]

    def flush_stamped(self) -> Stamped:
        return [(self._last, self._inner.flush())]


def stamped(inner: StreamFilter) -> StampedFilter:
    """``inner`` itself if it keeps the stamps of what it holds back, else a wrapper."""
    return inner if isinstance(inner, StampedFilter) else _Stamping(inner)
