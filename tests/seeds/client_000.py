"""A reader of bar's storage written from the original storage design alone (reference 000).

What a user of that design would write to look at a task without bar: find the project
and its active task (state.json), read task.json through the design's
``migrateTaskJSON`` (which knows version 1 only), read the ledger a line at a time as
the design's ``Step`` struct decodes it, rebuild the worktree after each step by applying
each step's diff with ``git apply`` onto the base, and read each step's output in its
``=== STDOUT === / === STDERR ===`` format.

It knows nothing the design does not say. Like Go's ``encoding/json``, which the
design's structs are decoded with, it ignores keys it does not know, and it checks the
types of the keys it reads as strictly as decoding into those structs would. It must
not import bar.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

KINDS = ("run", "apply", "rollback")  # the design's StepKind constants
STDOUT = "=== STDOUT ===\n"
STDERR = "=== STDERR ===\n"
_STEP_ID = re.compile(r"[0-9]{4}")


class Unreadable(Exception):
    """The file is not what the design describes."""


# --- the design's structs ------------------------------------------------------------


@dataclass
class Task:
    id: str
    name: str
    repo_root: str
    base_ref: str
    branch: str
    workspace_path: str
    status: str
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    metadata: dict[str, Any]


@dataclass
class DiffStat:
    files: int
    additions: int
    deletions: int
    file_list: list[str] = field(default_factory=list)


@dataclass
class Step:
    step_id: str
    kind: str
    started_at: datetime
    ended_at: datetime
    duration_ms: int = 0
    cmd: list[str] = field(default_factory=list)
    cwd: str = ""
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    diff_stat: DiffStat | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # patch, output
    policy_events: list[dict[str, str]] = field(default_factory=list)
    mode: str = ""
    commit_sha: str = ""
    commit_message: str = ""
    target_branch: str = ""
    target: str = ""
    target_step: str = ""
    hard: bool | None = None


# --- decoding, as encoding/json would -----------------------------------------------------


def _time(value: Any, what: str) -> datetime:
    """A time.Time: RFC 3339 text."""
    if not isinstance(value, str):
        raise Unreadable(f"{what} is not a time")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Unreadable(f"{what} is not RFC 3339: {value!r}") from None


def _typed(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """A field decoded into its Go type: absent or null leaves the zero value (None)."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and kind in (int, (int,)):
        raise Unreadable(f"{what}.{key} is not a number")
    if not isinstance(value, kind):
        raise Unreadable(f"{what}.{key} has the wrong type: {value!r}")
    return value


def migrate_task_json(data: bytes) -> Task:
    """The design's ``migrateTaskJSON``: version 1, or an error."""
    raw = json.loads(data)
    version = raw["version"]  # (the design asserts it is a number)
    if not isinstance(version, int | float) or isinstance(version, bool):
        raise Unreadable(f"task version is not a number: {version!r}")
    if int(version) != 1:
        raise Unreadable(f"unsupported task version: {int(version)}")
    return _parse_task_v1(raw)


