"""``bar review BRANCH``: the steps, sessions and policy decisions behind a pushed branch.

A branch someone pushed carries in its commits' messages the ``Bar-Task:`` and
``Bar-Step:`` lines ``bar apply`` wrote, which a squash merge keeps
(``bar.history.trailers``). The commits of the branch that its base lacks (``BRANCH
--not BASE``: what a pull request would merge) are read for them, and each task they
name that is here, this machine's own or a copy ``bar fetch`` brought, is read back: its
steps up to the one whose state the commit lands, with their agent sessions and what
the policy decided. A task of this machine that went on elsewhere (``bar fetch`` says
*behind*) lacks the states the other machine recorded: then the history fetched for it
is read in place (``bar.share.view``), without adopting it. A task that is not here at
all is named, for ``bar fetch`` to bring; a state no record here holds is said, with
what brings it.

Whether a commit still holds the state it names is asked of the task's files only, and
against what landing that state on the commit's parent gives (the state's change from
its base merged onto the parent, as ``bar apply`` merges), not against the state itself:
a branch that moved since the task began holds other lines in those files too, and a
squash or a rebase of the applied commit then still matches, while a fix made on the
way, or a merge resolved by hand, does not. Whether the branch's tip changed those files
since is said apart. The merge writes git objects only; no ref, no file, no record.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from bar import git
from bar.base.record import field, record
from bar.errors import BarError, GitError, NotFound, UsageError
from bar.history import bases, states, trailers
from bar.history.trace import applied_state
from bar.model.project import Project
from bar.model.records import ApplyStep, RunStep, State, Step
from bar.model.tasks import Task, list_tasks
from bar.session import stored
from bar.share import view

OWN = "own"  # this machine's task
COPY = "copy"  # a read-only copy ``bar fetch`` made of another machine's task
FETCHED = "fetched"  # the newest history fetched for it, read in place (``bar.share.view``)


@record(frozen=True)
class Landing:
    """A commit of the branch that names a state of the task."""

    commit: str
    subject: str
    state: str | None  # the step (or checkpoint) whose state it lands; None: not said
    applied: bool  # the very commit ``bar apply`` made (else a squash, rebase or pick)
    recorded: bool  # the record here has that state (a copy fetched earlier may not)
    # the task's files the commit holds otherwise than the state landed on its parent
    # would (none said when the state is not in the record here)
    differs: list[str] = field(default_factory=list)
    # the task's files the branch's tip holds otherwise than the commit
    changed_since: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool | None:
        """The commit holds the state's files as landing it would; None: cannot say."""
        return not self.differs if self.recorded else None

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "subject": self.subject,
            "state": self.state,
            "applied": self.applied,
            "recorded": self.recorded,
            "matches": self.matches,
            "differs": self.differs,
            "changed_since": self.changed_since,
        }


@record
class TaskReview:
    task_id: str
    task: Task | None  # None: not here (``bar fetch`` brings it)
    landings: list[Landing] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)  # up to the last state landed
    record: str | None = None  # whose record is read: OWN, COPY, FETCHED (None: not here)
    own: Task | None = None  # this machine's task, when a fetched history is read instead
    # a history was fetched for the task (newest: this commit), read or not
    fetched: view.Fetched | None = None

    def to_json(self) -> dict[str, Any]:
        t = self.task
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "here": t is not None,
            "name": t.name if t is not None else None,
            "record": self.record,
        }
        if t is not None and t.origin is not None:
            out["origin"] = t.origin  # a copy fetched from another machine
        out["landings"] = [x.to_json() for x in self.landings]
        out["steps"] = [step_json(s) for s in self.steps]
        return out


@record
class Review:
    branch: str
    tip: str
    base: str  # the base named (git.default_base unless given)
    base_commit: str
    commits: int  # commits of the branch that the base lacks
    tasks: list[TaskReview] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """Some task the branch names is here."""
        return any(t.task is not None for t in self.tasks)

    def to_json(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "tip": self.tip,
            "base": self.base,
            "base_commit": self.base_commit,
            "commits": self.commits,
            "tasks": [t.to_json() for t in self.tasks],
        }


