"""Tasks: a named piece of work with its own branch, worktree, ledger and snapshot chain.

``task.json`` holds the design's fields exactly (docs/storage.md), and is the last thing
``bar task new`` writes (``bar.task.new``): a task directory without it is a task bar did
not finish creating, which no listing or lookup returns.
"""

from __future__ import annotations

import unicodedata
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base import speed
from bar.base.clock import now_iso
from bar.base.migrate import upgrade
from bar.base.notices import warn
from bar.base.record import field, record
from bar.errors import BarError, CorruptFile, NotFound, TaskNotFound, UsageError
from bar.model.board import COMPLETED, IN_PROGRESS, PENDING, Board
from bar.model.board import parse as parse_board
from bar.model.ledger_file import Ledger
from bar.model.project import Project
from bar.store.files import read_json, write_json_atomic
from bar.store.layout import TASK_ID_RE, TaskPaths

if TYPE_CHECKING:
    from bar.model.records import ApplyStep

NAME_MAX = 64
_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


def validate_name(name: str) -> str:
    """Return ``name`` if it can name a task (and a branch); else say what is wrong."""
    problem = None
    if not name:
        problem = "it is empty"
    elif len(name) > NAME_MAX:
        problem = f"it is {len(name)} characters long (at most {NAME_MAX})"
    elif "/" in name or "\\" in name:
        problem = "it contains a slash"
    elif ".." in name:
        problem = "it contains '..'"
    elif any(ch.isspace() for ch in name):
        problem = "it contains whitespace"
    elif any(unicodedata.category(ch).startswith("C") for ch in name):
        problem = "it contains a control character"
    elif name.startswith(("-", ".")):
        problem = f"it starts with {name[0]!r}"
    elif name.endswith((".", ".lock")):
        problem = "it ends with '.' or '.lock'"
    elif any(ch in name for ch in "~^:?*[@{}"):
        bad = next(ch for ch in name if ch in "~^:?*[@{}")
        problem = f"it contains {bad!r}, which git does not allow in branch names"
    if problem:
        raise UsageError(
            f"invalid task name {name!r}: {problem}",
            hint="use letters, digits, '-', '_' and '.', e.g. fix-login-bug",
        )
    return name


def new_id(size: int = 8) -> str:
    """An 8-character nanoid. Never starts with ``-`` so it can't be mistaken for a flag."""
    import secrets  # only a new task needs it

    while True:
        value = "".join(secrets.choice(_ID_ALPHABET) for _ in range(size))
        if not value.startswith("-"):
            return value


