"""One scan that says which passes of a long stream can have anything to find.

A stream runs every pass of its scrubber over every byte: a dozen shapes, each a regex
whose fixed first letter ("k", "-", ":", "=") is common in ordinary output, so each stops
and checks often, and a long output is scrubbed at some 80 MB/s. But a shape cannot match
without one of its strings (``bar.redact.patterns._NEEDLES``, each covering the byte where
a match starts), nor a literal secret without itself. So a long stream first has every
pass's strings searched for at once, by Hyperscan's multi-string matcher (GB/s), and a
pass none of whose strings is in the new data is run only over its last bytes, where a
string cut by the end of the read could begin: the same result, exactly, from a small
part of the work (``bar.redact.stream`` says where this is used).

Hyperscan is loaded only for a stream past ``FROM`` bytes (its import costs some 20 ms,
more than a short output's whole scrub), and only where it is installed: it is a binary
package for x86-64; elsewhere every pass runs over everything, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

FROM = 1 << 20  # bytes of a stream after which the scan is used

Scan = Callable[[bytes | bytearray | memoryview], set[int]]

_unavailable = False


def scanner(needles: Sequence[Sequence[bytes]]) -> Scan | None:
    """A scan for the passes whose strings are ``needles[i]``: it returns the indexes of
    the passes with a string in the data. None if Hyperscan cannot be loaded here."""
    global _unavailable
    if _unavailable:
        return None
    try:
        import hyperscan
    except ImportError:  # (not installed: not an x86-64 machine)
        _unavailable = True
        return None
    expressions, ids = [], []
    for index, strings in enumerate(needles):
        for needle in strings:
            expressions.append(b"".join(b"\\x%02x" % byte for byte in needle))
            ids.append(index)
    db: Any = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(
            expressions=expressions,
            ids=ids,
            elements=len(expressions),
            flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(expressions),
        )
        scratch = hyperscan.Scratch(db)
    except hyperscan.HyperscanError:  # (e.g. a CPU without the instructions it needs)
        _unavailable = True
        return None

    def scan(data: bytes | bytearray | memoryview) -> set[int]:
        found: set[int] = set()

        def hit(index: int, start: int, end: int, flags: int, context: object) -> None:
            found.add(index)

        db.scan(data, match_event_handler=hit, scratch=scratch)
        return found

    return scan
