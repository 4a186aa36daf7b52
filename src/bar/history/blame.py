"""``bar blame``: for each line of a file, the step or tool call that last changed it.

A task's snapshots form one chain of commits from its base (``refs/bar/tasks/<id>``), and
every step and checkpoint names the commit of its state. git's own blame runs over that
chain, given as an explicit history (``git blame -S``) in which a rollback's commit
descends from the state it restored rather than from the one it replaced: a line a
rollback brought back is blamed on whoever wrote it in that state, so rewinding and
undoing the rewind loses no attribution. The ledger and the checkpoint files then say
what each commit was: which step or checkpoint, which tool and command, which agent
session. A commit of the chain that no record names (one a crash left, chained in by the
step recorded after it) belongs to the first recorded state after it. Lines older than
the task are ``base``.
"""

from __future__ import annotations

import string
import tempfile
from pathlib import Path
from typing import Any

from bar import git
from bar.base.cmdline import line_of
from bar.base.notices import byte_size
from bar.base.record import field, record
from bar.errors import NotFound, UsageError
from bar.history import bases, checkpoints
from bar.model import journals
from bar.model.records import ManualStep, RollbackStep, RunStep, State, SyncStep
from bar.model.tasks import Task


@record(frozen=True)
class Origin:
    """A recorded state that changed lines: a step, a checkpoint, or the base."""

    state: str  # "base", "0003", "0003.2"
    kind: str  # base | run | manual | rollback | tool | residual | ... (what made it)
    commit: str
    tool: str | None = None
    command: str | None = None  # the command (or the files an edit tool named)
    session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "kind": self.kind,
            "commit": self.commit,
            "tool": self.tool,
            "command": self.command,
            "session_id": self.session_id,
        }


@record(frozen=True)
class BlameLine:
    number: int
    text: str
    origin: Origin


@record(frozen=True)
class Blame:
    path: str
    at: str  # the state blamed
    lines: list[BlameLine] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "at": self.at,
            "lines": [{"line": b.number, "text": b.text, **b.origin.to_json()} for b in self.lines],
        }


def blame(task: Task, path: str, at: State | None = None) -> Blame:
    """Blame ``path`` (relative to the worktree) as the state ``at`` (default: the last
    recorded one) has it."""
    repo = task.project.root
    commit = at.commit if at is not None else task.recorded_snapshot()
    name = at.name if at is not None else _last_name(task)
    rel = path.strip("/")
    kind = git.git(repo, "cat-file", "-t", f"{commit}:{rel}", check=False)
    if kind.returncode != 0:
        raise NotFound(
            f"{rel} is not a file of the task in state {name}",
            hint="give a path relative to the task's worktree",
        )
    if kind.out.strip() != "blob":
        what = "directory" if kind.out.strip() == "tree" else kind.out.strip()
        raise UsageError(f"{rel} is a {what} in state {name}, not a file")
    first = bases.first(task)  # the chain's root, whatever base a sync moved to since
    chain = git.git(repo, "rev-list", "--first-parent", f"{first}..{commit}").out.split()
    refuse_large(repo, rel, [*chain, first], f"{rel} in state {name}")
    named, restored = _records(task)
    origins = _origins(chain, named)
    base = Origin("base", "base", first)
    with tempfile.NamedTemporaryFile("w", prefix="bar-blame-", dir=task.dir) as revs:
        revs.write(_history(first, chain, restored))
        revs.flush()
        raw = git.git(
            repo,
            "blame",
            "--porcelain",
            "--no-textconv",
            "--ignore-revs-file=",
            "-S",
            revs.name,
            commit,
            "--",
            rel,
        ).stdout
    lines = [
        BlameLine(number, text, base if boundary else origins.get(sha, base))
        for sha, number, text, boundary in _porcelain(raw)
    ]
    return Blame(rel, name, lines)


MOST_LINES = 500_000  # lines of a file bar blames (git's blame and bar's reading of it)


def refuse_large(repo: Path, rel: str, commits: list[str], what: str) -> None:
    """Raise ``UsageError`` if ``rel`` is, in any of ``commits`` (the first: the state
    blamed), larger than bar diffs line by line (``git.LINE_DIFF_LARGEST``), or has more
    than ``MOST_LINES`` lines in the first: git's blame holds every line of each version
    it compares (20 MB of short lines: 54 s, 628 MB of output for bar to read; a small
    file whose earlier version held 200 MB: 4.5 GB), and a step writes such a file in a
    second."""
    asked = "".join(f"{c}:{rel}\n" for c in commits).encode()
    said = git.git(repo, "cat-file", "--batch-check=%(objecttype) %(objectsize)", input=asked)
    sizes = [
        int(size)
        for kind, _, size in (line.partition(" ") for line in said.out.splitlines())
        if kind == "blob" and size.isdigit()
    ]
    largest = max(sizes, default=0)
    hint = "`bar show STEP` lists the files each step changed, with its patch"
    if largest > git.LINE_DIFF_LARGEST:
        which = "is" if sizes and sizes[0] == largest else "was, in an earlier state,"
        raise UsageError(
            f"{what} {which} {largest:,} bytes: bar blames no file over "
            f"{byte_size(git.LINE_DIFF_LARGEST)} in any of its states (it diffs such a file "
            "as binary)",
            hint=hint,
        )
    if sizes and sizes[0] > MOST_LINES:  # (fewer bytes than lines: fewer lines)
        lines = git.git(repo, "cat-file", "blob", f"{commits[0]}:{rel}").stdout.count(b"\n")
        if lines > MOST_LINES:
            raise UsageError(
                f"{what} has {lines:,} lines: bar blames no file of more than {MOST_LINES:,} lines",
                hint=hint,
            )


