"""The board where reference 002 keeps it: ``.tasks/`` and ``.worktrees/`` in the repository.

With ``board.layout: seed`` in the project's config.yaml, bar keeps, beside its own
files, the task board in the layout and with the keys and meanings of the worktree +
task-board design it follows, so a client written for that design (and its crash
recovery, which rebuilds everything from these files) reads bar's board unchanged::

    <repo>/.tasks/task_1.json        {"id": 1, "subject": "auth-refactor", "description": "…",
                                      "status": "in_progress", "owner": "agent-a",
                                      "worktree": "auth-refactor", "blockedBy": [],
                                      "created_at": 1764000000.0, "updated_at": 1764000100.0,
                                      "bar": {"id": "Xw3k9Qa2", "branch": "bar/…", "state": "active"}}
    <repo>/.worktrees/index.json     {"version": 1, "worktrees": [{"name", "path", "branch",
                                      "task_id": 1, "status", "created_at", "kept_at", …}]}
    <repo>/.worktrees/events.jsonl   {"version": 1, "event": "worktree.create.after", "ts": …,
                                      "task": {"id": 1, "status": …}, "worktree": {…}}

Task ids there are the design's numbers (1, 2, …), given in the order tasks are made and
never given again; bar's own id is under ``bar`` (``bar_id`` in an event), and every bar
command takes the number as a task reference. ``status`` is the board's (pending /
in_progress / completed), not task.json's active / closed.

bar writes these files, under the project lock, after each change of the board (every
change logs an event), and only these: a file there that bar did not write is never
touched. They are bookkeeping, not the project's files: they live in the developer's
checkout, never in a task's worktree, so no step and no hand edit records them. A copy
that fell behind (a crash between bar's own file and this one) is said by ``bar doctor``
and written again by ``--repair``, and by the next change of the board.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.base.notices import warn
from bar.errors import BarError, CorruptFile
from bar.model import event_log as task_events
from bar.model.seed_numbers import highest as _load_highest
from bar.model.seed_numbers import load as _load_numbers
from bar.model.seed_numbers import path_of as _numbers_path
from bar.store.files import read_regular, write_bytes_atomic, write_json_atomic

if TYPE_CHECKING:
    from bar.model.project import Project
    from bar.model.tasks import Task

SEED = "seed"
TASKS_DIR = ".tasks"
WORKTREES_DIR = ".worktrees"
VERSION = 1
_MODE = 0o644  # like the checkout's own files: the developer's tools read them


def enabled(project: Project) -> bool:
    """The project keeps the seed's layout too (``board.layout: seed``)."""
    return project.config.board.layout == SEED


def publish(project: Project, event: dict[str, Any] | None = None) -> None:
    """Write the seed's copy of the board as bar's files say it is now, and append
    ``event`` (as written to bar's log) to its event log. The caller holds the project
    lock. Whatever stands in the way (a link, a FIFO, a directory) is said, never
    written through, and never fails the change of the board it follows."""
    if not enabled(project):
        return
    try:
        wt_dir, numbers = _write_copy(project)
        if event is not None:
            _append(wt_dir / "events.jsonl", [_event(event, numbers)])
    except (BarError, OSError, ValueError) as exc:
        warn(f"the board's copy in {project.root} (board.layout: seed) was not written: {exc}")


def refresh(project: Project) -> None:
    """``publish`` after a change that logs its last event before it is done (a task
    deleted, a worktree removed): the copy as bar's files say it is now."""
    if enabled(project):
        with project.lock("the board's copy"):
            publish(project)


def differences(project: Project) -> list[str]:
    """How the seed's copy differs from bar's board, one sentence each (none: it is right,
    or the layout is bar's own)."""
    if not enabled(project):
        return []
    said: list[str] = []
    try:
        numbers = _load_numbers(project)
        from bar.model.tasks import list_tasks

        for task in list_tasks(project):
            n = numbers.get(task.id)
            if n is None:
                said.append(f"task {task.name} ({task.id}) has no number in the board's copy")
                continue
            path = project.root / TASKS_DIR / f"task_{n}.json"
            if _read(path) != _task_record(task, n):
                said.append(f"{path} is missing or says other than task {task.name} ({task.id})")
        index = project.root / WORKTREES_DIR / "index.json"
        if _read(index) != _index(project, numbers):
            said.append(f"{index} is missing or says other than the worktree registry")
        missing = _missing_events(project, numbers)
        if missing:
            said.append(
                f"{len(missing)} event(s) of bar's log are missing from "
                f"{project.root / WORKTREES_DIR / 'events.jsonl'}"
            )
    except (BarError, OSError, ValueError) as exc:
        said.append(str(exc))
    return said


