"""Sync: bring a task up to date with a branch that moved on since the task began.

The task's last recorded state is merged three-way onto the branch's tip, with the task's
base as the merge base, entirely in git's object store (``git merge-tree --write-tree``,
the merge ``bar apply`` makes): a conflict changes nothing, unless the caller asks for the
merge with its conflict markers, to resolve in the worktree. The worktree then gets the
merged tree (restored as a rollback restores, touching only the paths that differ), the
task branch follows when it can (below), and the task's base becomes the tip: the step
records ``base_before`` and ``base_after`` (``bar.history.bases``), so every earlier state keeps
the base it was recorded against.

The task branch: still at the old base (the agent committed nothing), it moves to the tip;
with commits of the agent's, it gets a merge commit of the tip when that merge is clean;
otherwise it is left as it is and only the files are brought up to date.

Like every verb: write the intent (``sync.json``), then ``complete`` it — restore, move
the branch, snapshot, patch, ledger line, task.json, intent removed. Each part can run
again, so recovery after a crash calls the same ``complete``.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from bar import git
from bar.base import faults
from bar.base.clock import ms_since, now_iso
from bar.base.record import field, record
from bar.changes import resumed, rollback
from bar.changes.merge import merge_with_markers, on_base
from bar.errors import Conflict, NotFound, UsageError
from bar.git import DiffStat
from bar.git.safe import SafeGit
from bar.history import bases, snapshot, steps
from bar.model import journals
from bar.model.journals import SyncIntent
from bar.model.records import Step, SyncStep
from bar.model.tasks import Task


@record
class SyncPlan:
    """What a sync would do, from the worktree as it is now."""

    onto: str
    tip: str
    base_before: str
    state: str  # the task's state merged (its last recorded one, or the worktree's)
    tree: str | None = None  # the merged tree (None: already up to date)
    conflicts: list[str] = field(default_factory=list)
    changes: list[git.RawChange] = field(default_factory=list)  # in the worktree
    stat: DiffStat = field(default_factory=DiffStat.empty)  # what the merge brings in
    up_to_date: bool = False
    step: SyncStep | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "onto": self.onto,
            "tip": self.tip,
            "base_before": self.base_before,
            "base_after": self.tip if not self.up_to_date else self.base_before,
            "up_to_date": self.up_to_date,
            "conflicts": self.conflicts,
            "changes": [{"status": c.status, "path": c.path} for c in self.changes],
            "diff_stat": self.stat.to_record(),
            "step_id": self.step.step_id if self.step else None,
        }


def onto_of(task: Task, onto: str | None) -> tuple[str, str]:
    """(name, commit) of what to sync onto: ``onto``, else the task's branch
    (``bases.branch``: the one ``bar apply`` lands on)."""
    repo = task.project.root
    if onto is not None:
        if not onto or onto.startswith("-"):
            raise UsageError(f"{onto!r} is not a branch or commit", hint="give --onto BRANCH")
        name = onto
    else:
        name = bases.branch(task)
    branch = f"refs/heads/{name}"
    tip = git.resolve_commit(repo, branch if git.rev_parse(repo, branch) else name)
    if tip is None:
        raise NotFound(
            f"{name!r} names no branch or commit", hint="give an existing branch with --onto"
        )
    return name, tip


def plan(task: Task, onto: str | None, *, dry: bool = False) -> SyncPlan:
    """What a sync would do; writes only git objects. ``dry``: the worktree may hold
    changes no step recorded yet (a real sync records them first), merged as they are."""
    repo = task.project.root
    name, tip = onto_of(task, onto)
    base = task.base_commit
    state = task.recorded_snapshot()
    safe = SafeGit.read(repo, task.worktree)
    if dry:
        tree = steps.current_tree(task, state)
        if tree != git.tree_of(repo, state):
            state = safe.commit_tree(
                repo, tree, [state], "bar: dry-run state", identity=git.BAR_IDENTITY
            )
    result = SyncPlan(name, tip, base, state)
    if tip == base or git.is_ancestor(repo, tip, base):
        result.up_to_date = True
        return result
    task_side = on_base(safe, repo, state, base)
    result.tree, result.conflicts = merge_with_markers(safe, repo, tip, task_side)
    if result.conflicts:
        result.tree = _named_markers(
            safe, repo, result.tree, result.conflicts, {tip: name, task_side: f"task {task.name}"}
        )
    result.changes = git.diff_tree_raw(repo, git.tree_of(repo, state), result.tree)
    result.stat = git.numstat(repo, state, result.tree)
    return result


def _named_markers(
    safe: SafeGit, repo: Path, tree: str, paths: list[str], names: dict[str, str]
) -> str:
    """``tree`` with its conflict markers in ``paths`` labelled by ``names`` (commit id:
    name) rather than the 40 hex digits ``git merge-tree`` writes: ``<<<<<<< main``."""
    ids = "|".join(re.escape(commit) for commit in names)
    marker = re.compile(rb"^(<{7}|\|{7}|>{7}) (" + ids.encode() + rb")(?=:|\r?$)", re.M)
    entries = b""
    for path in paths:
        listed = safe.git(repo, "ls-tree", "-z", tree, "--", path).stdout.split(b"\0")[0]
        if not listed.startswith((b"100644 blob ", b"100755 blob ")):
            continue  # gone on one side, a link or a submodule: no markers to name
        mode, _, rest = listed.partition(b" blob ")
        blob = rest.split(b"\t", 1)[0].decode()
        data = safe.git(repo, "cat-file", "blob", blob).stdout
        named = marker.sub(lambda m: m[1] + b" " + names[m[2].decode()].encode(), data)
        if named != data:
            new = safe.git(repo, "hash-object", "-w", "--stdin", input=named).out.strip()
            entries += (
                mode + b" " + new.encode() + b"\t" + path.encode("utf-8", "surrogateescape") + b"\0"
            )
    if not entries:
        return tree
    with tempfile.TemporaryDirectory(prefix="bar-sync-") as tmp:
        env = git.index_env(Path(tmp) / "index")
        safe.git(repo, "read-tree", tree, env=env)
        safe.git(repo, "update-index", "-z", "--index-info", env=env, input=entries)
        return safe.git(repo, "write-tree", env=env).out.strip()


def sync(task: Task, onto: str | None, *, allow_conflicts: bool = False) -> SyncPlan:
    """Sync the task (caller holds the lock and ran ``transaction.prepare``)."""
    result = plan(task, onto)
    if result.up_to_date:
        return result
    if result.conflicts and not allow_conflicts:
        raise Conflict(
            f"syncing onto {result.onto} would conflict in: {', '.join(result.conflicts)}; "
            "nothing was changed",
            hint="resolve it in the worktree: `bar task sync --allow-conflicts` records the "
            "merge with conflict markers in those files",
        )
    assert result.tree is not None
    repo = task.project.root
    safe = SafeGit.read(repo, task.worktree)
    # one parent: a second one would read as the raw bytes of the state (``bar.git.exact``)
    merged = safe.commit_tree(
        repo,
        result.tree,
        [result.tip],
        f"bar: {task.name} synced onto {result.onto}",
        identity=git.BAR_IDENTITY,
    )
    head_before = git.rev_parse(task.worktree, "HEAD")
    intent = SyncIntent(
        step_id=task.ledger.next_step_id(),
        onto=result.onto,
        snapshot_before=result.state,
        merged=merged,
        base_before=result.base_before,
        base_after=result.tip,
        head_before=head_before,
        head_after=_branch_after(safe, task, head_before, result),
        conflicts=result.conflicts,
        started_at=now_iso(),
    )
    journals.SYNC.write(task.paths, intent)
    result.step = complete(task, intent, verified=True)
    return result


def _branch_after(safe: SafeGit, task: Task, head: str | None, result: SyncPlan) -> str | None:
    """Where the task branch goes (None: it stays): the tip if it is still at the old base,
    else a merge commit of the tip if that merge is clean."""
    wt = task.worktree
    if head is None or git.current_branch(wt) != task.branch:
        return None  # the agent checked out something else: not bar's to move
    if head == result.base_before:
        return result.tip
    if git.is_ancestor(wt, result.tip, head):
        return None
    tree, conflicts = merge_with_markers(safe, task.project.root, head, result.tip)
    if conflicts:
        return None
    return safe.commit_tree(
        wt,
        tree,
        [head, result.tip],
        f"Merge {result.onto} into task {task.name}\n\nBar-Task: {task.id}\n",
    )


def complete(task: Task, intent: SyncIntent, *, verified: bool = False) -> SyncStep:
    """Restore, move the branch, record and remove the intent. ``verified``: the worktree
    was just found equal to ``intent.snapshot_before``."""
    t0 = time.monotonic()
    restored = rollback.restore(
        task, intent.merged, verified=intent.snapshot_before if verified else None
    )
    head = git.rev_parse(task.worktree, "HEAD")
    if intent.head_after and head in (intent.head_before, intent.head_after):
        # the worktree's own index follows the branch, so `git status` there shows only
        # the task's changes; its files are the merged ones already
        git.git(task.worktree, "reset", "--quiet", "--mixed", intent.head_after)
        faults.point("after moving the task branch")
    snap = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        intent.snapshot_before,
        f"step {intent.step_id}: sync onto {intent.onto}",
        stamped_at=intent.merged,
        restored_tree=restored,
    )
    stat, patch = steps.record_changes(task, intent.step_id, intent.snapshot_before, snap.commit)
    bases.will_move(task)
    step = SyncStep(
        step_id=intent.step_id,
        started_at=intent.started_at,
        ended_at=now_iso(),
        duration_ms=ms_since(t0),
        onto=intent.onto,
        snapshot_before=intent.snapshot_before,
        snapshot=snap.commit,
        diff_stat=stat,
        head=git.rev_parse(task.worktree, "HEAD"),
        base_before=intent.base_before,
        base_after=intent.base_after,
        conflicts=intent.conflicts,
    )
    step.artifacts.patch = patch
    written = steps.append(task, step)
    faults.point("after recording the sync")
    bases.settle(task, intent.base_after)
    journals.SYNC.clear(task.paths)
    return written


def finish_interrupted(task: Task, intent: SyncIntent) -> list[Step]:
    """The sync a stopped bar left (``journals.SYNC``): finished around the hand edits
    made since (``bar.changes.resumed``), or only settled if it was recorded; the steps
    recorded."""
    # (before any look: a file the restore had taken out is the worktree's)
    rollback.hand_back(task, "bar sync", intent.step_id)
    return resumed.finish(task, intent, intent.merged, "sync", journals.SYNC, complete)


journals.SYNC.finished_by(finish_interrupted)
