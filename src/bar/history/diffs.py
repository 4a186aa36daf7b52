"""The difference between two states of a task: two recorded ones, the last recorded one
and the worktree as it is now, or a target branch and what an apply makes of it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bar import git
from bar.base.record import record
from bar.git import DiffStat
from bar.history import states, steps
from bar.model.tasks import Task

if TYPE_CHECKING:
    from bar.changes.apply import ApplyResult


@record(frozen=True)
class Diff:
    """The difference between two commits or trees of a task's repository."""

    repo: Path
    from_commit: str
    to_commit: str

    def stat(self) -> DiffStat:
        return git.numstat(self.repo, self.from_commit, self.to_commit)

    def patch(self) -> str:
        """The replayable patch between the two states (asked with its numstat block,
        which is cut off: so git weighs a blob's size before it diffs its lines,
        ``git.TREES_ONLY``)."""
        args = git.diff_patch_args(self.from_commit, self.to_commit, with_numstat=True)
        raw = git.git(self.repo, *args, env=git.TREES_ONLY).stdout
        end = raw.find(b"\0\0")
        return raw[end + 2 if end >= 0 else len(raw) :].decode("utf-8", "surrogateescape")

    def text(self, *, stat_only: bool = False, with_stat: bool = False, color: bool = False) -> str:
        """As people read it: ``git diff -p`` (or ``--stat``, or both from one diff: the
        stat, a blank line, the patch), coloured if asked."""
        shape = ["--stat"] if stat_only else ["--stat", "-p"] if with_stat else ["-p"]
        return git.git(
            self.repo,
            "-c",
            f"color.ui={'always' if color else 'never'}",
            "diff",
            *git.DIFF_FLAGS[:2],
            *shape,
            self.from_commit,
            self.to_commit,
            "--",
            env=git.TREES_ONLY,
        ).out


def diff(task: Task, from_: str = "base", to: str | None = None) -> Diff:
    """Between two recorded states (default: base to the last); ``base``: that of ``to``."""
    end = states.resolve(task, to) if to else None
    start = end.base if from_ == "base" and end and end.base else states.resolve(task, from_).commit
    return Diff(task.project.root, start, end.commit if end else task.recorded_snapshot())


def unrecorded(task: Task, from_: str | None = None) -> Diff:
    """From a recorded state (default: the last) to the worktree as it is now: the changes
    no step recorded yet. Records nothing; the side index is read through a copy."""
    task.require_worktree()
    recorded = task.recorded_snapshot()
    now = steps.current_tree(task, recorded)
    start = states.resolve(task, from_).commit if from_ else recorded
    return Diff(task.project.root, start, now)


def apply_diff(task: Task, result: ApplyResult) -> Diff:
    """What an apply (or its dry run) changes on the target."""
    assert result.tree is not None
    return Diff(task.project.root, result.target_before, result.tree)
