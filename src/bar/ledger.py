"""ledger.jsonl: one JSON object per step, appended, never rewritten.

A line is written whole (one ``write()`` of the line and its newline, under the task lock,
then fsync). Readers never trust the file blindly: a line that does not parse is skipped
and reported, never fatal, and ``bar doctor --repair`` moves it aside. The newest steps are
read from the end of the file backwards, so ``bar log -n 20`` and the next step id cost the
same on a ledger of ten steps or of a hundred thousand.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bar.errors import CorruptFile, StepNotFound, UsageError
from bar.git import DiffStat, is_object_id
from bar.migrate import upgrade
from bar.store import append_line

KINDS = ("run", "apply", "rollback", "manual")
STEP_ID_RE = re.compile(r"^[0-9]{4,9}$")
# an artifact is a plain file in the task's artifacts/ directory, nothing else
ARTIFACT_RE = re.compile(r"^artifacts/(?!\.)[A-Za-z0-9._-]+$")
_BLOCK = 64 * 1024


def format_step_id(number: int) -> str:
    return f"{number:04d}"


def parse_step_ref(value: str) -> str:
    """Accept ``7``, ``0007`` or ``#7`` and return the canonical ``0007``."""
    text = value.strip().lstrip("#")
    # isdigit() alone accepts '²' and other digits int() refuses or reads differently
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < 1:
        raise UsageError(f"{value!r} is not a step id", hint="step ids look like 0001 or 1")
    return format_step_id(int(text))


@dataclass
class Artifacts:
    patch: str | None = None
    output: str | None = None
    cast: str | None = None

    def to_record(self) -> dict[str, str]:
        rec: dict[str, str] = {}
        if self.patch:
            rec["patch"] = self.patch
        if self.output:
            rec["output"] = self.output
        if self.cast:
            rec["cast"] = self.cast
        return rec


@dataclass
class Step:
    """One ledger line. Fields not used by a kind stay None and are not written."""

    step_id: str
    kind: str
    started_at: str
    ended_at: str
    duration_ms: int
    # run
    cmd: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    exit_code: int | None = None
    policy_events: list[dict[str, Any]] | None = None
    head: str | None = None
    signal: int | None = None
    interrupted: bool = False
    blocked: bool = False
    hooks: list[dict[str, Any]] | None = None
    pty: bool = False
    # run, manual, rollback
    diff_stat: DiffStat | None = None
    artifacts: Artifacts = field(default_factory=Artifacts)
    snapshot_before: str | None = None
    snapshot: str | None = None
    # apply
    mode: str | None = None
    commit_sha: str | None = None
    commit_message: str | None = None
    target_branch: str | None = None
    # rollback
    target: str | None = None
    target_step: str | None = None
    hard: bool | None = None
    # fields this version does not know, kept so a rewrite never drops them
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def number(self) -> int:
        return int(self.step_id)

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"step_id": self.step_id, "kind": self.kind}
        if self.kind == "run":
            rec["cmd"] = self.cmd or []
            rec["cwd"] = self.cwd or "."
            rec["env"] = self.env or {}
        rec["started_at"] = self.started_at
        rec["ended_at"] = self.ended_at
        rec["duration_ms"] = self.duration_ms
        if self.kind == "run":
            rec["exit_code"] = self.exit_code
        if self.kind == "apply":
            rec["mode"] = self.mode
            rec["commit_sha"] = self.commit_sha
            rec["commit_message"] = self.commit_message
            rec["target_branch"] = self.target_branch
        if self.kind == "rollback":
            rec["target"] = self.target
            rec["target_step"] = self.target_step
            rec["hard"] = bool(self.hard)
        if self.kind in ("run", "manual", "rollback"):
            rec["diff_stat"] = (self.diff_stat or DiffStat.empty()).to_record()
            rec["artifacts"] = self.artifacts.to_record()
        if self.kind == "run":
            rec["policy_events"] = self.policy_events or []
        if self.snapshot_before is not None:
            rec["snapshot_before"] = self.snapshot_before
        if self.snapshot is not None:
            rec["snapshot"] = self.snapshot
        if self.head is not None:
            rec["head"] = self.head
        if self.kind == "run":
            if self.signal is not None:
                rec["signal"] = self.signal
            if self.interrupted:
                rec["interrupted"] = True
            if self.blocked:
                rec["blocked"] = True
            rec["hooks"] = self.hooks or []
            if self.pty:
                rec["pty"] = True
        rec.update(self.extra)
        rec["version"] = 1
        return rec

    def to_line(self) -> bytes:
        return json.dumps(self.to_record(), ensure_ascii=False, separators=(",", ":")).encode()

    @classmethod
    def from_record(cls, rec: Any, where: str) -> Step:
        if not isinstance(rec, dict):
            raise CorruptFile(f"{where} is not a JSON object")
        rec = upgrade("step", dict(rec), where, default=1)
        known = set(_FIELDS)
        step_id = rec.get("step_id")
        kind = rec.get("kind")
        if not isinstance(step_id, str) or not STEP_ID_RE.match(step_id):
            raise CorruptFile(f"{where} has no valid step_id")
        if kind not in KINDS:
            raise CorruptFile(f"{where} has unknown kind {kind!r}")
        stat = rec.get("diff_stat")
        diff_stat = None
        if isinstance(stat, dict):
            files = stat.get("file_list") or []
            diff_stat = DiffStat(
                files=_int(stat.get("files")),
                additions=_int(stat.get("additions")),
                deletions=_int(stat.get("deletions")),
                file_list=tuple(str(f) for f in files) if isinstance(files, list) else (),
            )
        arts = rec.get("artifacts") if isinstance(rec.get("artifacts"), dict) else {}
        assert isinstance(arts, dict)
        # Values that reach git's command line or the file system are checked here, once,
        # so that a tampered line can neither pass an option to git nor name a file
        # outside the task.
        for key in _OBJECT_ID_FIELDS:
            if rec.get(key) is not None and not is_object_id(rec[key]):
                raise CorruptFile(f"{where} has an invalid {key} {rec[key]!r}")
        for value in arts.values():
            if value is not None and not (isinstance(value, str) and ARTIFACT_RE.match(value)):
                raise CorruptFile(f"{where} names an invalid artifact path {value!r}")
        cmd = rec.get("cmd")
        return cls(
            step_id=step_id,
            kind=kind,
            started_at=str(rec.get("started_at", "")),
            ended_at=str(rec.get("ended_at", "")),
            duration_ms=_int(rec.get("duration_ms")),
            cmd=[str(c) for c in cmd] if isinstance(cmd, list) else None,
            cwd=_str(rec.get("cwd")),
            env=rec["env"] if isinstance(rec.get("env"), dict) else None,
            exit_code=rec["exit_code"] if isinstance(rec.get("exit_code"), int) else None,
            policy_events=_dicts(rec.get("policy_events")),
            head=_str(rec.get("head")),
            signal=rec["signal"] if isinstance(rec.get("signal"), int) else None,
            interrupted=rec.get("interrupted") is True,
            blocked=rec.get("blocked") is True,
            hooks=_dicts(rec.get("hooks")),
            pty=rec.get("pty") is True,
            diff_stat=diff_stat,
            artifacts=Artifacts(
                patch=_str(arts.get("patch")),
                output=_str(arts.get("output")),
                cast=_str(arts.get("cast")),
            ),
            snapshot_before=_str(rec.get("snapshot_before")),
            snapshot=_str(rec.get("snapshot")),
            mode=_str(rec.get("mode")),
            commit_sha=_str(rec.get("commit_sha")),
            commit_message=_str(rec.get("commit_message")),
            target_branch=_str(rec.get("target_branch")),
            target=_str(rec.get("target")),
            target_step=_str(rec.get("target_step")),
            hard=rec.get("hard") if isinstance(rec.get("hard"), bool) else None,
            extra={k: v for k, v in rec.items() if k not in known and k != "version"},
        )


