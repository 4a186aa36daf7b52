"""Checkpoints: the state of a task's worktree after every tool call of an agent session.

An agent session run as one step can last an hour. With ``--agent``, the agent calls bar's
hook after each tool call that can change files (its shell, its edit tools), and the step's
supervisor records a checkpoint there (docs/checkpoints.md): a snapshot chained onto the
previous one like any step's, the patch from the previous checkpoint, and one line of
``artifacts/<step>.checkpoints.jsonl`` saying which tool call it followed (tool, call id,
session, command or paths, the policy's decision and what the agent did with it, times, diff
stat). They are numbered from 1 in the order the calls finished and addressed ``STEP.N``
(``0003.2``) wherever a state is named.

At the end of the step, what no hook saw (a subagent that skips hooks, a background
process, a hand edit during the session) becomes one more checkpoint, the residual, so
the checkpoints' patches add up exactly to the step's. The ledger keeps one line per
step, which counts its checkpoints.

Only the process that owns the step writes here: ``bar run`` (its supervisor thread
while the command runs, then ``complete``) or, after bar died, the command that records
the interrupted step. Lines are appended whole; a reader skips a torn one.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from bar import git
from bar.base.clock import now_iso
from bar.base.inotify import TreeWatch
from bar.base.record import field, record, replace
from bar.errors import NotFound, UsageError
from bar.git import DiffStat, patches
from bar.history import snapshot, steps
from bar.model.records import diff_stat_of, parse_step_ref
from bar.model.tasks import Task
from bar.redact import Scrubber
from bar.sandbox import quarantine
from bar.store.files import read_json_lines

KINDS = ("tool", "residual", "rollback")

_NAME = re.compile(r"^#?([0-9]{1,9})\.([0-9]{1,9})$")


def parse_name(value: str) -> tuple[str, int] | None:
    """``3.2`` or ``0003.2``: (step id, checkpoint number); None if not a checkpoint name."""
    match = _NAME.match(value.strip())
    if match is None:
        return None
    number = int(match.group(2))
    if number < 1:
        raise UsageError(f"{value!r} is not a checkpoint", hint="checkpoints count from 1: 3.1")
    return parse_step_ref(match.group(1)), number


@record(frozen=True)
class Checkpoint:
    step_id: str
    n: int
    kind: str  # tool | residual | rollback
    snapshot_before: str
    snapshot: str
    started_at: str
    ended_at: str
    tool: str | None = None  # the agent's tool name (Bash, Write, apply_patch, ...)
    call_id: str | None = None  # the agent's id of the call (Gemini sends none)
    session_id: str | None = None
    command: str | None = None  # a shell command
    paths: tuple[str, ...] = ()  # the files an edit tool named
    decision: str | None = None  # the policy's action on the command (allow, warn, ...)
    answer: str | None = None  # what bar told the agent (none, warning, ask)
    outcome: str | None = None  # what the agent reported: ran | failed | interrupted | refused
    agent_id: str | None = None  # the subagent that made the call (Claude Code's), its kind
    agent_type: str | None = None
    verified: bool | None = None  # the call is in the agent's transcript (None: cannot say)
    target: str | None = None  # a rollback's: the state it returned to
    label: str | None = None  # an order's: what the agent (or ``bar flow``) called the state
    head: str | None = None  # the task branch's HEAD then
    diff_stat: DiffStat = field(default_factory=DiffStat.empty)
    patch: str | None = None  # artifacts/<step>.<n>.patch, when it changed something

    @property
    def name(self) -> str:
        return f"{self.step_id}.{self.n}"

    @property
    def target_text(self) -> str:
        """What the call acted on, in a few words: its command, its files, its target."""
        if self.kind == "residual":
            return "changes no hook reported"
        if self.kind == "rollback":
            return f"rollback to {self.target}"
        if self.label is not None:
            return self.label
        if self.command is not None:
            return self.command
        return ", ".join(self.paths) or "-"

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"checkpoint": self.name, "n": self.n, "kind": self.kind}
        for key in ("tool", "call_id", "session_id", "command"):
            if getattr(self, key) is not None:
                rec[key] = getattr(self, key)
        if self.paths:
            rec["paths"] = list(self.paths)
        for key in (
            "decision",
            "answer",
            "outcome",
            "agent_id",
            "agent_type",
            "verified",
            "target",
            "label",
        ):
            if getattr(self, key) is not None:
                rec[key] = getattr(self, key)
        rec.update(
            started_at=self.started_at,
            ended_at=self.ended_at,
            snapshot_before=self.snapshot_before,
            snapshot=self.snapshot,
        )
        if self.head is not None:
            rec["head"] = self.head
        rec["diff_stat"] = self.diff_stat.to_record()
        if self.patch is not None:
            rec["patch"] = self.patch
        rec["version"] = 1
        return rec

    @classmethod
    def from_record(cls, step_id: str, rec: dict[str, Any]) -> Checkpoint | None:
        """The checkpoint a line holds; None for a line that is not one."""
        n, before, after = rec.get("n"), rec.get("snapshot_before"), rec.get("snapshot")
        if (
            not isinstance(n, int)
            or n < 1
            or not isinstance(before, str)
            or not isinstance(after, str)
        ):
            return None
        paths = rec.get("paths")
        patch = _str(rec.get("patch"))
        if patch is not None and not patch.startswith(f"artifacts/{step_id}."):
            patch = None  # a checkpoint names only its own step's patch
        return cls(
            step_id=step_id,
            n=n,
            kind=str(rec.get("kind") or "tool"),
            snapshot_before=before,
            snapshot=after,
            started_at=str(rec.get("started_at") or ""),
            ended_at=str(rec.get("ended_at") or ""),
            tool=_str(rec.get("tool")),
            call_id=_str(rec.get("call_id")),
            session_id=_str(rec.get("session_id")),
            command=_str(rec.get("command")),
            paths=tuple(str(p) for p in paths) if isinstance(paths, list) else (),
            decision=_str(rec.get("decision")),
            answer=_str(rec.get("answer")),
            outcome=_str(rec.get("outcome")),
            target=_str(rec.get("target")),
            agent_id=_str(rec.get("agent_id")),
            agent_type=_str(rec.get("agent_type")),
            verified=v if isinstance(v := rec.get("verified"), bool) else None,
            label=_str(rec.get("label")),
            head=_str(rec.get("head")),
            diff_stat=diff_stat_of(rec.get("diff_stat")),
            patch=patch,
        )


def path(task: Task, step_id: str) -> Path:
    return task.paths.artifacts / f"{step_id}.checkpoints.jsonl"


def artifact_name(step_id: str) -> str:
    """The name a step's line gives its checkpoints file."""
    return f"artifacts/{step_id}.checkpoints.jsonl"


