"""Rollback: put the worktree back to any recorded state, as a step that can itself be undone.

The restore is ``git read-tree -m -u <now> <target>`` on the task's side index: git's
two-tree merge writes exactly the paths that differ between the two trees (changed files
rewritten, missing ones recreated, extra ones deleted, modes and symlinks included) and
leaves every other file alone, ignored ones included. The agent's own index and HEAD are
not touched (unless ``--hard``, which resets the task branch to the HEAD recorded at the
target).

Crash safety: a journal (``rollback.json``) is written before the first file changes and
removed after the ledger line. The next command that takes the task lock finds it and
finishes the rollback; restoring to a tree is idempotent, so finishing is always safe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bar import faults, git, snapshot
from bar.errors import CorruptFile, UsageError
from bar.ledger import STEP_ID_RE, Step, format_step_id, parse_step_ref
from bar.migrate import upgrade
from bar.store import now_iso, read_json, write_json_atomic
from bar.tasks import Task


@dataclass(frozen=True)
class Target:
    kind: str  # "base" | "step"
    step_id: str | None
    commit: str  # the snapshot to restore
    head: str  # the task branch HEAD recorded at that state (for --hard)


def journal_path(task: Task) -> Path:
    return task.dir / "rollback.json"


def resolve_target(task: Task, to: str | None) -> Target:
    """``base``, a step id, or None: the state before the last step."""
    ledger = task.ledger
    if to is None:
        last = ledger.last()
        if last is None:
            raise UsageError("there are no steps to roll back", hint="the task is at its base")
        to = "base" if last.number == 1 else format_step_id(last.number - 1)
    if to == "base":
        return Target("base", None, task.base_commit, task.base_commit)
    step = ledger.get(parse_step_ref(to))
    if not step.snapshot:
        raise UsageError(f"step {step.step_id} recorded no snapshot to return to")
    return Target("step", step.step_id, step.snapshot, _head_at(task, step))


def _head_at(task: Task, step: Step) -> str:
    """The task branch HEAD at ``step``: its own record, or the nearest earlier one."""
    if step.head:
        return step.head
    for earlier in task.ledger.iter_reverse(warn=False):
        if earlier.number < step.number and earlier.head:
            return earlier.head
    return task.base_commit


def changed_paths(task: Task, a: str, b: str) -> list[git.RawChange]:
    return git.diff_tree_raw(task.worktree, a, b)


def restore(task: Task, target_commit: str, *, verified: str | None = None) -> None:
    """Make the worktree equal ``target_commit``'s tree, touching only differing paths.

    ``verified``: a snapshot the side index and the worktree were just found to equal
    (by ``prepare``), so they need no rescan first.
    """
    env = {"GIT_INDEX_FILE": str(task.index)}
    lock = task.index.with_name(task.index.name + ".lock")
    lock.unlink(missing_ok=True)  # we hold the task lock: a leftover is from a crash
    if verified is not None:
        now_tree = git.tree_of(task.worktree, verified)
    else:
        now_tree = snapshot.write_tree(task.worktree, task.index, recorded=task.recorded_snapshot())
    target_tree = git.tree_of(task.worktree, target_commit)
    if now_tree == target_tree:
        return
    faults.point("before restoring the worktree")
    started_ns = snapshot.now_ns()
    git.git(task.worktree, "read-tree", "-m", "-u", now_tree, target_tree, env=env)
    # the side index and the worktree now hold exactly the target: note it, so the
    # snapshot that follows rescans only the directories the restore touched
    snapshot.restamp(task.worktree, task.index, target_tree, target_commit, started_ns)
    faults.point("after restoring the worktree")


def _write_journal(task: Task, target: Target, hard: bool, step_id: str, before: str) -> None:
    write_json_atomic(
        journal_path(task),
        {
            "version": 1,
            "step_id": step_id,
            "target": target.kind,
            "target_step": target.step_id,
            "target_commit": target.commit,
            "target_head": target.head,
            "hard": hard,
            "snapshot_before": before,
            "started_at": now_iso(),
        },
    )


def _read_journal(rec: dict[str, Any], path: Path) -> tuple[Target, str, str, bool]:
    """The journal's fields, each checked: the step id names files, the commits go to git."""
    missing = [k for k in _JOURNAL_KEYS if k not in rec]
    if missing:
        raise CorruptFile(f"rollback journal at {path} lacks {', '.join(missing)}")
    step_id, kind, target_step = rec["step_id"], rec["target"], rec.get("target_step")
    problem = None
    if not isinstance(step_id, str) or not STEP_ID_RE.match(step_id) or int(step_id) < 1:
        problem = f"an invalid step_id {step_id!r}"
    elif kind not in ("base", "step"):
        problem = f"an unknown target {kind!r}"
    elif kind == "step" and not (isinstance(target_step, str) and STEP_ID_RE.match(target_step)):
        problem = f"an invalid target_step {target_step!r}"
    elif not isinstance(rec["hard"], bool):
        problem = f"a 'hard' that is not true or false: {rec['hard']!r}"
    else:
        bad = [k for k in ("target_commit", "target_head", "snapshot_before")
               if not git.is_object_id(rec[k])]  # fmt: skip
        if bad:
            problem = f"an invalid {bad[0]} {rec[bad[0]]!r}"
    if problem:
        raise CorruptFile(f"rollback journal at {path} has {problem}")
    target = Target(kind, target_step if kind == "step" else None, rec["target_commit"],
                    rec["target_head"])  # fmt: skip
    return target, step_id, rec["snapshot_before"], rec["hard"]


