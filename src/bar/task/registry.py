"""workspaces/index.json: the registry of task worktrees (docs/board.md, reference 002).

The execution plane's record: where each task's worktree is, on which branch, and whether
it is ``active`` (made and in use), ``kept`` (to stay when its task closes, or left after
it closed) or ``removed``::

    {"version": 1,
     "worktrees": [{"name": "auth", "path": "/…/workspaces/Ab3x_9Qz",
                    "branch": "bar/auth-Ab3x_9Qz", "task_id": "Ab3x_9Qz",
                    "status": "active", "created_at": 1730000000.0,
                    "kept_at": 1730000100.0, "removed_at": 1730000200.0}]}

One entry per task, updated in place (a reopened task's worktree is ``active`` again);
times are seconds since the epoch, as the board's events write them. It is written whole
(atomically) under the project lock. It is derived state: the worktrees on disk and the
tasks' files are the truth, and ``rebuild`` (``bar doctor --repair``, ``bar init
--adopt``) makes it again from them, keeping what only it knew (that an open task's
worktree is to be kept, when each changed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.base.migrate import upgrade
from bar.errors import CorruptFile
from bar.store.files import ensure_dir, read_json, write_json_atomic

if TYPE_CHECKING:
    from bar.model.project import Project
    from bar.model.tasks import Task

ACTIVE = "active"
KEPT = "kept"
REMOVED = "removed"
STATUSES = (ACTIVE, KEPT, REMOVED)
VERSION = 1
_FIELDS = {"name": str, "path": str, "branch": str, "task_id": str, "status": str}


def path_of(project: Project) -> Path:
    return project.paths.workspaces / "index.json"


def load(project: Project) -> list[dict[str, Any]]:
    """The registry's entries (none when it was never written); ``CorruptFile`` if it
    cannot be read (``bar doctor --repair`` makes it again)."""
    path = path_of(project)
    try:
        data = read_json(path, "workspaces/index.json")
    except FileNotFoundError:
        return []
    data = upgrade("worktrees", data, path, default=VERSION)
    entries = data.get("worktrees")
    if not isinstance(entries, list):
        raise CorruptFile(f"{path} has no list of worktrees", hint="run `bar doctor --repair`")
    for entry in entries:
        if not isinstance(entry, dict) or any(
            not isinstance(entry.get(key), kind) for key, kind in _FIELDS.items()
        ):
            raise CorruptFile(f"{path} has a malformed entry: {entry!r}"[:300])
        if entry["status"] not in STATUSES:
            raise CorruptFile(f"{path} has an unknown worktree status {entry['status']!r}")
    return entries


def _save(project: Project, entries: list[dict[str, Any]]) -> None:
    ensure_dir(project.paths.workspaces)
    write_json_atomic(path_of(project), {"version": VERSION, "worktrees": entries})


def entry_of(project: Project, task_id: str) -> dict[str, Any] | None:
    """The registry entry of the task's worktree (None if it never had one, or the
    registry cannot be read)."""
    try:
        entries = load(project)
    except CorruptFile:
        return None
    return next((e for e in entries if e["task_id"] == task_id), None)


def mark(task: Task, status: str, *, when: float | None = None) -> dict[str, Any]:
    """Record that the task's worktree is now ``status``; the entry as written. Takes the
    project lock; an unreadable registry is made again from disk first."""
    project = task.project
    now = round(time.time() if when is None else when, 3)
    with project.lock(f"worktree registry: {status} {task.id}"):
        try:
            entries = load(project)
        except CorruptFile:
            entries = _derived(project, [])
        entry = next((e for e in entries if e["task_id"] == task.id), None)
        if entry is None:
            entry = {"task_id": task.id, "created_at": now}
            entries.append(entry)
        was = entry.get("status")
        name = task.board.worktree or entry.get("name") or task.name
        entry.update(name=name, path=str(task.worktree), branch=task.branch, task_id=task.id)
        entry["status"] = status
        if status == ACTIVE and was in (REMOVED, None):
            entry["created_at"] = now
            entry.pop("removed_at", None)
            entry.pop("kept_at", None)
        elif status == KEPT and was != KEPT:
            entry["kept_at"] = now
        elif status == REMOVED:
            entry["removed_at"] = now
        _save(project, entries)
        return dict(entry)


def name_of(task: Task) -> str:
    """The name of the task's worktree: the one it is bound under, else the one the
    registry knows it by (a worktree removed keeps its name for the next start), else the
    task's name."""
    if task.board.worktree:
        return task.board.worktree
    entry = entry_of(task.project, task.id)
    return str(entry["name"]) if entry is not None and entry.get("name") else task.name


