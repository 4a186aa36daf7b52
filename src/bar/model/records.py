"""Typed records of the ledger: one class per step kind, and the entries steps carry.

A ledger line is one of ``RunStep``, ``ManualStep``, ``RollbackStep``, ``ApplyStep``,
``SyncStep``, ``DecisionStep`` (``Step`` is their union). Each knows its own fields and writes them in the seed's line
format; ``step_from_record`` reads any line back through the migration registry,
checking every value that could reach git's command line or the file system, so a
tampered line can neither pass an option to git nor name a file outside the task.
Fields a newer bar wrote are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from bar.base.ids import is_object_id
from bar.base.migrate import upgrade
from bar.base.record import field, record
from bar.errors import CorruptFile, UsageError
from bar.git import DiffStat
from bar.model import endings
from bar.store.layout import ARTIFACT_RE, STEP_ID_RE

KINDS = (
    "run",
    "manual",
    "rollback",
    "sync",
    "apply",
    "decision",
)  # (as `bar log --kind` lists them)


def format_step_id(number: int) -> str:
    return f"{number:04d}"


def parse_step_ref(value: str) -> str:
    """Accept ``7``, ``0007`` or ``#7`` and return the canonical ``0007``."""
    text = value.strip().lstrip("#")
    # isdigit() alone accepts '²' and other digits int() refuses or reads differently
    if not (text.isascii() and text.isdigit()) or len(text) > 9 or int(text) < 1:
        raise UsageError(
            f"{value!r} is not a step id", hint="step ids look like 0001 or 1; checkpoints like 1.2"
        )
    return format_step_id(int(text))


# --- what steps carry ----------------------------------------------------------------


@record
class Artifacts:
    """Artifact paths relative to the task directory (``artifacts/0003.patch``)."""

    patch: str | None = None
    output: str | None = None
    cast: str | None = None
    checkpoints: str | None = None  # ext: the step's checkpoints (``bar.history.checkpoints``)
    session: str | None = None  # ext: the agent's conversation (``bar.session``)
    cleaned: str | None = None  # ext: the decision records ``bar decide clean`` removed

    def to_record(self) -> dict[str, str]:
        pairs = (
            ("patch", self.patch),
            ("output", self.output),
            ("cast", self.cast),
            ("checkpoints", self.checkpoints),
            ("session", self.session),
            ("cleaned", self.cleaned),
        )
        return {key: value for key, value in pairs if value}

    @classmethod
    def from_record(cls, rec: object, where: str) -> Artifacts:
        arts = rec if isinstance(rec, dict) else {}
        for value in arts.values():
            if value is not None and not (isinstance(value, str) and ARTIFACT_RE.match(value)):
                raise CorruptFile(f"{where} names an invalid artifact path {value!r}")
        return cls(
            _str(arts.get("patch")),
            _str(arts.get("output")),
            _str(arts.get("cast")),
            _str(arts.get("checkpoints")),
            _str(arts.get("session")),
            _str(arts.get("cleaned")),
        )


@record(frozen=True)
class PolicyEventRecord:
    """A ``policy_events`` entry: a rule that matched (``rule`` None: nothing matched
    an inner command, recorded so the decision is on file). Entries that an agent's
    hook asked for say so in ``source`` (``hook:claude``) with the agent's ids."""

    rule: str | None
    action: str
    matched: str
    source: str | None = None
    session_id: str | None = None
    tool_use_id: str | None = None
    command: str | None = None
    decision: str | None = None
    answer: str | None = None  # what bar's reply told the agent: deny | ask | warning | none
    outcome: str | None = None  # what the agent did with the command: ran | failed | refused
    agent_id: str | None = None  # the subagent that asked (Claude Code's), and its kind
    agent_type: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS: ClassVar[tuple[str, ...]] = (
        "rule",
        "action",
        "matched",
        "source",
        "session_id",
        "tool_use_id",
        "command",
        "decision",
        "answer",
        "outcome",
        "agent_id",
        "agent_type",
    )

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"rule": self.rule, "action": self.action, "matched": self.matched}
        for key in self._KEYS[3:]:
            value = getattr(self, key)
            if value is not None:
                rec[key] = value
        rec.update(self.extra)
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> PolicyEventRecord:
        return cls(
            rule=_str(rec.get("rule")),
            action=str(rec.get("action", "")),
            matched=str(rec.get("matched", "")),
            source=_str(rec.get("source")),
            session_id=_str(rec.get("session_id")),
            tool_use_id=_str(rec.get("tool_use_id")),
            command=_str(rec.get("command")),
            decision=_str(rec.get("decision")),
            answer=_str(rec.get("answer")),
            outcome=_str(rec.get("outcome")),
            agent_id=_str(rec.get("agent_id")),
            agent_type=_str(rec.get("agent_type")),
            extra={k: v for k, v in rec.items() if k not in cls._KEYS},
        )


