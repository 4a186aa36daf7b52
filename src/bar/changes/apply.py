"""Apply: land a task's work on a real branch, as one commit or as a merge.

The new commit is computed entirely in git's object store first (``git merge-tree
--write-tree`` + ``git commit-tree``), so a conflict changes nothing anywhere. Only then is
the target moved:

- checked out in a worktree (usually the developer's own checkout): nothing may be in
  the way there (``bar.changes.checkout``: no changed, staged, untracked or ignored file where
  the apply writes), then files, index and branch are updated in steps that a crash
  cannot leave half done;
- not checked out: the ref is moved with a compare-and-swap ``update-ref``.
Either way, never while a worktree is mid-rebase (or merge, cherry-pick, ...) of it.

A task without its worktree is applied from its record alone: its last snapshot (commit
mode) or its branch (merge mode). That is a closed task, and an open one whose worktree was
removed (``bar worktree remove``: pending again) or is gone; every state it recorded is in
git's object store. Only a task with its worktree has it looked at first, for hand edits.

A target that does not exist is refused, unless it is to be made (``create``): then the
branch is created by the same compare-and-swap that lands the apply (from nothing to the
new commit, whose parent is the start point: the task's base unless another is given), so
no branch is left behind when the apply fails.

Nothing an agent could have planted in the repository's shared configuration or hooks runs
meanwhile: every git command that merges, commits, reads or writes a worktree or its index,
or moves a ref goes through ``safe_git.SafeGit`` (docs/sandbox.md, "What bar does on the
step's behalf").

Like every verb: write the intent (``apply.json``, holding the step to record), move the
target, then ``complete``: an update of the checkout that had begun is finished, the step
is recorded if the target has the commit, and the intent removed. Recovery after a crash
calls the same ``complete``.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from bar import git
from bar.base.clock import ms_since, now_iso
from bar.base.notices import note
from bar.base.progress import Progress
from bar.base.record import field, record
from bar.changes import checkout, conflict_markers
from bar.changes.merge import Ahead, Merged, Plan, checked_out_in, merge, on_base
from bar.errors import (
    ApplyConflict,
    BarError,
    Conflict,
    DirtyWorktree,
    NotFound,
    UnresolvedConflicts,
    UsageError,
)
from bar.git import DiffStat
from bar.git.safe import SafeGit
from bar.history import bases, steps
from bar.model import journals, tasks
from bar.model.journals import ApplyIntent
from bar.model.records import ApplyStep, State, Step
from bar.model.tasks import Task
from bar.redact import known as known_secrets

MODES = ("commit", "merge")


@record
class ApplyResult:
    mode: str
    target_branch: str
    target_before: str
    tree: str | None = None
    conflicts: list[str] = field(default_factory=list)
    commit: str | None = None
    message: str = ""
    merged: Merged | None = None  # the merge of the task's work onto the target
    checkout: Path | None = None  # the worktree where the target is checked out
    blocking: list[str] = field(default_factory=list)  # dirty paths there in the way
    nothing_to_do: bool = False
    step: ApplyStep | None = None
    refusal: BarError | None = None  # a dry run: why the apply would refuse (blocking...)
    preview: str | None = None  # a dry run's `git diff --stat -p` of the change, if asked
    created: bool = False  # the target did not exist: it is made at ``target_before``
    # (unless there is nothing to apply: then nothing is made)

    @property
    def stat(self) -> DiffStat:  # (read from the merge's diff when first asked)
        return self.merged.stat if self.merged is not None else DiffStat.empty()

    @property
    def settings(self) -> list[str]:
        """bar's own files it changes."""
        return self.merged.settings if self.merged is not None else []

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "target_branch": self.target_branch,
            "target_before": self.target_before,
            "commit_sha": self.commit,
            "commit_message": self.message,
            "conflicts": self.conflicts,
            "diff_stat": self.stat.to_record(),
            "checkout": str(self.checkout) if self.checkout else None,
            "blocking_paths": self.blocking,
            "nothing_to_do": self.nothing_to_do,
            "step_id": self.step.step_id if self.step else None,
            "refusal": str(self.refusal) if self.refusal else None,
            "changes_bar_settings": self.settings,
            "created_branch": self.created and not self.nothing_to_do,
        }