@record
class Task:
    id: str
    name: str
    repo_root: str
    base_ref: str
    base_commit: str
    branch: str
    workspace_path: str
    status: str
    created_at: str
    updated_at: str
    closed_at: str | None
    metadata: dict[str, Any]
    snapshot_ref: str
    project: Project = field(repr=False, compare=False)
    # ext: where the task stands on the board (``bar.model.board``)
    board: Board = field(default_factory=lambda: Board(IN_PROGRESS))
    # ext: the base the task started from, set once its base first moves (``bar.history.bases``)
    first_base: str | None = None
    # ext: a copy of another machine's task, fetched from a remote (``bar.share.fetch``):
    # {remote, url, history, fetched_at}; read-only here until adopted
    origin: dict[str, Any] | None = None
    # ext: where an adopted task came from ({remote, history, adopted_at})
    adopted: dict[str, Any] | None = None
    # where the record is read from when it is not the project's ``tasks/<id>``: a
    # fetched history read in place (``bar.share.view``); never in task.json
    record_dir: Path | None = field(default=None, repr=False, compare=False)
    # ext: a planned task that started from where its base ref had moved since it was
    # planned ({from, to, at, by}: ``bar.task.start``); the record travels with its history
    base_moved: dict[str, str] | None = None

    @cached_property
    def paths(self) -> TaskPaths:
        if self.record_dir is not None:
            return TaskPaths(self.record_dir)
        return self.project.paths.task(self.id)

    @property
    def dir(self) -> Path:
        return self.paths.dir

    @property
    def worktree(self) -> Path:
        return self.project.dir / self.workspace_path

    @property
    def index(self) -> Path:
        return self.paths.index

    @cached_property
    def ledger(self) -> Ledger:
        # one Ledger per loaded task, so that a bad line is reported once per command
        return Ledger(self.paths.ledger)

    @property
    def active(self) -> bool:
        return self.status == "active"

    @property
    def pending(self) -> bool:
        """Planned and not started: the task has no worktree yet (``bar task start``)."""
        return self.active and self.board.status == PENDING

    @property
    def on_workers(self) -> bool:
        """Its steps run on workers (docs/workers.md: sent from this machine, ``bar.workers``):
        it has no worktree here, whatever its board says; its worktree is on the machine
        that runs its next step."""
        return self.project.paths.placement(self.id).is_file()

    @property
    def read_only(self) -> bool:
        """A copy fetched from another machine: it is read there, never changed here."""
        return self.origin is not None

    def require_own(self) -> None:
        if self.origin is not None:
            raise BarError(
                f"task {self.name} ({self.id}) is a read-only copy fetched from "
                f"{self.origin.get('remote', 'a remote')}: its work goes on on another machine",
                hint=f"`bar task adopt {self.id}` continues it here (its history then "
                "goes on from this machine)",
            )

    def to_record(self) -> dict[str, Any]:
        return {
            "version": 1,  # the seed's: bar's keys are additions (docs/storage.md)
            "id": self.id,
            "name": self.name,
            "repo_root": self.repo_root,
            "base_ref": self.base_ref,
            "base_commit": self.base_commit,
            "branch": self.branch,
            "workspace_path": self.workspace_path,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "closed_at": self.closed_at,
            "metadata": self.metadata,
            "snapshot_ref": self.snapshot_ref,
            "board": self.board.to_record(),
            **({"first_base": self.first_base} if self.first_base else {}),
            **({"origin": self.origin} if self.origin is not None else {}),
            **({"adopted": self.adopted} if self.adopted is not None else {}),
            **({"base_moved": self.base_moved} if self.base_moved is not None else {}),
        }

    def save(self) -> None:
        self.require_own()
        self.updated_at = now_iso()
        write_json_atomic(self.paths.task_json, self.to_record())

    def ledger_steps(self) -> int:
        """How many steps the ledger holds (step ids count from 0001)."""
        last = self.ledger.last()
        return int(last.step_id) if last is not None else 0

    def recorded_snapshot(self) -> str:
        """The last state the ledger knows of (the base commit before any step)."""
        return self.ledger.last_snapshot() or self.base_commit

    @property
    def git_cwd(self) -> Path:
        """Where bar runs git for this task: its worktree, or the repository once the
        worktree was removed (a closed task's record is all in the shared object store)."""
        return self.worktree if self.worktree.is_dir() else self.project.root

    def require_worktree(self) -> None:
        """A command that changes the task needs it its own, open, with its worktree."""
        self.require_own()
        if not self.active:
            raise BarError(
                f"task {self.name} ({self.id}) is closed",
                hint=f"`bar task reopen {self.id}` makes it active again, or start a new "
                "task with `bar task new NAME`",
            )
        if self.pending:
            raise BarError(
                f"task {self.name} ({self.id}) is planned and has no worktree yet",
                hint=f"`bar task start {self.id}` makes its worktree (so does its first "
                f"`bar run --task {self.id}`)",
            )
        if self.on_workers:
            raise BarError(
                f"task {self.name} ({self.id}) runs on workers: its worktree is on whichever "
                "machine runs its next step",
                hint=f"`bar run --on QUEUE -- CMD` sends it a step; `bar task adopt {self.id}` "
                "brings it back to run here",
            )
        if not self.worktree.is_dir() and self.paths.removal_journal.exists():
            raise BarError(
                f"the worktree of task {self.name} was being removed when bar stopped",
                hint="`bar task close` finishes the close (`bar worktree remove` a removal; "
                "`bar doctor --repair` either); what no recorded state holds goes to "
                "`bar trash`",
            )
        if not self.worktree.is_dir():
            raise NotFound(
                f"the worktree of task {self.name} is missing: {self.worktree}",
                hint="run `bar doctor` to check the task",
            )


def still_landed(task: Task, step: ApplyStep) -> bool:
    """The commit ``step`` made is still on its target branch (nobody reset it away)."""
    if not git.is_object_id(step.commit_sha):
        return False
    return git.is_ancestor(task.project.root, step.commit_sha, f"refs/heads/{step.target_branch}")