@record(frozen=True)
class HookRecord:
    """A ``hooks`` entry: one pre_run or post_run hook and how it ended."""

    phase: str
    cmd: str
    exit_code: int
    timed_out: bool = False

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"phase": self.phase, "cmd": self.cmd, "exit_code": self.exit_code}
        if self.timed_out:
            rec["timed_out"] = True
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> HookRecord:
        return cls(
            str(rec.get("phase", "")),
            str(rec.get("cmd", "")),
            _int(rec.get("exit_code")),
            rec.get("timed_out") is True,
        )


# --- steps ---------------------------------------------------------------------------


@record(kw_only=True)
class _Step:
    step_id: str
    started_at: str
    ended_at: str
    duration_ms: int
    head: str | None = None  # the task branch's HEAD after the step
    extra: dict[str, Any] = field(default_factory=dict)  # fields a newer bar wrote

    kind: ClassVar[str]

    @property
    def number(self) -> int:
        return int(self.step_id)

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"step_id": self.step_id, "kind": self.kind}
        self._head_fields(rec)
        rec.update(started_at=self.started_at, ended_at=self.ended_at, duration_ms=self.duration_ms)
        self._body_fields(rec)
        rec.update(self.extra)
        rec["version"] = 1
        return rec

    def to_line(self) -> bytes:
        return json.dumps(self.to_record(), ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "backslashreplace"
        )  # a name that is not UTF-8 becomes a JSON \u escape: the same bytes read back

    def _head_fields(self, rec: dict[str, Any]) -> None:
        """Fields the seed format puts before the times."""

    def _body_fields(self, rec: dict[str, Any]) -> None:
        raise NotImplementedError


@record(kw_only=True)
class _Changes(_Step):
    """A step that moved the worktree from one snapshot to another."""

    snapshot_before: str | None = None
    snapshot: str | None = None
    diff_stat: DiffStat = field(default_factory=DiffStat.empty)
    artifacts: Artifacts = field(default_factory=Artifacts)

    def _changes(self, rec: dict[str, Any]) -> None:
        rec["diff_stat"] = self.diff_stat.to_record()
        rec["artifacts"] = self.artifacts.to_record()

    def _snapshots(self, rec: dict[str, Any]) -> None:
        if self.snapshot_before is not None:
            rec["snapshot_before"] = self.snapshot_before
        if self.snapshot is not None:
            rec["snapshot"] = self.snapshot
        if self.head is not None:
            rec["head"] = self.head


@record(kw_only=True)
class RunStep(_Changes):
    kind: ClassVar[str] = "run"
    cmd: list[str]
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None  # None: bar stopped before the command ended
    policy_events: list[PolicyEventRecord] = field(default_factory=list)
    hooks: list[HookRecord] = field(default_factory=list)
    signal: int | None = None
    interrupted: bool = False
    blocked: bool = False
    pty: bool = False
    checkpoints: int = 0  # ext: tool-call checkpoints recorded inside the step

    @property
    def ending(self) -> endings.Ending:
        """How the step ended, in the words every face shows (``bar.model.endings``)."""
        return endings.of(self)

    def _head_fields(self, rec: dict[str, Any]) -> None:
        rec.update(cmd=list(self.cmd), cwd=self.cwd, env=dict(self.env))

    def _body_fields(self, rec: dict[str, Any]) -> None:
        rec["exit_code"] = self.exit_code
        self._changes(rec)
        rec["policy_events"] = [e.to_record() for e in self.policy_events]
        self._snapshots(rec)
        if self.signal is not None:
            rec["signal"] = self.signal
        if self.interrupted:
            rec["interrupted"] = True
        if self.blocked:
            rec["blocked"] = True
        rec["hooks"] = [h.to_record() for h in self.hooks]
        if self.pty:
            rec["pty"] = True
        if self.checkpoints:
            rec["checkpoints"] = self.checkpoints