def from_record(task: Task) -> bool:
    """Whether the task is applied from its record alone: it has no worktree to look at
    for hand edits (closed, or pending again after ``bar worktree remove``, or its
    worktree is gone)."""
    return not task.active or task.pending or not task.worktree.is_dir()


@record(frozen=True)
class Create:
    """Make the target branch: at ``start`` (a commit-ish), else at the task's base."""

    start: str | None = None


def dry_run(
    task: Task,
    *,
    mode: str,
    target_branch: str | None,
    message: str | None,
    at: State | None = None,
    preview: bool = False,
    create: Create | None = None,
) -> ApplyResult:
    """What ``apply`` would do, from the worktree as it is now (or from the recorded
    state ``at``; from the record alone for a task without its worktree: ``from_record``);
    writes only git objects. It makes the checks the apply makes: a conflict raises as it
    would, and ``refusal`` says why a clean merge would be refused. ``preview``: with the
    text of the change (``ApplyResult.preview``), from one diff."""
    target = _target(task, mode, target_branch, at)
    repo = task.project.root
    base = at.base if at is not None and at.base else task.base_commit
    if at is not None:
        state, label = at.commit, at.name
        ahead = None
    else:
        recorded = task.recorded_snapshot()
        state = recorded
        looks = not from_record(task)
        # the merge of the recorded state, while the worktree is looked at
        ahead = _ahead(task, mode, target, state, base, preview) if looks else None
        # a task without its worktree, or closed, is what it recorded (whatever a kept
        # worktree holds now)
        recorded_tree = steps.tree_of(task, recorded)
        tree = steps.current_tree(task, recorded) if looks else recorded_tree
        if tree != recorded_tree:  # unrecorded changes: apply records them first
            safe = _safe_git(task, target, git.worktree_list(repo))
            state = safe.commit_tree(
                repo, tree, [recorded], "bar: dry-run state", identity=git.BAR_IDENTITY
            )
            label = task.ledger.next_step_id()  # the step that will record them
        else:
            label = state_step(task)
    listed, safe, merged = _ahead_result(task, ahead, mode, target, state, base, preview)
    result = _compute(
        safe,
        task,
        mode,
        target,
        message,
        state,
        label,
        base,
        _upto(at),
        listed,
        merged,
        preview,
        create,
        at,
    )
    if result.conflicts:
        raise ApplyConflict(result.target_branch, result.conflicts)
    if result.checkout is not None and not result.nothing_to_do:
        assert result.tree is not None
        where = result.checkout
        result.refusal = checkout.busy(where) or refusal(
            safe.including(where), result, where, result.tree
        )
    return result


def apply(
    task: Task,
    *,
    mode: str,
    target_branch: str | None,
    message: str | None,
    at: State | None = None,
    prepare: Callable[[Task, Callable[[], object]], None],
    create: Create | None = None,
) -> ApplyResult:
    """Land the task's last recorded state, or the recorded state ``at`` (the caller
    holds the lock). ``prepare`` runs first (``bar.step.transaction.prepare``: a crash's
    leftovers finished, hand edits recorded; ``prepare_from_record`` where
    ``from_record``), given what to do meanwhile.
    ``create``: the target does not exist yet and is made (``Create``)."""
    ahead: list[Ahead | None] = []

    def merge_ahead() -> None:  # the merge of the recorded state, while hand edits are sought
        state = at.commit if at is not None else task.recorded_snapshot()
        base = at.base if at is not None and at.base else task.base_commit
        try:
            ahead.append(_ahead(task, mode, _target(task, mode, target_branch, at), state, base))
        except BarError:
            pass  # said again below, in its turn

    if from_record(task) and task.active and not task.pending:
        note(
            f"the worktree of task {task.name} is missing ({task.worktree}): its record is "
            "applied; `bar doctor --repair` makes the worktree again"
        )
    prepare(task, merge_ahead)
    target = _target(task, mode, target_branch, at)
    repo = task.project.root
    t0 = time.monotonic()
    started = now_iso()
    state = at.commit if at is not None else task.recorded_snapshot()
    base = at.base if at is not None and at.base else task.base_commit
    listed, safe, merged = _ahead_result(
        task, ahead[0] if ahead else None, mode, target, state, base
    )
    # the trailer names the step (or checkpoint) whose state is applied: `bar show` it
    label = at.name if at is not None else state_step(task)
    with Progress(f"apply: merging the task's work onto {target}") as shown:
        shown.update()
        result = _compute(
            safe,
            task,
            mode,
            target,
            message,
            state,
            label,
            base,
            _upto(at),
            listed,
            merged,
            create=create,
            at=at,
        )
    if result.conflicts:
        raise ApplyConflict(result.target_branch, result.conflicts)
    if result.nothing_to_do:
        return result
    assert result.tree is not None
    parents = [result.target_before]
    if mode == "merge":
        parents.append(_task_branch_commit(safe, task, state, dry=False))
    result.commit = safe.commit_tree(repo, result.tree, parents, result.message)
    intent = ApplyIntent(
        ApplyStep(
            step_id=task.ledger.next_step_id(),
            started_at=started,
            ended_at=started,
            duration_ms=0,
            mode=mode,
            commit_sha=result.commit,
            commit_message=result.message,
            target_branch=target,
            snapshot=state,
            head=_task_head(task),
        ),
        target_before=result.target_before,
        token=os.urandom(16).hex(),
    )
    journals.APPLY.write(task.paths, intent)
    try:
        _move_target(safe, repo, result, intent)
    except BaseException:
        complete(task, intent)  # records it if the target moved after all; else forgets it
        raise
    result.step = complete(task, intent, duration_ms=ms_since(t0), moved=True)
    return result


