"""What deleting a closed task would lose: ``at_risk``, one sentence per kind of loss.

A deletion removes the task's branch, its refs under ``refs/bar/``, its ledger and a
worktree kept on closing. Work is lost when nothing that stays holds it:

- its last recorded state, unless an ``apply`` step landed it on a branch that still has
  the commit it made;
- when it ends where it began (a rollback to the base, an undo): the states its steps
  recorded on the way, which a rollback can return to today and nothing can after,
  unless an apply landed each of them;
- commits of its branch (or of any of its refs) that no ref outside the task reaches,
  but those its steps recorded: a commit made by hand after closing, or its base when
  that base is on no branch that stays (a task started on another task's branch, which
  was deleted since). "Outside" is judged as it will be: ``gone`` names refs that go
  before this task does (a prune judges each task against what it leaves standing);
- in a worktree kept on closing: changes made since, and ignored files (``.env``, local
  data), which no snapshot ever holds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from bar import git
from bar.base.notices import plural
from bar.errors import BarError
from bar.history import bases, checkpoints, steps
from bar.model.records import ApplyStep
from bar.model.tasks import Task, still_landed
from bar.store.layout import AIDE_DIR, AIDE_FILES, TASK_ID_RE


def owner(ref: str) -> str | None:
    """The id of the task a ref ``refs/bar/<kind>/<task id>[/...]`` belongs to."""
    parts = ref.split("/")
    if len(parts) >= 4 and parts[:2] == ["refs", "bar"] and TASK_ID_RE.match(parts[3]):
        return parts[3]
    return None


def own_refs(task: Task, every: Iterable[str]) -> list[str]:
    """The refs of ``every`` that a deletion of ``task`` removes: its branch and its refs
    under ``refs/bar/``."""
    branch = f"refs/heads/{task.branch}"
    return [ref for ref in every if ref == branch or owner(ref) == task.id]


def at_risk(task: Task, gone: Collection[str] = ()) -> list[str]:
    """What deleting ``task`` would lose that nothing else holds, one sentence each;
    ``gone``: refs deleted before it, as if they were gone already."""
    repo = task.project.root
    lost: list[str] = []
    final = task.recorded_snapshot()
    tree = git.tree_of(repo, final)
    if tree != git.tree_of(repo, task.base_commit):
        missing = _not_landed(task, final, tree)
        if missing is not None:
            stat = git.numstat(repo, task.base_commit, final)
            lost.append(
                f"its work ({plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}) "
                f"is not on {missing}"
            )
    else:
        dropped = _dropped_steps(task)
        if dropped:
            lost.append(
                f"its steps recorded changes it ends without ({_steps(dropped)}): they go with it"
            )
    commits, base = _unkept_commits(task, gone)
    if commits:
        among = f", its base {git.short(task.base_commit)} among them" if base else ""
        lost.append(
            f"its branch {task.branch} holds {plural(commits, 'commit')} no step "
            f"recorded and no other branch or ref keeps{among}"
        )
    if task.worktree.is_dir():
        lost += _kept_worktree(task)
    return lost


def _not_landed(task: Task, final: str, tree: str) -> str | None:
    """None if an ``apply`` step landed ``final`` (or a state with its tree) on a branch
    that still has its commit; else where the work is missing, as a phrase: the branch
    it was applied to (which no longer has it) or the one it would land on."""
    repo = task.project.root
    gone: ApplyStep | None = None
    for step in task.ledger.iter_reverse(warn=False):
        if (
            isinstance(step, ApplyStep)
            and step.snapshot
            and (step.snapshot == final or git.tree_of(repo, step.snapshot) == tree)
        ):
            if still_landed(task, step):
                return None
            gone = gone or step
    if gone is not None:
        return (
            f"{gone.target_branch}: it was applied as {git.short(gone.commit_sha)}, which "
            f"{gone.target_branch} no longer has"
        )
    return f"{bases.branch(task)}: it was never applied"


# --- states recorded on the way --------------------------------------------------------


def _dropped_steps(task: Task) -> list[str]:
    """For a task that ends with its base's tree: the steps that recorded changes, if a
    state recorded on the way (a step's or a checkpoint's) differs from the base it was
    recorded against and no apply that still stands landed it; else none."""
    base = bases.first(task)
    states: list[tuple[str, str, str]] = []  # step id, state, the base it was recorded on
    landed: list[str] = []
    changed: set[str] = set()
    for step in task.ledger.read_all(warn=False):
        if isinstance(step, ApplyStep):
            if step.snapshot and still_landed(task, step):
                landed.append(step.snapshot)
            continue
        for point in checkpoints.read(task, step.step_id) if step.artifacts.checkpoints else []:
            states.append((step.step_id, point.snapshot, base))
            if point.diff_stat.files:
                changed.add(step.step_id)
        base = getattr(step, "base_after", None) or base
        if step.snapshot:
            states.append((step.step_id, step.snapshot, base))
        if step.diff_stat.files:
            changed.add(step.step_id)
    trees = _trees(task.project.root, {c for _, s, b in states for c in (s, b)} | set(landed))
    kept = {trees[c] for c in landed if c in trees}
    unlanded = {
        step_id
        for step_id, state, on in states
        if state in trees and trees[state] != trees.get(on) and trees[state] not in kept
    }
    return sorted(changed | unlanded) if unlanded else []


def _steps(ids: list[str]) -> str:
    """``step 0001``, ``steps 0001, 0002``, ``steps 0001, 0002, 0003 and 9 more``."""
    if len(ids) == 1:
        return f"step {ids[0]}"
    shown = ", ".join(ids[:4])
    return f"steps {shown}" + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")


def _trees(repo: Path, commits: Iterable[str]) -> dict[str, str]:
    """The tree of each commit git has, in one ``cat-file``."""
    wanted = sorted(set(commits))
    if not wanted:
        return {}
    res = git.git(
        repo,
        "cat-file",
        "--batch-check=%(objectname)",
        input="".join(f"{c}^{{tree}}\n" for c in wanted).encode(),
    )
    found: dict[str, str] = {}
    for commit, line in zip(wanted, res.out.splitlines(), strict=False):
        if git.is_object_id(line.strip()):
            found[commit] = line.strip()
    return found


# --- commits nothing else keeps ---------------------------------------------------------


def _unkept_commits(task: Task, gone: Collection[str]) -> tuple[int, bool]:
    """How many commits reachable from the task's branch, refs or base neither a step
    recorded nor a ref that stays reaches; and whether its base is one of them."""
    repo = task.project.root
    every = _commit_refs(repo)
    mine = set(own_refs(task, every))
    leaving = mine | set(gone)
    bases_ = {task.base_commit, bases.first(task)}
    records = task.ledger.read_all(warn=False)
    for step in records:
        bases_.update(
            b for b in (getattr(step, "base_before", None), getattr(step, "base_after", None)) if b
        )
    tips = [every[ref] for ref in sorted(mine)] + sorted(bases_)
    stays = [every[ref] for ref in every if ref not in leaving]
    unkept = _rev_list(repo, tips, stays)
    if not unkept:
        return 0, False
    heads = {s.head for s in records if s.head} | {task.snapshot_ref}
    unkept -= _rev_list(repo, sorted(heads), sorted(bases_))  # what the steps recorded
    return len(unkept), task.base_commit in unkept


def _commit_refs(repo: Path) -> dict[str, str]:
    """Every ref that leads to a commit, and that commit (an annotated tag's, peeled)."""
    res = git.git(
        repo,
        "for-each-ref",
        "--format=%(objecttype) %(objectname) %(*objecttype) %(*objectname) %(refname)",
    )
    found: dict[str, str] = {}
    for line in res.out.splitlines():
        kind, oid, peeled_kind, peeled, ref = line.split(" ", 4)
        if kind == "commit":
            found[ref] = oid
        elif peeled_kind == "commit":
            found[ref] = peeled
    return found


def _rev_list(repo: Path, tips: Iterable[str], stop: Iterable[str]) -> set[str]:
    """The commits reachable from ``tips`` and from none of ``stop`` (names git does not
    know are passed over)."""
    lines = [*tips, *(f"^{rev}" for rev in stop)]
    res = git.git(
        repo,
        "rev-list",
        "--ignore-missing",
        "--stdin",
        input="".join(f"{line}\n" for line in lines).encode(),
    )
    return set(res.out.split())


# --- a worktree kept on closing ---------------------------------------------------------


def _kept_worktree(task: Task) -> list[str]:
    lost: list[str] = []
    try:
        edited = steps.has_unrecorded_changes(task)
    except BarError:
        edited = True  # cannot tell: count it as a loss
    if edited:
        lost.append(f"its kept worktree {task.worktree} holds changes made after closing")
    res = git.git(
        task.worktree,
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
        "--directory",
        check=False,
    )
    ignored = sorted(p for p in res.out.split("\0") if p and not _aide_copy(p))
    if res.returncode != 0:
        lost.append(
            f"its kept worktree {task.worktree} may hold ignored files: git could not list them"
        )
    elif ignored:
        lost.append(
            f"its kept worktree holds {plural(len(ignored), 'ignored file')}, e.g. {ignored[0]}"
        )
    return lost


def _aide_copy(path: str) -> bool:
    """Whether ``path`` (as ``git ls-files`` lists it) is one of the copies of the task's
    decisions and flow bar keeps for aide's clients (``bar.aide.place``), or their
    directory: the task's own files, deleted with it, never a loss of the worktree's."""
    bare = path.rstrip("/")
    if bare in (AIDE_DIR, f"{AIDE_DIR}/.gitignore"):
        return True
    return any(bare == kept or bare.startswith(kept + "/") for kept in AIDE_FILES)