def _parse_task_v1(raw: dict[str, Any]) -> Task:
    for key in ("id", "name", "repo_root", "base_ref", "branch", "workspace_path", "status"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise Unreadable(f"task.json has no {key}")
    if raw["status"] not in ("active", "closed"):
        raise Unreadable(f"task.json has an unknown status {raw['status']!r}")
    closed = raw.get("closed_at")
    return Task(
        id=raw["id"],
        name=raw["name"],
        repo_root=raw["repo_root"],
        base_ref=raw["base_ref"],
        branch=raw["branch"],
        workspace_path=raw["workspace_path"],
        status=raw["status"],
        created_at=_time(raw.get("created_at"), "created_at"),
        updated_at=_time(raw.get("updated_at"), "updated_at"),
        closed_at=None if closed is None else _time(closed, "closed_at"),
        metadata=_typed(raw, "metadata", dict, "task") or {},
    )


def parse_step(line: str, where: str) -> Step:
    """One ledger line into the design's ``Step``."""
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise Unreadable(f"{where} is not an object")
    step_id, kind = raw.get("step_id"), raw.get("kind")
    if not isinstance(step_id, str) or not _STEP_ID.fullmatch(step_id):
        raise Unreadable(f"{where} has no step_id like 0001")
    if not isinstance(kind, str) or not kind:
        raise Unreadable(f"{where} has no kind")
    stat = _typed(raw, "diff_stat", dict, where)
    arts = _typed(raw, "artifacts", dict, where) or {}
    if not all(isinstance(v, str) for v in arts.values()):
        raise Unreadable(f"{where}.artifacts holds a path that is not text")
    env = _typed(raw, "env", dict, where) or {}
    events = _typed(raw, "policy_events", list, where) or []
    for event in events:
        for key in ("rule", "action", "matched"):
            _typed(event, key, str, f"{where}.policy_events")
    cmd = _typed(raw, "cmd", list, where) or []
    if not all(isinstance(c, str) for c in cmd):
        raise Unreadable(f"{where}.cmd holds a word that is not text")
    step = Step(
        step_id=step_id,
        kind=kind,
        started_at=_time(raw.get("started_at"), f"{where}.started_at"),
        ended_at=_time(raw.get("ended_at"), f"{where}.ended_at"),
        duration_ms=_typed(raw, "duration_ms", int, where) or 0,
        cmd=cmd,
        cwd=_typed(raw, "cwd", str, where) or "",
        env={str(k): str(v) for k, v in env.items()},
        exit_code=_typed(raw, "exit_code", int, where),
        diff_stat=None
        if stat is None
        else DiffStat(
            files=_typed(stat, "files", int, f"{where}.diff_stat") or 0,
            additions=_typed(stat, "additions", int, f"{where}.diff_stat") or 0,
            deletions=_typed(stat, "deletions", int, f"{where}.diff_stat") or 0,
            file_list=_typed(stat, "file_list", list, f"{where}.diff_stat") or [],
        ),
        artifacts=dict(arts),
        policy_events=events,
        mode=_typed(raw, "mode", str, where) or "",
        commit_sha=_typed(raw, "commit_sha", str, where) or "",
        commit_message=_typed(raw, "commit_message", str, where) or "",
        target_branch=_typed(raw, "target_branch", str, where) or "",
        target=_typed(raw, "target", str, where) or "",
        target_step=_typed(raw, "target_step", str, where) or "",
        hard=_typed(raw, "hard", bool, where),
    )
    _required(step, raw, where)
    return step


def _required(step: Step, raw: dict[str, Any], where: str) -> None:
    """The design's table of required fields, for the kinds it names. A kind it does not
    name is read as the one struct every step is decoded into; it is a ``run`` step's
    fields that make a step replayable, so those are asked of it too."""
    needed = {
        "run": ("cmd", "cwd", "exit_code", "diff_stat", "artifacts"),
        "apply": ("mode", "commit_sha", "commit_message", "target_branch"),
        "rollback": ("target", "hard"),
    }.get(step.kind, ("cmd", "cwd", "exit_code", "diff_stat", "artifacts"))
    missing = [key for key in needed if key not in raw]
    if missing:
        raise Unreadable(f"{where} ({step.kind}) lacks {', '.join(missing)}")


# --- the store -----------------------------------------------------------------------------


@dataclass
class Project:
    dir: Path
    active_task_id: str | None


def projects(home: Path) -> list[Project]:
    """Every project under ``home`` (``~/.bar``), with its state.json."""
    found = []
    for entry in sorted((home / "projects").iterdir()):
        state = json.loads((entry / "state.json").read_text())
        if state.get("version") != 1:
            raise Unreadable(f"unsupported state version: {state.get('version')!r}")
        found.append(Project(entry, state.get("active_task_id")))
    return found


def load_task(task_dir: Path) -> Task:
    return migrate_task_json((task_dir / "task.json").read_bytes())


def read_ledger(task_dir: Path) -> list[Step]:
    """Every step, oldest first."""
    steps = []
    with open(task_dir / "ledger.jsonl", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                steps.append(parse_step(line, f"ledger line {number}"))
    return steps


def read_output(task_dir: Path, step: Step) -> tuple[str, str] | None:
    """A step's stdout and stderr, from its output file (None: it has none)."""
    rel = step.artifacts.get("output")
    if not rel:
        return None
    text = (task_dir / rel).read_text(encoding="utf-8")
    if not text.startswith(STDOUT):
        raise Unreadable(f"{rel} does not begin with {STDOUT.strip()}")
    body = text[len(STDOUT) :]
    if body.startswith(STDERR):
        return "", body[len(STDERR) :]
    marker = "\n" + STDERR
    if marker not in body:  # (a step cut short by a crash: what there is, is stdout)
        return body, ""
    out, err = body.split(marker, 1)
    return out + "\n", err


# --- replaying the diffs -------------------------------------------------------------------


def _git(*args: str, cwd: Path | str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise Unreadable(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def files_of(root: Path) -> dict[str, bytes]:
    """The files of a directory (but .git): contents, with 'x:' or '-:' for the mode and
    '-> ' for a symbolic link's target."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".git":
            continue
        if path.is_symlink():
            files[rel.as_posix()] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            files[rel.as_posix()] = (b"x:" if os.access(path, os.X_OK) else b"-:") + (
                path.read_bytes()
            )
    return files


def replay(task_dir: Path, scratch: Path) -> dict[str, dict[str, bytes]]:
    """The worktree after each step: the base (``base_ref`` in ``repo_root``) checked out
    into ``scratch``, then each step's diff applied in order with ``git apply``."""
    task = load_task(task_dir)
    if scratch.exists():
        shutil.rmtree(scratch)
    _git("clone", "-q", "--no-checkout", "--shared", task.repo_root, str(scratch), cwd="/")
    base = _git(
        "-C", task.repo_root, "rev-parse", "--verify", f"{task.base_ref}^{{commit}}", cwd="/"
    )
    _git("checkout", "-q", "--detach", base.strip(), cwd=scratch)
    states: dict[str, dict[str, bytes]] = {"base": files_of(scratch)}
    for step in read_ledger(task_dir):
        patch = step.artifacts.get("patch")
        if patch:
            _git("apply", "--whitespace=nowarn", str(task_dir / patch), cwd=scratch)
        states[step.step_id] = files_of(scratch)
    return states
