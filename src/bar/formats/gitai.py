"""``bar notes export|import``: line attribution as git-ai authorship notes.

The git-ai standard (``authorship/3.0.0``, git-ai-project/git-ai
``specs/git_ai_standard_v3.0.0.md``) attaches to a commit one note under
``refs/notes/ai``: an attestation section, each file's path followed by lines of two
spaces, a key and the commit's line numbers the key wrote (``1-4,9``), then a line
``---`` and a JSON object of metadata that says who each key is. A key ``s_<14 hex>::t_<14
hex>`` is one checkpoint of an AI session (``metadata.sessions``: the tool, its
conversation id, the model), ``h_<14 hex>`` a known human (``metadata.humans``), a bare
16 hex digits an AI session in the older form (``metadata.prompts``).

**Export.** bar writes a note on each commit a ``bar apply`` made that is still in the
repository (and, with ``--rev``, in that revision's history): for each line the commit
added, the step or tool call that wrote it, from bar's blame (``bar.history.trace``
maps the task's state onto the commit). A tool call of an agent, or a step that ran one,
is the agent's session (``s_`` + the first 14 hex digits of SHA-256 of
``<agent>:<session id>``, as the standard derives it) with one trace per step or
checkpoint (``t_`` + 14 hex digits of SHA-256 of the task and the state: the same on
every export, where git-ai draws them at random); a hand edit bar recorded is the
committer as a known human (``h_``); a line of any other command is left unattested, as
git-ai leaves what it did not see. ``base_commit_sha`` is the commit itself, ``prompts``
is empty, and each session says which task it worked for in ``custom_attributes``
(``bar_task``). A note another tool wrote is left as it is (``--force`` replaces it).

**Import.** Every note of a notes ref (``refs/notes/ai``, or one fetched from a remote)
is read and checked against the standard; the ones that pass are kept in the project's
``notes/ai.json``, which ``bar blame --rev`` reads for a line that no bar task wrote: it
then names the agent, model and session, or the human, the note gives. A note that
fails the check is reported with its commit and why, and left out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bar import git
from bar.base.proc import Result
from bar.base.record import field, record
from bar.errors import BarError, NotFound, UsageError
from bar.git.safe import SafeGit
from bar.history import trace
from bar.model.project import Project
from bar.model.records import RunStep
from bar.model.tasks import Task
from bar.redact import known
from bar.session import stored
from bar.store.files import read_json, write_json_atomic

NOTES_REF = "refs/notes/ai"
SCHEMA = "authorship/3.0.0"
DIVIDER = "---"
_RANGES = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
_SESSION_KEY = re.compile(r"^(s_[0-9a-f]+)::t_[0-9a-f]+$")
_HUMAN_KEY = re.compile(r"^h_[0-9a-f]+$")
_LEGACY_KEY = re.compile(r"^[0-9a-f]{7}$|^[0-9a-f]{16}$")
_INDEX_VERSION = 1
MAX_NOTE = 16 << 20  # bytes of one note read at most (a fetched one may be anyone's)


def _git(
    repo: Path,
    *args: str,
    check: bool = True,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> Result:
    """git in the developer's repository, with every program a step could have planted
    in its configuration switched off (``bar.git.safe``)."""
    safe = _SAFE.get(repo)
    if safe is None:
        safe = _SAFE[repo] = SafeGit.read(repo)
    return safe.git(repo, *args, env=env, check=check, input=input)


_SAFE: dict[Path, SafeGit] = {}


class BadNote(ValueError):
    """A note that is not an authorship log of the standard."""


# --- the format --------------------------------------------------------------------------


@record(frozen=True)
class Entry:
    key: str
    lines: tuple[tuple[int, int], ...]  # inclusive ranges, 1-based, ascending


@record(frozen=True)
class FileEntries:
    path: str
    entries: tuple[Entry, ...]


@record(frozen=True)
class AuthorshipLog:
    files: tuple[FileEntries, ...]
    metadata: dict[str, Any]

    def render(self) -> str:
        out: list[str] = []
        for f in self.files:
            out.append(_quoted(f.path))
            out += [f"  {e.key} {ranges_text(e.lines)}" for e in f.entries]
        out.append(DIVIDER)
        out.append(json.dumps(self.metadata, indent=2, ensure_ascii=False))
        return "\n".join(out) + "\n"

    def who(self, key: str) -> dict[str, Any] | None:
        """The metadata record a key names: a session's, a human's or a legacy prompt's."""
        table, name = _table_of(key)
        found = self.metadata.get(table) or {}
        value = found.get(name) if isinstance(found, dict) else None
        return value if isinstance(value, dict) else None