def repair(project: Project) -> None:
    """Write the copy again and append the events its log lacks, in order (the caller
    holds the project lock). Lines another program wrote there stay."""
    if not enabled(project):
        return
    wt_dir, numbers = _write_copy(project)
    missing = _missing_events(project, numbers)
    if missing:
        _append(wt_dir / "events.jsonl", missing)


def _missing_events(project: Project, numbers: dict[str, int]) -> list[dict[str, Any]]:
    """bar's events, in the copy's shape, that the copy's log does not hold (an event is
    known by its name, time and task), from the first it holds on (the copy began then:
    the layout was switched on later than the project began); all of them when it holds
    none."""
    raw = read_regular(project.root / WORKTREES_DIR / "events.jsonl") or b""
    have = set()
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            have.add(_event_key(rec))
    wanted = [
        _event(rec, numbers)
        for rec in task_events.recent(project.paths.events, None)
        if rec.get("event") != task_events.PARSE_ERROR
    ]
    began = next((i for i, rec in enumerate(wanted) if _event_key(rec) in have), 0)
    return [rec for rec in wanted[began:] if _event_key(rec) not in have]


def _event_key(rec: dict[str, Any]) -> tuple[str, str, str]:
    task = rec.get("task") if isinstance(rec.get("task"), dict) else {}
    return (str(rec.get("event")), repr(rec.get("ts")), str((task or {}).get("bar_id")))


# --- the files -----------------------------------------------------------------------


def _dirs(project: Project) -> tuple[Path, Path]:
    dirs = _real_dir(project.root / TASKS_DIR), _real_dir(project.root / WORKTREES_DIR)
    # files the repository tracks there are the project's (a commit, an agent's applied
    # work): never bar's to write over
    from bar import git

    tracked = git.git(
        project.root, "ls-files", "-z", "--", TASKS_DIR, WORKTREES_DIR, check=False
    ).out.strip("\0")
    if tracked:
        raise BarError(
            f"the repository tracks files in {TASKS_DIR}/ or {WORKTREES_DIR}/ "
            f"({tracked.split(chr(0))[0]}, …): they are the project's, bar writes no copy there",
            hint="remove them from the repository, or set board.layout: bar",
        )
    return dirs


def _real_dir(path: Path) -> Path:
    """``path`` as a directory of its own: made if missing; a link or a file there is an
    error (bar writes nothing through it)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            path.mkdir(mode=0o755)
        except OSError as exc:
            raise BarError(f"cannot create {path}: {exc.strerror}") from None
        return path
    if not stat.S_ISDIR(st.st_mode):
        raise BarError(
            f"{path} is not a directory (a link or a file): bar writes nothing through it",
            hint=f"move {path} away, then `bar doctor --repair`",
        )
    if st.st_uid != os.getuid():
        raise BarError(f"{path} belongs to another user: bar writes nothing there")
    return path


def _write_copy(project: Project) -> tuple[Path, dict[str, int]]:
    """The task files and the index written as bar's files say (the tasks read once);
    the ``.worktrees`` directory and the numbers."""
    from bar.model.tasks import list_tasks

    tasks_dir, wt_dir = _dirs(project)
    tasks = list_tasks(project)
    numbers = _numbers(project, tasks)
    _write_tasks(tasks, tasks_dir, numbers)
    _write_if_changed(wt_dir / "index.json", _index(project, numbers))
    return wt_dir, numbers


def _write_tasks(tasks: list[Task], folder: Path, numbers: dict[str, int]) -> None:
    known = set()
    for task in tasks:
        n = numbers[task.id]
        known.add(n)
        _write_if_changed(folder / f"task_{n}.json", _task_record(task, n))
    # a deleted task's file goes, if bar wrote it; nothing else there is touched
    for task_id, n in numbers.items():
        path = folder / f"task_{n}.json"
        if n in known or not os.path.lexists(path):
            continue
        rec = _read(path)
        if _bar_id(rec) == task_id:
            path.unlink()


def _bar_id(rec: Any) -> str | None:
    """bar's id in a task file of the copy (None: a file bar did not write)."""
    own = rec.get("bar") if isinstance(rec, dict) else None
    found = own.get("id") if isinstance(own, dict) else None
    return found if isinstance(found, str) else None