def lane(project: Project, name: str) -> dict[str, Any] | None:
    """The entry of the worktree ``name`` that no task is bound to (``bar worktree
    create`` without a task), if it is there and not removed."""
    try:
        entries = load(project)
    except CorruptFile:
        return None
    return next(
        (e for e in entries if not e["task_id"] and e["name"] == name and e["status"] != REMOVED),
        None,
    )


def named(project: Project, name: str) -> dict[str, Any] | None:
    """The entry of a worktree (a task's or none's) called ``name``, not removed."""
    try:
        entries = load(project)
    except CorruptFile:
        return None
    return next((e for e in entries if e["name"] == name and e["status"] != REMOVED), None)


def set_lane(project: Project, entry: dict[str, Any] | None, *, drop: str | None = None) -> None:
    """Add (or replace, by name) the entry of a worktree no task is bound to; ``drop``:
    remove the one of that name instead. Takes the project lock."""
    with project.lock("worktree registry: a worktree of no task"):
        try:
            entries = load(project)
        except CorruptFile:
            entries = _derived(project, [])
        gone = drop if drop is not None else (entry or {}).get("name")
        entries = [e for e in entries if e["task_id"] or e["name"] != gone]
        if entry is not None:
            entries.append(entry)
        _save(project, entries)


def forget(project: Project, task_id: str) -> None:
    """Drop the entry of a deleted task (nothing of it is left to register)."""
    with project.lock(f"worktree registry: forget {task_id}"):
        entries = load(project)
        left = [e for e in entries if e["task_id"] != task_id]
        if len(left) != len(entries):
            _save(project, left)


def kept(task: Task) -> bool:
    """The task's worktree is marked to be kept when the task closes."""
    entry = entry_of(task.project, task.id)
    return entry is not None and entry["status"] == KEPT


def view(project: Project) -> tuple[list[dict[str, Any]], str | None]:
    """The entries to show, and what is wrong with the registry if it cannot be shown
    as it is: a missing or unreadable registry is shown as the disk implies (written
    again by ``bar doctor --repair``), never as no worktrees."""
    try:
        entries = load(project)
    except CorruptFile as exc:
        return _derived(project, []), f"{exc}; shown as the disk says"
    if entries or path_of(project).exists():
        return entries, None
    derived = _derived(project, [])
    if not derived:
        return [], None
    return derived, f"{path_of(project)} is missing; shown as the disk says"


def rebuild(project: Project) -> list[dict[str, Any]]:
    """Make the registry again from the tasks and worktrees on disk (keeping what the old
    one knew where it still holds); the entries written."""
    with project.lock("worktree registry: rebuild"):
        try:
            old = load(project)
        except CorruptFile:
            old = []
        entries = _derived(project, old)
        _save(project, entries)
        return entries


def differences(project: Project) -> list[str]:
    """How the registry differs from what the disk says, one sentence each (none: it
    is right)."""
    try:
        have = load(project)
    except CorruptFile as exc:
        return [str(exc)]
    want = _derived(project, have)
    said: list[str] = []
    have_by = {_key(e): e for e in have}
    want_by = {_key(e): e for e in want}
    for task_id, entry in want_by.items():
        got = have_by.get(task_id)
        if got is None:
            said.append(f"the worktree of task {entry['name']} ({task_id}) is not registered")
        elif any(got.get(k) != entry.get(k) for k in ("status", "path", "branch", "name")):
            said.append(
                f"the worktree of task {entry['name']} ({task_id}) is registered as "
                f"{got['status']} at {got['path']}, but is {entry['status']} at {entry['path']}"
            )
    for task_id in have_by.keys() - want_by.keys():
        said.append(f"the registry names a worktree of task {task_id}, which does not exist")
    return said


def _key(entry: dict[str, Any]) -> str:
    """An entry's key: its task, or for a worktree of no task its name."""
    return str(entry["task_id"]) or f"worktree {entry['name']}"