_FIELDS = [
    "step_id", "kind", "started_at", "ended_at", "duration_ms", "cmd", "cwd", "env",
    "exit_code", "policy_events", "head", "signal", "interrupted", "blocked", "hooks", "pty",
    "diff_stat", "artifacts", "snapshot_before", "snapshot", "mode", "commit_sha",
    "commit_message", "target_branch", "target", "target_step", "hard",
]  # fmt: skip
_OBJECT_ID_FIELDS = ("snapshot_before", "snapshot", "head", "commit_sha")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dicts(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, dict)]


@dataclass(frozen=True)
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


def _parse(line: bytes, where: str) -> Step:
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFile(f"{where} is not valid JSON ({exc.__class__.__name__})") from exc
    return Step.from_record(rec, where)


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

    def _warn_once(self, offset: int, message: str) -> None:
        if offset not in self._reported:
            self._reported.add(offset)
            print(f"bar: warning: {message}", file=sys.stderr)

    # --- reading from the end -------------------------------------------------

    def _reverse_lines(self) -> Iterator[tuple[int, bytes]]:
        """Yield (byte offset, line) from the last line to the first."""
        try:
            fd = _open_no_follow(self.path)
        except FileNotFoundError:
            return
        try:
            pos = os.fstat(fd).st_size
            tail = b""
            while pos > 0:
                start = max(0, pos - _BLOCK)
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
                yield 0, tail
        finally:
            os.close(fd)

    def iter_reverse(self, *, warn: bool = True) -> Iterator[Step]:
        for offset, line in self._reverse_lines():
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
        for step in self.iter_reverse():
            return step
        return None

    def next_step_id(self) -> str:
        """One more than the newest step, or than any step id a newer unreadable line
        still names: an id is never handed out twice."""
        number = 0
        seen = len(self.bad_lines)
        for step in self.iter_reverse():
            number = step.number
            break
        for bad in self.bad_lines[seen:]:
            if bad.claimed_step_id:
                number = max(number, int(bad.claimed_step_id))
        return format_step_id(number + 1)

    def last_snapshot(self) -> str | None:
        """The snapshot recorded by the newest step that has one."""
        for step in self.iter_reverse():
            if step.snapshot:
                return step.snapshot
        return None

    def get(self, step_id: str) -> Step:
        wanted = int(step_id)
        seen = len(self.bad_lines)
        for step in self.iter_reverse():
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

    # --- reading from the start ------------------------------------------------

    def read_all(self, *, warn: bool = True) -> list[Step]:
        steps: list[Step] = []
        try:
            fh = os.fdopen(_open_no_follow(self.path), "rb")
        except FileNotFoundError:
            return steps
        with fh:
            offset = 0
            for lineno, line in enumerate(fh, 1):
                stripped = line.rstrip(b"\n")
                if stripped.strip():
                    where = f"line {lineno} of {self.path}"
                    try:
                        steps.append(_parse(stripped, where))
                    except CorruptFile as exc:
                        self.bad_lines.append(
                            BadLine(lineno, offset, stripped, str(exc), _claimed_step_id(stripped))
                        )
                        if warn:
                            self._warn_once(offset, f"skipping {where}: {exc}")
                offset += len(line)
        return steps

    # --- writing ---------------------------------------------------------------

    def append(self, step: Step) -> None:
        """Append ``step``; the caller holds the task lock."""
        if self.path.is_symlink():  # appending would write wherever the link points
            _open_no_follow(self.path)
        append_line(self.path, step.to_line())
