"""What ``bar __complete KIND`` offers a shell's completion: task names, step ids, refs.

A shell runs it on each Tab press, so it reads bar's files as they lie (task.json,
state.json, the ledger) with ``json`` alone, runs git once to find the repository, takes
no lock, writes nothing, and never fails: what it cannot read it leaves out, and outside
a project it offers nothing. It tells the shell what each candidate is (a task's state,
a step's command), which zsh and fish show beside it.

Steps are offered as they are typed: ``12`` ... when the word so far starts with 1-9,
``0012`` ... otherwise, and a step's checkpoints (``12.1``, ``12.2``) once the word names
the step and a dot, so that a long agent session does not flood the list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bar.base.proc import run
from bar.base.record import record
from bar.store import layout

KINDS = ("task", "step", "state", "ref", "branch")
ID_PREFIX_MIN = 4  # as tasks.ID_PREFIX_MIN: the shortest start of an id that names a task


@record(frozen=True)
class Candidate:
    value: str
    about: str = ""  # what it is, in a few words (shown by zsh and fish)

    def line(self) -> str:
        about = " ".join(self.about.split())
        return f"{self.value}\t{about[:70]}" if about else self.value


@record(frozen=True)
class _Place:
    root: Path  # the developer's checkout
    project: layout.ProjectPaths
    task_id: str | None  # the task whose worktree we are in


def candidates(
    kind: str, word: str = "", task: str | None = None, cwd: Path | None = None
) -> list[Candidate]:
    """What ``word`` could become where a value of ``kind`` is due; ``task`` is the task
    the command line names (default: the one we are in, else the active one)."""
    if kind not in KINDS:
        return []
    try:
        place = _locate(cwd or Path.cwd())
        if place is None:
            return []
        if kind == "task":
            return list(_tasks(place.project))
        if kind in ("ref", "branch"):
            return _refs(place.root, tags=kind == "ref")
        task_dir = _task_dir(place, task)
        if task_dir is None:
            return []
        found = list(_states(task_dir, word))
        if kind == "state" and "." not in word:
            found.insert(0, Candidate("base", "where the task started"))
        return found
    except (OSError, ValueError, UnicodeError):
        return []  # a file half written or gone in between: no candidates, no traceback


def _locate(cwd: Path) -> _Place | None:
    res = run(
        "git",
        "-C",
        str(cwd),
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-common-dir",
        check=False,
    )
    lines = res.out.splitlines()
    if res.returncode != 0 or len(lines) < 2:
        return None
    root, project_dir, task_id = layout.place(Path(lines[0]), Path(lines[1]))
    paths = layout.ProjectPaths(project_dir)
    return _Place(root, paths, task_id) if paths.config.is_file() else None


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _task_records(project: layout.ProjectPaths) -> list[dict[str, Any]]:
    found = []
    for entry in os.scandir(project.tasks):
        if layout.TASK_ID_RE.match(entry.name):
            rec = _read(project.task(entry.name).task_json)
            if isinstance(rec.get("name"), str) and rec.get("id") == entry.name:
                found.append(rec)
    return sorted(found, key=lambda rec: str(rec.get("created_at")))


def _tasks(project: layout.ProjectPaths) -> Iterator[Candidate]:
    """Each task by name, or by id where ``--task NAME`` would find another; open first."""
    active = _read(project.state).get("active_task_id")
    records = _task_records(project)
    for closed in (False, True):
        for rec in records:
            if (rec.get("status") == "closed") != closed:
                continue
            about = "active task" if rec["id"] == active else ("closed" if closed else "open")
            meta = rec.get("metadata")
            description = meta.get("description") if isinstance(meta, dict) else None
            if isinstance(description, str) and description:
                about += f": {description}"
            if _by_name(records, rec["name"]) is rec:
                yield Candidate(rec["name"], f"{about} ({rec['id']})")
            else:
                yield Candidate(rec["id"], f"{rec['name']}, {about}")


def _by_name(records: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The task ``--task NAME`` finds (``tasks.resolve_task``): the one open task of that
    name, else the one task of that name."""
    named = [rec for rec in records if rec["name"] == name]
    open_ = [rec for rec in named if rec.get("status") != "closed"]
    if len(open_) == 1:
        return open_[0]
    return named[0] if len(named) == 1 else None


def _task_dir(place: _Place, ref: str | None) -> layout.TaskPaths | None:
    """The task ``bar --task REF`` would act on, as ``api.get_task`` finds it."""
    project = place.project
    if ref:
        if layout.TASK_ID_RE.match(ref) and project.task(ref).dir.is_dir():
            return project.task(ref)
        records = _task_records(project)
        found = _by_name(records, ref)
        starting = [rec for rec in records if rec["id"].startswith(ref)]
        if found is None and len(ref) >= ID_PREFIX_MIN and len(starting) == 1:
            found = starting[0]
        return project.task(found["id"]) if found else None
    task_id = place.task_id or _read(project.state).get("active_task_id")
    if isinstance(task_id, str) and layout.TASK_ID_RE.match(task_id):
        return project.task(task_id)
    return None


def _states(task: layout.TaskPaths, word: str) -> Iterator[Candidate]:
    """The task's steps, or (once ``word`` names a step and a dot) its checkpoints."""
    short = word[:1] in "123456789" if word else False
    step_part, dot, _ = word.partition(".")
    try:
        f = open(task.ledger, "rb")  # noqa: SIM115 - read line by line below
    except FileNotFoundError:
        return
    with f:
        for raw in f:
            try:
                rec = json.loads(raw)
                number = int(rec["step_id"])
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a crash: `bar doctor` reports it
            name = str(number) if short else f"{number:04d}"
            if not dot:
                yield Candidate(name, _about_step(rec))
            elif step_part.isdigit() and int(step_part) == number:
                yield from _checkpoints(task, rec, step_part)


def _about_step(rec: dict[str, Any]) -> str:
    kind = str(rec.get("kind"))
    if kind == "run":
        cmd = rec.get("cmd")
        words = " ".join(str(w) for w in cmd) if isinstance(cmd, list) else ""
        return f"exit {rec.get('exit_code')}: {words}"
    if kind == "rollback":
        return f"rollback to {rec.get('target_step') or rec.get('target')}"
    if kind == "apply":
        return f"apply to {rec.get('target_branch')}"
    return kind


def _checkpoints(task: layout.TaskPaths, rec: dict[str, Any], step: str) -> Iterator[Candidate]:
    count = rec.get("checkpoints")
    about: dict[int, str] = {}
    try:
        with open(task.artifacts / f"{rec['step_id']}.checkpoints.jsonl", "rb") as f:
            for raw in f:
                try:
                    cp = json.loads(raw)
                    n = int(cp["n"])
                except (ValueError, KeyError, TypeError):
                    continue
                what = cp.get("command") or ", ".join(cp.get("paths") or ()) or cp.get("kind")
                about[n] = f"{cp.get('tool') or cp.get('kind')}: {what}"
    except OSError:
        pass
    last = count if isinstance(count, int) else max(about, default=0)
    for n in range(1, last + 1):
        yield Candidate(f"{step}.{n}", about.get(n, "checkpoint"))


def _refs(root: Path, *, tags: bool) -> list[Candidate]:
    spaces = ["refs/heads/", "refs/tags/"] if tags else ["refs/heads/"]
    res = run(
        "git", "-C", str(root), "for-each-ref", "--format=%(refname:short)", *spaces, check=False
    )
    return [Candidate(name) for name in res.out.splitlines() if name]