def _table_of(key: str) -> tuple[str, str]:
    if (m := _SESSION_KEY.match(key)) is not None:
        return "sessions", m.group(1)
    if _HUMAN_KEY.match(key):
        return "humans", key
    return "prompts", key


def _quoted(path: str) -> str:
    return f'"{path}"' if any(c in path for c in " \t\n") else path


def ranges_text(lines: tuple[tuple[int, int], ...]) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in lines)


def parse(text: str) -> AuthorshipLog:
    """An authorship log read as the standard writes it; ``BadNote`` says where not."""
    lines = text.split("\n")
    try:
        cut = lines.index(DIVIDER)
    except ValueError:
        raise BadNote(f"no line {DIVIDER!r} between the attestations and the metadata") from None
    try:
        metadata = json.loads("\n".join(lines[cut + 1 :]))
    except ValueError as exc:
        raise BadNote(f"the metadata is not JSON: {exc}") from None
    _check_metadata(metadata)
    files: list[FileEntries] = []
    path: str | None = None
    entries: list[Entry] = []
    for n, line in enumerate(lines[:cut], 1):
        if not line.strip():
            continue
        if line.startswith("  ") and not line.startswith("   "):
            if path is None:
                raise BadNote(f"line {n}: an attestation before any file")
            entries.append(_entry(line[2:], n))
        elif line[0].isspace():
            raise BadNote(f"line {n}: an attestation is indented by exactly two spaces")
        else:
            if path is not None:
                files.append(FileEntries(path, tuple(entries)))
            path, entries = _path(line), []
    if path is not None:
        files.append(FileEntries(path, tuple(entries)))
    log = AuthorshipLog(tuple(files), metadata)
    for f in log.files:
        for e in f.entries:
            if log.who(e.key) is None:
                table = _table_of(e.key)[0]
                raise BadNote(f"{f.path}: key {e.key} has no record in metadata.{table}")
    return log


def _path(line: str) -> str:
    if line.startswith('"'):
        if len(line) < 2 or not line.endswith('"'):
            raise BadNote(f"a quoted path is not closed: {line!r}")
        return line[1:-1]
    return line


def _entry(text: str, n: int) -> Entry:
    key, _, spec = text.partition(" ")
    if not (_SESSION_KEY.match(key) or _HUMAN_KEY.match(key) or _LEGACY_KEY.match(key)):
        raise BadNote(f"line {n}: {key!r} is not an attestation key")
    if not _RANGES.match(spec):
        raise BadNote(f"line {n}: {spec!r} is not a list of lines and ranges")
    out: list[tuple[int, int]] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        start, end = int(a), int(b or a)
        if start < 1 or end < start or (out and start <= out[-1][1]):
            raise BadNote(f"line {n}: the lines must be positive and ascending: {spec}")
        out.append((start, end))
    return Entry(key, tuple(out))