# A step of a kind the seed does not know (ext: manual, sync, decision) carries every
# key of a ``run`` step, so that a reader of the seed's format can take it for one: no
# command ran (``cmd`` ``[]``, ``exit_code`` 0), and its ``artifacts.patch``, if any, is
# the change it recorded, applied in order with the others (docs/storage.md).


def _as_run_head(rec: dict[str, Any]) -> None:
    rec.update(cmd=[], cwd=".", env={})


def _as_run_body(step: _Changes, rec: dict[str, Any]) -> None:
    rec["exit_code"] = 0
    step._changes(rec)
    rec["policy_events"] = []


@record(kw_only=True)
class ManualStep(_Changes):
    """Changes found in the worktree that no step made (hand edits between steps)."""

    kind: ClassVar[str] = "manual"

    def _head_fields(self, rec: dict[str, Any]) -> None:
        _as_run_head(rec)

    def _body_fields(self, rec: dict[str, Any]) -> None:
        _as_run_body(self, rec)
        self._snapshots(rec)


@record(kw_only=True)
class _Rebased(_Changes):
    """A step that may move the task's base (ext): ``base_before`` -> ``base_after``."""

    base_before: str | None = None
    base_after: str | None = None

    def _bases(self, rec: dict[str, Any]) -> None:
        if self.base_before is not None and self.base_after is not None:
            rec.update(base_before=self.base_before, base_after=self.base_after)


@record(kw_only=True)
class RollbackStep(_Rebased):
    kind: ClassVar[str] = "rollback"
    target: str  # "base" | "step"
    target_step: str | None = None
    hard: bool = False
    undo_of: str | None = None  # ext: ``bar undo`` of this step
    redo_of: str | None = None  # ext: ``bar redo`` of this step

    @property
    def target_text(self) -> str:
        """``base``, ``step 0003`` or ``checkpoint 0003.2``."""
        if self.target == "base":
            return "base"
        where = self.target_step or "?"
        return f"checkpoint {where}" if "." in where else f"step {where}"

    def _body_fields(self, rec: dict[str, Any]) -> None:
        rec.update(target=self.target, target_step=self.target_step, hard=self.hard)
        self._changes(rec)
        self._snapshots(rec)
        self._bases(rec)
        if self.undo_of is not None:
            rec["undo_of"] = self.undo_of
        if self.redo_of is not None:
            rec["redo_of"] = self.redo_of


@record(kw_only=True)
class SyncStep(_Rebased):
    """The task brought up to date (ext): its last state merged three-way onto ``onto``'s
    tip, with ``base_before`` as the merge base; its base is ``base_after`` from then on.
    ``conflicts``: paths recorded with conflict markers, left to resolve in the worktree."""

    kind: ClassVar[str] = "sync"
    onto: str
    conflicts: list[str] = field(default_factory=list)

    def _head_fields(self, rec: dict[str, Any]) -> None:
        _as_run_head(rec)

    def _body_fields(self, rec: dict[str, Any]) -> None:
        rec["onto"] = self.onto
        _as_run_body(self, rec)
        self._snapshots(rec)
        self._bases(rec)
        rec["conflicts"] = list(self.conflicts)


@record(kw_only=True)
class ApplyStep(_Step):
    kind: ClassVar[str] = "apply"
    mode: str  # "commit" | "merge"
    commit_sha: str
    commit_message: str
    target_branch: str
    snapshot: str | None = None  # the state applied

    # an apply changes no worktree: these read as empty, so every step can be asked
    @property
    def snapshot_before(self) -> str | None:
        return None

    @property
    def diff_stat(self) -> DiffStat:
        return DiffStat.empty()

    @property
    def artifacts(self) -> Artifacts:
        return Artifacts()

    def _body_fields(self, rec: dict[str, Any]) -> None:
        rec.update(
            mode=self.mode,
            commit_sha=self.commit_sha,
            commit_message=self.commit_message,
            target_branch=self.target_branch,
        )
        if self.snapshot is not None:
            rec["snapshot"] = self.snapshot
        if self.head is not None:
            rec["head"] = self.head