def complete(
    task: Task, intent: ApplyIntent, *, duration_ms: int | None = None, moved: bool = False
) -> ApplyStep | None:
    """Finish an update of the target's checkout that had begun, record the apply if its
    commit landed on the target and is not recorded yet, then remove the intent. Returns
    the step if it landed. ``moved``: the caller has just moved the target to the commit
    (and updated its checkout) itself, so there is nothing to finish or to ask git."""
    step = intent.step
    repo = task.project.root
    landed = moved
    if not moved:
        where = checked_out_in(repo, step.target_branch)
        safe = SafeGit.read(repo, where)
        if where is not None:
            _finish_checkout(safe, where, intent)
        landed = safe.is_ancestor(repo, step.commit_sha, f"refs/heads/{step.target_branch}")
    last = task.ledger.last()
    recorded = last is not None and last.number >= step.number
    if landed and not recorded:
        step.ended_at = now_iso()
        if duration_ms is not None:
            step.duration_ms = duration_ms
        step = steps.append(task, step)
    journals.APPLY.clear(task.paths)
    return step if landed else None


def _finish_checkout(safe: SafeGit, where: Path, intent: ApplyIntent) -> None:
    """Finish the update of ``where`` if a stopped bar had begun it (``bar.changes.checkout``)."""
    step, token, before = intent.step, intent.token, intent.target_before
    if token is None or before is None:
        return  # an intent written before bar updated checkouts in resumable steps
    if checkout.resume(
        safe,
        where,
        step.target_branch,
        before,
        step.commit_sha,
        token=token,
        reason=_reason(step.mode),
    ):
        note(
            f"finished the interrupted apply of {git.short(step.commit_sha)} to "
            f"{step.target_branch}: updated the checkout at {where}"
        )


# --- computing the commit ------------------------------------------------------------


def _target(task: Task, mode: str, target_branch: str | None, at: State | None = None) -> str:
    if mode not in MODES:
        raise UsageError(f"unknown apply mode {mode!r}", hint="use --mode commit or --mode merge")
    if at is not None and mode == "merge":
        raise UsageError(
            "--at lands a recorded state as one commit; a merge takes the task branch as it is",
            hint=f"use --mode commit with --at {at.name}",
        )
    return target_branch or bases.branch(task)


def state_step(task: Task) -> str:
    """The id of the step that recorded the task's last state: the newest step with a
    snapshot that is not an apply (an apply lands a state, it records none); ``0000``
    for the base."""
    for step in task.ledger.iter_reverse(warn=False):
        if step.snapshot and not isinstance(step, ApplyStep):
            return step.step_id
    return "0000"


def default_message(task: Task) -> str:
    title = task.name.replace("-", " ").replace("_", " ")
    text = title[:1].upper() + title[1:]
    body = task.metadata.get("description")
    if isinstance(body, str) and body.strip():
        text += "\n\n" + body.strip()
    return text


