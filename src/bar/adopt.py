"""A repository that moved: finding its tasks again, and re-attaching them.

A project directory is named after a hash of the repository's path (``bar.store.layout``),
so after ``mv repo repo2`` the repository maps to a new, empty directory and its tasks
seem gone. They are not: the repository still holds each task's snapshot ref
``refs/bar/tasks/<id>``, and the old project directory still holds ``tasks/<id>/``.
``find_moved`` matches the two, keeping only projects whose tasks' recorded ``repo_root``
no longer holds this repository (the path is gone, or holds a repository without those
refs: a copy made with ``cp -a`` leaves both places whole, and is not a move).

``adopt`` renames that directory to the new path's name (one ``rename``: the tasks,
ledgers, snapshots' side indexes and worktrees move together), then ``reattach`` writes
the new root into each task.json and runs ``git worktree repair`` so that the repository
and the worktrees name each other again. ``reattach`` finds its work by looking, not by
remembering: a bar stopped after the rename finishes on the next ``bar init --adopt``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bar import git
from bar.errors import AlreadyExists, BarError, Locked, NotFound, NotInitialized, UsageError
from bar.notices import warn
from bar.project import Project
from bar.record import field, record
from bar.store.files import read_json, write_json_atomic
from bar.store.layout import TASK_ID_RE, ProjectPaths, projects_dir
from bar.store.lock import FileLock, is_locked

_REFS = "refs/bar/tasks/"


@record(frozen=True)
class Moved:
    """A project directory that holds tasks of this repository, registered elsewhere."""

    dir: Path
    old_root: str  # where the repository was when its tasks were made
    task_ids: list[str]  # its tasks whose snapshot refs this repository holds
    tasks: int  # its tasks altogether

    @property
    def name(self) -> str:
        return self.dir.name

    def describe(self) -> str:
        many = f"{self.tasks} task" + ("" if self.tasks == 1 else "s")
        return f"project {self.name} ({many}) at {self.old_root}"


@record(frozen=True)
class Adopted:
    project: Project
    moved: Moved | None  # None: only finished an adoption a stopped bar left
    replaced_empty: bool  # an empty project registered here was replaced
    rewritten: list[str] = field(default_factory=list)  # task ids whose task.json changed
    repaired: list[Path] = field(default_factory=list)  # worktrees relinked


def task_refs(root: Path) -> list[str]:
    """The ids of the tasks whose snapshot refs the repository at ``root`` holds."""
    res = git.git(root, "for-each-ref", "--format=%(refname)", _REFS, check=False)
    ids = (line.removeprefix(_REFS) for line in res.out.splitlines())
    return sorted(i for i in ids if TASK_ID_RE.match(i))


def find_moved(project: Project) -> list[Moved]:
    """Projects under $BAR_HOME that hold tasks of this repository made at a path it has
    left. Costs one ``for-each-ref`` and a look into each project directory."""
    ours = task_refs(project.root)
    home = projects_dir()
    if not ours or not home.is_dir():
        return []
    here = project.dir.resolve() if project.dir.exists() else project.dir
    found: list[Moved] = []
    for pdir in sorted(home.iterdir()):
        if pdir.is_symlink() or not pdir.is_dir() or pdir.resolve() == here:
            continue
        tasks = ProjectPaths(pdir).tasks
        matched = [i for i in ours if (tasks / i / "task.json").is_file()]
        roots = {r for r in (_recorded_root(tasks / i / "task.json") for i in matched) if r}
        if not roots or any(_still_holds(Path(r), project, matched) for r in roots):
            continue
        total = sum(1 for t in tasks.iterdir() if (t / "task.json").is_file())
        found.append(Moved(pdir, sorted(roots)[0], matched, total))
    return found


def _recorded_root(task_json: Path) -> str | None:
    try:
        root = read_json(task_json, "task.json").get("repo_root")
    except (BarError, OSError):
        return None
    return root if isinstance(root, str) and os.path.isabs(root) else None


def _still_holds(root: Path, project: Project, ids: list[str]) -> bool:
    """True when ``root`` is this very repository, or one that holds the tasks too."""
    if not root.is_dir():
        return False
    res = git.git(root, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    if res.returncode != 0:
        return False
    if Path(res.out.strip()).resolve() == project.common_dir.resolve():
        return True
    return bool(set(task_refs(root)) & set(ids))


def hint_for(moved: list[Moved]) -> str:
    """What to run to re-attach the tasks, said in one sentence."""
    if len(moved) == 1:
        return (
            f"this repository moved from {moved[0].old_root}; "
            "`bar init --adopt` re-attaches its tasks here"
        )
    names = ", ".join(m.name for m in moved)
    return f"tasks of this repository are in {names}; re-attach one with `bar init --adopt NAME`"


def refuse_if_moved(project: Project) -> list[Moved]:
    """What ``find_moved`` finds; an error if the repository is not registered here yet:
    ``bar init`` registers a moved repository only by adopting its tasks."""
    moved = find_moved(project)
    if moved and not project.initialized:
        raise NotInitialized(
            "this repository was registered with bar where it was before: "
            + "; ".join(m.describe() for m in moved)
            + "; bar init registered nothing",
            hint=hint_for(moved),
        )
    return moved


def not_registered(project: Project) -> NotInitialized:
    """The error of a repository bar does not know here, told how to adopt the tasks it
    left behind if it moved."""
    moved = find_moved(project)
    return NotInitialized(
        f"{project.root} is not registered with bar",
        hint=hint_for(moved) if moved else "run `bar init` in the repository first",
    )


def adopt(project: Project, which: str | None = None) -> Adopted:
    """Move the project directory of ``which`` (None: the only one found) to this
    repository's name and re-attach its tasks here."""
    candidates = find_moved(project)
    if which:
        chosen = [m for m in candidates if m.name == which]
        if not chosen:
            known = ", ".join(m.name for m in candidates) or "none"
            raise NotFound(f"no project named {which!r} holds tasks of this repository",
                           hint=f"the projects that do: {known}")  # fmt: skip
        candidates = chosen
    if len(candidates) > 1:
        raise UsageError(
            "more than one project holds tasks of this repository: "
            + "; ".join(m.describe() for m in candidates),
            hint="pick one: `bar init --adopt NAME`",
        )
    if not candidates:
        adopted = reattach(project, None, False)
        if adopted.rewritten or adopted.repaired:
            return adopted
        if project.initialized:
            raise NotFound(
                f"{project.root} is registered as project {project.name}, and no other "
                f"project under {projects_dir()} holds tasks it left behind: there is "
                "nothing to adopt",
                hint="`bar task list --all` lists its tasks; `bar init --adopt` is for a "
                "repository that was moved after its tasks were made",
            )
        raise NotFound(
            f"no project under {projects_dir()} holds tasks this repository left behind",
            hint="`bar init` registers it as a new project",
        )
    moved = candidates[0]
    replaced = _make_room(project)
    old = ProjectPaths(moved.dir)
    with FileLock(old.lock, f"project {moved.name}", what="bar init --adopt", wait=False):
        busy = [e.name for e in _task_dirs(old) if is_locked(old.task(e.name).lock)]
        if busy:
            raise Locked(
                f"tasks of {moved.name} are in use by another bar: {', '.join(busy)}",
                hint="wait for them to finish, then run `bar init --adopt` again",
            )
        if replaced:
            shutil.rmtree(project.dir)
        os.rename(moved.dir, project.dir)
    adopted = reattach(project, moved, replaced)
    project.log_event("project.adopted", root=str(project.root), old_root=moved.old_root,
                      old_dir=moved.name, tasks=moved.tasks)  # fmt: skip
    return adopted


