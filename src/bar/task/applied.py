"""Whether a task's last recorded state is applied (``bar.task.state``): an apply of it is
newer than every step that changed the worktree (a step that changed nothing, or a
decision, keeps it applied), and its commit is still on the branch it landed on.

It is read from the end of the ledger back to the newest step that changed files. A task
whose agent ran its tests 100,000 times since then would be read back that far at every
``bar status`` and ``bar task list`` (the lines that surely changed nothing are passed over
on their bytes, but each is still read), so what the ledger's lines up to some point say
is kept beside it, in ``ledger.applied.json``, and a later call reads only the lines
appended since.

The kept summary is a cache, trusted only as far as it can be checked: it names the
ledger file it was read from (its device and inode: ``bar doctor --repair`` and a fetch
write a new file), how many bytes it covers (a ledger now shorter is another), and a
digest of the last line it read (a line rewritten in place is another). Anything else, or
no file, and the ledger is read back as far as it takes, as it always was; the summary is
made again once enough lines have been read past the kept one. Losing it loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from bar.base.record import record
from bar.errors import BarError
from bar.model.ledger_file import surely_unchanged
from bar.model.records import ApplyStep, DecisionStep
from bar.model.tasks import Task, still_landed
from bar.store.files import read_regular, write_bytes_atomic

FORMAT = 1
# lines read past the kept summary (or from the start) before a new one is kept: a task
# read back a few lines keeps no file
KEEP_AFTER = 256
_LOOK_BACK = 1 << 16  # the longest last line a kept summary is checked by


@record(frozen=True)
class Seen:
    """What a stretch of the ledger says, read from its end back to the newest step in it
    that changed files (or its start): the newest apply among those lines (``apply``: its
    step id; "" for one that recorded no state, which leaves nothing applied), the newest
    recorded state (``state``), and whether a step that changed files was reached
    (``changed``: nothing older counts then)."""

    apply: str | None = None
    state: str | None = None
    changed: bool = False

    def then(self, older: Seen) -> Seen:
        """What these lines and the ``older`` ones before them say together."""
        if self.changed:
            return self
        return Seen(
            apply=self.apply if self.apply is not None else older.apply,
            state=self.state or older.state,
            changed=older.changed,
        )


def is_applied(task: Task) -> bool:
    """Whether the task's last recorded state is applied (see the module's text)."""
    kept = _kept(task)
    scan = _Scan(task, kept.covers if kept is not None else 0)
    if kept is not None and not scan.seen.changed:
        if scan.opened is not None and _still_the_ledger(task, kept, scan.opened):
            seen = scan.seen.then(kept.seen)
        else:  # (not this ledger's: read back as far as it takes)
            scan = _Scan(task, 0)
            seen = scan.seen
    else:
        seen = scan.seen
    if scan.count >= KEEP_AFTER and scan.opened is not None and scan.last is not None:
        _keep(task, scan.opened, scan.last, seen)
    return _judged(task, seen, scan.applies)


class _Scan:
    """The ledger read from its end back to the newest step that changed files, or to
    byte ``first`` (where a kept summary ends)."""

    def __init__(self, task: Task, first: int) -> None:
        self.count = 0  # lines read
        self.newest: bytes | None = None  # the newest line read
        self.applies: dict[str, ApplyStep] = {}
        apply: str | None = None
        state: str | None = None  # the last recorded state
        seen: Seen | None = None

        def look(line: bytes) -> bool:
            # once the last recorded state is known, a step that surely changed nothing
            # is passed over unparsed
            self.count += 1
            if self.newest is None:
                self.newest = line
            return state is None or not surely_unchanged(line)

        opened: list[os.stat_result] = []
        for step in task.ledger.iter_reverse(
            warn=False, may_match=look, first=first, opened=opened
        ):
            if isinstance(step, DecisionStep):
                continue
            if isinstance(step, ApplyStep):
                # one that recorded no state leaves nothing applied, but the reading goes
                # on: what is older counts when this is read after a newer apply
                if apply is None:
                    apply = step.step_id if step.snapshot else ""
                    self.applies[step.step_id] = step
                continue
            if not step.snapshot:
                continue
            state = state or step.snapshot
            if step.snapshot_before != step.snapshot:  # the newest step that changed files
                seen = Seen(apply=apply, state=state, changed=True)
                break
        self.seen = seen if seen is not None else Seen(apply=apply, state=state)
        self.opened = opened[0] if opened else None
        # the digest of the newest line, when it is whole (the file ends with its
        # newline): what a summary kept of this read covers
        self.last = (
            _digest(self.newest)
            if self.newest is not None
            and self.opened is not None
            and _ends_a_line(task, self.opened)
            else None
        )


def _judged(task: Task, seen: Seen, found: dict[str, ApplyStep]) -> bool:
    if not seen.apply:
        return False
    apply = found.get(seen.apply) or _apply_step(task, seen.apply)
    if apply is None or not apply.snapshot:
        return False
    recorded = seen.state or (None if seen.changed else task.base_commit)
    return apply.snapshot == recorded and still_landed(task, apply)


def _apply_step(task: Task, step_id: str) -> ApplyStep | None:
    with contextlib.suppress(BarError, OSError, ValueError):
        step = task.ledger.get(step_id)
        if isinstance(step, ApplyStep):
            return step
    return None


def _digest(line: bytes) -> str:
    import hashlib  # (here: a step's bar run loads this module, and needs no hashlib)

    return hashlib.blake2b(line, digest_size=16).hexdigest()


def _ends_a_line(task: Task, opened: os.stat_result) -> bool:
    """Whether the ledger's byte before ``opened.st_size`` is a newline (its last line
    whole, as it was read)."""
    if opened.st_size == 0:
        return False
    return _read(task, (opened.st_dev, opened.st_ino), opened.st_size - 1, 1) == b"\n"


def _read(task: Task, file: tuple[int, int], start: int, size: int) -> bytes | None:
    """``size`` bytes of the ledger from ``start``, if it is still the file ``file``
    (device, inode); else None."""
    try:
        fd = os.open(task.ledger.path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if (status.st_dev, status.st_ino) != file:
            return None
        return os.pread(fd, size, start)
    except OSError:
        return None
    finally:
        os.close(fd)


@record(frozen=True)
class _Kept:
    device: int
    inode: int
    covers: int  # bytes of the ledger read
    last: str  # the digest of the last line of them
    seen: Seen


def _kept(task: Task) -> _Kept | None:
    """The kept summary, if it reads as one (whether it is this ledger's is checked by
    its caller)."""
    held = read_regular(task.paths.applied_summary)
    try:
        data = json.loads(held) if held is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    numbers = [data.get(k) for k in ("device", "inode", "covers")]
    last, seen = data.get("last"), data.get("seen")
    if not (
        all(type(n) is int and n >= 0 for n in numbers)
        and isinstance(last, str)
        and isinstance(seen, dict)
        and all(seen.get(k) is None or isinstance(seen.get(k), str) for k in ("apply", "state"))
        and isinstance(seen.get("changed"), bool)
    ):
        return None
    device, inode, covers = (int(n) for n in numbers)  # type: ignore[arg-type]
    return _Kept(device, inode, covers, last, Seen(seen["apply"], seen["state"], seen["changed"]))


def _still_the_ledger(task: Task, kept: _Kept, opened: os.stat_result) -> bool:
    """Whether the ledger read (``opened``) is the one ``kept`` was made from: the same
    file, at least as long, its last line read then the same."""
    if (opened.st_dev, opened.st_ino) != (kept.device, kept.inode) or opened.st_size < kept.covers:
        return False
    if kept.covers == 0:
        return False
    start = max(0, kept.covers - _LOOK_BACK)
    chunk = _read(task, (kept.device, kept.inode), start, kept.covers - start)
    if chunk is None or not chunk.endswith(b"\n"):
        return False
    body = chunk[:-1]
    cut = body.rfind(b"\n")
    if cut < 0 and start > 0:
        return False  # (a last line longer than the look: not trusted)
    return _digest(body[cut + 1 :]) == kept.last


def _keep(task: Task, opened: os.stat_result, last: str, seen: Seen) -> None:
    """Keep ``seen``, what the whole ledger (``opened``) says, its last line's digest
    ``last``. A cache: written without waiting for the disk, and never an error."""
    data: dict[str, Any] = {
        "format": FORMAT,
        "device": opened.st_dev,
        "inode": opened.st_ino,
        "covers": opened.st_size,
        "last": last,
        "seen": {"apply": seen.apply, "state": seen.state, "changed": seen.changed},
    }
    with contextlib.suppress(BarError, OSError):
        write_bytes_atomic(
            task.paths.applied_summary, json.dumps(data).encode() + b"\n", durable=False
        )