def review(project: Project, branch: str, base: str | None = None) -> Review:
    """What the commits of ``branch`` that ``base`` (default: git.default_base) lacks
    say of their tasks. ``NotFound`` when none of them names a task."""
    repo = project.root
    tip = _commit(repo, branch, "branch")
    base_name = base or project.config.git.default_base
    base_commit = _commit(repo, base_name, "base")
    found = trailers.branch_links(repo, tip, base_commit)
    count = int(git.out(repo, "rev-list", "--count", tip, "--not", base_commit, "--"))
    if not found:
        raise NotFound(
            f"no commit of {branch} that {base_name} lacks ({count} of them) names a bar task",
            hint="bar apply ends each commit with Bar-Task and Bar-Step lines; a squash "
            "merge keeps them when its message keeps the squashed ones. Compare with "
            "another branch: --base BRANCH",
        )
    result = Review(branch, tip, base_name, base_commit, count)
    here = {t.id: t for t in list_tasks(project)}
    subjects = _subjects(repo, [sha for sha, _ in found])
    named: dict[str, list[tuple[str, trailers.Link]]] = {}
    for sha, links in reversed(found):  # oldest first
        for link in links:
            named.setdefault(link.task_id, []).append((sha, link))
    for task_id, landed in named.items():
        entry = _reader(project, task_id, here.get(task_id), landed)
        result.tasks.append(entry)
        for sha, link in landed:
            if entry.task is not None:
                entry.landings.append(_landing(entry.task, sha, subjects[sha], link, tip))
            else:
                entry.landings.append(Landing(sha, subjects[sha], link.step_id, False, False))
        if entry.task is not None:
            entry.steps = _steps_up_to(entry.task, entry.landings)
    return result


def _reader(
    project: Project, task_id: str, local: Task | None, links: list[tuple[str, trailers.Link]]
) -> TaskReview:
    """Which record of the task the review reads: the one here if it holds every state
    the branch names; else the newest history fetched for the task, read in place, if it
    holds more of them (a task of this machine that went on elsewhere; a copy deleted)."""
    own = COPY if local is not None and local.read_only else OWN
    if local is not None and all(_holds(local, sha, link) for sha, link in links):
        return TaskReview(task_id, local, record=own)
    fetched = view.newest(project, task_id)
    read = view.read(project, task_id) if fetched is not None else None
    if read is not None:
        theirs = sum(_holds(read, sha, link) for sha, link in links)
        mine = sum(_holds(local, sha, link) for sha, link in links) if local is not None else 0
        if theirs > mine or local is None:
            return TaskReview(task_id, read, record=FETCHED, own=local, fetched=fetched)
    if local is None:
        return TaskReview(task_id, None, fetched=fetched)
    return TaskReview(task_id, local, record=own, fetched=fetched)


def _holds(task: Task, sha: str, link: trailers.Link) -> bool:
    """The task's record has the state the commit ``sha`` lands."""
    if link.step_id is not None:
        return _state(task, link.step_id, None) is not None
    made = next(
        (
            s
            for s in task.ledger.read_all(warn=False)
            if isinstance(s, ApplyStep) and s.commit_sha == sha
        ),
        None,
    )
    return made is not None


def _commit(repo: Path, name: str, what: str) -> str:
    if name.startswith("-"):
        raise UsageError(f"{what} {name!r} cannot start with '-'")
    sha = git.rev_parse(repo, f"{name}^{{commit}}")
    if sha is None:
        raise NotFound(
            f"{what} {name!r} is not a commit of this repository",
            hint="a pushed branch: git fetch origin, then bar review origin/BRANCH; a pull "
            "request: git fetch origin pull/12/head:refs/pull/12/head"
            if what == "branch"
            else "name the branch the work goes onto with --base BRANCH",
        )
    return sha


