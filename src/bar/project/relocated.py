"""A repository that moved: finding its tasks again, and re-attaching them.

A project directory is named after a hash of the repository's path (``bar.store.layout``),
so after ``mv repo repo2`` the repository maps to a new, empty directory and its tasks
seem gone. They are not: the repository still holds each task's snapshot ref
``refs/bar/tasks/<id>``, and the old project directory still holds ``tasks/<id>/``.
``find_moved`` matches the two, keeping only projects whose tasks' recorded ``repo_root``
no longer holds this repository (the path is gone, or holds a repository without those
refs: a copy made with ``cp -a`` leaves both places whole, and is not a move).

Holding a task's ref is not enough: a copy made before the last steps holds the refs too,
at older states. ``missing_state`` asks the repository for what the ledgers last recorded
(each task's last snapshot under its ref, and the commits its newest step names); a
repository that lacks any of it is an older copy and never adopts (``Moved.behind``). The
same check lets the real repository take its tasks back from a holder that lacks them.

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
from bar.base.notices import plural, warn
from bar.base.record import field, record
from bar.errors import AlreadyExists, BarError, Locked, NotFound, NotInitialized, UsageError
from bar.model.journals import DELETE
from bar.model.ledger_file import Ledger
from bar.model.project import Project
from bar.model.records import Step
from bar.store.files import read_json, write_json_atomic, write_text_atomic
from bar.store.layout import TASK_ID_RE, ProjectPaths, TaskPaths, projects_dir
from bar.store.lock import FileLock, is_locked
from bar.task import registry

_REFS = "refs/bar/tasks/"


@record(frozen=True)
class Moved:
    """A project directory that holds tasks of this repository, registered elsewhere."""

    dir: Path
    old_root: str  # where the repository was when its tasks were made
    task_ids: list[str]  # its tasks whose snapshot refs this repository holds
    tasks: int  # its tasks altogether
    # what this repository has short of the tasks' recorded state, one phrase per task
    # ("no snapshot 1a2b3c4d5e (step 0004) of task fix (x1Yc0qPZ)"): empty when it is
    # up to date, else it is an older copy and adopts nothing
    behind: list[str] = field(default_factory=list)
    # its recorded root holds an older copy of this repository that adopted it by mistake
    reclaimed: bool = False

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
        holders = [_holder(Path(r), project, matched) for r in roots]
        if not roots or "this" in holders:
            continue
        behind = missing_state(project.root, pdir)
        copies = [Path(r) for r, h in zip(roots, holders, strict=True) if h == "copy"]
        # a copy made with cp -a leaves both places whole: neither is a move; but a
        # holder that lacks what this repository has is an older copy, and gives it back
        if copies and (behind or not all(missing_state(c, pdir) for c in copies)):
            continue
        total = sum(1 for t in tasks.iterdir() if (t / "task.json").is_file())
        found.append(Moved(pdir, sorted(roots)[0], matched, total, behind, bool(copies)))
    return found


def _recorded_root(task_json: Path) -> str | None:
    try:
        root = read_json(task_json, "task.json").get("repo_root")
    except (BarError, OSError):
        return None
    return root if isinstance(root, str) and os.path.isabs(root) else None


def _holder(root: Path, project: Project, ids: list[str]) -> str | None:
    """``"this"`` when ``root`` is this very repository, ``"copy"`` when it is another one
    that holds some of the tasks' refs too, None when it holds none of them."""
    if not root.is_dir():
        return None
    res = git.git(root, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    if res.returncode != 0:
        return None
    if Path(res.out.strip()).resolve() == project.common_dir.resolve():
        return "this"
    return "copy" if set(task_refs(root)) & set(ids) else None


# the commits a step names, and what each one is to a reader (the first role said wins)
_NAMED = (
    ("snapshot", "snapshot"),
    ("snapshot_before", "snapshot"),
    ("head", "branch commit"),
    ("commit_sha", "applied commit"),
    ("base_after", "base"),
    ("base_before", "base"),
)


def missing_state(root: Path, pdir: Path) -> list[str]:
    """What of the state the ledgers of project directory ``pdir`` last recorded the
    repository at ``root`` lacks, one phrase per task; empty when it lacks nothing.

    Per task: its base commit, the commits its newest step names (snapshots, the branch's
    HEAD, an applied commit) and, under ``refs/bar/tasks/<id>``, its last snapshot. Older
    steps need no look: whoever has the newest state had theirs when it was made. Costs
    one ``for-each-ref``, one ``cat-file --batch-check`` and one ``merge-base`` a task."""
    paths = ProjectPaths(pdir)
    wanted = [w for e in _task_dirs(paths) if (w := _recorded(paths.task(e.name))) is not None]
    if not wanted:
        return []
    ask = "".join(f"{sha}\n" for w in wanted for sha in w.named)
    res = git.git(
        root,
        "cat-file",
        "--batch-check=%(objectname) %(objecttype)",
        input=ask.encode(),
        check=False,
    )
    present = {ln.split()[0] for ln in res.out.splitlines() if ln.endswith(" commit")}
    listed = git.git(root, "for-each-ref", "--format=%(refname) %(objectname)", _REFS, check=False)
    refs = dict(ln.split(" ", 1) for ln in listed.out.splitlines() if " " in ln)
    behind: list[str] = []
    for w in wanted:
        gone = [role for sha, role in w.named.items() if sha not in present]
        ref = _REFS + w.task_id
        tip = refs.get(ref)
        if gone:
            behind.append(f"no {gone[0]} of {w.label}")
        elif tip is None:
            behind.append(f"no {ref} ({w.label})")
        elif w.snapshot is not None and not git.is_ancestor(root, w.snapshot, tip):
            behind.append(f"{ref} without snapshot {git.short(w.snapshot)} of {w.label}")
    return behind


@record(frozen=True)
class _Recorded:
    """The state a task's files say its repository holds."""

    task_id: str
    label: str  # "task NAME (ID)"
    snapshot: str | None  # its last snapshot (the base commit before any step)
    named: dict[str, str]  # commit id -> what it is, said for a reader


def _recorded(task: TaskPaths) -> _Recorded | None:
    if DELETE.path(task).exists():  # being deleted: its refs may be gone already
        return None
    try:
        rec = read_json(task.task_json, "task.json")
    except (BarError, OSError):
        return None
    named: dict[str, str] = {}  # the base first: a task without steps names only it
    base = rec.get("base_commit")
    base = base if isinstance(base, str) and git.is_object_id(base) else None
    if base:
        named[base] = f"base commit {git.short(base)}"
    newest, last = _ledger_ends(task.ledger)
    for step in (s for s in (newest, last) if s is not None):
        for attr, role in _NAMED:
            sha = getattr(step, attr, None)
            if isinstance(sha, str) and git.is_object_id(sha):
                named.setdefault(sha, f"{role} {git.short(sha)} (step {step.step_id})")
    tid = task.dir.name
    name = rec.get("name")
    label = f"task {name if isinstance(name, str) else tid} ({tid})"
    return _Recorded(tid, label, last.snapshot if last else base, named)


def _ledger_ends(path: Path) -> tuple[Step | None, Step | None]:
    """The newest step of a ledger, and the newest that left the worktree at a snapshot
    (an apply's snapshot is a state it landed, not one it made)."""
    newest: Step | None = None
    for step in Ledger(path).iter_reverse(warn=False):
        newest = newest or step
        if step.snapshot and step.kind != "apply" and git.is_object_id(step.snapshot):
            return newest, step
    return newest, None


def hint_for(moved: list[Moved]) -> str:
    """What to run to re-attach the tasks, said in one sentence."""
    if len(moved) == 1 and moved[0].reclaimed:
        return (
            f"its tasks were adopted at {moved[0].old_root}, an older copy that lacks their "
            "latest state; `bar init --adopt` takes them back here"
        )
    if len(moved) == 1:
        return (
            f"this repository moved from {moved[0].old_root}; "
            "`bar init --adopt` re-attaches its tasks here"
        )
    names = ", ".join(m.name for m in moved)
    return f"tasks of this repository are in {names}; re-attach one with `bar init --adopt NAME`"


def refuse_if_moved(project: Project) -> list[Moved]:
    """What ``find_moved`` finds that this repository can adopt; an error if it is not
    registered here yet: ``bar init`` registers a moved repository only by adopting its
    tasks. An older copy is a repository of its own, and is registered as one."""
    moved = [m for m in find_moved(project) if not m.behind]
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
    found = find_moved(project)
    moved = [m for m in found if not m.behind]
    if moved:
        hint = hint_for(moved)
    elif found:
        hint = (
            f"it is an older copy of the repository of project {found[0].name} (it has "
            f"{found[0].behind[0]}); `bar init` registers it as a project of its own"
        )
    else:
        hint = "run `bar init` in the repository first"
    return NotInitialized(f"{project.root} is not registered with bar", hint=hint)


def older_copy(project: Project, older: list[Moved]) -> BarError:
    """The refusal to adopt into a repository that lacks the state the ledgers recorded:
    adopting there would leave the real repository without its tasks."""
    behind = [b for m in older for b in m.behind]
    more = len(behind) - 2
    names = ", ".join(m.name for m in older)
    where = " or ".join(sorted({m.old_root for m in older}))
    return BarError(
        f"{project.root} is an older copy of the repository the tasks of project {names} "
        "were recorded in: it has "
        + "; ".join(behind[:2])
        + (f"; and {plural(more, 'more task')} behind" if more > 0 else "")
        + "; bar adopted nothing",
        hint="run `bar init --adopt` in the repository that holds their latest state (the "
        f"one that was at {where})"
        + ("" if project.initialized else "; `bar init` registers this copy on its own"),
    )


def adopt(project: Project, which: str | None = None) -> Adopted:
    """Move the project directory of ``which`` (None: the only one found) to this
    repository's name and re-attach its tasks here."""
    candidates = find_moved(project)
    if which:
        chosen = [m for m in candidates if m.name == which]
        if not chosen:
            known = ", ".join(m.name for m in candidates) or "none"
            raise NotFound(
                f"no project named {which!r} holds tasks of this repository",
                hint=f"the projects that do: {known}",
            )
        candidates = chosen
    else:
        candidates = [m for m in candidates if not m.behind] or candidates
    older = [m for m in candidates if m.behind]
    if older:
        raise older_copy(project, older)
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
        behind = missing_state(project.root, moved.dir)  # a step may have ended since
        if behind:
            raise older_copy(
                project, [Moved(moved.dir, moved.old_root, moved.task_ids, moved.tasks, behind)]
            )
        if replaced:
            shutil.rmtree(project.dir)
        os.rename(moved.dir, project.dir)
    adopted = reattach(project, moved, replaced)
    registry.rebuild(project)  # its worktrees' paths moved with it
    project.log_event(
        "project.adopted",
        project={
            "root": str(project.root),
            "old_root": moved.old_root,
            "old_dir": moved.name,
            "tasks": moved.tasks,
        },
    )
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
        with FileLock(
            project.paths.task(entry.name).lock,
            f"task {entry.name}",
            what="bar init --adopt",
            wait=False,
        ):
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
        _claim(project, wt)
        res = git.git(project.root, "worktree", "repair", "--", str(wt), check=False)
        if res.returncode != 0 or not _linked(project, wt):
            said = res.err.strip() or "git left it as it was"
            warn(f"could not relink the worktree {wt}: {said}; `bar doctor` checks it")
            continue
        repaired.append(wt)
    return repaired


def _claim(project: Project, wt: Path) -> None:
    """Point a worktree that names another repository's live admin directory (an older
    copy's, which adopted it by mistake) at this repository's own: git's repair keeps any
    link that leads to a live admin directory, whoever's it is."""
    own = project.common_dir / "worktrees" / wt.name  # git names it after the worktree
    try:
        said = (wt / ".git").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return
    named = Path(said.removeprefix("gitdir:").strip())
    if own.is_symlink() or not (own / "gitdir").is_file() or not named.is_dir():
        return
    if named.resolve() != own.resolve():
        write_text_atomic(wt / ".git", f"gitdir: {own}\n")


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
