"""Intent journals: what a verb is about to do, written before it starts changing things.

Four verbs change a task in more than one write, and each writes its intent first:
``running.json`` (a step's command is running), ``rollback.json`` (the worktree is being
restored), ``apply.json`` (a target branch is being moved) and ``sync.json`` (the task is
being brought up to date with a branch). Each verb then reads
"write the intent, act, complete it", where completing appends the ledger line and
removes the journal. If bar dies in between, the next command that takes the task lock
finds the journal and calls the same completion (``bar.step.transaction``): holding the lock
proves the journal's author is dead, because the kernel drops an ``flock`` with its
holder. Every field read back is checked: step ids name files, commits go to git.

``bar task new`` writes ``creating.json`` before it makes anything outside the new task's
directory (the snapshot ref, the branch, the worktree): ``bar.task.new`` completes it, or
undoes what it names if bar died first. ``bar task delete`` writes ``deleting.json``
before it removes anything: ``bar.task.delete`` finishes the removal it names.

Each kind is one ``Journal`` (``RUN``, ``ROLLBACK``, ``APPLY``, ``SYNC``, ``CREATE``,
``DELETE``) of its intent's record: ``write``, ``read`` (checked, or ``CorruptFile``
saying which field and where) and ``clear``; an intent says how it is written
(``to_record``) and read back (``from_record``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from bar import git
from bar.base import file_clock
from bar.base.clock import now_iso
from bar.base.migrate import upgrade
from bar.base.record import field, record, replace
from bar.errors import CorruptFile
from bar.model import outcome
from bar.model.records import ApplyStep, State, Step, step_from_record
from bar.store.files import read_json, write_json_atomic
from bar.store.layout import STATE_ID_RE, STEP_ID_RE, TaskPaths

if TYPE_CHECKING:
    from bar.model.tasks import Task


def _valid_step_id(value: object) -> bool:
    return isinstance(value, str) and bool(STEP_ID_RE.match(value)) and int(value) >= 1


class Intent(Protocol):
    """What a verb is about to do: written as a record, read back checked."""

    def to_record(self) -> dict[str, Any]: ...

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> Self:
        """The intent ``rec`` holds (upgraded to this bar's version); ``CorruptFile``,
        saying ``where``, for anything a field must not be."""
        ...


T = TypeVar("T", bound=Intent)


class Journal(Generic[T]):
    """One kind of intent journal: its file in the task's directory, what its errors
    call it, the name its versions go by (``bar.base.migrate``) and its intent."""

    def __init__(
        self,
        intent: type[T],
        file: Callable[[TaskPaths], Path],
        what: str,
        versions: str,
        cleared: Callable[[TaskPaths], None] | None = None,
    ) -> None:
        self.intent = intent
        self.path = file
        self.what = what
        self.versions = versions
        self._cleared = cleared  # what goes first when the journal does
        self._finish: Callable[[Task, T], list[Step]] | None = None

    def write(self, paths: TaskPaths, intent: T) -> None:
        write_json_atomic(self.path(paths), {"version": 1, **intent.to_record()})

    def read(self, paths: TaskPaths) -> T | None:
        """The intent written, checked; None: none was (or it was completed)."""
        path = self.path(paths)
        try:
            rec = upgrade(self.versions, read_json(path, self.what), path)
        except FileNotFoundError:
            return None
        return self.intent.from_record(rec, f"{self.what} at {path}", paths)

    def clear(self, paths: TaskPaths) -> None:
        if self._cleared is not None:
            self._cleared(paths)
        self.path(paths).unlink(missing_ok=True)

    def finished_by(self, finish: Callable[[Task, T], list[Step]]) -> None:
        """Say what finishes an intent of this kind that a stopped bar left (under the
        task lock; the steps it recorded): the verb's own completion, registered as its
        module loads."""
        self._finish = finish

    def finish_left(self, task: Task) -> list[Step]:
        """Finish the intent a stopped bar left in ``task``'s journal, if any (the caller
        holds the task lock: its author is dead); the steps that recorded."""
        intent = self.read(task.paths)
        if intent is None:
            return []
        if self._finish is None:
            for load in _VERBS:
                load()
        if self._finish is None:
            raise RuntimeError(f"nothing finishes an interrupted {self.what}")
        return self._finish(task, intent)


# what loads the verbs that register their journals' completions (``finished_by``): each
# verb says how its intent is finished, and is loaded only when one is found
_VERBS: list[Callable[[], None]] = []


def verbs_from(load: Callable[[], None]) -> None:
    """``load`` imports verbs whose modules register completions (``finished_by``)."""
    if load not in _VERBS:
        _VERBS.append(load)


# --- running.json --------------------------------------------------------------------


@record(frozen=True)
class RunIntent:
    """A step whose command is running (or was, when bar died).

    ``cmd`` and ``env`` are as the ledger records them, secrets already scrubbed: the
    marker stays on disk if bar is killed, and the process that completes the step then
    knows neither the run's ``-e`` pairs nor, often, its environment.
    """

    pid: int
    step_id: str
    started_at: str
    cmd: list[str]  # as recorded (secrets scrubbed)
    cwd: str
    snapshot_before: str
    env: dict[str, str] = field(default_factory=dict)  # as recorded (secrets redacted)
    pty: bool = False
    excludes: list[str] = field(default_factory=list)  # worktree paths kept out of snapshots
    sandbox: dict[str, Any] | None = None  # the step's confinement, as recorded
    agent: dict[str, Any] | None = None  # with --agent: how it was started (Supervisor)
    # how the command ended, when it did but its recording failed (a full disk)
    exit_code: int | None = None
    signal: int | None = None
    ended_at: str | None = None
    # why ``bar run`` could not record the step, once the command ended (read from its
    # outcome, never written here: ``bar.model.outcome.unrecorded``)
    unrecorded: str | None = None
    # the file clock's floor as ``bar run`` began the step, before any of its processes
    # (its hooks among them) ran: a change stamped earlier is not the step's, killed or
    # not (``bar.step.interrupted``); 0: not known (an intent of an older bar)
    from_ns: int = 0

    def to_record(self) -> dict[str, Any]:
        ended = (
            {}
            if self.exit_code is None
            else {"exit_code": self.exit_code, "signal": self.signal, "ended_at": self.ended_at}
        )
        return {
            "pid": self.pid,
            "step_id": self.step_id,
            "started_at": self.started_at,
            "cmd": self.cmd,
            "cwd": self.cwd,
            "snapshot_before": self.snapshot_before,
            "env": self.env,
            "pty": self.pty,
            "excludes": self.excludes,
            **({"sandbox": self.sandbox} if self.sandbox is not None else {}),
            **({"agent": self.agent} if self.agent is not None else {}),
            **({"from_ns": self.from_ns} if self.from_ns else {}),
            **ended,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> RunIntent:
        step_id, before = rec.get("step_id"), rec.get("snapshot_before")
        if not isinstance(step_id, str) or not isinstance(before, str):
            raise CorruptFile(f"{where} lacks step_id or snapshot_before")
        if not _valid_step_id(step_id):
            raise CorruptFile(f"{where} has an invalid step_id {step_id!r}")
        if not git.is_object_id(before):
            raise CorruptFile(f"{where} has an invalid snapshot_before {before!r}")
        cmd, env, excludes, pid = (rec.get(k) for k in ("cmd", "env", "excludes", "pid"))
        intent = RunIntent(
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else 0,
            step_id=step_id,
            started_at=str(rec.get("started_at") or now_iso()),
            cmd=[str(c) for c in cmd] if isinstance(cmd, list) else [],
            cwd=str(rec.get("cwd", ".")),
            snapshot_before=before,
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
            pty=rec.get("pty") is True,
            excludes=[str(e) for e in excludes] if isinstance(excludes, list) else [],
            sandbox=rec["sandbox"] if isinstance(rec.get("sandbox"), dict) else None,
            agent=rec["agent"] if isinstance(rec.get("agent"), dict) else None,
            exit_code=_int_or_none(rec.get("exit_code")),
            signal=_int_or_none(rec.get("signal")),
            ended_at=str(rec["ended_at"]) if isinstance(rec.get("ended_at"), str) else None,
            from_ns=_int_or_none(rec.get("from_ns")) or 0,
        )
        # how the command ended, if it did and ``bar run`` died before it could record it
        ended = outcome.read(paths, step_id)
        if ended is not None and intent.exit_code is None:
            intent = replace(
                intent, exit_code=ended.exit_code, signal=ended.signal, ended_at=ended.ended_at
            )
        if ended is not None and ended.unrecorded is not None:
            intent = replace(intent, unrecorded=ended.unrecorded)
        return intent


# (its outcome first: ``bar.model.outcome``)
RUN = Journal(RunIntent, lambda paths: paths.marker, "running marker", "marker", outcome.remove)


def touch_run(paths: TaskPaths, *, after_tick: int | None = None) -> int:
    """A sign of life of the running step's ``bar run``: its intent journal's mtime says
    until when the step ran, if bar is killed (``bar.step.interrupted``). With
    ``after_tick`` (a ``file_clock.ceiling`` taken once what it vouches for was done), in
    a later tick: a file written in the tick of the last sign of life is not credited to
    the step, since bar may have died within that tick. Returns that later tick
    (``file_clock.tick_after``), or the current one."""
    tick = file_clock.tick_after(after_tick) if after_tick is not None else file_clock.floor()
    try:
        os.utime(paths.marker)
    except OSError:
        pass
    return tick


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- rollback.json -------------------------------------------------------------------


@record(frozen=True)
class RollbackIntent:
    step_id: str
    target: State
    hard: bool
    snapshot_before: str
    started_at: str
    undo_of: str | None = None  # ``bar undo`` of this step
    redo_of: str | None = None  # ``bar redo`` of this step
    # the state the restore ends at when recovery kept edits made by hand after a crash
    # (``bar.changes.resumed``): the target's files where the rollback writes, the hand
    # edits elsewhere; None: the target itself
    finish: str | None = None

    @property
    def restores_to(self) -> str:
        """The commit whose tree the restore writes."""
        return self.finish or self.target.commit

    def to_record(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "target": self.target.kind,
            "target_step": self.target.step_id,
            "target_commit": self.target.commit,
            "target_head": self.target.head,
            "hard": self.hard,
            "snapshot_before": self.snapshot_before,
            "started_at": self.started_at,
            "target_base": self.target.base,
            "undo_of": self.undo_of,
            "redo_of": self.redo_of,
            **({"finish_commit": self.finish} if self.finish else {}),
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> RollbackIntent:
        missing = [k for k in _ROLLBACK_KEYS if k not in rec]
        if missing:
            raise CorruptFile(f"{where} lacks {', '.join(missing)}")
        step_id, kind, target_step = rec["step_id"], rec["target"], rec.get("target_step")
        problem = None
        if not _valid_step_id(step_id):
            problem = f"an invalid step_id {step_id!r}"
        elif kind not in ("base", "step"):
            problem = f"an unknown target {kind!r}"
        elif kind == "step" and not (
            isinstance(target_step, str) and STATE_ID_RE.match(target_step)
        ):
            problem = f"an invalid target_step {target_step!r}"
        elif not isinstance(rec["hard"], bool):
            problem = f"a 'hard' that is not true or false: {rec['hard']!r}"
        else:
            bad = [
                k
                for k in ("target_commit", "target_head", "snapshot_before")
                if not git.is_object_id(rec[k])
            ]
            bad += [
                k
                for k in ("target_base", "finish_commit")
                if rec.get(k) is not None and not git.is_object_id(rec[k])
            ]
            bad += [
                k
                for k in ("undo_of", "redo_of")
                if rec.get(k) is not None and not _valid_step_id(rec[k])
            ]
            if bad:
                problem = f"an invalid {bad[0]} {rec[bad[0]]!r}"
        if problem:
            raise CorruptFile(f"{where} has {problem}")
        target = State(
            kind,
            target_step if kind == "step" else None,
            rec["target_commit"],
            rec["target_head"],
            rec.get("target_base"),
        )
        return RollbackIntent(
            step_id,
            target,
            rec["hard"],
            rec["snapshot_before"],
            str(rec.get("started_at") or now_iso()),
            rec.get("undo_of"),
            rec.get("redo_of"),
            rec.get("finish_commit"),
        )


_ROLLBACK_KEYS = ("step_id", "target", "target_commit", "target_head", "hard", "snapshot_before")

ROLLBACK = Journal(
    RollbackIntent, lambda paths: paths.rollback_journal, "rollback journal", "rollback-journal"
)


# --- apply.json ----------------------------------------------------------------------


@record(frozen=True)
class ApplyIntent:
    """The apply step about to land: written before the target moves.

    ``target_before`` is the target's commit before the apply. ``token`` names this apply
    in the lock it holds on the developer's checkout (``bar.changes.checkout``), so recovery can
    tell its own lock, and an update it must finish, from anyone else's. Journals written
    before these fields existed read back with both None.
    """

    step: ApplyStep
    target_before: str | None = None
    token: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "step": self.step.to_record(),
            "target_before": self.target_before,
            "token": self.token,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> ApplyIntent:
        step = step_from_record(rec.get("step"), where)
        if not isinstance(step, ApplyStep) or not git.is_object_id(step.commit_sha):
            raise CorruptFile(f"{where} does not hold an apply step")
        before, token = rec.get("target_before"), rec.get("token")
        if before is not None and not git.is_object_id(before):
            raise CorruptFile(f"{where} has an invalid target_before {before!r}")
        if token is not None and not (isinstance(token, str) and _TOKEN_RE.match(token)):
            raise CorruptFile(f"{where} has an invalid token {token!r}")
        return ApplyIntent(step, before, token)


_TOKEN_RE = re.compile(r"^[0-9a-f]{16,64}$")

APPLY = Journal(ApplyIntent, lambda paths: paths.apply_journal, "apply journal", "apply-journal")


# --- sync.json ----------------------------------------------------------------------


@record(frozen=True)
class SyncIntent:
    """A sync about to be made (``bar.changes.sync``): the worktree goes from ``snapshot_before``
    to the tree of ``merged``, the task branch from ``head_before`` to ``head_after`` (if
    it moves), and the task's base from ``base_before`` to ``base_after``."""

    step_id: str
    onto: str
    snapshot_before: str
    merged: str  # a commit holding the merged tree
    base_before: str
    base_after: str
    head_before: str | None
    head_after: str | None
    conflicts: list[str]
    started_at: str

    def to_record(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "onto": self.onto,
            **{key: getattr(self, key) for key in _SYNC_IDS},
            "head_before": self.head_before,
            "head_after": self.head_after,
            "conflicts": self.conflicts,
            "started_at": self.started_at,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> SyncIntent:
        if not _valid_step_id(rec.get("step_id")):
            raise CorruptFile(f"{where} has an invalid step_id {rec.get('step_id')!r}")
        for key in _SYNC_IDS:
            if not git.is_object_id(rec.get(key)):
                raise CorruptFile(f"{where} has an invalid {key} {rec.get(key)!r}")
        for key in ("head_before", "head_after"):
            if rec.get(key) is not None and not git.is_object_id(rec[key]):
                raise CorruptFile(f"{where} has an invalid {key} {rec[key]!r}")
        conflicts = rec.get("conflicts")
        return SyncIntent(
            step_id=str(rec["step_id"]),
            onto=str(rec.get("onto", "")),
            **{key: str(rec[key]) for key in _SYNC_IDS},
            head_before=rec.get("head_before"),
            head_after=rec.get("head_after"),
            conflicts=[str(c) for c in conflicts] if isinstance(conflicts, list) else [],
            started_at=str(rec.get("started_at") or now_iso()),
        )


_SYNC_IDS = ("snapshot_before", "merged", "base_before", "base_after")

SYNC = Journal(SyncIntent, lambda paths: paths.sync_journal, "sync journal", "sync-journal")


# --- creating.json -------------------------------------------------------------------


@record(frozen=True)
class CreateIntent:
    """A task being created. Besides its directory, ``bar task new`` makes the snapshot
    ref ``refs/bar/tasks/<id>``, the worktree ``workspaces/<id>`` and ``branch``, which
    did not exist when the intent was written: if it exists, bar made it."""

    task_id: str
    name: str
    branch: str
    base_commit: str
    started_at: str

    def to_record(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "branch": self.branch,
            "base_commit": self.base_commit,
            "started_at": self.started_at,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> CreateIntent:
        task_id, name, branch, base = (
            rec.get(k) for k in ("task_id", "name", "branch", "base_commit")
        )
        # the branch is deleted on undo: it must be the one this task would have made
        problem = _task_problem(paths, task_id, name, branch)
        if problem is None and not git.is_object_id(base):
            problem = f"has an invalid base_commit {base!r}"
        if problem:
            raise CorruptFile(f"{where} {problem}")
        assert isinstance(task_id, str) and isinstance(name, str)
        assert isinstance(branch, str) and isinstance(base, str)
        return CreateIntent(task_id, name, branch, base, str(rec.get("started_at") or now_iso()))


_BRANCH_RE = re.compile(r"^(?![-/.])(?!.*(?:\.\.|@\{|//))[^\x00-\x20\x7f~^:?*\[\\]+$")


def _task_problem(paths: TaskPaths, task_id: object, name: object, branch: object) -> str | None:
    """What is wrong with a journal's task id, name and branch (a branch bar made for
    this task: journals name branches that get deleted), if anything."""
    if task_id != paths.dir.name:
        return f"names task {task_id!r}, not {paths.dir.name!r}"
    if not isinstance(name, str) or not name:
        return f"has an invalid name {name!r}"
    if not (
        isinstance(branch, str) and _BRANCH_RE.match(branch) and branch.endswith(f"-{task_id}")
    ):
        return f"has an invalid branch {branch!r}"
    return None


CREATE = Journal(
    CreateIntent,
    lambda paths: paths.dir / "creating.json",
    "task creation journal",
    "create-journal",
)


# --- deleting.json -------------------------------------------------------------------


@record(frozen=True)
class DeleteIntent:
    """A closed task being deleted. ``branch_tip`` is where its branch pointed when the
    deletion was decided (None: it had none): a branch that moved since holds commits
    nobody decided to drop, and is kept."""

    task_id: str
    name: str
    branch: str
    branch_tip: str | None
    forced: bool
    started_at: str

    def to_record(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "branch": self.branch,
            "branch_tip": self.branch_tip,
            "forced": self.forced,
            "started_at": self.started_at,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], where: str, paths: TaskPaths) -> DeleteIntent:
        task_id, name, branch, tip = (
            rec.get(k) for k in ("task_id", "name", "branch", "branch_tip")
        )
        # the branch is deleted: it must be one bar made for this task
        problem = _task_problem(paths, task_id, name, branch)
        if problem is None and tip is not None and not git.is_object_id(tip):
            problem = f"has an invalid branch_tip {tip!r}"
        if problem:
            raise CorruptFile(f"{where} {problem}")
        assert isinstance(task_id, str) and isinstance(name, str) and isinstance(branch, str)
        return DeleteIntent(
            task_id,
            name,
            branch,
            tip,
            rec.get("forced") is True,
            str(rec.get("started_at") or now_iso()),
        )


DELETE = Journal(
    DeleteIntent,
    lambda paths: paths.dir / "deleting.json",
    "task deletion journal",
    "delete-journal",
)


# the intents a command that changes a task finishes first, in this order
INTERRUPTED = (RUN, ROLLBACK, SYNC, APPLY)