def _subjects(repo: Path, commits: list[str]) -> dict[str, str]:
    raw = git.out(repo, "log", "--no-walk=unsorted", "--format=%H %s", *commits, "--")
    out: dict[str, str] = {}
    for line in raw.splitlines():
        sha, _, subject = line.partition(" ")
        out[sha] = subject
    return out


def _landing(task: Task, sha: str, subject: str, link: trailers.Link, tip: str) -> Landing:
    applies = [s for s in task.ledger.read_all(warn=False) if isinstance(s, ApplyStep)]
    made = next((s for s in applies if s.commit_sha == sha), None)
    state = _state(task, link.step_id, made)
    name = state.name if state is not None else link.step_id
    if state is None:
        return Landing(sha, subject, name, made is not None, False)
    paths = _changed(task, state)
    return Landing(
        sha,
        subject,
        name,
        made is not None,
        True,
        differs=_differs(task, _landed(task, state, sha), sha, paths),
        changed_since=_differs(task, sha, tip, paths),
    )


def _state(task: Task, step_id: str | None, made: ApplyStep | None) -> State | None:
    """The state the commit lands: its ``Bar-Step`` (``0000``: the base), else, for a
    commit bar made, the state its apply recorded; None when the record has neither
    (a copy fetched before the step was)."""
    if step_id is not None:
        if int(step_id) == 0:
            return states.base(task)
        try:
            return states.resolve(task, step_id)
        except BarError:
            return None
    return applied_state(task, made) if made is not None else None


def _changed(task: Task, state: State) -> list[str]:
    """The files the task changed, from its base to ``state``."""
    base = state.base or bases.first(task)
    return [c.path for c in git.diff_tree_raw(task.project.root, base, state.commit)]


def _landed(task: Task, state: State, commit: str) -> str:
    """The tree ``commit`` would have if it held the task's change and nothing else on
    top of its first parent: the state, as a commit on its base, merged onto the parent
    three-way (the state itself for a commit without one)."""
    repo = task.project.root
    parent = git.rev_parse(repo, f"{commit}^1")
    if parent is None:
        return state.commit
    on_base = git.commit_tree(
        repo,
        git.tree_of(repo, state.commit),
        [state.base or bases.first(task)],
        f"bar: state {state.name} of task {task.id} on its base (review)",
        identity=git.BAR_IDENTITY,
    )
    res = git.git(repo, "merge-tree", "--write-tree", parent, on_base, check=False)
    if res.returncode not in (0, 1):  # 1: conflicts, whose markers the tree holds
        raise GitError(res.cmd, res.returncode, res.stdout, res.stderr)
    return res.out.split("\n", 1)[0].strip()


def _differs(task: Task, expected: str, actual: str, paths: list[str]) -> list[str]:
    """Which of ``paths`` ``actual`` holds otherwise than ``expected`` (or not at all)."""
    mine = set(paths)
    return sorted(
        c.path for c in git.diff_tree_raw(task.project.root, expected, actual) if c.path in mine
    )


def _steps_up_to(task: Task, landings: list[Landing]) -> list[Step]:
    """The task's steps up to the last one whose state the branch lands (all of them
    when no commit says which)."""
    named = [int(x.state.partition(".")[0]) for x in landings if x.state is not None]
    steps = task.ledger.read_all(warn=False)
    if not named or len(named) < len(landings):
        return steps
    last = max(named)
    return [s for s in steps if s.number <= last]


def step_json(step: Step) -> dict[str, Any]:
    """What a review shows of a step, as fields."""
    out: dict[str, Any] = {
        "step_id": step.step_id,
        "kind": step.kind,
        "command": shlex.join(step.cmd) if isinstance(step, RunStep) else None,
        "exit_code": step.exit_code if isinstance(step, RunStep) else None,
        "diff_stat": step.diff_stat.to_record(),
        "session": stored.summary(step),
        "policy_events": (
            [e.to_record() for e in step.policy_events] if isinstance(step, RunStep) else []
        ),
        "checkpoints": step.checkpoints if isinstance(step, RunStep) else 0,
    }
    if isinstance(step, ApplyStep):
        out["commit"] = step.commit_sha
    return out