def with_trailers(message: str, task: Task, step_id: str) -> str:
    return f"{message.rstrip()}\n\nBar-Task: {task.id}\nBar-Step: {step_id}\n"


def _safe_git(task: Task, target_branch: str, listed: list[dict[str, str]]) -> SafeGit:
    """Git for this apply, from the configuration seen where it runs git: the repository,
    the task worktree (unless removed) and the target's checkout."""
    repo = task.project.root
    worktree = task.worktree if task.worktree.is_dir() else None
    return SafeGit.read(repo, worktree, checked_out_in(repo, target_branch, listed))


def _ahead(
    task: Task,
    mode: str,
    target: str,
    state: str,
    base: str,
    preview: bool = False,
) -> Ahead | None:
    """The commit mode's merge of ``state`` onto ``target``, started in a thread
    (``bar.changes.merge``) while the caller looks at the worktree."""
    if mode != "commit":
        return None
    steps.note_tree(task, state)  # (asked in the thread: known without git if noted)
    plan = _plan(task, target, state, base, preview)
    # the configuration seen from the repository and the target's checkout: a commit-mode
    # apply runs no git in the task worktree (a merge-mode one does: ``_safe_git``)
    return Ahead(task.project.root, plan, task.project.root)


def _plan(task: Task, target: str, state: str, base: str, preview: bool) -> Plan:
    return Plan(target, state, base, tuple(task.project.settings_files()), preview)


def _ahead_result(
    task: Task,
    ahead: Ahead | None,
    mode: str,
    target: str,
    state: str,
    base: str,
    preview: bool = False,
) -> tuple[list[dict[str, str]], SafeGit, Merged | None]:
    """(the worktree list, the git to use, the merge if computed ahead for this state)."""
    if ahead is not None:
        done = ahead.result(_plan(task, target, state, base, preview))
        if done is not None:
            return done
    listed = git.worktree_list(task.project.root)
    return listed, _safe_git(task, target, listed), None


def _task_head(task: Task) -> str | None:
    """The task branch's HEAD: its worktree's, or the branch's tip once it was removed."""
    if task.worktree.is_dir():
        return git.head(task.worktree)
    return git.rev_parse(task.project.root, f"refs/heads/{task.branch}")


def _upto(at: State | None) -> int | None:
    """The number of the step whose state ``at`` is (None: the last state)."""
    if at is None:
        return None
    return int(at.step_id.split(".")[0]) if at.step_id else 0


def _compute(
    safe: SafeGit,
    task: Task,
    mode: str,
    target_branch: str,
    message: str | None,
    state: str,
    step_id: str,
    base: str,
    upto: int | None,
    listed: list[dict[str, str]],
    merged: Merged | None = None,
    preview: bool = False,
    create: Create | None = None,
    at: State | None = None,
) -> ApplyResult:
    """Everything up to (not including) the commit. Writes only git objects. ``upto``:
    the step whose state this is (None: the last one), for the syncs that led to it.
    ``merged``: the merge, computed ahead for this state, base and target. ``create``:
    the target is to be made (its tip is then the start point); ``at``: the state named
    on the command line, for the command a hint gives."""
    repo = task.project.root
    tip = merged.tip if merged is not None else git.rev_parse(repo, f"refs/heads/{target_branch}")
    if tip is None and create is None:
        raise _no_target(task, mode, target_branch, base, at)
    if tip is not None and create is not None:
        raise UsageError(
            f"--create makes a new branch, and {target_branch!r} exists already "
            f"(at {git.short(tip)})",
            hint=f"apply onto it: {apply_command(task, mode, at, target=target_branch)}",
        )
    created = tip is None
    if tip is None:
        assert create is not None
        tip, merged = _start_point(task, target_branch, create, base), None
    bases.refuse_task_worktree(task.project, target_branch, listed)
    held = conflict_markers.unresolved(task, state, upto)
    if held:
        raise UnresolvedConflicts(target_branch, held, task.name if task.active else task.id)
    result = ApplyResult(mode, target_branch, tip, created=created)
    if merged is None:
        if mode == "commit":
            theirs = on_base(safe, repo, state, base)
        else:
            theirs = _task_branch_commit(safe, task, state, dry=True)
        merged = merge(
            safe, repo, tip, theirs, list(task.project.settings_files()), preview=preview
        )
    if merged.tree is None:
        result.conflicts = merged.conflicts
        return result
    result.tree, result.merged = merged.tree, merged
    result.preview = merged.preview
    if mode == "commit" and merged.tree == git.tree_of(repo, tip):
        result.nothing_to_do = True
        return result
    if mode == "merge" and safe.is_ancestor(repo, merged.theirs, tip):
        result.nothing_to_do = True
        return result
    if message:  # typed on the command line, it may hold a secret (as a description may)
        text = known_secrets.scrub(message)
    elif mode == "commit":
        text = default_message(task)
    else:
        text = f"Merge task {task.name} ({task.id}) into {target_branch}"
    result.message = with_trailers(text, task, step_id)
    checkout.refuse_mid_operation(task.project.common_dir, target_branch, _task_branch(task))
    result.checkout = None if created else checked_out_in(repo, target_branch, listed)
    return result