def _check_metadata(metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise BadNote("the metadata is not a JSON object")
    if metadata.get("schema_version") != SCHEMA:
        raise BadNote(f"schema_version is {metadata.get('schema_version')!r}, not {SCHEMA!r}")
    if not isinstance(metadata.get("base_commit_sha"), str):
        raise BadNote("base_commit_sha is missing")
    if not isinstance(metadata.get("prompts"), dict):
        raise BadNote("prompts is missing")
    for table in ("sessions", "humans"):
        if table in metadata and not isinstance(metadata[table], dict):
            raise BadNote(f"{table} is not an object")
    for name, rec in (metadata.get("sessions") or {}).items():
        if not isinstance(rec, dict) or not isinstance(rec.get("agent_id"), dict):
            raise BadNote(f"session {name} has no agent_id")
    for name, rec in (metadata.get("humans") or {}).items():
        if not isinstance(rec, dict) or not isinstance(rec.get("author"), str):
            raise BadNote(f"human {name} has no author")
    for name, rec in metadata["prompts"].items():
        if not isinstance(rec, dict) or not isinstance(rec.get("agent_id"), dict):
            raise BadNote(f"prompt {name} has no agent_id")


def session_key(tool: str, conversation: str) -> str:
    return "s_" + hashlib.sha256(f"{tool}:{conversation}".encode()).hexdigest()[:14]


def human_key(identity: str) -> str:
    return "h_" + hashlib.sha256(identity.encode()).hexdigest()[:14]


# --- export -------------------------------------------------------------------------------


@record
class Exported:
    written: list[str] = field(default_factory=list)  # commits given a note
    unchanged: list[str] = field(default_factory=list)  # bar's note there already
    kept: list[str] = field(default_factory=list)  # another tool's note, left alone
    lines: int = 0  # lines attested in the notes written

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": NOTES_REF,
            "written": self.written,
            "unchanged": self.unchanged,
            "kept": self.kept,
            "lines": self.lines,
        }


def export(project: Project, tasks: list[Task], rev: str | None, *, force: bool) -> Exported:
    """Write a note on every applied commit of ``tasks`` (in ``rev``'s history, when
    given)."""
    repo = project.root
    _SAFE.clear()  # (the configuration is read anew by each command)
    within = None
    if rev is not None:
        if rev.startswith("-"):
            raise UsageError(f"{rev!r} is not a revision")
        within = git.resolve_commit(repo, rev)
        if within is None:
            raise NotFound(f"no commit {rev!r} in {repo}", hint="give a branch, a tag or a commit")
    identity = _identity(repo)
    done = Exported()
    for task in tasks:
        for rec in trace.export(task):
            if rec.apply_step is None:
                continue  # (a state no apply landed: no commit of a branch to note)
            if within is not None and not git.is_ancestor(repo, rec.revision, within):
                continue
            log = _log(project, task, rec, identity)
            if log is None:
                continue
            _write(repo, rec.revision, log, force, done)
    return done


def _log(
    project: Project, task: Task, rec: trace.TraceRecord, identity: str
) -> AuthorshipLog | None:
    repo = project.root
    sessions: dict[str, Any] = {}
    humans: dict[str, Any] = {}
    files: list[FileEntries] = []
    for f in rec.files:
        if "\n" in f.path or '"' in f.path:
            continue  # (the standard's lines cannot name it: a quote or a line break)
        added = _added_lines(repo, rec.revision, f.path)
        keyed: dict[str, list[int]] = {}
        for conv in f.conversations:
            key = _key(task, conv, identity, sessions, humans)
            if key is None:
                continue
            numbers = [
                n for r in conv.ranges for n in range(r.start_line, r.end_line + 1) if n in added
            ]
            if numbers:
                keyed.setdefault(key, []).extend(numbers)
        entries = [Entry(k, _runs(sorted(set(v)))) for k, v in keyed.items()]
        if entries:
            files.append(FileEntries(f.path, tuple(sorted(entries, key=lambda e: e.lines[0]))))
    if not files:
        return None
    metadata: dict[str, Any] = {
        "schema_version": SCHEMA,
        "base_commit_sha": rec.revision,
        "prompts": {},
    }
    if humans:
        metadata["humans"] = humans
    if sessions:
        metadata["sessions"] = sessions
    return AuthorshipLog(tuple(files), known.scrubber().scrub_obj(metadata))


def _key(
    task: Task,
    conv: trace.Conversation,
    identity: str,
    sessions: dict[str, Any],
    humans: dict[str, Any],
) -> str | None:
    if conv.contributor.type == "human":
        key = human_key(identity)
        humans[key] = {"author": identity}
        return key
    if conv.contributor.type != "ai":
        return None  # a command bar cannot say who wrote: untracked, as git-ai leaves it
    step_id = conv.state.partition(".")[0]
    agent, model = _agent(task, step_id)
    conversation = conv.session_id or f"bar:{task.id}:{step_id}"
    sid = session_key(agent, conversation)
    sessions[sid] = {
        "agent_id": {"tool": agent, "id": conversation, "model": model},
        "human_author": identity,
        "custom_attributes": {"bar_task": task.id, "bar_task_name": task.name},
    }
    trace_id = "t_" + hashlib.sha256(f"bar:{task.id}:{conv.state}".encode()).hexdigest()[:14]
    return f"{sid}::{trace_id}"