def _require_str(rec: dict[str, Any], key: str, path: Path) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value:
        raise CorruptFile(f"task.json at {path} has no valid {key!r}")
    return value


def _is_branch_name(name: str) -> bool:
    """A cheap form of `git check-ref-format --branch`: enough that a branch read back
    from task.json can never be taken by git as an option or a revision expression."""
    return not (
        name.startswith(("-", "/", "."))
        or name.endswith(("/", ".", ".lock"))
        or ".." in name
        or "//" in name
        or "@{" in name
        or any(ch in name for ch in " ~^:?*[\\")
        or any(unicodedata.category(ch).startswith("C") for ch in name)
    )


def _base_moved_of(value: object, path: Path) -> dict[str, str] | None:
    """``base_moved``: its commits are commits (they are shown, and given to git)."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not all(isinstance(value.get(k), str) for k in ("from", "to", "at", "by"))
        or not git.is_object_id(value["from"])
        or not git.is_object_id(value["to"])
    ):
        raise CorruptFile(f"task.json at {path} has an invalid base_moved {value!r}")
    return {k: str(value[k]) for k in ("from", "to", "at", "by")}


def _board_of(rec: dict[str, Any], path: Path) -> Board:
    """The task's ``board``; for a task.json written before the board, the one its
    status implies: an open task was started with its worktree (``in_progress``), a
    closed one is ``completed`` (bound again to a kept worktree by ``load_task``)."""
    if isinstance(rec.get("board"), dict):
        return parse_board(rec["board"], path)
    if rec.get("status") == "closed":
        return Board(COMPLETED)
    name = rec.get("name")
    return Board(IN_PROGRESS, worktree=name if isinstance(name, str) else "")


def load_task(project: Project, task_id: str, *, record_dir: Path | None = None) -> Task:
    """The task ``task_id`` of the project; ``record_dir``: its record read from there
    instead of ``tasks/<id>`` (a fetched history read in place, ``bar.share.view``)."""
    if not TASK_ID_RE.match(task_id):
        raise TaskNotFound(f"no task with id {task_id!r}")
    paths = TaskPaths(record_dir) if record_dir is not None else project.paths.task(task_id)
    path = paths.task_json
    for own in (paths.dir, path):  # bar's own files are never links; one may point anywhere
        if own.is_symlink():
            raise CorruptFile(
                f"{own} is a symbolic link; bar does not follow links in its own files",
                hint="run `bar doctor` to check the project",
            )
    try:
        rec = read_json(path, "task.json")
    except FileNotFoundError:
        if (paths.dir / "creating.json").exists():
            raise TaskNotFound(
                f"task {task_id} was never finished: bar stopped while creating it",
                hint="`bar doctor --repair` or the next `bar task new` clears it",
            ) from None
        if paths.dir.is_dir():
            raise CorruptFile(
                f"task.json at {path} is missing", hint="run `bar doctor` to check the project"
            ) from None
        raise TaskNotFound(
            f"no task with id {task_id!r}", hint="`bar task list` shows the tasks"
        ) from None
    rec = upgrade("task", rec, path)
    # ``board`` is bar's (docs/board.md); a task.json written before it has none
    unbound = not isinstance(rec.get("board"), dict)
    status = _require_str(rec, "status", path)
    if status not in ("active", "closed"):
        raise CorruptFile(f"task.json at {path} has unknown status {status!r}")
    workspace = _require_str(rec, "workspace_path", path)
    if workspace != f"workspaces/{task_id}":
        raise CorruptFile(
            f"task.json at {path} has workspace_path {workspace!r}; expected 'workspaces/{task_id}'"
        )
    if rec.get("id") != task_id:
        raise CorruptFile(f"task.json at {path} names id {rec.get('id')!r}, not {task_id!r}")
    # these reach git's command line: a tampered value must not become an option
    base_commit = _require_str(rec, "base_commit", path)
    if not git.is_object_id(base_commit):
        raise CorruptFile(f"task.json at {path} has an invalid base_commit {base_commit!r}")
    branch = _require_str(rec, "branch", path)
    if not _is_branch_name(branch):
        raise CorruptFile(f"task.json at {path} has an invalid branch {branch!r}")
    snapshot_ref = rec.get("snapshot_ref") or f"refs/bar/tasks/{task_id}"
    if snapshot_ref != f"refs/bar/tasks/{task_id}":
        raise CorruptFile(
            f"task.json at {path} has snapshot_ref {snapshot_ref!r}; "
            f"expected 'refs/bar/tasks/{task_id}'"
        )
    first_base = rec.get("first_base")
    if first_base is not None and not git.is_object_id(first_base):
        raise CorruptFile(f"task.json at {path} has an invalid first_base {first_base!r}")
    repo_root = _require_str(rec, "repo_root", path)
    if not Path(repo_root).is_absolute():
        raise CorruptFile(f"task.json at {path} has a relative repo_root {repo_root!r}")
    metadata = rec.get("metadata")
    closed_at = rec.get("closed_at")
    origin, adopted = rec.get("origin"), rec.get("adopted")
    for name, value in (("origin", origin), ("adopted", adopted)):
        if value is not None and not isinstance(value, dict):
            raise CorruptFile(f"task.json at {path} has an invalid {name} {value!r}")
    base_moved = _base_moved_of(rec.get("base_moved"), path)
    task = Task(
        id=task_id,
        name=_require_str(rec, "name", path),
        repo_root=repo_root,
        base_ref=_require_str(rec, "base_ref", path),
        base_commit=base_commit,
        branch=branch,
        workspace_path=workspace,
        status=status,
        created_at=_require_str(rec, "created_at", path),
        updated_at=_require_str(rec, "updated_at", path),
        closed_at=closed_at if isinstance(closed_at, str) else None,
        metadata=metadata if isinstance(metadata, dict) else {},
        snapshot_ref=snapshot_ref,
        project=project,
        board=_board_of(rec, path),
        first_base=first_base,
        origin=origin,
        adopted=adopted,
        record_dir=record_dir,
        base_moved=base_moved,
    )
    if unbound and status == "closed" and task.worktree.is_dir():
        task.board.worktree = task.name  # closed with its worktree kept
    # status and board.status are written together; read them so, whatever edited the file
    if status == "closed":
        task.board.status = COMPLETED
    elif task.board.status == COMPLETED:
        task.board.status = IN_PROGRESS
    if origin is None and not task.pending and (status == "active" or task.worktree.is_dir()):
        pin(task)  # (a closed task's kept worktree too; a planned task has none yet)
    _configure_speed(project)
    return task


def _configure_speed(project: Project) -> None:
    """Tell the speed layer whether this project wants it (``speed.fast``); a config
    that cannot be read leaves it as it was: the command that reads it says why."""
    try:
        speed.configure(project.config.speed.fast)
    except BarError:
        pass


def admin_dir(common: Path, worktree: Path) -> Path | None:
    """The worktree's own admin directory in the repository (``<git dir>/worktrees/<name>``).

    git names it after the worktree's directory (with a number added only if that name
    was taken); a step can write the files in it but cannot rename or make directories
    beside it, so the name decides. Only when it is missing are the others' ``gitdir``
    files asked which one names the worktree."""
    folder = common / "worktrees"
    first = folder / worktree.name
    if first.is_dir() and not first.is_symlink():
        return first
    expected = str(worktree / ".git").encode()
    try:
        candidates = sorted(folder.iterdir())
    except OSError:
        return None
    for cand in candidates:
        try:
            said = (cand / "gitdir").read_bytes().strip()
        except OSError:
            continue
        if said == expected and not cand.is_symlink():
            return cand
    return None


def pin(task: Task) -> None:
    """bar's git in the worktree uses the git directories bar found, not those named by
    files a step can write (``git.pin``): done as a task is loaded, and as its worktree
    is made."""
    common = task.project.common_dir
    admin = admin_dir(common, task.worktree)
    if admin is not None:
        git.pin(task.worktree, admin, common)
    git.pin_own(task.dir, task.paths.git_dir, common, task.worktree)


def list_tasks(project: Project) -> list[Task]:
    tasks: list[Task] = []
    if not project.paths.tasks.is_dir():
        return tasks
    for entry in sorted(project.paths.tasks.iterdir()):
        if entry.is_dir() and TASK_ID_RE.match(entry.name) and (entry / "task.json").exists():
            try:
                tasks.append(load_task(project, entry.name))
            except BarError as exc:
                warn(str(exc))
    tasks.sort(key=lambda t: (t.created_at, t.id))
    return tasks


ID_PREFIX_MIN = 4  # like git's shortest abbreviation of an object id


def resolve_task(
    project: Project, ref: str | None, *, from_cwd: str | None = None, closed: bool = False
) -> Task:
    """The task named by ``ref``, else the one whose worktree we are in, else the active
    task. ``ref`` is tried as a whole id, then as a name (an open task before closed
    ones; ``closed``: a closed one before open ones), then as the start of an id (at
    least ``ID_PREFIX_MIN`` characters). A name that also starts another task's id is
    refused as ambiguous (``UsageError``)."""
    if ref is not None:
        if not ref:
            raise UsageError("an empty task name was given", hint="give a task id or name")
        if TASK_ID_RE.match(ref) and project.paths.task(ref).dir.is_dir():
            return load_task(project, ref)
        numbered = _by_number(project, ref)
        if numbered is not None:
            return numbered
        return _by_name_or_prefix(project, ref, closed=closed)
    if from_cwd:
        return load_task(project, from_cwd)
    active_id = project.active_task_id()
    if not active_id:
        raise TaskNotFound(
            "there is no active task",
            hint="create one with `bar task new NAME` or pick one with `bar task switch`",
        )
    return load_task(project, active_id)


def _by_number(project: Project, ref: str) -> Task | None:
    """The task the board's copy in the seed's layout numbers ``ref`` (``#3`` or ``3``),
    when the project keeps that layout (``bar.task.seed_board``)."""
    digits = ref.removeprefix("#")
    if not (digits.isascii() and digits.isdigit()) or project.config.board.layout != "seed":
        return None
    from bar.model import seed_numbers

    found = seed_numbers.task_id_of(project, int(digits))
    if found is not None and not project.paths.task(found).task_json.exists():
        found = None  # the task numbered so was deleted
    if found is None:
        if ref.startswith("#"):
            raise TaskNotFound(
                f"no task is numbered {ref}",
                hint=f"the numbers are the task files' in {project.root / '.tasks'}",
            )
        return None
    numbered = load_task(project, found)
    if not ref.startswith("#"):
        named = [t for t in list_tasks(project) if t.name == ref and t.id != found]
        if named:
            raise UsageError(
                f"{ref!r} is the number of task {numbered.name} ({numbered.id}) and the name "
                f"of {_listed(named)}",
                hint=f"give #{digits} for the numbered one, or the task's id",
            )
    return numbered


def _listed(found: list[Task]) -> str:
    return ", ".join(f"{t.id} ({t.name}, {t.status})" for t in found)


def _by_name_or_prefix(project: Project, ref: str, *, closed: bool = False) -> Task:
    every = list_tasks(project)
    named = [t for t in every if t.name == ref]
    if named and len(ref) >= ID_PREFIX_MIN:
        # `bar task list` shows ids: whoever typed the start of one may not know of a
        # task that happens to be named so, and must not get that one silently
        ids = {t.id for t in named}
        others = [t for t in every if t.id.startswith(ref) and t.id not in ids]
        if others:
            raise UsageError(
                f"{ref!r} names {_listed(named)} and starts the id of {_listed(others)}",
                hint="give the full id of the task you mean",
            )
    open_ = [t for t in named if t.active != closed]
    if len(open_) == 1:
        return open_[0]
    if len(named) == 1:
        return named[0]
    if named:
        which = "open tasks are" if bool(open_) != closed else "closed tasks are"
        raise UsageError(
            f"{len(open_ or named)} {which} named {ref!r}: {_listed(open_ or named)}",
            hint="give the task's id (or its first characters) instead of the name",
        )
    starting = [t for t in every if t.id.startswith(ref)]
    if len(starting) == 1 and len(ref) >= ID_PREFIX_MIN:
        return starting[0]
    if len(starting) > 1 and len(ref) >= ID_PREFIX_MIN:
        raise UsageError(
            f"{len(starting)} task ids start with {ref!r}: {_listed(starting)}",
            hint="give more characters of the id",
        )
    hint = "`bar task list --all` shows every task, closed ones too"
    if starting:
        hint = (
            f"an id is found by its first {ID_PREFIX_MIN} characters or more "
            f"({ref!r} starts {_listed(starting)}); " + hint
        )
    raise TaskNotFound(f"no task with id or name {ref!r}", hint=hint)


def open_task_named(project: Project, name: str) -> Task | None:
    """The open task called ``name``, if there is one."""
    return next((t for t in list_tasks(project) if t.active and t.name == name), None)