@record(kw_only=True)
class DecisionStep(_Changes):
    """A person answered the agent's questions (ext, ``bar decide``): the session they
    answered and each choice. It changes no file: its snapshot is the state it was
    recorded in, so undo and rollback pass over it."""

    kind: ClassVar[str] = "decision"
    session_id: str
    decisions: list[dict[str, Any]] = field(default_factory=list)  # {id, chosen, note?}
    # "file": the answer was read from a file another program wrote, as aide's web
    # server writes it (``bar.aide.answers``); None: given through bar
    via: str | None = None
    # ``bar decide clean``: the sessions whose records it removed (kept in the step's
    # artifact ``artifacts.cleaned``); its ``session_id`` is "" and it has no decisions
    cleaned: list[str] = field(default_factory=list)

    def _head_fields(self, rec: dict[str, Any]) -> None:
        _as_run_head(rec)

    def _body_fields(self, rec: dict[str, Any]) -> None:
        rec.update(session_id=self.session_id, decisions=[dict(d) for d in self.decisions])
        if self.via is not None:
            rec["via"] = self.via
        if self.cleaned:
            rec["cleaned"] = list(self.cleaned)
        _as_run_body(self, rec)
        self._snapshots(rec)


Step = RunStep | ManualStep | RollbackStep | ApplyStep | SyncStep | DecisionStep

_COMMON = ("step_id", "kind", "started_at", "ended_at", "duration_ms", "head", "version")
_CHANGES = ("snapshot_before", "snapshot", "diff_stat", "artifacts")
# the keys of a run step that bar's own kinds carry too (``_as_run_head``, ``_as_run_body``)
_AS_RUN = (*_CHANGES, "cmd", "cwd", "env", "exit_code", "policy_events")
_OWN: dict[str, tuple[str, ...]] = {
    "run": (
        *_CHANGES,
        "cmd",
        "cwd",
        "env",
        "exit_code",
        "policy_events",
        "hooks",
        "signal",
        "interrupted",
        "blocked",
        "pty",
        "checkpoints",
    ),
    "manual": _AS_RUN,
    "rollback": (
        *_CHANGES,
        "target",
        "target_step",
        "hard",
        "base_before",
        "base_after",
        "undo_of",
        "redo_of",
    ),
    "sync": (*_AS_RUN, "onto", "base_before", "base_after", "conflicts"),
    "apply": ("mode", "commit_sha", "commit_message", "target_branch", "snapshot"),
    "decision": (*_AS_RUN, "session_id", "decisions", "via", "cleaned"),
}
_OBJECT_IDS = ("snapshot_before", "snapshot", "head", "commit_sha", "base_before", "base_after")


