"""Rows derived from every step, kept beside the ledger (``ledger.<name>.rows``).

A command that needs every step of a task (``bar log`` shows each; ``bar undo`` replays the
chain of undos) turns each ledger line into a row of plain values. Reading and checking
100,000 lines of about a kilobyte each costs seconds (the checks that keep a tampered line
from reaching git dominate), so the rows made from the ledger's lines are kept, and a
later call makes rows only for the lines appended since.

The kept rows are trusted only as far as they can be checked: their file names the bytes of
the ledger they were made from (its first ``covers`` bytes, with their BLAKE2b digest) and
what made them (the caller's tag and bar's version). A ledger that is shorter, whose
prefix hashes otherwise (``bar doctor --repair`` rewrote it, or a hand did), rows made by
another bar, or a row its caller finds malformed, are thrown away and made again. Rows cover whole, readable lines only: from
the first line that does not parse on, rows are made (and the line reported) at every
call. The file is replaced whole (a temporary file renamed over it), so readers never see
it half-written; losing it loses nothing.

The file: a header line ``{"format": 1, "tag", "bar", "covers", "lines", "rows",
"blake2b"}``, then a line with the JSON array of the rows, oldest first (read in one go).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bar.errors import WriteFailed
from bar.model.ledger_file import Ledger
from bar.model.records import Step
from bar.store.files import write_bytes_atomic

FORMAT = 1
_CHUNK = 1 << 20

Row = list[Any]


def rows(
    ledger: Ledger,
    path: Path,
    make: Callable[[Step], Row],
    tag: str,
    check: Callable[[Row], bool],
) -> list[Row]:
    """One row per step of ``ledger``, oldest first: ``make(step)``, a list of plain JSON
    values (lists, not tuples: a kept row is read back from JSON), kept in the file
    ``path`` under ``tag``, which names what ``make`` returns (change it when ``make``
    changes). ``check``: whether a row read back is one ``make`` could have made."""
    from bar import __version__

    header, kept = _read(path, tag, __version__)
    if not all(map(check, kept)):
        header, kept = None, []
    digest = hashlib.blake2b(digest_size=20)
    covers, lineno = 0, 1
    if header is not None and _prefix_digest(ledger, header["covers"], digest) == header["blake2b"]:
        covers, lineno = header["covers"], header["lines"] + 1
    else:
        digest, kept = hashlib.blake2b(digest_size=20), []
    made: list[Row] = []  # rows of the lines from the first that cannot be kept on
    whole, grown = True, False
    for number, _, line, step in ledger.lines_from(covers, lineno):
        row = make(step) if step is not None else None
        whole = whole and line.endswith(b"\n") and (row is not None or not line.strip())
        if whole:
            digest.update(line)
            covers, lineno, grown = covers + len(line), number + 1, True
        # (an unreadable line, or one not yet whole: its row and those after it are
        # made at every call)
        if row is not None:
            (kept if whole else made).append(row)
    if grown:
        _write(path, tag, __version__, covers, lineno - 1, digest.hexdigest(), kept)
    return kept + made


def _read(path: Path, tag: str, version: str) -> tuple[dict[str, Any] | None, list[Row]]:
    """The kept header and rows, or (None, []) when there are none fit to use."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None, []
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    header_line, _, body = data.partition(b"\n")
    try:
        header = json.loads(header_line)
        if not (
            isinstance(header, dict)
            and header.get("format") == FORMAT
            and header.get("tag") == tag
            and header.get("bar") == version
            and all(
                type(header.get(k)) is int and header[k] >= 0 for k in ("covers", "lines", "rows")
            )
            and isinstance(header.get("blake2b"), str)
        ):
            return None, []
        kept = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None, []
    if not (
        isinstance(kept, list)
        and len(kept) == header["rows"]
        and all(isinstance(row, list) for row in kept)
    ):
        return None, []
    return header, kept


def _prefix_digest(ledger: Ledger, size: int, digest: Any) -> str | None:
    """The digest of the ledger's first ``size`` bytes, fed into ``digest`` (None if the
    ledger is shorter, or cannot be read)."""
    try:
        fd = os.open(ledger.path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with contextlib.closing(os.fdopen(fd, "rb", buffering=0)) as fh:
        left = size
        while left > 0:
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                return None
            digest.update(chunk)
            left -= len(chunk)
    return str(digest.hexdigest())


def _write(
    path: Path,
    tag: str,
    version: str,
    covers: int,
    lines: int,
    hexdigest: str,
    kept: list[Row],
) -> None:
    header = {
        "format": FORMAT,
        "tag": tag,
        "bar": version,
        "covers": covers,
        "lines": lines,
        "rows": len(kept),
        "blake2b": hexdigest,
    }
    # (ASCII: a row may hold a lone surrogate, as a ledger line's ``\\udc80`` reads back)
    dump = json.JSONEncoder(separators=(",", ":")).encode
    body = f"{dump(header)}\n{dump(kept)}\n"
    # a read-only home, a full disk: the rows are made again next time
    with contextlib.suppress(OSError, WriteFailed):
        write_bytes_atomic(path, body.encode("ascii"), durable=False)