def read(task: Task, step_id: str) -> list[Checkpoint]:
    """A step's checkpoints in order (none: a step without an agent, or an old one)."""
    found: list[Checkpoint] = []
    for rec in read_json_lines(path(task, step_id)):  # a line torn by a crash is skipped
        amends = rec.get("amends")
        if isinstance(amends, int) and 0 < amends <= len(found):  # (what was learnt later)
            if isinstance(rec.get("verified"), bool):
                found[amends - 1] = replace(found[amends - 1], verified=rec["verified"])
            if isinstance(rec.get("call_id"), str) and found[amends - 1].call_id is None:
                found[amends - 1] = replace(found[amends - 1], call_id=rec["call_id"])
            continue
        checkpoint = Checkpoint.from_record(step_id, rec)
        if checkpoint is not None and checkpoint.n == len(found) + 1:
            found.append(checkpoint)
    return found


def get(task: Task, step_id: str, n: int) -> Checkpoint:
    """Checkpoint ``n`` of step ``step_id``; a clear error when there is none."""
    found = read(task, step_id)
    if n <= len(found):
        return found[n - 1]
    if not found:
        raise NotFound(
            f"step {step_id} has no checkpoints",
            hint="a step records one after each tool call of its agent (`bar run --agent`); "
            f"`bar show {step_id}` shows the step as a whole",
        )
    raise NotFound(
        f"step {step_id} has no checkpoint {n}: it has {len(found)}",
        hint=f"list them with `bar show {step_id}`",
    )


def lookup(task: Task, name: str) -> Checkpoint:
    """The checkpoint named ``STEP.N`` (``3.2``, ``0003.2``), of a recorded step or of the
    running one."""
    parsed = parse_name(name)
    if parsed is None:
        raise UsageError(
            f"{name!r} is not a checkpoint", hint="checkpoints look like 3.2 or 0003.2"
        )
    step_id, n = parsed
    if not path(task, step_id).exists():
        task.ledger.get(step_id)  # says so if there is no such step
    return get(task, step_id, n)