def _task_branch(task: Task) -> Callable[[Path], str | None]:
    """The branch of the project's task whose worktree is at a path (None: none's), the
    project's tasks read when first asked."""
    known: dict[Path, str] = {}

    def branch_at(where: Path) -> str | None:
        if not known:
            known.update({t.worktree.resolve(): t.branch for t in tasks.list_tasks(task.project)})
        return known.get(where.resolve())

    return branch_at


def apply_command(
    task: Task, mode: str = "commit", at: State | None = None, *, target: str | None = None
) -> str:
    """The ``bar apply`` command line that lands this task as asked (``--task`` unless
    it is the project's active task)."""
    words = ["bar apply"]
    if task.project.active_task_id() != task.id:
        words.append(f"--task {task.name if task.active else task.id}")
    if mode != "commit":
        words.append(f"--mode {mode}")
    if at is not None:
        words.append(f"--at {at.name}")
    if target is not None:
        words.append(f"--target {shlex.quote(target)}")
    return " ".join(words)


def _no_target(task: Task, mode: str, target: str, base: str, at: State | None) -> BarError:
    """The error for a target branch that does not exist: a name that cannot be a branch
    is a bad command line; a valid one can be made with ``--create``."""
    repo = task.project.root
    if not git.check_branch_name(repo, target):
        return UsageError(
            f"{target!r} cannot be a branch name (git check-ref-format --branch)",
            hint="give an existing branch with --target, or a valid name with --create",
        )
    command = apply_command(task, mode, at, target=target)
    return NotFound(
        f"target branch {target!r} does not exist",
        hint=f"`{command} --create` makes it at the task's base ({_base_text(task, base)}) "
        f"and lands the task there; `--create REF` makes it at REF instead",
    )


def _base_text(task: Task, base: str) -> str:
    """The task's base as people read it: ``main at 1a2b3c4d5e``."""
    return f"{task.base_ref} at {git.short(base)}" if task.base_ref else git.short(base)


def _start_point(task: Task, target: str, create: Create, base: str) -> str:
    """The commit a new target branch starts from: ``create.start``, else the base."""
    repo = task.project.root
    if not git.check_branch_name(repo, target):
        raise UsageError(
            f"{target!r} cannot be a branch name (git check-ref-format --branch)",
            hint="give --target a valid branch name",
        )
    if create.start is None:
        return base
    if create.start.startswith("-"):
        raise UsageError(f"--create {create.start!r}: a start point cannot start with '-'")
    found = git.rev_parse(repo, f"{create.start}^{{commit}}")
    if found is None:
        raise NotFound(
            f"--create {create.start!r}: no such commit or branch here",
            hint="give a branch, tag or commit to start the new branch at, or --create "
            "alone for the task's base",
        )
    return found


