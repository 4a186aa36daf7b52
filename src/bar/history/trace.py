"""``bar export --format agent-trace``: a task's attribution as Agent Trace records.

Agent Trace (the open RFC of github.com/cursor/agent-trace, spec 0.1.0) says which lines
of which files, at which commit, a conversation with a model (or a person) wrote. bar
knows that from its blame (``bar.history.blame``): every line of a recorded state with
the step or tool call that last changed it. A record is written for each commit a reader
of the repository can find:

* one per ``bar apply`` whose commit is here, at that commit (``vcs.revision``): the lines
  the task wrote, where that commit has them. An apply merges the task's state onto its
  target, whose own changes may have moved them, so the state's blamed lines are mapped
  onto the commit's file by their text (``difflib``), never assumed to be where the
  state had them; a line the merge changed is not claimed;
* one for the last recorded state when no apply landed it, at its snapshot commit.

Only the files the task changed (its base to the state) that are text are listed, and
only the lines the task wrote: a line of the base, or one a ``sync`` merged in from
another branch, is someone else's. Each step or tool call that wrote lines is one
conversation (``url`` ``bar://task/<id>/step/<state>``): a tool call of an agent, or a
step that ran an agent session, is ``ai`` with the session's model (``provider/model``);
a hand edit bar recorded (a ``manual`` step) is ``human``; any other command is
``unknown``, since bar cannot tell who wrote what it printed. The residual checkpoint
of an agent step (changes no hook reported) counts as the agent's too: a subagent or a
process it started made them, in its session.

``version`` is ``"0.1"``: the README names the spec 0.1.0, but the published JSON schema
(``schemas/trace-record.json``) allows only ``MAJOR.MINOR``, and a record that fails the
schema helps no reader. A record's ``id`` is a UUID derived from the task, the state and
the commit, so exporting again gives the same ids and a reader that keeps records does
not count one twice. What Agent Trace has no field for (the step, the tool, the command,
the session and its first prompt) is under ``metadata["dev.bar"]``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

from bar import __version__, git
from bar.agents import AGENTS
from bar.agents.base import of
from bar.base.clock import iso_of, now_iso, seconds_of
from bar.base.record import record
from bar.errors import BarError
from bar.history import bases, checkpoints, states
from bar.history.blame import Origin, blame
from bar.model.records import ApplyStep, RunStep, State, Step
from bar.model.tasks import Task
from bar.redact import known
from bar.session import stored

VERSION = "0.1"  # the schema's MAJOR.MINOR form of spec 0.1.0 (see above)
VENDOR = "dev.bar"  # the reverse-domain key of bar's metadata
_IDS = uuid.uuid5(uuid.NAMESPACE_URL, "bar://agent-trace")
_PROMPT_MAX = 2000  # characters of a session's first prompt kept in the metadata
_MODEL_MAX = 250  # the schema's limit on model_id
# the provider of a model whose name does not say it (models.dev's names)
_PROVIDERS = (
    (("claude",), "anthropic"),
    (("gpt-", "gpt4", "o1", "o3", "o4", "codex", "chatgpt"), "openai"),
    (("gemini", "gemma"), "google"),
)


@record(frozen=True)
class Contributor:
    type: str  # human | ai | mixed | unknown
    model_id: str | None = None  # provider/model

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.model_id:
            out["model_id"] = self.model_id
        return out


@record(frozen=True)
class LineRange:
    start_line: int  # 1-based, in the file as the record's revision has it
    end_line: int
    content_hash: str  # sha256:<16 hex> of the range's lines

    def to_json(self) -> dict[str, Any]:
        return {
            "start_line": self.start_line,
            "end_line": self.end_line,
            "content_hash": self.content_hash,
        }


@record(frozen=True)
class Conversation:
    """The lines of one file that one step or tool call wrote."""

    state: str  # "0003", "0003.2"
    url: str
    contributor: Contributor
    ranges: list[LineRange]
    kind: str  # the origin's kind: run | manual | tool | residual | rollback
    tool: str | None = None
    command: str | None = None
    session_id: str | None = None
    session_url: str | None = None
    prompt: str | None = None  # the session's first prompt, scrubbed

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "url": self.url,
            "contributor": self.contributor.to_json(),
            "ranges": [r.to_json() for r in self.ranges],
        }
        if self.session_url:
            out["related"] = [{"type": "session", "url": self.session_url}]
        return out

    def about(self) -> dict[str, Any]:
        """What Agent Trace has no field for (``metadata["dev.bar"].conversations``)."""
        out: dict[str, Any] = {
            "step": self.state,
            "kind": self.kind,
            "tool": self.tool,
            "command": self.command,
            "session_id": self.session_id,
        }
        if self.prompt is not None:
            out["prompt"] = self.prompt
        return out


@record(frozen=True)
class TracedFile:
    path: str  # relative to the repository's root
    conversations: list[Conversation]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "conversations": [c.to_json() for c in self.conversations]}


@record(frozen=True)
class TraceRecord:
    id: str
    timestamp: str  # RFC 3339, UTC
    revision: str  # the git commit the line numbers refer to
    task_id: str
    task_name: str
    state: str  # the recorded state whose lines these are
    apply_step: str | None  # the apply that made ``revision`` (None: the state's snapshot)
    files: list[TracedFile]

    def to_json(self) -> dict[str, Any]:
        about: dict[str, Any] = {}
        for f in self.files:
            for c in f.conversations:
                about.setdefault(c.url, c.about())
        bar_meta: dict[str, Any] = {
            "task_id": self.task_id,
            "task_name": self.task_name,
            "state": self.state,
            "apply_step": self.apply_step,
            "conversations": about,
        }
        return {
            "version": VERSION,
            "id": self.id,
            "timestamp": self.timestamp,
            "vcs": {"type": "git", "revision": self.revision},
            "tool": {"name": "bar", "version": __version__},
            "files": [f.to_json() for f in self.files],
            "metadata": {VENDOR: bar_meta},
        }

    def to_line(self) -> str:
        """The record as one line of JSON Lines (with its newline)."""
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n"


@record(frozen=True)
class _Target:
    """A commit to write a record for, and the recorded state whose lines it holds."""

    state: State
    revision: str
    at: str  # when it was recorded
    apply_step: str | None


def export(task: Task) -> list[TraceRecord]:
    """The task's Agent Trace records: one per apply whose commit is here, and one for
    the last recorded state if no apply landed it. A record with no file (the task wrote
    no text) is left out."""
    out = []
    for target in _targets(task):
        files = _files(task, target)
        if files:
            out.append(_record(task, target, files))
    return out


def _record(task: Task, target: _Target, files: list[TracedFile]) -> TraceRecord:
    key = f"{task.id}/{target.state.name}/{target.revision}"
    return TraceRecord(
        id=str(uuid.uuid5(_IDS, key)),
        timestamp=_rfc3339(target.at),
        revision=target.revision,
        task_id=task.id,
        task_name=task.name,
        state=target.state.name,
        apply_step=target.apply_step,
        files=files,
    )


def _targets(task: Task) -> list[_Target]:
    steps = task.ledger.read_all(warn=False)
    repo = task.project.root
    out: list[_Target] = []
    landed: set[str] = set()
    for step in steps:
        if not isinstance(step, ApplyStep) or not _is_commit(repo, step.commit_sha):
            continue  # (an apply whose commit is gone, or a copy's that was never fetched)
        state = applied_state(task, step, steps)
        if state is None or state.kind == "base":
            continue
        out.append(_Target(state, step.commit_sha, step.ended_at, step.step_id))
        landed.add(state.commit)
    last = next((s for s in reversed(steps) if s.snapshot and not isinstance(s, ApplyStep)), None)
    if last is not None and last.snapshot not in landed:
        state = states.resolve(task, last.step_id)
        out.append(_Target(state, state.commit, last.ended_at, None))
    return out


def applied_state(task: Task, apply: ApplyStep, steps: list[Step] | None = None) -> State | None:
    """The recorded state ``apply`` landed: the first step before it (or, after
    ``bar apply --at 3.2``, the checkpoint) whose snapshot is the one applied; None when
    no record here names it."""
    if apply.snapshot is None:
        return None
    listed = task.ledger.read_all(warn=False) if steps is None else steps
    earlier = [s for s in listed if s.number < apply.number and not isinstance(s, ApplyStep)]
    for step in earlier:
        if step.snapshot == apply.snapshot:
            return states.resolve(task, step.step_id)
    for step in earlier:
        if isinstance(step, RunStep) and step.checkpoints:
            for cp in checkpoints.read(task, step.step_id):
                if cp.snapshot == apply.snapshot:
                    return states.resolve(task, cp.name)
    if apply.snapshot == bases.first(task):
        return states.base(task)
    return None


# --- files and lines -----------------------------------------------------------------


def _files(task: Task, target: _Target) -> list[TracedFile]:
    repo = task.project.root
    base = target.state.base or bases.first(task)
    sessions = _Sessions(task)
    out = []
    for change in git.diff_tree_raw(repo, base, target.state.commit):
        if change.status == "D" or not change.dst_mode.startswith("100"):
            continue  # deleted, a link or a submodule: no lines to attribute
        ours = _text(_blob(repo, change.dst_blob))
        if ours is None:
            continue
        theirs = (
            ours
            if target.revision == target.state.commit
            else _text(_blob(repo, f"{target.revision}:{change.path}"))
        )
        if theirs is None:
            continue  # not in the applied commit, or not text there
        conversations = _conversations(task, target, change.path, theirs, sessions)
        if conversations:
            out.append(TracedFile(change.path, conversations))
    return out


def _conversations(
    task: Task, target: _Target, path: str, theirs: list[str], sessions: _Sessions
) -> list[Conversation]:
    """The file's blamed lines, mapped onto the revision's file, one conversation per
    step or tool call that wrote any."""
    found = blame(task, path, at=target.state)
    where = line_map([b.text for b in found.lines], theirs)
    lines: dict[str, list[int]] = {}
    origins: dict[str, Origin] = {}
    for line in found.lines:
        at = where.get(line.number)
        if at is None or line.origin.kind in ("base", "sync"):
            continue  # not at the revision, or not the task's writing
        lines.setdefault(line.origin.state, []).append(at)
        origins[line.origin.state] = line.origin
    return [
        _conversation(task, origins[state], ranges(sorted(lines[state]), theirs), sessions)
        for state in sorted(lines, key=_state_order)
    ]


def _conversation(
    task: Task, origin: Origin, found: list[LineRange], sessions: _Sessions
) -> Conversation:
    step_id = origin.state.partition(".")[0]
    summary = sessions.summary(step_id)
    session_id = origin.session_id or (summary or {}).get("session_id")
    session_id = session_id if isinstance(session_id, str) and session_id else None
    return Conversation(
        state=origin.state,
        url=f"bar://task/{task.id}/step/{origin.state}",
        contributor=contributor(origin, summary),
        ranges=found,
        kind=origin.kind,
        tool=origin.tool,
        command=origin.command,
        session_id=session_id,
        session_url=f"bar://task/{task.id}/session/{session_id}" if session_id else None,
        prompt=sessions.prompt(step_id) if summary is not None else None,
    )


def contributor(origin: Origin, summary: dict[str, Any] | None) -> Contributor:
    """Who wrote the lines ``origin`` changed (see the module's docstring)."""
    checkpoint = "." in origin.state
    if checkpoint or (origin.kind == "run" and summary is not None):
        return Contributor("ai", model_id(summary) if summary is not None else None)
    if origin.kind == "manual":
        return Contributor("human")
    return Contributor("unknown")


def model_id(summary: dict[str, Any]) -> str | None:
    """The session's model as ``provider/model`` (models.dev's names): ``claude-...`` is
    Anthropic's, ``gpt-...``, ``o3``, ``codex...`` OpenAI's, ``gemini-...`` Google's; a
    name with a provider already is kept; else the agent says whose it is."""
    model = summary.get("model")
    if not isinstance(model, str) or not model.strip():
        return None
    model = model.strip()
    if "/" not in model:
        lower = model.lower()
        provider = next((p for starts, p in _PROVIDERS if lower.startswith(starts)), None)
        agent = summary.get("agent")
        if provider is None and agent in AGENTS:
            provider = of(str(agent)).provider
        if provider is not None:
            model = f"{provider}/{model}"
    return model[:_MODEL_MAX]


def line_map(ours: list[str], theirs: list[str]) -> dict[int, int]:
    """Line number (1-based) in ``ours`` -> line number in ``theirs``, for each line
    ``theirs`` holds unchanged where the two files match up (``difflib``'s longest
    matching blocks). Lines a merge changed or moved out of order map nowhere."""
    if ours == theirs:
        return {n: n for n in range(1, len(ours) + 1)}
    matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
    out: dict[int, int] = {}
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            out[a + k + 1] = b + k + 1
    return out


def ranges(numbers: list[int], lines: list[str]) -> list[LineRange]:
    """Sorted line numbers as runs of consecutive lines, each with the hash of its text."""
    out: list[LineRange] = []
    start = prev = 0
    for n in [*numbers, 0]:  # (0: ends the last run)
        if start and n == prev + 1:
            prev = n
            continue
        if start:
            out.append(LineRange(start, prev, content_hash(lines[start - 1 : prev])))
        start = prev = n
    return out


def content_hash(lines: list[str]) -> str:
    """``sha256:`` and the first 16 hex digits of the lines' text, each with its newline:
    the same lines hash the same wherever they moved."""
    data = "".join(f"{line}\n" for line in lines).encode("utf-8", "surrogateescape")
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


class _Sessions:
    """The session summary and first prompt of each step, read once per export."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._steps: dict[str, Step | None] = {}
        self._prompts: dict[str, str | None] = {}

    def _step(self, step_id: str) -> Step | None:
        if step_id not in self._steps:
            try:
                self._steps[step_id] = self.task.ledger.get(step_id)
            except BarError:
                self._steps[step_id] = None
        return self._steps[step_id]

    def summary(self, step_id: str) -> dict[str, Any] | None:
        step = self._step(step_id)
        return stored.summary(step) if isinstance(step, RunStep) else None

    def prompt(self, step_id: str) -> str | None:
        if step_id not in self._prompts:
            self._prompts[step_id] = self._first_prompt(step_id)
        return self._prompts[step_id]

    def _first_prompt(self, step_id: str) -> str | None:
        step = self._step(step_id)
        if step is None:
            return None
        for event in stored.events(self.task, step):
            text = event.get("text")
            said = event.get("type") == "message" and event.get("role") == "user"
            if said and isinstance(text, str) and text.strip():
                # stored redacted already; scrubbed again for what this process knows
                return known.scrub(text.strip())[:_PROMPT_MAX]
        return None


def _state_order(state: str) -> tuple[int, ...]:
    return tuple(int(p) for p in state.split(".") if p.isdigit())


def _blob(repo: Path, what: str) -> bytes | None:
    res = git.git(repo, "cat-file", "blob", what, check=False)
    return res.stdout if res.returncode == 0 else None


def _text(data: bytes | None) -> list[str] | None:
    """The file's lines as ``git blame`` shows them; None for a binary file (a NUL in
    its first 8000 bytes, as git decides)."""
    if data is None or b"\0" in data[:8000]:
        return None
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _is_commit(repo: Path, sha: str) -> bool:
    if not git.is_object_id(sha):
        return False
    return git.git(repo, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


def _rfc3339(at: str) -> str:
    """A time the ledger wrote as RFC 3339 UTC (``Z``); now, for one it cannot read."""
    try:
        return iso_of(round(seconds_of(at) * 1_000_000_000))
    except ValueError:
        return now_iso()
