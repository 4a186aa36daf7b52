"""Apply: land a task's work on a real branch, as one commit or as a merge.

The new commit is computed entirely in git's object store first (``git merge-tree
--write-tree`` + ``git commit-tree``), so a conflict changes nothing anywhere. Only then is
the target moved:

- checked out in a worktree (usually the developer's own checkout): every path the apply
  changes must be clean there (no staged, unstaged or untracked file in the way), then the
  checkout is fast-forwarded to the new commit, which updates files, index and branch
  together and is refused by git itself if the branch moved meanwhile;
- not checked out: the ref is moved with a compare-and-swap ``update-ref``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bar import faults, git
from bar.errors import Conflict, DirtyWorktree, UsageError
from bar.git import DiffStat
from bar.ledger import Step
from bar.render import short
from bar.store import now_iso, read_json, write_json_atomic
from bar.tasks import Task


@dataclass
class Result:
    mode: str
    target_branch: str
    target_before: str
    tree: str | None
    conflicts: list[str] = field(default_factory=list)
    commit: str | None = None
    message: str = ""
    stat: DiffStat = field(default_factory=DiffStat.empty)
    checkout: str | None = None  # the worktree where the target is checked out
    nothing_to_do: bool = False
    step: Step | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "target_branch": self.target_branch,
            "target_before": self.target_before,
            "commit_sha": self.commit,
            "commit_message": self.message,
            "conflicts": self.conflicts,
            "diff_stat": self.stat.to_record(),
            "checkout": self.checkout,
            "nothing_to_do": self.nothing_to_do,
            "step_id": self.step.step_id if self.step else None,
        }


def merge_trees(repo: Path, ours: str, theirs: str) -> tuple[str | None, list[str]]:
    """Three-way merge of two commits in the object store: (tree, conflicting paths)."""
    res = git.git(
        repo, "merge-tree", "--write-tree", "--name-only", "-z", ours, theirs, check=False
    )
    if res.returncode not in (0, 1):
        raise git.GitCommandError(res)
    fields = res.stdout.split(b"\0")
    tree = fields[0].decode().strip()
    conflicts: list[str] = []
    if res.returncode == 1:
        for item in fields[1:]:
            if not item:
                break
            path = item.decode("utf-8", "surrogateescape")
            if path not in conflicts:
                conflicts.append(path)
        return None, conflicts
    return tree, conflicts


def default_message(task: Task, step_id: str) -> str:
    title = task.name.replace("-", " ").replace("_", " ")
    title = title[:1].upper() + title[1:]
    body = task.metadata.get("description")
    text = title
    if isinstance(body, str) and body.strip():
        text += "\n\n" + body.strip()
    return text


def with_trailers(message: str, task: Task, step_id: str) -> str:
    return f"{message.rstrip()}\n\nBar-Task: {task.id}\nBar-Step: {step_id}\n"


def checked_out_in(repo: Path, branch: str) -> Path | None:
    ref = f"refs/heads/{branch}"
    for entry in git.worktree_list(repo):
        if entry.get("branch") == ref and "bare" not in entry:
            return Path(entry["worktree"])
    return None


def blocking_paths(checkout: Path, paths: list[str]) -> list[str]:
    """Paths among ``paths`` with staged, unstaged or untracked changes in ``checkout``."""
    if not paths:
        return []
    res = git.git(
        checkout, "status", "--porcelain=v1", "-z", "--untracked-files=all",
        "--ignored=no", "--no-renames", "--", *[f":(literal){p}" for p in paths],
    )  # fmt: skip
    blocked: list[str] = []
    for item in res.stdout.split(b"\0"):
        if len(item) > 3:
            blocked.append(item[3:].decode("utf-8", "surrogateescape"))
    return blocked


def compute(
    task: Task, mode: str, target_branch: str, message: str | None, state: str, step_id: str
) -> Result:
    """Everything up to (not including) moving the target. Writes only git objects."""
    repo = task.project.root
    tip = git.rev_parse(repo, f"refs/heads/{target_branch}")
    if tip is None:
        raise UsageError(
            f"target branch {target_branch!r} does not exist",
            hint="give an existing branch with --target",
        )
    result = Result(mode, target_branch, tip, None)
    theirs = state if mode == "commit" else _task_branch_commit(task, state, dry=True)
    tree, conflicts = merge_trees(repo, tip, theirs)
    if conflicts:
        result.conflicts = conflicts
        return result
    assert tree is not None
    result.tree = tree
    result.stat = git.numstat(repo, tip, tree)
    if mode == "commit" and tree == git.tree_of(repo, tip):
        result.nothing_to_do = True
        return result
    if mode == "merge" and git.is_ancestor(repo, theirs, tip):
        result.nothing_to_do = True
        return result
    text = message or (
        default_message(task, step_id)
        if mode == "commit"
        else f"Merge task {task.name} ({task.id}) into {target_branch}"
    )
    result.message = with_trailers(text, task, step_id)
    result.checkout = str(checked_out_in(repo, target_branch) or "") or None
    return result


def _task_branch_commit(task: Task, state: str, *, dry: bool) -> str:
    """The task branch tip carrying ``state``: the branch itself if it already has that
    tree, else a commit of the uncommitted changes on top of it."""
    wt = task.worktree
    head = git.rev_parse(wt, "HEAD") or task.base_commit
    state_tree = git.tree_of(wt, state)
    if git.tree_of(wt, head) == state_tree:
        return head
    commit = git.commit_tree(
        wt, state_tree, [head], f"Uncommitted changes of task {task.name}\n\nBar-Task: {task.id}\n"
    )
    if not dry:
        branch = git.current_branch(wt)
        if branch == task.branch:
            git.update_ref(wt, f"refs/heads/{task.branch}", commit, head, "bar: apply --mode merge")
            git.git(wt, "reset", "--quiet", "--mixed", commit)
        else:
            git.update_ref(wt, f"refs/heads/{task.branch}", commit,
                           git.rev_parse(wt, f"refs/heads/{task.branch}"), "bar: apply --mode merge")  # fmt: skip
    return commit


def apply(
    task: Task,
    *,
    mode: str,
    target_branch: str | None,
    message: str | None,
    dry_run: bool,
    wait: bool = True,
) -> Result:
    from bar.recorder import append_step, current_tree_readonly, prepare
    from bar.tasks import load_task

    if mode not in ("commit", "merge"):
        raise UsageError(f"unknown apply mode {mode!r}", hint="use --mode commit or --mode merge")
    target = target_branch or task.project.config.git.default_base
    repo = task.project.root
    if dry_run:
        tree = current_tree_readonly(task)
        recorded = task.recorded_snapshot()
        state = recorded
        if tree != git.tree_of(repo, recorded):
            parent = recorded
            state = git.commit_tree(repo, tree, [parent], "bar: dry-run state")
        last = task.ledger.last()
        result = compute(task, mode, target, message, state, last.step_id if last else "0000")
        if result.conflicts:
            raise ConflictError(result)
        return result
    with task.lock("bar apply", wait=wait):
        task = load_task(task.project, task.id)
        prepare(task)
        t0 = time.monotonic()
        started = now_iso()
        state = task.recorded_snapshot()
        step_id = task.ledger.next_step_id()
        last = task.ledger.last()
        # the trailer names the step whose state is applied: `bar show` it to review
        result = compute(task, mode, target, message, state, last.step_id if last else "0000")
        if result.conflicts:
            raise ConflictError(result)
        if result.nothing_to_do:
            return result
        assert result.tree is not None
        parents = [result.target_before]
        if mode == "merge":
            parents.append(_task_branch_commit(task, state, dry=False))
        result.commit = git.commit_tree(repo, result.tree, parents, result.message)
        step = Step(
            step_id=step_id,
            kind="apply",
            started_at=started,
            ended_at=started,
            duration_ms=0,
            mode=mode,
            commit_sha=result.commit,
            commit_message=result.message,
            target_branch=target,
            snapshot=state,
            head=git.rev_parse(task.worktree, "HEAD"),
        )
        # The journal says what is about to land: if bar dies after the target moved but
        # before the ledger line, the next command records the apply from it.
        write_json_atomic(journal_path(task), {"version": 1, "step": step.to_record()})
        try:
            _move_target(repo, result)
        except BaseException:
            if not git.is_ancestor(repo, result.commit, f"refs/heads/{target}"):
                journal_path(task).unlink(missing_ok=True)
            raise
        step.ended_at = now_iso()
        step.duration_ms = int((time.monotonic() - t0) * 1000)
        result.step = append_step(task, step)
        journal_path(task).unlink(missing_ok=True)
        return result


def journal_path(task: Task) -> Path:
    return task.dir / "apply.json"


def finish_interrupted(task: Task) -> Step | None:
    """Record an apply whose target moved before bar died; forget one that never landed."""
    import sys

    from bar.recorder import append_step

    path = journal_path(task)
    try:
        rec = read_json(path, "apply journal")
    except FileNotFoundError:
        return None
    step = Step.from_record(rec.get("step"), f"apply journal at {path}")
    last = task.ledger.last()
    landed = (
        step.commit_sha is not None
        and step.target_branch is not None
        and git.is_ancestor(task.project.root, step.commit_sha, f"refs/heads/{step.target_branch}")
    )
    if landed and (last is None or last.number < step.number):
        step.ended_at = now_iso()
        append_step(task, step)
        print(
            f"bar: recorded apply step {step.step_id} ({short(step.commit_sha)} on "
            f"{step.target_branch}), which bar stopped before recording",
            file=sys.stderr,
        )
    path.unlink(missing_ok=True)
    return step if landed else None


def _move_target(repo: Path, result: Result) -> None:
    assert result.commit is not None
    ref = f"refs/heads/{result.target_branch}"
    reason = f"bar: apply ({result.mode})"
    checkout = checked_out_in(repo, result.target_branch)
    if checkout is None:
        git.update_ref(repo, ref, result.commit, result.target_before, reason)
        return
    touched = list(git.numstat(repo, result.target_before, result.commit).file_list)
    changed = [c.path for c in git.diff_tree_raw(repo, result.target_before, result.commit)]
    paths = sorted(set(touched) | set(changed))
    blocked = blocking_paths(checkout, paths)
    if blocked:
        shown = ", ".join(blocked[:10]) + (
            f" and {len(blocked) - 10} more" if len(blocked) > 10 else ""
        )
        raise DirtyWorktree(
            f"{result.target_branch} is checked out in {checkout} and these files have "
            f"changes the apply would overwrite: {shown}",
            hint="commit or stash them there, or apply to another branch with --target",
        )
    head = git.rev_parse(checkout, "HEAD")
    if head != result.target_before:
        raise Conflict(
            f"{result.target_branch} moved while applying; nothing was changed",
            hint="run bar apply again",
        )
    faults.point("before updating the checkout")
    git.git(
        checkout, "-c", "core.hooksPath=/dev/null", "merge", "--ff-only", "--quiet",
        "--no-stat", result.commit,
    )  # fmt: skip


class ConflictError(Conflict):
    def __init__(self, result: Result) -> None:
        self.result = result
        shown = ", ".join(result.conflicts)
        super().__init__(
            f"applying onto {result.target_branch} would conflict in: {shown}; nothing was changed",
            hint="roll the task back, or rebase its work by hand, then apply again",
        )
