"""``bar push``: publish tasks' histories to a git remote, fast-forward only.

For each task: build its history commit (``bar.share.history_commit``), ask the remote what it
has (one ``ls-remote``), refuse a history the remote has moved past (another machine
went on with the task), scan every object that would leave (``bar.share.scan``) and
refuse on any finding not allowed by id. What passes goes in one ``git push`` of
``refs/bar/history/<id>`` and ``refs/bar/tasks/<id>`` per task, never forced: the remote
refuses anything but a fast-forward, so a push that raced another machine's loses
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bar import git
from bar.base.record import field, record
from bar.errors import ExitCode, UsageError
from bar.model.project import Project
from bar.model.tasks import Task
from bar.redact import known
from bar.share import history_commit, remotes, scan
from bar.share.history_commit import Cut
from bar.share.remotes import Remote

PUSHED = "pushed"
UP_TO_DATE = "up to date"
REFUSED = "refused"  # findings
DIVERGED = "diverged"  # the remote went on without us
WOULD_PUSH = "would push"  # --dry-run
REJECTED = "rejected"  # the remote said no (a race lost, a hook)
BEHIND = "behind"  # nothing new here, and the remote went on: `bar task adopt` takes it


@record
class TaskPush:
    task_id: str
    name: str
    outcome: str
    steps: int = 0
    history: str | None = None
    findings: list[scan.Finding] = field(default_factory=list)
    cut: list[Cut] = field(default_factory=list)
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "outcome": self.outcome,
            "steps": self.steps,
            "history": self.history,
            "findings": [f.to_json() for f in self.findings],
            "cut": [c.to_json() for c in self.cut],
            "message": self.message,
        }


@record(frozen=True)
class Pushed:
    remote: Remote
    tasks: list[TaskPush]
    dry_run: bool

    @property
    def ok(self) -> bool:
        return all(t.outcome in (PUSHED, UP_TO_DATE, WOULD_PUSH, BEHIND) for t in self.tasks)

    @property
    def exit_code(self) -> int:
        """12 when a finding kept a history here, 6 when the remote went on without
        this machine, else 0."""
        outcomes = {t.outcome for t in self.tasks}
        if REFUSED in outcomes:
            return ExitCode.REFUSED
        if outcomes & {DIVERGED, REJECTED}:
            return ExitCode.CONFLICT
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote.name,
            "url": self.remote.url,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "tasks": [t.to_json() for t in self.tasks],
        }


def push(
    project: Project,
    tasks: list[Task],
    remote: Remote,
    *,
    allow: frozenset[str] = frozenset(),
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Pushed:
    if not tasks:
        raise UsageError("no task to push", hint="`bar task list` shows the tasks")
    for task in tasks:
        task.require_own()
    repo = project.root
    said = progress or (lambda _: None)
    patterns = (
        [f"{history_commit.HISTORY}*", "refs/bar/tasks/*"]
        if len(tasks) > 4
        else [
            p for t in tasks for p in (history_commit.history_ref(t.id), f"refs/bar/tasks/{t.id}")
        ]
    )
    there = remotes.listed(repo, remote, patterns)
    have = set(remotes.present(repo, sorted(set(there.values()))))
    scrubber = known.scrubber()
    max_blob = project.config.share.max_blob
    results: list[TaskPush] = []
    refspecs: list[str] = []
    for task in tasks:
        said(f"task {task.name} ({task.id}): building its history")
        result, specs = _one(task, remote, there, have, scrubber, max_blob, allow, dry_run, said)
        results.append(result)
        refspecs += specs
    if refspecs and not dry_run:
        said(
            f"pushing {len(refspecs) // 2} task histor{'y' if len(refspecs) == 2 else 'ies'} to {remote}"
        )
        outcomes = {r.ref: r for r in remotes.push(repo, remote, refspecs)}
        for result in results:
            if result.outcome != PUSHED:
                continue
            got = outcomes.get(history_commit.history_ref(result.task_id))
            if got is None or not got.ok:
                result.outcome = REJECTED
                result.message = got.summary if got is not None else "the remote did not say"
                if got is not None and (
                    "fetch first" in got.summary or "non-fast-forward" in got.summary
                ):
                    result.outcome = DIVERGED
                    result.message = _diverged_text(result.name, result.task_id, remote)
            else:
                _remember(repo, result.task_id, remote, result.history)
    return Pushed(remote, results, dry_run)


def _one(
    task: Task,
    remote: Remote,
    there: dict[str, str],
    have: set[str],
    scrubber: Any,
    max_blob: int,
    allow: frozenset[str],
    dry_run: bool,
    said: Callable[[str], None],
) -> tuple[TaskPush, list[str]]:
    repo = task.project.root
    built = history_commit.build(task, max_blob, keep=not dry_run)
    result = TaskPush(task.id, task.name, PUSHED, built.steps, built.commit, cut=built.cut)
    on_remote = there.get(history_commit.history_ref(task.id))
    if on_remote == built.commit:
        result.outcome = UP_TO_DATE
        _remember(repo, task.id, remote, on_remote)
        return result, []
    before = built.parent if built.changed else built.commit  # what was built before
    if (
        on_remote is not None
        and on_remote in have
        and before is not None
        and before != on_remote
        and git.is_ancestor(repo, before, on_remote)
        and _ledger_blob(repo, before) == built.files["ledger.jsonl"]
    ):
        # no step here since; only task.json may differ (a board move): theirs goes on
        if built.changed and not dry_run:
            git.git(repo, "update-ref", history_commit.history_ref(task.id), before, built.commit)
        result.outcome = BEHIND
        result.message = (
            f"task {task.name} went on elsewhere: {remote} has steps this machine has not; "
            f"`bar fetch {remote}` then `bar task adopt {task.id}` brings them here"
        )
        return result, []
    if on_remote is not None and (
        on_remote not in have or not git.is_ancestor(repo, on_remote, built.commit)
    ):
        result.outcome = DIVERGED
        result.message = _diverged_text(task.name, task.id, remote)
        return result, []
    sent: dict[str, str] = {}  # path -> blob, of the history the remote has
    if on_remote is not None:
        for line in git.git(repo, "ls-tree", "-r", on_remote).out.splitlines():
            head, tab, path = line.partition("\t")
            if tab and len(head.split()) == 3:
                sent[path] = head.split()[2]
    said(f"task {task.name}: scanning what would leave")
    exclude = [s for s in there.values() if s in have]
    exclude += [task.base_commit, *([task.first_base] if task.first_base else [])]
    exclude += [
        sha for name, sha in built.refs.items() if name == "base" or name.startswith("bases/")
    ]
    tips = [
        sha for name, sha in built.refs.items() if name != "base" and not name.startswith("bases/")
    ]
    found = scan.history_files(repo, built.files, set(sent.values()), scrubber, sent)
    found += scan.state_files(task, tips, exclude, scrubber, max_blob, allow)
    found = [f for f in found if f.id not in allow]
    if found:
        result.outcome = REFUSED
        result.findings = found
        return result, []
    if dry_run:
        result.outcome = WOULD_PUSH
        return result, []
    return result, [
        f"{built.commit}:{history_commit.history_ref(task.id)}",
        f"{built.refs['snapshot']}:refs/bar/tasks/{task.id}",
    ]


def _ledger_blob(repo: Any, commit: str) -> str | None:
    return git.rev_parse(repo, f"{commit}:ledger.jsonl")


def _remember(repo: Any, task_id: str, remote: Remote, commit: str | None) -> None:
    """What the remote has now, as a fetch would have left it (so the next push scans
    only what is new, and ``bar fetch`` knows it is not news)."""
    if commit:
        git.git(repo, "update-ref", history_commit.fetched_ref(task_id, remote.key), commit)


def _diverged_text(name: str, task_id: str, remote: Remote) -> str:
    return (
        f"the history of task {name} on {remote} has steps this machine does not have "
        f"(it went on elsewhere). `bar fetch {remote}` brings them; if you recorded nothing "
        f"here since, `bar task adopt {task_id}` then continues from there. Work of your own "
        "since then cannot join that history: apply it to a branch (`bar apply --target "
        "NAME`) and push the branch"
    )