def _agent(task: Task, step_id: str) -> tuple[str, str]:
    """(the agent's name, its model) of a step, as git-ai names tools."""
    try:
        step = task.ledger.get(step_id)
    except BarError:
        return "unknown", "unknown"
    summary = stored.summary(step) if isinstance(step, RunStep) else None
    agent = (summary or {}).get("agent")
    if not isinstance(agent, str):
        given = step.extra.get("agent")
        agent = given.get("name") if isinstance(given, dict) else None
    model = (summary or {}).get("model")
    return (
        agent if isinstance(agent, str) and agent else "unknown",
        model if isinstance(model, str) and model else "unknown",
    )


def _runs(numbers: list[int]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return tuple(out)


_HUNK = re.compile(rb"^@@ -[0-9,]+ \+([0-9]+)(?:,([0-9]+))? @@")


def _added_lines(repo: Path, commit: str, path: str) -> set[int]:
    """The line numbers of ``path`` at ``commit`` that the commit added (against its
    first parent; every line for a root commit)."""
    parent = _git(repo, "rev-parse", "--verify", "-q", f"{commit}^", check=False)
    base = parent.stdout.decode().strip() if parent.returncode == 0 else git.EMPTY_TREE
    raw = _git(
        repo,
        "diff",
        "-U0",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        base,
        commit,
        "--",
        path,
        env=git.TREES_ONLY,
    ).stdout
    out: set[int] = set()
    for line in raw.split(b"\n"):
        m = _HUNK.match(line)
        if m is not None:
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            out.update(range(start, start + count))
    return out


def _identity(repo: Path) -> str:
    """The committer as git names it (``Name <email>``), without the time."""
    res = _git(repo, "var", "GIT_COMMITTER_IDENT", check=False)
    text = res.stdout.decode("utf-8", "replace").strip()
    return text.rsplit(">", 1)[0] + ">" if ">" in text else (text or "unknown")


def _write(repo: Path, commit: str, log: AuthorshipLog, force: bool, done: Exported) -> None:
    text = log.render()
    old = _git(repo, "notes", f"--ref={NOTES_REF}", "show", commit, check=False)
    if old.returncode == 0:
        before = old.stdout.decode("utf-8", "replace")
        if before == text:
            done.unchanged.append(commit)
            return
        if not force and not _ours(before):
            done.kept.append(commit)
            return
    _git(repo, "notes", f"--ref={NOTES_REF}", "add", "-f", "-F", "-", commit, input=text.encode())
    done.written.append(commit)
    done.lines += sum(b - a + 1 for f in log.files for e in f.entries for a, b in e.lines)


def _ours(text: str) -> bool:
    """Whether a note is one bar wrote (its sessions name a bar task)."""
    try:
        log = parse(text)
    except BadNote:
        return False
    sessions = log.metadata.get("sessions") or {}
    return bool(sessions) and all(
        isinstance(s, dict) and "bar_task" in (s.get("custom_attributes") or {})
        for s in sessions.values()
    )


# --- import -------------------------------------------------------------------------------


@record
class Imported:
    ref: str
    notes: int = 0  # notes read and kept
    lines: int = 0
    tools: dict[str, int] = field(default_factory=dict)  # agent tool -> lines
    invalid: list[dict[str, str]] = field(default_factory=list)  # {commit, why}

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "notes": self.notes,
            "lines": self.lines,
            "tools": self.tools,
            "invalid": self.invalid,
        }


def index_path(project: Project) -> Path:
    return project.paths.dir / "notes" / "ai.json"