def _task_branch_commit(safe: SafeGit, task: Task, state: str, *, dry: bool) -> str:
    """The task branch tip carrying ``state``: the branch itself if it already has that
    tree, else a commit of the uncommitted changes on top of it."""
    wt = task.git_cwd
    head = _task_head(task)
    if head is None and not task.worktree.is_dir():
        raise NotFound(
            f"--mode merge merges the branch {task.branch} of task {task.name}, which was deleted",
            hint="land the task's recorded state as one commit with --mode commit",
        )
    head = head or task.base_commit
    state_tree = git.tree_of(wt, state)
    if git.tree_of(wt, head) == state_tree:
        return head
    in_worktree = task.worktree.is_dir() and git.current_branch(wt) == task.branch
    elsewhere = None if in_worktree else checked_out_in(task.project.root, task.branch)
    if elsewhere is not None:
        raise DirtyWorktree(
            f"--mode merge would commit the task's uncommitted changes on {task.branch}, "
            f"which is checked out in {elsewhere}; nothing was changed",
            hint="switch that checkout to another branch, or apply with --mode commit",
        )
    commit = safe.commit_tree(
        wt, state_tree, [head], f"Uncommitted changes of task {task.name}\n\nBar-Task: {task.id}\n"
    )
    if not dry:
        ref = f"refs/heads/{task.branch}"
        if in_worktree:
            safe.update_ref(wt, ref, commit, head, "bar: apply --mode merge")
            safe.git(wt, "reset", "--quiet", "--mixed", commit)
        else:
            old = git.rev_parse(wt, ref) or ""  # ("": must not exist)
            safe.update_ref(wt, ref, commit, old, "bar: apply --mode merge")
    return commit


def _reason(mode: str) -> str:
    return f"bar: apply ({mode})"


def _move_target(safe: SafeGit, repo: Path, result: ApplyResult, intent: ApplyIntent) -> None:
    assert result.commit is not None and intent.token is not None
    branch, before, token = result.target_branch, result.target_before, intent.token
    where = checked_out_in(repo, branch)
    if where is None:
        # a branch made by this apply must not exist yet: "" is git's "no such ref"
        old = "" if result.created else before
        safe.update_ref(repo, f"refs/heads/{branch}", result.commit, old, _reason(result.mode))
        return
    result.checkout = where
    safe = safe.including(where)
    checkout.lock(where, token)  # checked under the lock: no git changes the index now
    try:
        found = checkout.changes(safe, where, before, result.commit)
        refused = refusal(safe, result, where, result.commit, found)
        if refused is not None:
            raise refused
    except BaseException:
        checkout.unlock(where, token)
        raise
    checkout.advance(
        safe,
        where,
        branch,
        before,
        result.commit,
        token=token,
        reason=_reason(result.mode),
        found=found,
    )
    checkout.unlock(where, token)


def refusal(
    safe: SafeGit,
    result: ApplyResult,
    where: Path,
    new: str,
    found: list[checkout.Change] | None = None,
) -> BarError | None:
    """Why the checkout ``where`` of the target may not be updated to ``new`` (``found``:
    what changes between the two, if known) (None: it may). The apply asks under the
    checkout's lock; its dry run asks the same."""
    branch = result.target_branch
    if git.rev_parse(where, "HEAD") != result.target_before:
        return Conflict(
            f"{branch} moved while applying; nothing was changed", hint="run bar apply again"
        )
    blocked = checkout.blocking_paths(safe, where, result.target_before, new, found)
    if not blocked:
        return None
    result.blocking = blocked
    shown = ", ".join(blocked[:10]) + (
        f" and {len(blocked) - 10} more" if len(blocked) > 10 else ""
    )
    return DirtyWorktree(
        f"{branch} is checked out in {where}, where the apply would overwrite these "
        f"files (changed, untracked or ignored there): {shown}; nothing was changed",
        hint="commit, move or remove them there, or apply to another branch with --target",
    )


def finish_interrupted(task: Task, intent: ApplyIntent) -> list[Step]:
    """The apply a stopped bar left (``journals.APPLY``): finished if its commit landed
    on the target (recorded, if it was not yet), else dropped; the step recorded."""
    last = task.ledger.last()
    recorded = last is not None and last.number >= intent.step.number
    landed = complete(task, intent)
    if landed is None:
        step = intent.step
        note(
            f"apply step {step.step_id} ({step.commit_sha[:10]} onto {step.target_branch}) "
            f"was interrupted before {step.target_branch} moved; nothing was applied"
        )
        return []
    if recorded:
        return []
    note(
        f"recorded apply step {landed.step_id} ({landed.commit_sha[:10]} on "
        f"{landed.target_branch}), which bar stopped before recording"
    )
    return [landed]


journals.APPLY.finished_by(finish_interrupted)