def _read(path: Path) -> Any:
    """The JSON in the regular file ``path`` (None: missing, not JSON, or not a regular
    file: a link, a FIFO, a directory are never opened through)."""
    data = read_regular(path)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _write_if_changed(path: Path, record: dict[str, Any]) -> None:
    """Replace ``path`` with ``record`` unless it already says so; a link, a FIFO or a
    directory there (not bar's) is said and left as it is."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        warn(f"{path} is not a regular file: left as it is (the board's copy skips it)")
        return
    if _read(path) == record:
        return
    text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"), mode=_MODE)


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    """Append ``records`` to the log at ``path``, one line each, in one write: never
    through a link, into a file with another name (a hard link), a FIFO or another
    user's file; a torn last line stays a line of its own."""
    data = "".join(
        json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n" for rec in records
    ).encode("utf-8", "backslashreplace")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, _MODE)
    except OSError as exc:
        raise BarError(f"cannot append to {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid():
            raise BarError(f"{path} is not a file of its own: bar writes nothing into it")
        if st.st_size:
            last = read_regular(path, tail=1)
            if last not in (None, b"\n"):
                data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _task_record(task: Task, number: int) -> dict[str, Any]:
    """The task as the seed's task board writes it, bar's own keys under ``bar``."""
    from bar.base.clock import seconds_of

    description = task.metadata.get("description")
    try:
        created = seconds_of(task.created_at)
    except ValueError:
        created = 0.0
    try:
        updated = seconds_of(task.updated_at)
    except ValueError:
        updated = created
    return {
        "id": number,
        "subject": task.name,
        "description": description if isinstance(description, str) else "",
        "status": task.board.status,
        "owner": task.board.owner,
        "worktree": task.board.worktree,
        "blockedBy": [],
        "created_at": created,
        "updated_at": updated,
        "bar": {"id": task.id, "branch": task.branch, "state": task.status},
    }


def _index(project: Project, numbers: dict[str, int]) -> dict[str, Any]:
    from bar.task import registry

    try:
        entries = registry.load(project)
    except CorruptFile:
        entries = []
    worktrees = []
    for entry in entries:
        seed = dict(entry)
        seed["task_id"] = numbers.get(entry["task_id"]) if entry["task_id"] else None
        seed["bar_task_id"] = entry["task_id"]
        worktrees.append(seed)
    # entries another program added (a client of the design making its own worktrees)
    # stay as they were, after bar's
    was = _read(project.root / WORKTREES_DIR / "index.json")
    if isinstance(was, dict) and isinstance(was.get("worktrees"), list):
        worktrees += [e for e in was["worktrees"] if isinstance(e, dict) and "bar_task_id" not in e]
    return {"version": VERSION, "worktrees": worktrees}


def _event(rec: dict[str, Any], numbers: dict[str, int]) -> dict[str, Any]:
    """An event of bar's log as the seed's event log writes it: the task by its number
    (bar's id beside it as ``bar_id``)."""
    seed: dict[str, Any] = {k: v for k, v in rec.items() if k not in ("task", "worktree")}
    seed["version"] = VERSION
    task = dict(rec.get("task") or {})
    bar_id = task.get("id")
    if isinstance(bar_id, str):
        task["bar_id"] = bar_id
        task["id"] = numbers.get(bar_id)
        if task.get("name") and "subject" not in task:
            task["subject"] = task["name"]
    seed["task"] = task
    seed["worktree"] = dict(rec.get("worktree") or {})
    return seed


# --- numbers -------------------------------------------------------------------------


def _numbers(project: Project, tasks: list[Task]) -> dict[str, int]:
    """Every task's number, a new task given the next one (in the order tasks were made;
    a number is never given twice, a deleted task's included: the highest given is kept,
    and, were that lost, the copy's files and event log say which were). The caller
    holds the project lock."""
    try:
        numbers = _load_numbers(project)
        highest = _load_highest(project)
    except CorruptFile:
        numbers, highest = {}, 0
    changed = False
    highest = max(highest, *numbers.values(), 0)
    ids = {task.id for task in tasks}
    folder = project.root / TASKS_DIR
    if folder.is_dir() and not folder.is_symlink():
        for path in folder.glob("task_*.json"):
            stem = path.stem.partition("_")[2]
            if not (stem.isascii() and stem.isdigit()):
                continue
            rec = _read(path)
            bar_id = _bar_id(rec)
            if bar_id in ids and bar_id not in numbers:
                numbers[bar_id] = int(stem)  # bar wrote it: the same task keeps it
                changed = True
            highest = max(highest, int(stem))
    if not numbers:  # nothing known: what the copy's log names is not given again
        log = read_regular(project.root / WORKTREES_DIR / "events.jsonl") or b""
        for n in re.findall(rb'"task":\{"id":(\d{1,12})[,}]', log):
            highest = max(highest, int(n))
    for task in tasks:
        if task.id not in numbers:
            highest += 1
            numbers[task.id] = highest
            changed = True
    if changed or not _numbers_path(project).exists():
        write_json_atomic(
            _numbers_path(project), {"version": VERSION, "numbers": numbers, "highest": highest}
        )
    return numbers


task_events.after_logged.append(publish)  # every change of the board logs an event