def import_notes(project: Project, ref: str = NOTES_REF) -> Imported:
    """Read every note of ``ref`` into the project's index (``notes/ai.json``)."""
    repo = project.root
    _SAFE.clear()
    if ref.startswith("-") or not ref:
        raise UsageError(f"{ref!r} is not a notes ref")
    full = ref if ref.startswith("refs/") else f"refs/notes/{ref}"
    if not full.startswith("refs/notes/"):
        raise UsageError(
            f"{ref} is not a notes ref", hint="notes live under refs/notes/, like refs/notes/ai"
        )
    if _git(repo, "rev-parse", "--verify", "-q", full, check=False).returncode != 0:
        raise NotFound(
            f"no notes under {full} in {repo}",
            hint=f"git fetch origin {NOTES_REF}:{NOTES_REF} brings a remote's notes; "
            "`bar notes export` writes bar's own",
        )
    listed = _git(repo, "notes", f"--ref={full}", "list").stdout.decode().split()
    notes, commits = listed[0::2], listed[1::2]
    sizes = _git(
        repo,
        "cat-file",
        "--batch-check=%(objectsize)",
        input="".join(f"{n}\n" for n in notes).encode(),
    ).stdout.split()
    index = _read_index(project)
    done = Imported(full)
    for note, commit, size in zip(notes, commits, sizes, strict=False):
        if not size.isdigit() or int(size) > MAX_NOTE:
            done.invalid.append({"commit": commit, "why": f"larger than {MAX_NOTE} bytes"})
            continue
        text = _git(repo, "cat-file", "blob", note).stdout.decode("utf-8", "replace")
        try:
            log = parse(text)
        except BadNote as exc:
            done.invalid.append({"commit": commit, "why": str(exc)})
            continue
        index[commit] = _indexed(log)
        done.notes += 1
        for f in log.files:
            for e in f.entries:
                count = sum(b - a + 1 for a, b in e.lines)
                done.lines += count
                tool = _tool_of(log.who(e.key), e.key)
                done.tools[tool] = done.tools.get(tool, 0) + count
    path = index_path(project)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(path, {"version": _INDEX_VERSION, "commits": index})
    return done


def _indexed(log: AuthorshipLog) -> dict[str, Any]:
    return {
        "files": {
            f.path: [[e.key, [list(r) for r in e.lines]] for e in f.entries] for f in log.files
        },
        "who": {e.key: log.who(e.key) for f in log.files for e in f.entries if log.who(e.key)},
    }


def _tool_of(who: dict[str, Any] | None, key: str) -> str:
    if _HUMAN_KEY.match(key):
        return "human"
    agent = (who or {}).get("agent_id") or {}
    tool = agent.get("tool") if isinstance(agent, dict) else None
    return tool if isinstance(tool, str) and tool else "unknown"


def _read_index(project: Project) -> dict[str, Any]:
    try:
        data = read_json(index_path(project), "notes/ai.json")
    except (BarError, OSError):
        return {}
    commits = data.get("commits") if data.get("version") == _INDEX_VERSION else None
    return commits if isinstance(commits, dict) else {}


@record(frozen=True)
class Authorship:
    """What an imported note says of one line."""

    kind: str  # ai | human
    key: str
    tool: str | None = None
    model: str | None = None
    conversation: str | None = None
    author: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "tool": self.tool,
            "model": self.model,
            "conversation": self.conversation,
            "author": self.author,
        }


class Notes:
    """The imported notes, read once, for ``bar blame --rev``."""

    def __init__(self, project: Project) -> None:
        self.commits = _read_index(project)

    def line(self, commit: str, path: str, number: int) -> Authorship | None:
        found = self.commits.get(commit)
        if not isinstance(found, dict):
            return None
        for key, spans in (found.get("files") or {}).get(path) or []:
            if any(a <= number <= b for a, b in spans):
                return _authorship(key, (found.get("who") or {}).get(key))
        return None


def _authorship(key: str, who: Any) -> Authorship:
    who = who if isinstance(who, dict) else {}
    if _HUMAN_KEY.match(key):
        return Authorship("human", key, author=_s(who.get("author")))
    agent = who.get("agent_id") if isinstance(who.get("agent_id"), dict) else {}
    return Authorship(
        "ai",
        key,
        tool=_s(agent.get("tool")),
        model=_s(agent.get("model")),
        conversation=_s(agent.get("id")),
        author=_s(who.get("human_author")),
    )


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
