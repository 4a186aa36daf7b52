"""ledger.jsonl: one JSON object per step, appended, never rewritten.

A line is written whole (one ``write()`` of the line and its newline, under the task lock,
then fsync). Readers never trust the file blindly: a line that does not parse is skipped
and reported, never fatal, and ``bar doctor --repair`` moves it aside. The newest steps are
read from the end of the file backwards, so ``bar log -n 20`` and the next step id cost the
same on a ledger of ten steps or of a hundred thousand; one step, wherever it is (``bar show
N``, ``bar rollback --to N``), is found by halving the file, whose step numbers only grow.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

from bar.base import notices
from bar.base.record import record
from bar.errors import CorruptFile, StepNotFound
from bar.model.records import Step, format_step_id, step_from_record
from bar.store.files import append_line
from bar.store.layout import STEP_ID_RE

# read from the end in blocks: a first small one (the newest steps, which is what most
# reads want: a line is ~1 KB), then large ones
_FIRST_BLOCK = 8 * 1024
_BLOCK = 64 * 1024
_PROBE = 2 * 1024  # what a look into the middle of the file reads first


@record(frozen=True)
class BadLine:
    lineno: int | None  # None when read from the end (counted from the end in `offset`)
    offset: int
    text: bytes
    reason: str
    claimed_step_id: str | None = None  # the step id the line names, if it names one


def _claimed_step_id(line: bytes) -> str | None:
    """The step id an unreadable line still names (a line of a newer version, say), so
    that it is never given to a new step. A torn line names none: its step is re-recorded
    from the running marker."""
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    step_id = rec.get("step_id") if isinstance(rec, dict) else None
    if isinstance(step_id, int) and not isinstance(step_id, bool) and 0 < step_id < 10**9:
        return format_step_id(step_id)
    return step_id if isinstance(step_id, str) and STEP_ID_RE.match(step_id) else None


_LINE_START = b'{"step_id":"'


def _named(line: bytes) -> int | None:
    """The number of the step a line is, read without parsing it, when the line says so
    beyond doubt: bar writes a step's id first, and a line with no other "step_id" key
    (JSON keeps the last of two) and no escape (that could spell one) is that step's.
    None for any other line: it is parsed. A command that wants one step, or the steps
    before one, of a 100,000-step ledger then parses only those lines."""
    if not line.startswith(_LINE_START) or b"\\u" in line or line.count(b'"step_id"') != 1:
        return None
    end = line.find(b'"', len(_LINE_START))
    digits = line[len(_LINE_START) : end]
    return int(digits) if end > 0 and digits.isdigit() and digits.isascii() else None


_UNCHANGING_KINDS = (b'","kind":"run",', b'","kind":"manual",')
_BEFORE, _AFTER = b',"snapshot_before":"', b'","snapshot":"'


def surely_unchanged(line: bytes) -> bool:
    """Whether a line is, beyond doubt, a command's or a hand edit's step that left the
    worktree's state as it found it, read without parsing it (``bar status`` of a task
    with thousands of such steps since its last change parses none of them). Beyond
    doubt: the line is as bar writes one (``_named``), its kind follows its id, and
    ``snapshot_before`` and ``snapshot`` are each named once (no nested or repeated
    key could be the one JSON keeps), one after the other, with the same object id. (A
    torn such line is no step at all, which readers pass over too.) False whenever
    unsure: the line is then parsed."""
    if _named(line) is None:
        return False
    kind = line.find(b'"', len(_LINE_START))
    if not line.startswith(_UNCHANGING_KINDS, kind):
        return False
    if line.count(_BEFORE[1:]) != 1 or line.count(_AFTER[2:]) != 1:
        return False
    start = line.find(_BEFORE) + len(_BEFORE)
    end = line.find(b'"', start)
    before = line[start:end]
    return (
        start >= len(_BEFORE)
        and len(before) in (40, 64)
        and not before.translate(None, b"0123456789abcdef")
        and line.startswith(_AFTER + before + b'"', end)
    )


def _line_from(fd: int, pos: int, end: int) -> tuple[int, bytes] | None:
    """The first line that starts at or after byte ``pos`` and before ``end``: its offset
    and its bytes (without the newline, which it must have: a torn last line is none)."""
    at = pos - 1 if pos > 0 else 0  # (byte pos - 1 says whether a line starts at pos)
    held = b""  # the file's bytes from ``at``
    first = 0 if pos == 0 else None  # where in them the line starts, once known
    while True:
        if first is None and (cut := held.find(b"\n")) >= 0:
            first = cut + 1
        if first is not None:
            if at + first >= end:
                return None
            if (cut := held.find(b"\n", first)) >= 0:
                return at + first, held[first:cut]
        more = os.pread(fd, max(_PROBE, len(held)), at + len(held))
        if not more:
            return None
        held += more


def _parse(line: bytes, where: str) -> Step:
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFile(f"{where} is not valid JSON ({exc.__class__.__name__})") from exc
    return step_from_record(rec, where)


def _open_no_follow(path: Path) -> int:
    """Open the ledger for reading; a symbolic link in its place is refused, not followed."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptFile(
                f"ledger.jsonl at {path} is a symbolic link; bar does not follow links "
                "in its own files",
                hint="run `bar doctor` to check the project",
            ) from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise CorruptFile(f"cannot read ledger.jsonl at {path}: {exc.strerror or exc}") from None


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.bad_lines: list[BadLine] = []
        # byte offsets of the bad lines already reported: a command reads its task's
        # ledger several times (through one Ledger) and should say so once
        self._reported: set[int] = set()
        # the newest step with its line (offset and bytes): a command asks for it a dozen
        # times (the next step id, the recorded state, ...); reading the end of the file
        # costs little, parsing the line more (callers treat what the ledger gives as
        # read-only)
        self._newest: tuple[tuple[int, bytes], Step] | None = None

    def _warn_once(self, offset: int, message: str) -> None:
        if offset not in self._reported:
            self._reported.add(offset)
            notices.warn(message)

    # --- reading from the end -------------------------------------------------

    def _reverse_lines(self) -> Generator[tuple[int, bytes], None, None]:
        """Yield (byte offset, line) from the last line to the first."""
        return self.lines_back()

    def lines_back(
        self, first: int = 0, opened: list[os.stat_result] | None = None
    ) -> Generator[tuple[int, bytes], None, None]:
        """Yield (byte offset, line) from the last line back to the one at byte ``first``
        (a line that begins before it is not read: ``first`` is where one begins), each
        without its newline (the last one may have none: torn, or still being written).
        ``opened``: the file read is ``os.fstat``-ed into it as it is opened."""
        try:
            fd = _open_no_follow(self.path)
        except FileNotFoundError:
            return
        try:
            status = os.fstat(fd)
            if opened is not None:
                opened.append(status)
            pos = status.st_size
            tail = b""
            block = _FIRST_BLOCK
            while pos > first:
                start = max(first, pos - block)
                block = _BLOCK
                chunk = os.pread(fd, pos - start, start)
                data = chunk + tail
                lines = data.split(b"\n")
                tail = lines[0]
                base = start + len(tail) + 1
                offsets = []
                off = base
                for ln in lines[1:]:
                    offsets.append((off, ln))
                    off += len(ln) + 1
                for off, ln in reversed(offsets):
                    if ln.strip():
                        yield off, ln
                pos = start
            if tail.strip():
                yield first, tail
        finally:
            os.close(fd)

    def iter_reverse(
        self,
        *,
        warn: bool = True,
        only: int | None = None,
        below: int | None = None,
        may_match: Callable[[bytes], bool] | None = None,
        first: int = 0,
        opened: list[os.stat_result] | None = None,
    ) -> Iterator[Step]:
        """Every step from the newest. Lines that are surely later steps are passed over
        unparsed (and unreported): ``only``, those after step number ``only``; ``below``,
        those from step number ``below`` on. ``may_match``: a look at a line's bytes
        before it is parsed (a search's words); a line it says no to is passed over.
        ``first``, ``opened``: as ``lines_back``."""
        for offset, line in self.lines_back(first, opened):
            if may_match is not None and not may_match(line):
                continue
            if only is not None or below is not None:
                number = _named(line)
                if number is not None and (
                    (only is not None and number > only) or (below is not None and number >= below)
                ):
                    continue
            where = f"{self.path} at byte {offset}"
            try:
                yield _parse(line, where)
            except CorruptFile as exc:
                self.bad_lines.append(BadLine(None, offset, line, str(exc), _claimed_step_id(line)))
                if warn:
                    self._warn_once(
                        offset, f"skipping unreadable line at byte {offset} of {self.path}: {exc}"
                    )

    def tail(self, n: int) -> list[Step]:
        """The last ``n`` steps, oldest first, reading only the end of the file."""
        steps: list[Step] = []
        if n <= 0:
            return steps
        for step in self.iter_reverse():
            steps.append(step)
            if len(steps) >= n:
                break
        steps.reverse()
        return steps

    def last(self) -> Step | None:
        """The newest step (its line parsed again only once it is another line)."""
        with contextlib.closing(self._reverse_lines()) as lines:
            first = next(lines, None)
        if first is not None:
            if self._newest is not None and self._newest[0] == first:
                return self._newest[1]
            try:
                step = _parse(first[1], f"{self.path} at byte {first[0]}")
            except CorruptFile:
                pass  # (read on, reported as every unreadable line is)
            else:
                self._newest = (first, step)
                return step
        for step in self.iter_reverse():
            return step
        return None

    def next_step_id(self) -> str:
        """One more than the newest step, or than any step id a newer unreadable line
        still names: an id is never handed out twice."""
        seen = len(self.bad_lines)
        newest = self.last()
        number = newest.number if newest is not None else 0
        for bad in self.bad_lines[seen:]:
            if bad.claimed_step_id:
                number = max(number, int(bad.claimed_step_id))
        return format_step_id(number + 1)

    def last_snapshot(self) -> str | None:
        """The state the worktree was left in by the newest step that recorded one (an
        apply's snapshot is the state it landed, which may be an earlier one: ``--at``)."""
        newest = self.last()
        if newest is not None and newest.snapshot and newest.kind != "apply":
            return newest.snapshot
        for step in self.iter_reverse():
            if step.snapshot and step.kind != "apply":
                return step.snapshot
        return None

    def get(self, step_id: str) -> Step:
        wanted = int(step_id)
        found = self._halving(wanted)
        if found is not None:
            return found
        seen = len(self.bad_lines)
        if self.near_start(wanted):
            for step in self.iter_forward(only=wanted):
                if step.number == wanted:
                    return step
        else:
            for step in self.iter_reverse(only=wanted):
                if step.number == wanted:
                    return step
                if step.number < wanted:
                    break
        for bad in self.bad_lines[seen:]:
            if bad.claimed_step_id and int(bad.claimed_step_id) == wanted:
                raise CorruptFile(
                    f"step {step_id} in {self.path} is unreadable: {bad.reason}",
                    hint="run `bar doctor` to check the task",
                )
        raise StepNotFound(
            f"no step {step_id} in this task", hint="`bar log` lists the recorded steps"
        )

    def _halving(self, wanted: int) -> Step | None:
        """Step number ``wanted``, found by halving the file: step numbers grow down the
        ledger (each is the newest plus one, appended under the task lock), so a few
        reads of a few kilobytes find any step of a ledger of any length (a line that
        does not name its step beyond doubt, ``_named``, is parsed). None when halving
        finds no readable line of that number (an unreadable line on the way, or none of
        that number): the caller then reads the lines, and reports what it finds."""
        try:
            fd = _open_no_follow(self.path)
        except FileNotFoundError:
            return None
        try:
            lo, hi = 0, os.fstat(fd).st_size  # the step's line, if any, starts in [lo, hi)
            while lo < hi:
                mid = (lo + hi) // 2
                found = _line_from(fd, mid, hi)
                if found is None:  # (no line starts in [mid, hi))
                    hi = mid
                    continue
                start, line = found
                number, step = _named(line), None
                if number is None or number == wanted:
                    try:
                        step = _parse(line, f"{self.path} at byte {start}")
                    except CorruptFile:
                        return None
                    number = step.number
                if number < wanted:
                    lo = start + len(line) + 1
                elif number > wanted:
                    hi = mid
                else:
                    return step
            return None
        finally:
            os.close(fd)

    # --- reading from the start ------------------------------------------------

    def read_all(self, *, warn: bool = True) -> list[Step]:
        return list(self.iter_forward(warn=warn))

    def iter_forward(
        self, *, warn: bool = True, upto: int | None = None, only: int | None = None
    ) -> Iterator[Step]:
        """Every step from the oldest; ``upto``: only the steps numbered up to ``upto``,
        ending at the first step past it; ``only``: lines surely other steps than number
        ``only`` passed over unparsed, ending at the first step past it."""
        upto = only if only is not None else upto
        for _, _, _, step in self.lines_from(warn=warn, only=only):
            if step is None:
                continue
            if upto is not None and step.number > upto:
                return  # (a line that only looked past it was parsed: junk)
            yield step

    def lines_from(
        self, offset: int = 0, first: int = 1, *, warn: bool = True, only: int | None = None
    ) -> Iterator[tuple[int, int, bytes, Step | None]]:
        """(line number, byte offset, the line as written, its step) for every line from
        byte ``offset`` (where line number ``first`` starts) to the end; the step is None
        for a blank line, for one that does not parse (reported) and, with ``only``, for
        one surely an earlier step than number ``only`` (passed over unparsed)."""
        try:
            fh = os.fdopen(_open_no_follow(self.path), "rb")
        except FileNotFoundError:
            return
        with fh:
            fh.seek(offset)
            for lineno, line in enumerate(fh, first):
                stripped = line.rstrip(b"\n")
                number = _named(stripped) if only is not None else None
                step = None
                if (number is None or only is None or number >= only) and stripped.strip():
                    where = f"line {lineno} of {self.path}"
                    try:
                        step = _parse(stripped, where)
                    except CorruptFile as exc:
                        self.bad_lines.append(
                            BadLine(lineno, offset, stripped, str(exc), _claimed_step_id(stripped))
                        )
                        if warn:
                            self._warn_once(offset, f"skipping {where}: {exc}")
                yield lineno, offset, line, step
                offset += len(line)

    def near_start(self, number: int) -> bool:
        """Whether step ``number`` is nearer the ledger's start than its end: read from
        the start to reach it (``iter_forward``), not from the end."""
        newest = self.last()
        return newest is not None and number <= newest.number // 2

    # --- writing ---------------------------------------------------------------

    def append(self, step: Step) -> None:
        """Append ``step``; the caller holds the task lock."""
        if self.path.is_symlink():  # appending would write wherever the link points
            _open_no_follow(self.path)
        append_line(self.path, step.to_line())