def _derived(project: Project, old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries the disk implies: one per task that has or had a worktree."""
    from bar.base.clock import seconds_of
    from bar.model.tasks import list_tasks

    before = {e["task_id"]: e for e in old}
    remembered = _from_events(project) if not old else {}
    entries: list[dict[str, Any]] = []
    for task in list_tasks(project):
        # a pending task has no worktree: a directory there is a stopped start's leftover;
        # nor has a task on workers, here
        unbound = task.board.status == "pending" or task.on_workers
        present = task.worktree.is_dir() and not unbound
        prior = before.get(task.id) or remembered.get(task.id, {})
        # (a closed task that neither has a worktree nor is remembered with one never
        # had one here: planned and closed, or sent to workers and closed)
        if not present and (task.read_only or unbound or not task.active) and not prior:
            continue  # never had one (here: a fetched copy has none)
        if present:
            keep = not task.active or prior.get("status") == KEPT
            status = KEPT if keep else ACTIVE
        else:
            status = REMOVED
        try:
            created = float(prior.get("created_at") or seconds_of(task.created_at))
        except (TypeError, ValueError):
            created = 0.0
        entry: dict[str, Any] = {
            "name": task.board.worktree or prior.get("name") or task.name,
            "path": str(task.worktree),
            "branch": task.branch,
            "task_id": task.id,
            "status": status,
            "created_at": created,
        }
        for key in ("kept_at", "removed_at"):
            if isinstance(prior.get(key), (int, float)):
                entry[key] = prior[key]
        if status == REMOVED and "removed_at" not in entry and task.closed_at:
            try:
                entry["removed_at"] = seconds_of(task.closed_at)
            except ValueError:
                pass
        entries.append(entry)
    lanes = [e for e in old if not e["task_id"]] if old else _lanes_from_events(project)
    for prior in lanes:  # worktrees no task is bound to (``bar worktree create``)
        lane = dict(prior)
        if not Path(lane["path"]).is_dir() and lane["status"] != REMOVED:
            lane["status"] = REMOVED
            lane["removed_at"] = round(time.time(), 3)
        entries.append(lane)
    return entries


def _from_events(project: Project) -> dict[str, dict[str, Any]]:
    """What the event log says of each task's worktree, for a registry that was lost:
    its last status (``kept`` is known nowhere else for an open task) and when."""
    from bar.model import event_log as events

    found: dict[str, dict[str, Any]] = {}
    for rec in events.recent(project.paths.events, None):
        task = rec.get("task")
        ts = rec.get("ts")
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            continue
        if not isinstance(ts, (int, float)):
            continue
        entry = found.setdefault(task["id"], {})
        kind = rec.get("event")
        if kind == "worktree.create.after":
            entry.clear()
            entry.update(status=ACTIVE, created_at=ts)
        elif kind == "worktree.keep":
            entry.update(status=KEPT, kept_at=ts)
        elif kind == "worktree.remove.after":
            entry.update(status=REMOVED, removed_at=ts)
    return found


def _lanes_from_events(project: Project) -> list[dict[str, Any]]:
    """The worktrees made with no task, as the event log tells them, for a registry
    that was lost: made (``worktree.create.after`` with no task), removed, or taken by a
    task (``task.bound``)."""
    from bar.model import event_log as events

    found: dict[str, dict[str, Any]] = {}
    for rec in events.recent(project.paths.events, None):
        wt, ts = rec.get("worktree"), rec.get("ts")
        if not isinstance(wt, dict) or not isinstance(wt.get("name"), str):
            continue
        name = wt["name"]
        if rec.get("event") == "task.bound":
            found.pop(name, None)
        elif rec.get("task") or not isinstance(ts, (int, float)):
            continue
        elif rec.get("event") == "worktree.create.after" and all(
            isinstance(wt.get(k), str) for k in ("path", "branch")
        ):
            found[name] = {
                "name": name,
                "path": wt["path"],
                "branch": wt["branch"],
                "task_id": "",
                "status": ACTIVE,
                "created_at": ts,
            }
        elif rec.get("event") == "worktree.remove.after" and name in found:
            found[name].update(status=REMOVED, removed_at=ts)
    return list(found.values())