def step_from_record(rec: object, where: str) -> Step:
    """Read one ledger line's object; ``CorruptFile`` naming ``where`` if it is not a step."""
    if not isinstance(rec, dict):
        raise CorruptFile(f"{where} is not a JSON object")
    rec = upgrade("step", dict(rec), where, default=1)
    step_id, kind = rec.get("step_id"), rec.get("kind")
    if not isinstance(step_id, str) or not STEP_ID_RE.match(step_id):
        raise CorruptFile(f"{where} has no valid step_id")
    if kind not in KINDS:
        raise CorruptFile(f"{where} has unknown kind {kind!r}")
    for key in _OBJECT_IDS:
        if rec.get(key) is not None and not is_object_id(rec[key]):
            raise CorruptFile(f"{where} has an invalid {key} {rec[key]!r}")
    common: dict[str, Any] = {
        "step_id": step_id,
        "started_at": str(rec.get("started_at", "")),
        "ended_at": str(rec.get("ended_at", "")),
        "duration_ms": _int(rec.get("duration_ms")),
        "head": _str(rec.get("head")),
        "extra": {k: v for k, v in rec.items() if k not in _COMMON and k not in _OWN[kind]},
    }
    if kind == "apply":
        return ApplyStep(
            **common,
            mode=str(rec.get("mode", "")),
            commit_sha=str(rec.get("commit_sha", "")),
            commit_message=str(rec.get("commit_message", "")),
            target_branch=str(rec.get("target_branch", "")),
            snapshot=_str(rec.get("snapshot")),
        )
    changes: dict[str, Any] = {
        "snapshot_before": _str(rec.get("snapshot_before")),
        "snapshot": _str(rec.get("snapshot")),
        "diff_stat": diff_stat_of(rec.get("diff_stat")),
        "artifacts": Artifacts.from_record(rec.get("artifacts"), where),
    }
    if kind == "manual":
        return ManualStep(**common, **changes)
    if kind == "decision":
        return DecisionStep(
            **common,
            **changes,
            session_id=str(rec.get("session_id", "")),
            decisions=_dicts(rec.get("decisions")),
            via=_str(rec.get("via")),
            cleaned=[str(c) for c in rec["cleaned"]]
            if isinstance(rec.get("cleaned"), list)
            else [],
        )
    bases: dict[str, Any] = {
        "base_before": _str(rec.get("base_before")),
        "base_after": _str(rec.get("base_after")),
    }
    if kind == "sync":
        conflicts = rec.get("conflicts")
        return SyncStep(
            **common,
            **changes,
            **bases,
            onto=str(rec.get("onto", "")),
            conflicts=[str(c) for c in conflicts] if isinstance(conflicts, list) else [],
        )
    if kind == "rollback":
        for key in ("undo_of", "redo_of"):
            if rec.get(key) is not None and not (
                isinstance(rec[key], str) and STEP_ID_RE.match(rec[key])
            ):
                raise CorruptFile(f"{where} has an invalid {key} {rec[key]!r}")
        return RollbackStep(
            **common,
            **changes,
            **bases,
            target=str(rec.get("target", "")),
            target_step=_str(rec.get("target_step")),
            hard=rec.get("hard") is True,
            undo_of=_str(rec.get("undo_of")),
            redo_of=_str(rec.get("redo_of")),
        )
    cmd, env = rec.get("cmd"), rec.get("env")
    return RunStep(
        **common,
        **changes,
        cmd=[str(c) for c in cmd] if isinstance(cmd, list) else [],
        cwd=_str(rec.get("cwd")) or ".",
        env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
        exit_code=_int_or_none(rec.get("exit_code")),
        policy_events=[PolicyEventRecord.from_record(e) for e in _dicts(rec.get("policy_events"))],
        hooks=[HookRecord.from_record(h) for h in _dicts(rec.get("hooks"))],
        signal=_int_or_none(rec.get("signal")),
        interrupted=rec.get("interrupted") is True,
        blocked=rec.get("blocked") is True,
        pty=rec.get("pty") is True,
        checkpoints=_int(rec.get("checkpoints")),
    )


def diff_stat_of(stat: object) -> DiffStat:
    """A recorded ``diff_stat`` object (empty if it is not one)."""
    if not isinstance(stat, dict):
        return DiffStat.empty()
    files = stat.get("file_list")
    return DiffStat(
        files=_int(stat.get("files")),
        additions=_int(stat.get("additions")),
        deletions=_int(stat.get("deletions")),
        file_list=tuple(str(f) for f in files) if isinstance(files, list) else (),
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# --- recorded states -------------------------------------------------------------------


@record(frozen=True)
class State:
    """A recorded state of a task: its base, or the state after a step or one of its
    tool calls (``bar.history.states`` resolves the names people give them)."""

    kind: str  # "base" | "step" (a step's state, or a checkpoint's: ``step_id`` "0003.2")
    step_id: str | None
    commit: str  # the snapshot commit
    head: str  # the task branch's HEAD recorded at that state (what --hard resets to)
    base: str | None = None  # the task's base then (None: read before bar knew it)

    def describe(self) -> str:
        if self.kind == "base":
            return "base"
        return (
            f"checkpoint {self.step_id}" if "." in (self.step_id or "") else f"step {self.step_id}"
        )

    @property
    def name(self) -> str:
        """How a person names it: ``base``, ``0003``, ``0003.2``."""
        return self.step_id or "base"