def _history(base: str, chain: list[str], restored: dict[str, str]) -> str:
    """The history blame walks (``-S``: "commit parent" lines): each snapshot's parent is
    the one before it, a rollback's the state it restored; the base has none."""
    on_chain = set(chain) | {base}
    lines = []
    for i, sha in enumerate(chain):
        parent = chain[i + 1] if i + 1 < len(chain) else base
        target = restored.get(sha)
        lines.append(f"{sha} {target if target in on_chain and target != sha else parent}\n")
    lines.append(f"{base}\n")
    return "".join(lines)


def _last_name(task: Task) -> str:
    last = task.ledger.last()
    return last.step_id if last is not None and last.snapshot else "base"


def _records(task: Task) -> tuple[dict[str, Origin], dict[str, str]]:
    """What the records say of the chain's commits: the state each one is (a checkpoint
    rather than its step when both name it), and for a rollback's, the commit of the state
    it restored."""
    named: dict[str, Origin] = {}
    restored: dict[str, str] = {}
    states: dict[str, str] = {"base": bases.first(task)}
    step_ids: list[str] = []
    running = journals.RUN.read(task.paths)
    now_base = states["base"]  # the base in effect (a sync moves it)
    for step in task.ledger.read_all(warn=False):
        step_ids.append(step.step_id)
        if not isinstance(step, RunStep | ManualStep | RollbackStep | SyncStep) or (
            not step.snapshot
        ):
            continue
        states[step.step_id] = step.snapshot
        if isinstance(step, RollbackStep) and step.snapshot != step.snapshot_before:
            target = states.get(step.target_step or "base") if step.target != "base" else (now_base)
            if target is not None:
                restored[step.snapshot] = target
        if not isinstance(step, RunStep | ManualStep) and step.base_after:
            now_base = step.base_after
        named.setdefault(step.snapshot, _step_origin(step, step.snapshot))
        if isinstance(step, RunStep) and step.checkpoints:
            _add_checkpoints(task, step.step_id, named, restored, states)
    if running is not None and running.step_id not in step_ids:
        _add_checkpoints(task, running.step_id, named, restored, states)
    return named, restored


def _add_checkpoints(
    task: Task,
    step_id: str,
    named: dict[str, Origin],
    restored: dict[str, str],
    states: dict[str, str],
) -> None:
    for cp in checkpoints.read(task, step_id):
        states[cp.name] = cp.snapshot
        if cp.snapshot == cp.snapshot_before:
            continue  # changed nothing: the commit is an earlier state's
        named[cp.snapshot] = _checkpoint_origin(cp)  # more exact than the step's
        if cp.kind == "rollback" and cp.target in states:
            restored[cp.snapshot] = states[cp.target]


def _origins(chain: list[str], named: dict[str, Origin]) -> dict[str, Origin]:
    """Every commit of the chain (newest first) with the recorded state that made it."""
    origins: dict[str, Origin] = {}
    current: Origin | None = None
    for sha in chain:  # newest first: an unnamed commit belongs to the state after it
        current = named.get(sha, current)
        if current is not None:
            origins[sha] = current
    return origins


def _step_origin(step: RunStep | ManualStep | RollbackStep | SyncStep, commit: str) -> Origin:
    if isinstance(step, SyncStep):
        return Origin(step.step_id, "sync", commit, command=f"sync onto {step.onto}")
    if isinstance(step, RunStep):
        return Origin(step.step_id, "run", commit, command=line_of(step.cmd))
    if isinstance(step, RollbackStep):
        return Origin(step.step_id, "rollback", commit, command=step.target_text)
    return Origin(step.step_id, "manual", commit, command="changes made outside bar")


def _checkpoint_origin(cp: checkpoints.Checkpoint) -> Origin:
    return Origin(
        cp.name,
        cp.kind,
        cp.snapshot,
        tool=cp.tool,
        command=cp.target_text,
        session_id=cp.session_id,
    )


def _porcelain(raw: bytes) -> list[tuple[str, int, str, bool]]:
    """(commit, line number, text, whether the commit is the boundary) of each line of
    ``git blame --porcelain``."""
    found: list[tuple[str, int, str, bool]] = []
    boundary: set[str] = set()
    sha = ""
    number = 0
    for line in raw.split(b"\n"):
        if line.startswith(b"\t"):
            text = line[1:].decode("utf-8", "replace")
            found.append((sha, number, text, sha in boundary))
        elif is_header(words := line.split(b" ")):
            sha, number = words[0].decode(), int(words[2])
        elif line == b"boundary":
            boundary.add(sha)
    return found


_HEX = frozenset(string.hexdigits.lower().encode())


def is_header(words: list[bytes]) -> bool:
    """``<commit> <original line> <final line> [<lines in group>]``"""
    return (
        len(words) in (3, 4)
        and len(words[0]) in (40, 64)
        and set(words[0]) <= _HEX
        and all(w.isdigit() for w in words[1:])
    )