_JOURNAL_KEYS = ("step_id", "target", "target_commit", "target_head", "hard", "snapshot_before")


def finish_interrupted(task: Task) -> Step | None:
    """Complete a rollback whose bar process died (the caller holds the task lock)."""
    path = journal_path(task)
    try:
        rec = read_json(path, "rollback journal")
    except FileNotFoundError:
        return None
    rec = upgrade("rollback-journal", rec, path)
    target, step_id, before, hard = _read_journal(rec, path)
    last = task.ledger.last()
    if last is not None and last.number >= int(step_id):
        path.unlink(missing_ok=True)  # recorded before the crash
        return None
    import sys

    print(f"bar: finishing rollback step {step_id}, which was interrupted", file=sys.stderr)
    return _perform(task, target, hard, step_id, before, str(rec.get("started_at", now_iso())))


def _perform(
    task: Task,
    target: Target,
    hard: bool,
    step_id: str,
    before: str,
    started: str,
    *,
    verified: bool = False,
) -> Step:
    from bar.recorder import append_step, diff_into_step

    t0 = time.monotonic()
    restore(task, target.commit, verified=before if verified else None)
    if hard:
        git.git(task.worktree, "reset", "--quiet", "--mixed", target.head)
        faults.point("after resetting the task branch")
    where = "base" if target.kind == "base" else f"step {target.step_id}"
    snap = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        before,
        f"step {step_id}: rollback to {where}",
        stamped_at=target.commit,
    )
    if snap.tree != git.tree_of(task.worktree, target.commit):
        import sys

        print(
            "bar: warning: the restored worktree differs from the target state "
            "(a file could not be written?); the difference is recorded",
            file=sys.stderr,
        )
    stat, artifacts = diff_into_step(task, step_id, before, snap.commit)
    step = Step(
        step_id=step_id,
        kind="rollback",
        started_at=started,
        ended_at=now_iso(),
        duration_ms=int((time.monotonic() - t0) * 1000),
        target=target.kind,
        target_step=target.step_id,
        hard=hard,
        snapshot_before=before,
        snapshot=snap.commit,
        diff_stat=stat,
        artifacts=artifacts,
        head=git.rev_parse(task.worktree, "HEAD"),
    )
    step = append_step(task, step)
    journal_path(task).unlink(missing_ok=True)
    return step


@dataclass(frozen=True)
class Plan:
    target: Target
    current: str
    changes: list[git.RawChange]


def plan(task: Task, to: str | None) -> Plan:
    """What a rollback would do, computed without writing anything of the task's."""
    from bar.recorder import current_tree_readonly

    target = resolve_target(task, to)
    current_tree = current_tree_readonly(task)
    changes = git.diff_tree_raw(
        task.worktree, current_tree, git.tree_of(task.worktree, target.commit)
    )
    return Plan(target, current_tree, changes)


def rollback(task: Task, to: str | None, *, hard: bool, wait: bool = True) -> Step:
    from bar.recorder import prepare
    from bar.tasks import load_task

    with task.lock("bar rollback", wait=wait):
        task = load_task(task.project, task.id)
        target = resolve_target(task, to)  # decided before hand edits are recorded
        prepare(task)
        step_id = task.ledger.next_step_id()
        before = task.recorded_snapshot()
        started = now_iso()
        _write_journal(task, target, hard, step_id, before)
        # prepare() just found the worktree equal to `before`
        return _perform(task, target, hard, step_id, before, started, verified=True)