def _task_dirs(paths: ProjectPaths) -> list[Path]:
    if not paths.tasks.is_dir():
        return []
    return [e for e in sorted(paths.tasks.iterdir()) if e.is_dir() and TASK_ID_RE.match(e.name)]


def _make_room(project: Project) -> bool:
    """True when an empty project was registered here (by ``bar init`` after the move):
    it is replaced. A project here with tasks of its own is not."""
    if not os.path.lexists(project.dir):
        return False
    own = _task_dirs(project.paths)
    if own or project.dir.is_symlink():
        raise AlreadyExists(
            f"{project.root} is registered as project {project.name} with "
            f"{len(own)} task(s) of its own; bar does not merge two projects",
            hint="close and apply the tasks of one of them, or keep working in both places",
        )
    return True


def reattach(project: Project, moved: Moved | None, replaced: bool) -> Adopted:
    """Point every task of the project at this repository: its task.json's ``repo_root``
    and git's links between the repository and its worktrees."""
    root = str(project.root)
    rewritten: list[str] = []
    for entry in _task_dirs(project.paths):
        path = project.paths.task(entry.name).task_json
        try:
            rec = read_json(path, "task.json")
        except FileNotFoundError:
            continue
        if rec.get("repo_root") == root:
            continue
        with FileLock(project.paths.task(entry.name).lock, f"task {entry.name}",
                      what="bar init --adopt", wait=False):  # fmt: skip
            write_json_atomic(path, {**rec, "repo_root": root})
        rewritten.append(entry.name)
    repaired = _repair_links(project)
    return Adopted(project, moved, replaced, rewritten, repaired)


def _repair_links(project: Project) -> list[Path]:
    """``git worktree repair`` for each worktree whose links do not meet."""
    repaired: list[Path] = []
    if not project.paths.workspaces.is_dir():
        return repaired
    for wt in sorted(project.paths.workspaces.iterdir()):
        if wt.is_symlink() or not wt.is_dir() or not TASK_ID_RE.match(wt.name):
            continue
        if _linked(project, wt):
            continue
        res = git.git(project.root, "worktree", "repair", "--", str(wt), check=False)
        if res.returncode != 0 or not _linked(project, wt):
            said = res.err.strip() or "git left it as it was"
            warn(f"could not relink the worktree {wt}: {said}; `bar doctor` checks it")
            continue
        repaired.append(wt)
    return repaired


def _linked(project: Project, wt: Path) -> bool:
    """The worktree's ``.git`` file names an admin directory of this repository, and that
    directory's ``gitdir`` names the worktree back."""
    try:
        said = (wt / ".git").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return False
    admin = Path(said.removeprefix("gitdir:").strip())
    if admin.parent.resolve() != (project.common_dir / "worktrees").resolve():
        return False
    try:
        back = (admin / "gitdir").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return False
    return back == str(wt / ".git")
