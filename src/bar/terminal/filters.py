"""The one interface through which recorded output passes on its way to disk."""

from __future__ import annotations

from typing import Protocol


class StreamFilter(Protocol):
    """A streaming filter such as the secret scrubber.

    ``feed`` may hold back bytes (the start of what could be a secret) until a later call
    shows what they are; ``flush`` returns whatever is still held at the end of the stream.
    """

    def feed(self, chunk: bytes, /) -> bytes: ...

    def flush(self) -> bytes: ...
