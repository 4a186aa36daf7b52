"""``bar blame FILE --rev REV``: a line of any branch traced to the tool call that wrote it.

git blames the line to a commit of the branch. If that commit's message links a task
(``Bar-Task:`` / ``Bar-Step:``, ``bar.history.trailers``: an applied commit, or a squash
merge that kept the links), the task's own blame (``bar.history.blame``) at the linked
state says which step or checkpoint wrote the line, with its tool, command and session;
the session (``bar.session.stored``) gives the prompt that led to it. The task may be
this machine's or a copy fetched from another (``bar fetch``).

The commit's file and the task's state may differ (the apply merged onto a moved target,
or a squash carried other changes too), so lines are matched by content: the commit's
file and the state's are aligned (longest matching blocks) and a line takes the origin of
the state's line it matches. A commit that links several tasks takes the first whose
state wrote the line. A line no task wrote is the commit's, as git says.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base.record import field, record
from bar.errors import BarError, NotFound, UsageError
from bar.history import blame as task_blame
from bar.history import states, trailers
from bar.history.blame import Origin
from bar.model.project import Project
from bar.model.tasks import Task, load_task

if TYPE_CHECKING:
    from bar.formats.gitai import Authorship


@record(frozen=True)
class Traced:
    """Where one line came from: the commit git names, and the task state behind it."""

    commit: str
    task_id: str | None = None
    task_name: str | None = None
    origin: Origin | None = None  # the step or checkpoint that wrote it
    prompt: str | None = None  # the last thing the developer said to the agent before
    # what a git-ai note imported for the commit says of the line (no task wrote it)
    authorship: Authorship | None = None

    def to_json(self) -> dict[str, Any]:
        origin = self.origin.to_json() if self.origin else {"state": None}
        origin["state_commit"] = origin.pop("commit", None)  # the task state's snapshot
        out = {
            **origin,
            "commit": self.commit,
            "task_id": self.task_id,
            "task_name": self.task_name,
            "prompt": self.prompt,
        }
        if self.authorship is not None:
            out["authorship"] = self.authorship.to_json()
        return out


@record(frozen=True)
class TracedLine:
    number: int
    text: str
    traced: Traced
    source: tuple[str, int] = ("", 0)  # the file's path and the line's number in ``commit``


@record(frozen=True)
class RevBlame:
    path: str
    rev: str
    commit: str
    lines: list[TracedLine] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # linked task ids not here

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "rev": self.rev,
            "commit": self.commit,
            "missing_tasks": self.missing,
            "lines": [{"line": x.number, "text": x.text, **x.traced.to_json()} for x in self.lines],
        }


def blame_rev(project: Project, path: str, rev: str) -> RevBlame:
    repo = project.root
    if rev.startswith("-"):
        raise UsageError(f"{rev!r} is not a revision")
    commit = git.resolve_commit(repo, rev)
    if commit is None:
        raise NotFound(f"no commit {rev!r} in {repo}", hint="give a branch, a tag or a commit")
    rel = path.strip("/")
    if git.git(repo, "cat-file", "-e", f"{commit}:{rel}", check=False).returncode != 0:
        raise NotFound(f"{rel} is not a file of {rev}")
    versions = git.git(repo, "rev-list", "--max-count=10000", commit, "--", rel).out.split()
    task_blame.refuse_large(repo, rel, [commit, *versions], f"{rel} in {rev}")
    raw = git.git(
        repo, "blame", "--porcelain", "--no-textconv", "--ignore-revs-file=", commit, "--", rel
    ).stdout
    lines = _porcelain(raw)
    links = trailers.commit_links(repo, sorted({sha for sha, *_ in lines}))
    tracer = _Tracer(project)
    out = []
    for sha, original, final, text, source_path in lines:
        found = tracer.trace(sha, links.get(sha, []), source_path, original)
        out.append(TracedLine(final, text, found, (source_path or rel, original)))
    return RevBlame(rel, rev, commit, out, sorted(tracer.missing))


class _Tracer:
    """Traces lines to task states, reading each (task, state, file) once."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.missing: set[str] = set()
        self._tasks: dict[str, Task | None] = {}
        self._maps: dict[tuple[str, str, str, str], dict[int, Origin]] = {}
        self._prompts: dict[tuple[str, str], str | None] = {}

    def trace(self, sha: str, links: list[trailers.Link], path: str, line: int) -> Traced:
        for link in links:
            task = self._task(link.task_id)
            if task is None:
                continue
            origin = self._origins(task, link.step_id, sha, path).get(line)
            if origin is not None and origin.kind != "base":
                return Traced(sha, task.id, task.name, origin, self._prompt(task, origin))
        if links:
            first = self._task(links[0].task_id)
            if first is not None:
                return Traced(sha, first.id, first.name)
            return Traced(sha, links[0].task_id)
        return Traced(sha)

    def _task(self, task_id: str) -> Task | None:
        if task_id not in self._tasks:
            try:
                self._tasks[task_id] = load_task(self.project, task_id)
            except BarError:
                self._tasks[task_id] = None
                self.missing.add(task_id)
        return self._tasks[task_id]

    def _origins(self, task: Task, step: str | None, sha: str, path: str) -> dict[int, Origin]:
        """Line of ``sha:path`` -> the origin of the task state's line it matches."""
        key = (task.id, step or "", sha, path)
        if key in self._maps:
            return self._maps[key]
        mapped: dict[int, Origin] = {}
        try:
            at = states.resolve(task, step) if step and step != "0000" else None
            blamed = task_blame.blame(task, path, at)
        except BarError:
            self._maps[key] = mapped
            return mapped
        ours = git.git(self.project.root, "cat-file", "blob", f"{sha}:{path}").stdout
        mine = ours.decode("utf-8", "replace").split("\n")
        theirs = [b.text for b in blamed.lines]
        matcher = difflib.SequenceMatcher(None, mine, theirs, autojunk=False)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                mapped[block.a + k + 1] = blamed.lines[block.b + k].origin
        self._maps[key] = mapped
        return mapped

    def _prompt(self, task: Task, origin: Origin) -> str | None:
        key = (task.id, origin.state)
        if key not in self._prompts:
            self._prompts[key] = prompt_of(task, origin.state)
        return self._prompts[key]