class Recorder:
    """Takes a running step's checkpoints, one after another (one writer: the caller
    holds the task lock, and calls are serialized)."""

    def __init__(
        self,
        task: Task,
        step_id: str,
        snapshot_before: str,
        excludes: list[str] | tuple[str, ...] = (),
        scrubber: Scrubber | None = None,
        watch: TreeWatch | None = None,
    ) -> None:
        self.task = task
        self.watch = watch  # says which paths changed between two calls
        self.step_id = step_id
        self.excludes = list(excludes)
        self.scrubber = scrubber
        taken = read(task, step_id)  # a step recorded after bar died has some already
        self.count = len(taken)
        self.last = taken[-1].snapshot if taken else snapshot_before
        self.last_ended = taken[-1].ended_at if taken else None
        self._last_tree: str | None = None  # the tree of `last`, once a take has seen it

    def take(
        self, kind: str, *, started_at: str | None = None, message: str | None = None, **facts: Any
    ) -> Checkpoint:
        """Snapshot the worktree as the next checkpoint and record it. A call that
        changed nothing costs a stat pass: its checkpoint names the previous snapshot.
        ``message``: the snapshot commit's, if it is a new one (default: the call's)."""
        started = started_at or now_iso()
        n = self.count + 1
        label = facts.get("command") or ", ".join(facts.get("paths") or ()) or kind
        message = message or f"step {self.step_id}.{n}: {facts.get('tool') or kind}: {label}"
        if self.scrubber is not None:
            message = self.scrubber.scrub_text(message)
        changed = self.watch.look() if self.watch is not None else None
        snap = snapshot.take(
            self.task.worktree,
            self.task.index,
            self.task.snapshot_ref,
            self.last,
            message,
            self.excludes,
            recorded_tree=self._last_tree,
            changed=changed,
            hold_stamps=True,
        )
        checkpoint = self.add(kind, snap.commit, started_at=started, **facts)
        self._last_tree = snap.tree
        return checkpoint

    def amend(self, n: int, *, verified: bool, call_id: str | None = None) -> None:
        """What was learnt of checkpoint ``n`` after it was recorded, as one more line
        (the file stays append-only): whether its call is in the agent's transcript, and
        the call's id there (for an agent whose events name none)."""
        rec: dict[str, Any] = {"amends": n, "verified": verified}
        if call_id is not None:
            rec["call_id"] = call_id
        _append(path(self.task, self.step_id), rec)

    def catch_up(self) -> Checkpoint | None:
        """What changed since the last checkpoint, as a residual one, before the agent's
        next call; None when nothing did. Where the kernel says what changed (a watch),
        nothing changed costs nothing; else a stat pass."""
        changed = self.watch.look() if self.watch is not None else None
        if changed is not None and not changed:
            return None
        snap = snapshot.take(
            self.task.worktree,
            self.task.index,
            self.task.snapshot_ref,
            self.last,
            f"step {self.step_id}: changes no call made",
            self.excludes,
            recorded_tree=self._last_tree,
            changed=changed,
            hold_stamps=True,
        )
        if snap.commit == self.last:
            self._last_tree = snap.tree
            return None
        checkpoint = self.add("residual", snap.commit, started_at=now_iso())
        self._last_tree = snap.tree
        return checkpoint

    def add(self, kind: str, commit: str, *, started_at: str, **facts: Any) -> Checkpoint:
        """Record ``commit`` (a snapshot chained onto the last one) as the next checkpoint."""
        n = self.count + 1
        quarantine.settle(self.task, final=False)  # (the step's commits: ``head`` below)
        stat, patch = steps.record_changes(self.task, f"{self.step_id}.{n}", self.last, commit)
        if patch is not None and self.scrubber is not None:
            patches.mask_names(self.task.dir / patch, stat.file_list, self.scrubber.scrub_values)
        checkpoint = Checkpoint(
            step_id=self.step_id,
            n=n,
            kind=kind,
            snapshot_before=self.last,
            snapshot=commit,
            started_at=started_at,
            ended_at=now_iso(),
            head=git.head(self.task.worktree),
            diff_stat=stat,
            patch=patch,
            **facts,
        )
        rec = checkpoint.to_record()
        if self.scrubber is not None:
            rec = self.scrubber.scrub_obj(rec)
        _append(path(self.task, self.step_id), rec)
        self.count, self.last, self.last_ended = n, commit, checkpoint.ended_at
        self._last_tree = None
        return checkpoint


def _append(file: Path, rec: dict[str, Any]) -> None:
    """One line, one ``write()`` (never through a link planted in its place)."""
    data = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "backslashreplace"
    )
    fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data + b"\n")
    finally:
        os.close(fd)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