def prompt_of(task: Task, state: str) -> str | None:
    """The last message the developer (or the task's prompt) gave the agent before the
    tool call that made ``state`` (a checkpoint), or the session's first one (a step)."""
    from bar.history import checkpoints
    from bar.session import stored

    step_id = state.split(".")[0]
    try:
        step = task.ledger.get(step_id)
    except BarError:
        return None
    events = stored.events(task, step)
    if not events:
        return None
    upto = len(events)
    if checkpoints.parse_name(state) is not None:
        upto = next(
            (
                i
                for i, e in enumerate(events)
                if e.get("type") == "tool_call" and e.get("checkpoint") == state
            ),
            len(events),
        )
    said = [
        e
        for e in events[:upto]
        if e.get("type") == "message" and e.get("role") == "user" and not e.get("agent_id")
    ]
    chosen = said[-1] if said else None
    text = chosen.get("text") if chosen else None
    return text if isinstance(text, str) else None


def _porcelain(raw: bytes) -> list[tuple[str, int, int, str, str]]:
    """(commit, line in that commit, line now, text, the file's path in that commit) of
    each line of ``git blame --porcelain``."""
    found: list[tuple[str, int, int, str, str]] = []
    paths: dict[str, str] = {}
    sha, original, final = "", 0, 0
    for line in raw.split(b"\n"):
        if line.startswith(b"\t"):
            text = line[1:].decode("utf-8", "replace")
            found.append((sha, original, final, text, paths.get(sha, "")))
            continue
        words = line.split(b" ")
        if task_blame.is_header(words):
            sha, original, final = words[0].decode(), int(words[1]), int(words[2])
        elif line.startswith(b"filename "):
            paths[sha] = line[len(b"filename ") :].decode("utf-8", "surrogateescape")
    return found
