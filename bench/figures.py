"""The ten figures. Each builds its own world in a Fixture and returns Rows.

A Row is one ratio (or, for memory, one peak RSS) with its target. Rows without a target
are context: they help read the others and never pass or miss. A row may also carry the
median extra time of its first contender over the second (``extra_ms``), shown next to the
ratio; with ``extra_ms_target`` the row also passes when that extra time is small enough.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import edits
from harness import BenchError, Fixture, interleave, log, median, ratio, round_ratios
from inside import Inside

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Params:
    repeat: int
    warmup: int  # discarded calls of each contender before the measured rounds
    rollback_steps: tuple[int, ...]
    ledger_steps: int
    output_bytes: int
    many_files: int
    quick: bool


@dataclass
class Row:
    key: str
    label: str
    value: float | None = None
    unit: str = "x"  # "x" for a ratio, "MB" for memory, "git" for a count of processes
    op: str = "<="
    target: float | None = None
    medians_ms: dict[str, float] = field(default_factory=dict)
    spread: tuple[float, float] | None = None  # lowest and highest per-round ratio
    samples: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""
    error: str | None = None
    bar_warnings: dict[str, int] = field(default_factory=dict)
    extra_ms: float | None = None  # median of A - median of B, in ms
    extra_ms_target: float | None = None  # also passes when extra_ms is at most this
    # a target of its own for some repository sizes (the small one, where fixed cost
    # dominates); ``at_size`` applies it when the row is measured at that size
    size_targets: dict[str, float] = field(default_factory=dict)

    def at_size(self, size: str) -> Row:
        if size in self.size_targets:
            self.target = self.size_targets[size]
        return self

    @property
    def verdict(self) -> str | None:
        if self.error:
            return "error"
        if self.target is None or self.value is None:
            return None
        ok = self.value <= self.target if self.op == "<=" else self.value < self.target
        if not ok and self.extra_ms_target is not None and self.extra_ms is not None:
            ok = self.extra_ms <= self.extra_ms_target
        return "pass" if ok else "miss"


def ratio_row(
    key: str,
    label: str,
    samples: dict[str, list[float]],
    a: str,
    b: str,
    target: float | None,
    op: str = "<=",
    note: str = "",
    extra_ms: bool = False,
    extra_ms_target: float | None = None,
    size_targets: dict[str, float] | None = None,
) -> Row:
    per_round = round_ratios(samples, a, b)
    extra = None
    if extra_ms or extra_ms_target is not None:
        extra = (median(samples[a]) - median(samples[b])) * 1000
    return Row(
        key=key,
        label=label,
        value=ratio(samples, a, b),
        op=op,
        target=target,
        medians_ms={a: median(samples[a]) * 1000, b: median(samples[b]) * 1000},
        spread=(min(per_round), max(per_round)),
        samples={a: samples[a], b: samples[b]},
        note=note,
        extra_ms=extra,
        extra_ms_target=extra_ms_target,
        size_targets=dict(size_targets or {}),
    )


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _project(f: Fixture, name: str = "bench") -> tuple[Path, str, Path, list[str]]:
    """A registered clone with one task; returns repo, task id, worktree and edit pool."""
    repo = f.clone()
    f.init(repo)
    task_id, wt = f.new_task(repo, name)
    pool = edits.make_pool(wt, f.dir / "pool.txt")
    return repo, task_id, wt, pool


def _sh_step(f: Fixture, wt: Path, task: str, script: str) -> float:
    return f.t([f.tools.bar, "run", "--task", task, "--no-pty", "--", "sh", "-c", script], wt)


# --- 1. bar run -- true vs git status ---------------------------------------------------

# On the 1,000-file repository git status takes a few milliseconds, so bar's fixed cost
# (Python, imports, its few git processes) is most of the ratio: it has its own target.
SMALL_FIXED_COST = 8.0


def fig1(f: Fixture, p: Params) -> list[Row]:
    _, task, wt, pool = _project(f)
    bar_true: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"]
    bar_echo = [*bar_true[:-1], "echo", "ok: 12 passed"]
    n = Counter()

    def run_after_change() -> float:
        edits.small_change(wt, pool, n())
        return f.t(bar_true, wt)

    s = interleave(
        {
            "bar run (new change)": run_after_change,
            "bar run (nothing new)": lambda: f.t(bar_true, wt),
            "bar run (prints a line)": lambda: f.t(bar_echo, wt),
            "git status": lambda: f.t(["git", "status", "--porcelain"], wt),
        },
        p.repeat,
        p.warmup,
    )
    fixed = {"small": SMALL_FIXED_COST}
    return [
        ratio_row(
            "1",
            "`bar run -- true` after a small change ÷ `git status --porcelain`",
            s,
            "bar run (new change)",
            "git status",
            1.8,
            size_targets=fixed,
        ),
        ratio_row(
            "1b",
            "`bar run -- true`, nothing new to record ÷ `git status --porcelain`",
            s,
            "bar run (nothing new)",
            "git status",
            1.3,
            size_targets=fixed,
        ),
        ratio_row(
            "1c",
            "`bar run -- echo ...` (a line printed), nothing new to record ÷ `git status "
            "--porcelain`",
            s,
            "bar run (prints a line)",
            "git status",
            None,
        ),
    ]


# --- 2. the snapshot alone --------------------------------------------------------------


def _side_index(f: Fixture, task: str, name: str) -> Path:
    """A copy of the task's side index in a directory of its own, as bar keeps it: the
    index, and beside it ``git/``, the task's git directory holding its shared part
    (``bar.store.layout.TaskPaths.git_dir``)."""
    folder = f.dir / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    shutil.copyfile(f.task_dir(task) / "index", folder / "index")
    shutil.copytree(f.task_dir(task) / "git", folder / "git")
    return folder / "index"


# the stat of every recorded file that every look of bar's makes (figure 24)
LOOK = ["git", "diff-files", "--ignore-submodules=dirty", "--name-only", "-z"]


def _look_env(f: Fixture, repo: Path, task: str, wt: Path, name: str) -> dict[str, str]:
    """The environment in which git works on a copy of the task's side index (made now,
    in a directory ``name`` of its own) in its worktree, writing nothing it may skip: an
    exact look of bar's, by git alone (``LOOK``), with none of bar's around it."""
    index = _side_index(f, task, name)
    return {
        **f.env,
        "GIT_INDEX_FILE": str(index),
        "GIT_DIR": str(index.parent / "git"),
        "GIT_COMMON_DIR": str(repo / ".git"),
        "GIT_WORK_TREE": str(wt),
        "GIT_OPTIONAL_LOCKS": "0",
    }


def fig2(f: Fixture, p: Params) -> list[Row]:
    repo, task, wt, pool = _project(f)
    f.bar(wt, "run", "--task", task, "--no-pty", "--", "true")  # bar's side index is warm
    idx_a, idx_b = _side_index(f, task, "inproc"), _side_index(f, task, "plumbing")

    out = f.run(
        [
            f.tools.python,
            HERE / "inproc.py",
            "bar-snapshot",
            wt,
            idx_a,
            f.dir / "pool.txt",
            str(p.repeat),
        ],
        wt,
        capture=True,
    ).stdout
    s1 = json.loads(out)
    rows = [
        ratio_row(
            "2",
            "snapshot, in process (`bar.history.snapshot.take`) ÷ `git status --porcelain`",
            s1,
            "take",
            "status",
            1.5,
            note="tree + commit + ref, timed inside bar's interpreter",
        ),
    ]

    env = {
        **f.env,
        "GIT_INDEX_FILE": str(idx_b),
        "GIT_DIR": str(idx_b.parent / "git"),
        "GIT_COMMON_DIR": str(repo / ".git"),
        "GIT_WORK_TREE": str(wt),
    }
    add = [
        "git",
        "-c",
        "core.untrackedCache=true",
        "-c",
        "core.splitIndex=true",
        "add",
        "-A",
        "--ignore-errors",
        "--",
        ".",
    ]
    n = Counter()

    def plumbing() -> float:
        edits.small_change(wt, pool, 10_000 + n())
        return f.t(add, wt, env=env) + f.t(["git", "write-tree"], wt, env=env)

    s2 = interleave(
        {
            "add+write-tree": plumbing,
            "git status": lambda: f.t(["git", "status", "--porcelain"], wt),
        },
        p.repeat,
        p.warmup,
    )
    rows.append(
        ratio_row(
            "2b",
            "`git add -A` + `git write-tree` on a side index ÷ `git status --porcelain`",
            s2,
            "add+write-tree",
            "git status",
            None,
            note="the git work a snapshot cannot avoid",
        )
    )
    return rows


# --- 3. rollback ------------------------------------------------------------------------


def fig3(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    tasks: dict[int, tuple[str, Path]] = {}
    pool: list[str] = []
    for n_steps in p.rollback_steps:
        task, wt = f.new_task(repo, f"rollback-{n_steps}")
        tasks[n_steps] = (task, wt)
        if not pool:
            pool = edits.make_pool(wt, f.dir / "pool.txt")
        log(f"  building a task of {n_steps} steps")
        for k in range(1, n_steps + 1):
            _sh_step(f, wt, task, edits.step_script(pool, k))
            if k % 100 == 0:
                log(f"    {k}/{n_steps} steps")

    def snapshot_of(task: str, step: int) -> str:
        if step == 0:
            return f.git(repo, "rev-parse", "main")
        rec = json.loads(
            f.bar(repo, "show", "--task", task, str(step), "--json", capture=True).stdout
        )
        return str(rec["snapshot"])

    smallest = min(p.rollback_steps)
    first_task = tasks[smallest][0]
    far = snapshot_of(first_task, smallest - 10)
    near = snapshot_of(first_task, smallest)
    checkout = f.dir / "checkout"
    f.git(repo, "worktree", "add", "-q", "--detach", str(checkout), near)
    import genrepo

    genrepo.populate_ignored(checkout, f.seed)

    def rollback(n_steps: int) -> Callable[[], float]:
        task, wt = tasks[n_steps]
        back = "base" if n_steps == 10 else str(n_steps - 10)
        turn = Counter()

        def go() -> float:
            to = back if turn() % 2 else str(n_steps)
            return f.t([f.tools.bar, "rollback", "--task", task, "--to", to], wt)

        return go

    turn = Counter()

    def git_checkout() -> float:
        to = far if turn() % 2 else near
        return f.t(["git", "checkout", "-q", "--detach", to], checkout)

    # the floor of a rollback: its look for hand edits (a stat of every recorded file,
    # figure 24), then what git does to write the other tree
    first_wt = tasks[smallest][1]
    look_env = _look_env(f, repo, first_task, first_wt, "rollback-floor")

    contenders = {f"rollback@{n}": rollback(n) for n in p.rollback_steps}
    contenders["git checkout"] = git_checkout
    contenders["look"] = lambda: f.t(LOOK, first_wt, env=look_env)
    repeat = p.repeat + p.repeat % 2  # as many rollbacks back as forth
    s = interleave(contenders, repeat, warmup=2 * p.warmup)
    # (each round's look and checkout, added: the floor of that round's rollbacks)
    s["look + git checkout"] = [a + b for a, b in zip(s["look"], s["git checkout"], strict=True)]
    label = "`bar rollback` 10 steps back, task of {} steps ÷ `git checkout` of the same trees"
    rows = [
        ratio_row(f"3@{n}", label.format(n), s, f"rollback@{n}", "git checkout", 3.0)
        for n in p.rollback_steps
    ]
    lo, hi = min(p.rollback_steps), max(p.rollback_steps)
    rows.append(
        ratio_row(
            "3-flat",
            f"`bar rollback`: task of {hi} steps ÷ task of {lo} steps",
            s,
            f"rollback@{hi}",
            f"rollback@{lo}",
            1.25,
            note="must stay flat",
        )
    )
    rows += [
        ratio_row(
            "3-floor",
            "floor of a rollback: one exact look (`git diff-files` on the side index) and "
            "`git checkout` ÷ `git checkout` of the same trees",
            s,
            "look + git checkout",
            "git checkout",
            None,
        ),
        ratio_row(
            f"3@{smallest}-floor",
            f"`bar rollback` 10 steps back, task of {smallest} steps ÷ its floor",
            s,
            f"rollback@{smallest}",
            "look + git checkout",
            None,
        ),
    ]
    return rows


# --- 4. apply ---------------------------------------------------------------------------


def fig4(f: Fixture, p: Params) -> list[Row]:
    repo, task, wt, pool = _project(f)
    for k in range(1, 11):
        _sh_step(f, wt, task, edits.step_script(pool, k))
    # The target has moved on since the task started (other files changed), so the
    # three-way merge has real work to do.
    idx = f.dir / "diverge.index"
    env = {**f.env, "GIT_INDEX_FILE": str(idx)}
    f.git(repo, "read-tree", "main", env=env)
    for path in pool[-5:]:  # files no step of the task touches
        before = f.run(["git", "cat-file", "blob", f"main:{path}"], repo, capture=True).stdout
        blob = (
            f.run(
                ["git", "hash-object", "-w", "--stdin"],
                repo,
                capture=True,
                stdin=_write(f.dir / "blob.txt", before + b"changed on main\n"),
            )
            .stdout.decode()
            .strip()
        )
        f.git(repo, "update-index", "--cacheinfo", f"100644,{blob},{path}", env=env)
    tree = f.git(repo, "write-tree", env=env)
    diverged = f.git(repo, "commit-tree", tree, "-p", "main", "-m", "Work on main")
    state = f.git(repo, "rev-parse", f"refs/bar/tasks/{task}")
    n = Counter()

    def bar_apply() -> float:
        branch = f"bench-a-{n()}"
        f.git(repo, "branch", branch, diverged)
        return f.t([f.tools.bar, "apply", "--task", task, "--target", branch, "-m", "Apply"], repo)

    def plumbing() -> float:
        branch = f"bench-b-{n()}"
        f.git(repo, "branch", branch, diverged)
        merged = f.run(["git", "merge-tree", "--write-tree", diverged, state], repo, capture=True)
        tree = merged.stdout.decode().split()[0]
        made = f.run(
            ["git", "commit-tree", tree, "-p", diverged, "-m", "Apply"], repo, capture=True
        )
        commit = made.stdout.decode().strip()
        moved = f.run(["git", "update-ref", f"refs/heads/{branch}", commit, diverged], repo)
        return merged.seconds + made.seconds + moved.seconds

    def bar_dry_run() -> float:
        branch = f"bench-c-{n()}"
        f.git(repo, "branch", branch, diverged)
        return f.t([f.tools.bar, "apply", "--task", task, "--target", branch, "--dry-run"], repo)

    def dry_plumbing() -> float:
        merged = f.run(["git", "merge-tree", "--write-tree", diverged, state], repo, capture=True)
        tree = merged.stdout.decode().split()[0]
        made = f.run(
            ["git", "commit-tree", tree, "-p", diverged, "-m", "Apply"], repo, capture=True
        )
        return merged.seconds + made.seconds

    # bar looks for hand edits before it applies (a stat of every file of the task
    # worktree); these contenders do the same look with git's own `git status`
    status = ["git", "status", "--porcelain"]

    def look_and_plumbing() -> float:
        return f.t(status, wt) + plumbing()

    def look_and_dry_plumbing() -> float:
        return f.t(status, wt) + dry_plumbing()

    s = interleave(
        {
            "bar apply": bar_apply,
            "merge-tree+commit-tree+update-ref": plumbing,
            "bar apply --dry-run": bar_dry_run,
            "merge-tree+commit-tree": dry_plumbing,
            "status+merge-tree+commit-tree+update-ref": look_and_plumbing,
            "status+merge-tree+commit-tree": look_and_dry_plumbing,
        },
        p.repeat,
        p.warmup,
    )
    return [
        ratio_row(
            "4",
            "`bar apply` ÷ `git merge-tree --write-tree` + `commit-tree` + `update-ref`",
            s,
            "bar apply",
            "merge-tree+commit-tree+update-ref",
            8.0,
        ),
        ratio_row(
            "4-dry",
            "`bar apply --dry-run` ÷ `git merge-tree --write-tree` + `commit-tree`",
            s,
            "bar apply --dry-run",
            "merge-tree+commit-tree",
            10.0,
        ),
        ratio_row(
            "4-look",
            "`bar apply` ÷ `git status --porcelain` of the task worktree + the plumbing of 4",
            s,
            "bar apply",
            "status+merge-tree+commit-tree+update-ref",
            None,
        ),
        ratio_row(
            "4-dry-look",
            "`bar apply --dry-run` ÷ `git status --porcelain` of the task "
            "worktree + the plumbing of 4-dry",
            s,
            "bar apply --dry-run",
            "status+merge-tree+commit-tree",
            None,
        ),
    ]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- 5. task new ------------------------------------------------------------------------


def fig5(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    n = Counter()

    def task_new() -> float:
        name = f"new-{n()}"
        seconds = f.t([f.tools.bar, "task", "new", name], repo)
        f.bar(repo, "task", "close", "--force", name)  # keep the number of worktrees steady
        return seconds

    def worktree_add() -> float:
        i = n()
        path = f.dir / f"wt-{i}"
        seconds = f.t(["git", "worktree", "add", "-q", "-b", f"wt-{i}", str(path), "main"], repo)
        f.git(repo, "worktree", "remove", "--force", str(path))
        return seconds

    s = interleave({"bar task new": task_new, "git worktree add": worktree_add}, p.repeat, p.warmup)
    return [
        ratio_row(
            "5",
            "`bar task new` ÷ `git worktree add` of the same repository",
            s,
            "bar task new",
            "git worktree add",
            1.2,
        )
    ]


# --- 6. a long ledger -------------------------------------------------------------------


# seconds between two commands of figure 6, untimed: a developer reading a task's history
# types one command after another, and the resident has forked its next spare meanwhile
# (back to back, that fork of a ~100 MB process lands in the next command's time)
TYPED = 0.2


def fig6(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    big, wt_big = f.new_task(repo, "long-ledger")
    small, wt_small = f.new_task(repo, "short-ledger")
    pool = edits.make_pool(wt_big, f.dir / "pool.txt")
    # Each ledger: a real step, synthetic ones, a real step again.
    log(f"  appending {p.ledger_steps - 2:,} synthetic steps")
    for task, wt, n in ((big, wt_big, p.ledger_steps), (small, wt_small, 10)):
        _sh_step(f, wt, task, edits.step_script(pool, 1))
        _synthesize(f.task_dir(task) / "ledger.jsonl", n - 2)
        _sh_step(f, wt, task, edits.step_script(pool, 2))
        lines = sum(1 for _ in (f.task_dir(task) / "ledger.jsonl").open("rb"))
        if lines != n:
            raise BenchError(f"a ledger has {lines} lines, expected {n}")
    # and one whose steps since its first changed nothing (an agent running the tests
    # again and again): what bar status reads back to find whether it is applied
    idle, wt_idle = f.new_task(repo, "idle-ledger")
    _sh_step(f, wt_idle, idle, edits.step_script(pool, 3))
    _synthesize(f.task_dir(idle) / "ledger.jsonl", p.ledger_steps - 2)
    f.bar(wt_idle, "run", "--task", idle, "--no-pty", "--", "true")

    def cmd(task: str, *args: str) -> list[str | Path]:
        return [f.tools.bar, *args[:1], "--task", task, *args[1:]]

    middle = str(p.ledger_steps // 2)

    s = interleave(
        {
            "log big": lambda: f.t(cmd(big, "log", "-n", "20"), wt_big),
            "log small": lambda: f.t(cmd(small, "log", "-n", "20"), wt_small),
            "status big": lambda: f.t(cmd(big, "status"), wt_big),
            "status small": lambda: f.t(cmd(small, "status"), wt_small),
            "status idle": lambda: f.t(cmd(idle, "status"), wt_idle),
            "run big": lambda: f.t(cmd(big, "run", "--no-pty", "--", "true"), wt_big),
            "run small": lambda: f.t(cmd(small, "run", "--no-pty", "--", "true"), wt_small),
            "show middle": lambda: f.t(cmd(big, "show", middle), wt_big),
            "show second": lambda: f.t(cmd(big, "show", "2"), wt_big),
            "show last": lambda: f.t(cmd(big, "show", str(p.ledger_steps)), wt_big),
            # (a commit's record alone, as the synthetic steps changed nothing)
            "git show": lambda: f.t(["git", "show", "--no-patch", "HEAD"], wt_big),
        },
        p.repeat,
        p.warmup,
        settle=TYPED,
    )
    k = f"{p.ledger_steps:,}"
    whole = _whole_history(f, p, repo, big, wt_big)
    return [
        *whole,
        ratio_row(
            "6-log",
            f"`bar log -n 20`: {k}-step ledger ÷ 10-step ledger",
            s,
            "log big",
            "log small",
            1.5,
        ),
        ratio_row(
            "6-status",
            f"`bar status`: {k}-step ledger ÷ 10-step ledger",
            s,
            "status big",
            "status small",
            1.5,
        ),
        ratio_row(
            "6-status-idle",
            f"`bar status`: {k} steps that changed nothing since the task's last change "
            "÷ a 10-step ledger",
            s,
            "status idle",
            "status small",
            1.5,
        ),
        ratio_row(
            "6-run",
            f"step append (`bar run -- true`): {k}-step ledger ÷ 10-step ledger",
            s,
            "run big",
            "run small",
            1.5,
        ),
        ratio_row(
            "6-show",
            f"`bar show` of the middle step of a {k}-step ledger (served, as typed) "
            "÷ `git show --no-patch HEAD`",
            s,
            "show middle",
            "git show",
            3,
        ),
        ratio_row(
            "6-show-second",
            f"`bar show 2` of a {k}-step ledger ÷ `git show --no-patch HEAD`",
            s,
            "show second",
            "git show",
            3,
        ),
        ratio_row(
            "6-show-last",
            f"`bar show {p.ledger_steps}`, the last step of a {k}-step ledger "
            "÷ `git show --no-patch HEAD`",
            s,
            "show last",
            "git show",
            3,
        ),
    ]


def _whole_history(f: Fixture, p: Params, repo: Path, task: str, wt: Path) -> list[Row]:
    """The long task's whole history: its full ``bar log`` against ``git log --oneline``
    over as many commits, and a rollback between its first and last states (100,000
    steps apart) against ``git checkout`` between the same two trees."""
    commits = f.dir / "commits"
    _chain_of_commits(f, commits, p.ledger_steps)
    ledger = (f.task_dir(task) / "ledger.jsonl").read_bytes().splitlines()
    first, last = json.loads(ledger[0]), json.loads(ledger[-1])
    checkout = f.dir / "checkout"
    f.git(repo, "worktree", "add", "-q", "--detach", str(checkout), last["snapshot"])
    log("  the first full log of the long ledger (its rows are kept from then on)")
    first_log = f.t([f.tools.bar, "log", "--task", task], wt)
    at = {"bar": last["step_id"], "git": last["snapshot"]}

    def bar_rollback() -> float:
        at["bar"] = first["step_id"] if at["bar"] == last["step_id"] else last["step_id"]
        return f.t([f.tools.bar, "rollback", "--task", task, "--to", at["bar"]], wt)

    def git_checkout() -> float:
        at["git"] = first["snapshot"] if at["git"] == last["snapshot"] else last["snapshot"]
        return f.t(["git", "checkout", "-q", "--detach", at["git"]], checkout)

    s = interleave(
        {
            "bar log": lambda: f.t([f.tools.bar, "log", "--task", task], wt),
            "git log --oneline": lambda: f.t(["git", "log", "--oneline"], commits),
            "bar rollback": bar_rollback,
            "git checkout": git_checkout,
        },
        p.repeat,
        p.warmup,
    )
    k = f"{p.ledger_steps:,}"
    return [
        ratio_row(
            "6-log-all",
            f"`bar log` of all {k} steps ÷ `git log --oneline` of {k} commits",
            s,
            "bar log",
            "git log --oneline",
            3.0,
            note=f"the first full log, which makes the rows kept from then on: "
            f"{first_log / median(s['git log --oneline']):.1f}×",
        ),
        ratio_row(
            "6-rollback",
            f"`bar rollback` between steps {k} apart ÷ `git checkout` between their trees",
            s,
            "bar rollback",
            "git checkout",
            3.0,
        ),
    ]


def _chain_of_commits(f: Fixture, path: Path, count: int) -> None:
    """A repository of ``count`` commits in a line, one file, written by fast-import."""
    f.run(["git", "init", "-q", "-b", "main", str(path)], f.dir)
    parts = [b"blob\nmark :1\ndata 2\na\n"]
    for i in range(count):
        message = f"step {i + 1}".encode()
        parts.append(
            b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n"
            b"data %d\n%s\n" % (1_700_000_000 + i, len(message), message)
        )
        if i == 0:
            parts.append(b"M 100644 :1 a\n")
        parts.append(b"\n")
    stream = f.dir / "commits.fi"
    stream.write_bytes(b"".join(parts))
    f.run(["git", "fast-import", "--quiet"], path, stdin=stream)
    stream.unlink()


# what a synthetic step printed, as bar stores a step's output (``bar.terminal.pipes``)
_SYNTHETIC_OUTPUT = b"=== STDOUT ===\nok: 412 passed\n=== STDERR ===\n"


def _synthesize(ledger: Path, count: int) -> None:
    """Append ``count`` valid steps after the first: commands that changed nothing, so every
    snapshot stays the one the first step recorded and the task stays consistent. Each
    printed something, so its output artifact is there, as a long task's are: a command
    that lists or globs the artifacts directory pays for them."""
    first = json.loads(ledger.read_bytes().splitlines()[0])
    number = int(first["step_id"])
    artifacts = ledger.parent / "artifacts"
    with ledger.open("ab") as fh:
        for i in range(count):
            step_id = f"{number + 1 + i:04d}"
            (artifacts / f"{step_id}.output").write_bytes(_SYNTHETIC_OUTPUT)
            rec = dict(first)
            rec.update(
                step_id=step_id,
                cmd=["make", "test"],
                exit_code=0,
                duration_ms=1200 + i % 500,
                diff_stat={"files": 0, "additions": 0, "deletions": 0, "file_list": []},
                artifacts={"output": f"artifacts/{step_id}.output"},
                snapshot_before=first["snapshot"],
                snapshot=first["snapshot"],
            )
            fh.write(json.dumps(rec, separators=(",", ":")).encode() + b"\n")


# --- 7. start-up ------------------------------------------------------------------------

CLAUDE_EVENT = {
    "session_id": "8c5f4a52-3d2b-4b7a-9d0e-bench00000001",
    "transcript_path": "~/.claude/projects/bench/8c5f4a52.jsonl",
    "cwd": "",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {
        "command": "cd src && npm test -- --watch=false 2>&1 | tail -n 50",
        "description": "Run the unit tests",
    },
    "tool_use_id": "toolu_01BenchBenchBenchBench",
}


# Every module `bar run -- true` loads that `python -c pass` does not, in the order it
# loads them, as a probe in the task finds them (stdlib ones too, such as what argparse
# loads while it builds the parser): 7-imports stays honest however the imports move.
# tests/test_architecture.py keeps heavier ones out.
_LOADED = "import sys\n{before}open({out!r}, 'w').write(' '.join(sys.modules))\n"


def _run_path_modules(f: Fixture, wt: Path, *, served: bool) -> list[str]:
    """What the ``bar`` command loads for ``bar run -- true`` (``served``: with the bar
    home's resident running it, as ``bin/bar`` calls it; else doing the step itself)."""
    listing, plain = f.dir / "run-modules.txt", f.dir / "python-modules.txt"
    # (served, the bar command ends with os._exit: the listing is written on the way)
    step = (
        "import os, sys\nsys.argv = ['bar', 'run', '--no-pty', '--', 'true']\n"
        f"_exit = os._exit\nos._exit = lambda code: (open({str(listing)!r}, 'w').write("
        "' '.join(sys.modules)), _exit(code))\n"
        + (
            "from bar.cli.entry import main\nmain(sys.argv[1:])\n"
            if served
            else "from bar.cli.main import main\nmain()\n"
        )
    )
    f.run([f.tools.python, "-c", _LOADED.format(before=step, out=str(listing))], wt)
    f.run([f.tools.python, "-c", _LOADED.format(before="", out=str(plain))], wt)
    already = set(plain.read_text().split()) | {"__main__"}
    return [name for name in listing.read_text().split() if name not in already]


def _tiny_task(f: Fixture) -> Path:
    """The worktree of a task (one step run) in a repository of 20 files, beside the
    figure's repository: where `bar status` has the most to say (the task, its steps, a
    look for changes not recorded), with the fixed costs of a command alone, which a
    larger repository's look hides."""
    tiny = f.dir / "tiny"
    tiny.mkdir()
    f.git(tiny, "init", "-q", "-b", "main")
    for i in range(20):
        (tiny / f"file{i:02d}.txt").write_text(f"line {i}\n")
    f.git(tiny, "add", "-A")
    f.git(tiny, "commit", "-q", "-m", "twenty files")
    f.init(tiny)
    f.git(tiny, "add", "-A")
    f.git(tiny, "commit", "-q", "-m", "bar")
    task, wt = f.new_task(tiny, "tiny")
    f.run([f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"], wt)
    return wt


def fig7(f: Fixture, p: Params) -> list[Row]:
    _, task, wt, _ = _project(f)
    event = f.dir / "event.json"
    event.write_text(json.dumps({**CLAUDE_EVENT, "cwd": str(wt)}))
    # Inside `bar run --agent claude`, the agent runs the hook command bar installed,
    # which hands the event to the running step's bar run over the task's socket; bar run
    # answers only its own step's processes, so every contender runs inside the step.
    with Inside(f.tools.bar, task, wt, f.env) as inside:
        relay = _relay(f, task)
        inside.t(relay, wt, stdin=event)
        s = interleave(
            {
                "bar --version": lambda: inside.t([f.tools.bar, "--version"], wt),
                "bar hook claude (in a run)": lambda: inside.t(relay, wt, stdin=event),
                "python -c pass": lambda: inside.t([f.tools.python, "-c", "pass"], wt),
            },
            p.repeat,
            p.warmup,
        )
    # With no bar run to ask (an agent wired by `bar agent setup`): judged in the hook.
    alone: list[str | Path] = [f.tools.bar, "hook", "claude"]
    f.run([f.tools.bar, "run", "--", "true"], wt)  # (the resident is loaded: f.run waits)
    served = _run_path_modules(f, wt, served=True)
    loaded = _run_path_modules(f, wt, served=False)
    imports: list[str | Path] = [f.tools.python, "-c", f"import {', '.join(loaded)}"]
    client: list[str | Path] = [f.tools.python, "-c", f"import {', '.join(served)}"]
    stdlib = [m for m in loaded if m.split(".")[0] != "bar"]
    floor: list[str | Path] = [f.tools.python, "-c", f"import {', '.join(stdlib)}"]
    tiny = _tiny_task(f)
    s.update(
        interleave(
            {
                "bar status (tiny)": lambda: f.t([f.tools.bar, "status"], tiny),
                "git status (tiny)": lambda: f.t(["git", "status"], tiny),
                "bar hook claude (no run)": lambda: f.t(alone, wt, stdin=event),
                "bar status": lambda: f.t([f.tools.bar, "status"], wt),
                "git status": lambda: f.t(["git", "status", "--porcelain"], wt),
                "imports of bar run": lambda: f.t(client, wt),
                "imports of bar run, unserved": lambda: f.t(imports, wt),
                "its standard library": lambda: f.t(floor, wt),
                "python -c pass (2)": lambda: f.t([f.tools.python, "-c", "pass"], wt),
            },
            p.repeat,
            p.warmup,
        )
    )
    return [
        ratio_row(
            "7-version",
            "`bar --version` ÷ `python -c pass`",
            s,
            "bar --version",
            "python -c pass",
            None,
        ),
        ratio_row(
            "7-status",
            "`bar status` (a stat of every file, as git's) ÷ `git status --porcelain`",
            s,
            "bar status",
            "git status",
            1.5,
        ),
        ratio_row(
            "7-status-tiny",
            "`bar status` in a task's worktree, repository of 20 files ÷ `git status` there",
            s,
            "bar status (tiny)",
            "git status (tiny)",
            5.0,
        ),
        ratio_row(
            "7-status-start",
            "`bar status` ÷ `python -c pass`",
            s,
            "bar status",
            "python -c pass (2)",
            None,
        ),
        ratio_row(
            "7-imports",
            "the modules the `bar` command imports for `bar run`, the "
            "resident doing the step (`bar.changes.fast.resident`) ÷ `python -c pass`",
            s,
            "imports of bar run",
            "python -c pass (2)",
            2.5,
        ),
        ratio_row(
            "7-imports-here",
            "the modules `bar run` imports doing the step itself "
            "(the first, or with `BAR_RESIDENT_IDLE=0`) ÷ `python -c pass`",
            s,
            "imports of bar run, unserved",
            "python -c pass (2)",
            None,
        ),
        ratio_row(
            "7-imports-stdlib",
            "of those, the standard library's and other packages' alone ÷ `python -c pass`",
            s,
            "its standard library",
            "python -c pass (2)",
            None,
        ),
        ratio_row(
            "7-hook",
            "`bar hook claude` inside a running step (the agent's case) ÷ `python -c pass`",
            s,
            "bar hook claude (in a run)",
            "python -c pass",
            2.5,
        ),
        ratio_row(
            "7-hook-alone",
            "`bar hook claude` with no `bar run` to ask ÷ `python -c pass`",
            s,
            "bar hook claude (no run)",
            "python -c pass (2)",
            None,
        ),
    ]


# --- 8. memory --------------------------------------------------------------------------


def fig8(f: Fixture, p: Params) -> list[Row]:
    _, task, wt, _ = _project(f)
    artifacts = f.task_dir(task) / "artifacts"
    size = p.output_bytes
    line = "yes 'compiling module 0123456789 with flags -O2 -Wall: ok'"
    produce = f"{line} | head -c {size}"
    tee_file = f.dir / "tee.out"
    runs = 1 if p.quick else 2
    rss: list[int] = []
    t_bar: list[float] = []
    t_tee: list[float] = []
    t_pipe: list[float] = []
    t_file: list[float] = []
    # measured in a bar that does the step itself: a step the resident serves is done by
    # a fork of it, which is not this process's child (``bar.changes.fast.resident``)
    here = {**f.env, "BAR_RESIDENT_IDLE": "0"}
    for _ in range(runs):
        out = f.run(
            [f.tools.bar, "run", "--task", task, "--no-pty", "--", "sh", "-c", produce],
            wt,
            env=here,
            peak=True,
        )
        rss.append(out.maxrss_kb)
        t_bar.append(out.seconds)
        for art in artifacts.glob("*.output"):
            art.unlink()
        t_tee.append(f.t(["sh", "-c", f"{produce} | tee {tee_file}"], wt))
        tee_file.unlink()
        t_pipe.append(f.t(["sh", "-c", f"{produce} | cat"], wt))
        t_file.append(f.t(["sh", "-c", f"{produce} | cat > {tee_file}"], wt))
        tee_file.unlink()
    rss_many: list[int] = []
    t_many: list[float] = []
    t_git_many: list[float] = []
    plain = f.clone("repo-git", checkout=True)  # the same edit, recorded by git alone
    # the file system's time to create ten thousand files varies from run to run by a
    # third: more rounds than the output figures take, interleaved
    for i in range(1 if p.quick else max(runs, p.repeat)):
        out = f.run(
            [
                f.tools.bar,
                "run",
                "--task",
                task,
                "--no-pty",
                "--",
                f.tools.python,
                HERE / "edits.py",
                "many",
                f.dir / "pool.txt",
                str(p.many_files),
                f"run{i}",
            ],
            wt,
            env=here,
            peak=True,
        )
        rss_many.append(out.maxrss_kb)
        t_many.append(out.seconds)
        edit = f"'{f.tools.python}' '{HERE / 'edits.py'}' many '{f.dir / 'pool.txt'}'"
        t_git_many.append(
            f.t(
                [
                    "sh",
                    "-c",
                    f"{edit} {p.many_files} git{i} && git add -A && git commit -qm many",
                ],
                plain,
            )
        )
    pty = _pty_output(f, p, task, wt, line, artifacts)
    mb = f"{size / 1e9:g} GB" if size >= 1e9 else f"{size / 1e6:g} MB"
    return [
        Row(
            "8-output",
            f"peak RSS of `bar run` on a command printing {mb}",
            value=max(rss) / 1024,
            unit="MB",
            op="<=",
            target=50.0,
            note="largest process in bar's tree (bar, git, the command)",
        ),
        Row(
            "8-files",
            f"peak RSS of `bar run` on a step changing {p.many_files:,} files",
            value=max(rss_many) / 1024,
            unit="MB",
            op="<=",
            target=50.0,
        ),
        Row(
            "8-many",
            f"`bar run` of a step changing {p.many_files:,} files ÷ the same edit, then "
            "`git add -A` + `git commit`",
            value=median(t_many) / median(t_git_many),
            op="<=",
            target=1.5,
            note="both include the edit itself",
            medians_ms={"bar run": median(t_many) * 1000, "git": median(t_git_many) * 1000},
            samples={"bar run": t_many, "git": t_git_many},
        ),
        Row(
            "8-speed",
            f"`bar run --no-pty` printing {mb} ÷ the same command into a plain pipe to `cat`",
            value=median(t_bar) / median(t_pipe),
            op="<=",
            target=2.0,
            note="at least half a plain pipe's speed",
            medians_ms={"bar run": median(t_bar) * 1000, "pipe": median(t_pipe) * 1000},
            samples={"bar run": t_bar, "pipe": t_pipe},
        ),
        Row(
            "8-file",
            f"`bar run --no-pty` printing {mb} ÷ the same command piped to `cat > FILE`",
            value=median(t_bar) / median(t_file),
            op="<=",
            target=2.0,
            note="what bar does: the output kept in a file (bar's also scrubbed and synced)",
            medians_ms={"bar run": median(t_bar) * 1000, "cat > file": median(t_file) * 1000},
            samples={"bar run": t_bar, "cat > file": t_file},
        ),
        Row(
            "8-tee",
            f"`bar run --no-pty` printing {mb} ÷ the same command piped to `tee FILE`",
            value=median(t_bar) / median(t_tee),
            target=None,
            medians_ms={"bar run": median(t_bar) * 1000, "tee": median(t_tee) * 1000},
            samples={"bar run": t_bar, "tee": t_tee},
        ),
        *pty,
    ]


def _pty_output(
    f: Fixture, p: Params, task: str, wt: Path, line: str, artifacts: Path
) -> list[Row]:
    """8-pty: a command printing a tenth of figure 8's output through a terminal, by
    `bar run --pty` and by `script -qc` (util-linux), which also records it; 8-stored:
    what bar keeps of it (its text in NNNN.output, its recording of what the text lacks)
    ÷ what was printed."""
    script = shutil.which("script")
    if script is None:
        return []
    size = max(p.output_bytes // 10, 1_000_000)
    produce = f"{line} | head -c {size}"
    typescript = f.dir / "typescript"
    t_bar: list[float] = []
    t_script: list[float] = []
    stored = 0
    # as a developer's terminal runs it: served by the resident (the first step, untimed,
    # leaves one up), the recording handed to a fork once the step has printed a little
    f.t([f.tools.bar, "run", "--task", task, "--pty", "--", "true"], wt)
    for _ in range(1 if p.quick else max(3, p.repeat)):
        for old in artifacts.glob("*"):
            old.unlink()
        t_bar.append(
            f.t([f.tools.bar, "run", "--task", task, "--pty", "--", "sh", "-c", produce], wt)
        )
        stored = sum(a.stat().st_size for a in artifacts.glob("*"))
        t_script.append(f.t([script, "-qc", produce, str(typescript)], wt))
        typescript.unlink(missing_ok=True)
    mb = f"{size / 1e6:g} MB"
    return [
        Row(
            "8-pty",
            f"`bar run --pty` printing {mb} ÷ `script -qc` recording the same",
            value=median(t_bar) / median(t_script),
            op="<=",
            target=1.0,
            medians_ms={"bar run --pty": median(t_bar) * 1000, "script": median(t_script) * 1000},
            samples={"bar run --pty": t_bar, "script": t_script},
        ),
        Row(
            "8-stored",
            f"bytes bar keeps of a pty step printing {mb} (its output file and its "
            "recording) ÷ the bytes printed",
            value=stored / size,
            op="<=",
            target=1.1,
            note="stored once: the text in the output file, the recording refers to it",
        ),
    ]


# --- 9. bar vs stepback -----------------------------------------------------------------


def fig9(f: Fixture, p: Params) -> list[Row]:
    stepback, stepback_python = f.tools.stepback, f.tools.stepback_python
    if stepback is None or stepback_python is None:
        raise BenchError("stepback is not installed")
    _, task, wt, pool = _project(f)
    other = f.clone("repo-stepback", checkout=True)
    ka, kb = Counter(), Counter()

    def bar_step() -> float:
        return _sh_step(f, wt, task, edits.step_script(pool, ka()))

    def stepback_step() -> float:
        return f.t([stepback, "run", "--", "sh", "-c", edits.step_script(pool, kb())], other)

    s = interleave({"bar run": bar_step, "stepback run": stepback_step}, p.repeat, p.warmup)
    rows = [
        ratio_row(
            "9",
            "`bar run -- EDIT` ÷ `stepback run -- EDIT` (same repository, same edit)",
            s,
            "bar run",
            "stepback run",
            1.0,
            op="<",
            note="whole command per step: start-up, snapshots, records",
        ),
    ]

    idx = _side_index(f, task, "inproc")

    def bar_take() -> float:
        f.t(["sh", "-c", edits.step_script(pool, ka())], wt)
        out = f.run([f.tools.python, HERE / "inproc.py", "bar-take", wt, idx], wt, capture=True)
        return float(json.loads(out.stdout)["seconds"])

    def stepback_checkpoint() -> float:
        f.t(["sh", "-c", edits.step_script(pool, kb())], other)
        out = f.run(
            [stepback_python, HERE / "inproc.py", "stepback-checkpoint", other],
            other,
            capture=True,
        )
        return float(json.loads(out.stdout)["seconds"])

    s2 = interleave(
        {"bar take": bar_take, "stepback checkpoint": stepback_checkpoint}, p.repeat, p.warmup
    )
    rows.append(
        ratio_row(
            "9b",
            "one checkpoint in process: `bar.history.snapshot.take` ÷ stepback `Engine.checkpoint`",
            s2,
            "bar take",
            "stepback checkpoint",
            1.0,
            op="<",
        )
    )
    return rows


# --- 10. the set-up cost of confinement -------------------------------------------------

# A developer's home as bar's default sandbox.deny_read meets it: ~/.ssh, ~/.aws and
# ~/.gnupg exist, so confinement must carve them out of what the command may read.
HOME_ENTRIES = {
    ".ssh/config": "Host *\n  IdentitiesOnly yes\n",
    ".ssh/known_hosts": "example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBench\n",
    ".ssh/id_ed25519": "not a key\n",
    ".ssh/id_ed25519.pub": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBench bench@example.com\n",
    ".aws/config": "[default]\nregion = eu-west-1\n",
    ".aws/credentials": "[default]\naws_access_key_id = none\n",
    ".gnupg/pubring.kbx": "",
    ".gnupg/trustdb.gpg": "",
    ".cache/pip/.keep": "",
    ".config/git/ignore": "*.swp\n",
    ".local/share/.keep": "",
    ".bashrc": "export EDITOR=vi\n",
    ".profile": "",
    ".bash_history": "ls\n",
    "src/.keep": "",
    "Downloads/.keep": "",
}


def _developer_home(f: Fixture) -> Path:
    home = f.dir / "home"
    for rel, text in HOME_ENTRIES.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in (".ssh", ".gnupg"):
        (home / folder).chmod(0o700)
    shutil.copyfile(Path(f.base_env["HOME"]) / ".gitconfig", home / ".gitconfig")
    return home


def fig10(f: Fixture, p: Params) -> list[Row]:
    plain_home = Path(f.base_env["HOME"])  # nothing of sandbox.deny_read in it
    home = _developer_home(f)
    f.env = {**f.env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    entries = sum(1 for _ in home.iterdir())
    _, task, wt, _ = _project(f)
    bar_run: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty"]
    rec = json.loads(f.run([*bar_run, "--json", "--", "true"], wt, capture=True).stdout)
    sandbox = rec.get("sandbox") or {}
    if not sandbox.get("enabled"):
        why = f"skipped: bar could not confine the step ({sandbox.get('reason', 'no reason')})"
        log(f"  figure 10 {why}")
        return [Row("10", "`bar run -- true` confined ÷ `bar run --no-sandbox -- true`", note=why)]

    # The difference sought is a few ms of a command taking a few hundred: three times
    # the rounds of the other figures, so that the medians can show it.
    s = interleave(
        {
            "confined": lambda: f.t([*bar_run, "--", "true"], wt),
            "--no-sandbox": lambda: f.t([*bar_run, "--no-sandbox", "--", "true"], wt),
        },
        3 * p.repeat,
        p.warmup,
    )
    rows = [
        ratio_row(
            "10",
            "`bar run -- true` confined ÷ `bar run --no-sandbox -- true` (nothing new to record)",
            s,
            "confined",
            "--no-sandbox",
            1.1,
            extra_ms_target=10.0,
            note=f"HOME of {entries} entries, ~/.ssh, ~/.aws, ~/.gnupg among them",
        ),
    ]

    # The same confinement timed inside bar's interpreter, with and without anything to
    # carve out, and bubblewrap given the binds of the same plan where it is installed.
    bwrap = shutil.which("bwrap", path=f.env.get("PATH"))
    calls = 5 if p.quick else 30
    out = f.run(
        [
            f.tools.python,
            HERE / "inproc.py",
            "sandbox",
            wt,
            plain_home,
            home,
            str(p.repeat),
            str(calls),
            str(p.warmup),
            bwrap or "-",
        ],
        wt,
        capture=True,
    ).stdout
    got = json.loads(out)
    if got.get("unavailable"):
        raise BenchError(f"bar run was confined but bar.sandbox.confine was not: {got}")
    s2: dict[str, list[float]] = got["samples"]
    rules = got["rules"]
    depth = len(home.parts) - 1
    log(
        f"  Landlock rules per step: {rules['plain']} with nothing to hide, {rules['carve']} "
        f"with ~/.ssh, ~/.aws, ~/.gnupg carved out of a HOME {depth} levels below /"
    )
    per = f"{calls} calls of each per round, interleaved call by call"
    rows += [
        ratio_row(
            "10-inproc",
            "in process: `confine(plan.for_step())` + `start(Popen(true))` "
            "÷ `Popen(true)`, nothing to hide",
            s2,
            "landlock",
            "popen",
            None,
            extra_ms=True,
            note=f"{rules['plain']} rules; each until `true` exits; {per}",
        ),
        ratio_row(
            "10-carve",
            "in process: the same with ~/.ssh, ~/.aws, ~/.gnupg present "
            "(read-deny carved) ÷ `Popen(true)`",
            s2,
            "landlock carve",
            "popen",
            None,
            extra_ms=True,
            note=f"{rules['carve']} rules; HOME of {entries} entries, "
            f"{depth} levels below /; {per}",
        ),
    ]
    bwrap_label = "bubblewrap: `bwrap` with the plan's binds, then `true` ÷ `Popen(true)`"
    if "bwrap carve" in s2:
        rows += [
            ratio_row(
                "10-bwrap",
                bwrap_label,
                s2,
                "bwrap carve",
                "popen",
                None,
                extra_ms=True,
                note=got.get("bwrap_argv", ""),
            ),
            ratio_row(
                "10-bwrap-landlock",
                "bubblewrap ÷ Landlock, same plan (read-deny carved), each starting `true`",
                s2,
                "bwrap carve",
                "landlock carve",
                None,
                extra_ms=True,
            ),
        ]
    else:
        why = f"skipped: {got.get('bwrap_problem') or 'bwrap is not on the PATH'}"
        log(f"  10-bwrap {why}")
        rows.append(Row("10-bwrap", bwrap_label, note=why))
    return rows


# --- 11. checkpoints ----------------------------------------------------------------


def _post_event(wt: Path, n: int) -> dict[str, object]:
    """Claude Code's event after a shell command, as the agent sends it to bar's hook."""
    return {
        **CLAUDE_EVENT,
        "cwd": str(wt),
        "hook_event_name": "PostToolUse",
        "tool_use_id": f"toolu_bench{n:08d}",
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False},
    }


def _relay(f: Fixture, task: str) -> list[str | Path]:
    """``bar hook claude`` asking the running step of ``task`` over its socket, as an
    agent's hook inside the step does."""
    return [f.tools.bar, "hook", "claude", "--socket", f.task_dir(task) / "bar.sock"]


def _event_file(f: Fixture, name: str) -> Path:
    """A file for the hook events a step is sent, made before the step starts: a step
    reads a new file beside a place it may not read (the bar home's ``ui`` here) only if
    it was there when the step's rules were made."""
    event = f.dir / name
    event.write_text("{}")
    return event


def fig11(f: Fixture, p: Params) -> list[Row]:
    _, task, wt, pool = _project(f)
    event = _event_file(f, "post.json")
    n = Counter()
    with Inside(f.tools.bar, task, wt, f.env, agent="claude") as inside:
        relay = _relay(f, task)

        def post(change: bool) -> Callable[[], float]:
            def call() -> float:
                k = n()
                if change:
                    edits.small_change(wt, pool, k)
                event.write_text(json.dumps(_post_event(wt, k)))
                return inside.t(relay, wt, stdin=event)

            return call

        s = interleave(
            {
                "checkpoint (a file changed)": post(True),
                "checkpoint (nothing changed)": post(False),
                "git status": lambda: inside.t(["git", "status", "--porcelain"], wt),
                "git status (outside)": lambda: f.t(["git", "status", "--porcelain"], wt),
            },
            p.repeat,
            p.warmup,
        )
    taken = len(
        (f.task_dir(task) / "artifacts" / "0001.checkpoints.jsonl").read_text().splitlines()
    )
    if taken != n.n:
        raise BenchError(f"{n.n} post-tool events took {taken} checkpoints")
    rows = [
        ratio_row(
            "11-changed",
            "post-tool hook, a file changed: checkpoint taken ÷ `git status --porcelain`",
            s,
            "checkpoint (a file changed)",
            "git status",
            1.5,
        ),
        ratio_row(
            "11-unchanged",
            "post-tool hook, nothing changed ÷ `git status --porcelain`",
            s,
            "checkpoint (nothing changed)",
            "git status",
            1.2,
        ),
        ratio_row(
            "11-changed-out",
            "post-tool hook, a file changed: checkpoint taken ÷ `git status --porcelain` "
            "run outside the step",
            s,
            "checkpoint (a file changed)",
            "git status (outside)",
            0.5,
        ),
        ratio_row(
            "11-unchanged-out",
            "post-tool hook, nothing changed ÷ `git status --porcelain` run outside the step",
            s,
            "checkpoint (nothing changed)",
            "git status (outside)",
            None,
        ),
    ]
    return rows + _fig11_log(f, p)


def _fig11_log(f: Fixture, p: Params) -> list[Row]:
    """`bar log` on a 1,000-step task, one of whose steps holds a 500-call session."""
    repo = f.clone("log-repo")
    f.init(repo)
    steps = 20 if p.quick else 1000
    calls = 10 if p.quick else 500
    plain, wt_plain = f.new_task(repo, "plain")
    with_cps, wt_cps = f.new_task(repo, "checkpointed")
    pool = edits.make_pool(wt_plain, f.dir / "pool2.txt")
    for task, wt in ((plain, wt_plain), (with_cps, wt_cps)):
        _sh_step(f, wt, task, edits.step_script(pool, 1))
        _synthesize(f.task_dir(task) / "ledger.jsonl", steps - 2)
        _sh_step(f, wt, task, edits.step_script(pool, 2))
    # the session: an agent step whose hook calls each take a checkpoint
    event = _event_file(f, "post2.json")
    with Inside(f.tools.bar, with_cps, wt_cps, f.env, agent="claude") as inside:
        relay = _relay(f, with_cps)
        for k in range(calls):
            edits.small_change(wt_cps, pool, 10_000 + k)
            event.write_text(json.dumps(_post_event(wt_cps, k)))
            inside.t(relay, wt_cps, stdin=event)
    s = interleave(
        {
            "log (a session of checkpoints)": lambda: f.t(
                [f.tools.bar, "log", "--task", with_cps], wt_cps
            ),
            "log (no checkpoints)": lambda: f.t([f.tools.bar, "log", "--task", plain], wt_plain),
        },
        p.repeat,
        p.warmup,
    )
    return [
        ratio_row(
            "11-log",
            f"`bar log` of a {steps:,}-step task with a {calls}-call session ÷ "
            "the same task without",
            s,
            "log (a session of checkpoints)",
            "log (no checkpoints)",
            1.1,
        ),
    ]


# --- 12. git processes per command ------------------------------------------------------


def fig12(f: Fixture, p: Params) -> list[Row]:
    """How many git processes each command starts (git's trace, one run of each)."""
    repo, task, wt, pool = _project(f)
    for k in range(1, 11):
        _sh_step(f, wt, task, edits.step_script(pool, k))
    run_true: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"]
    counts: dict[str, int] = {"bar run -- true (nothing new)": f.git_processes(run_true, wt)}
    edits.small_change(wt, pool, 1)
    counts["bar run -- true (after a change)"] = f.git_processes(run_true, wt)
    for k in range(11, 14):  # steps that change files, as an agent's do
        edits.small_change(wt, pool, k)
    script = edits.step_script(pool, 14)
    counts["bar run (a step changing 3 files)"] = f.git_processes(
        [f.tools.bar, "run", "--task", task, "--no-pty", "--", "sh", "-c", script], wt
    )
    counts["bar rollback (10 steps back)"] = f.git_processes(
        [f.tools.bar, "rollback", "--task", task, "--to", "0003"], wt
    )
    f.git(repo, "branch", "bench-count", "main")
    apply: list[str | Path] = [f.tools.bar, "apply", "--task", task, "--target", "bench-count"]
    counts["bar apply --dry-run"] = f.git_processes([*apply, "--dry-run"], repo)
    counts["bar apply"] = f.git_processes([*apply, "-m", "Apply"], repo)
    counts["bar status"] = f.git_processes([f.tools.bar, "status"], wt)
    return [
        Row(
            key=f"12-{i + 1}",
            label=f"git processes: `{name.split(' (')[0]}`"
            + (f" ({name.split(' (', 1)[1]}" if " (" in name else ""),
            value=float(count),
            unit="git",
            target=None,
        )
        for i, (name, count) in enumerate(counts.items())
    ]


# --- 14. the speed layer on and off ----------------------------------------------------


def fig14(f: Fixture, p: Params) -> list[Row]:
    """``bar run -- true`` with the speed layer on (the default) and off (``BAR_FAST=0``:
    no resident, watches or stamps), after a small edit and with nothing to record, each
    against ``git status`` in the same rounds. The two tasks are of one repository."""
    repo = f.clone()
    f.init(repo)
    fast_task, fast_wt = f.new_task(repo, "fast")
    slow_task, slow_wt = f.new_task(repo, "slow")
    pool = edits.make_pool(fast_wt, f.dir / "pool.txt")
    slow_env = {**f.env, "BAR_FAST": "0"}
    n = Counter()

    def bar_true(task: str) -> list[str | Path]:
        return [f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"]

    def after_change(task: str, wt: Path, slow: bool) -> float:
        edits.small_change(wt, pool, n())
        return f.t(bar_true(task), wt, env=slow_env) if slow else f.t(bar_true(task), wt)

    s = interleave(
        {
            "fast, after a change": lambda: after_change(fast_task, fast_wt, False),
            "fast, nothing new": lambda: f.t(bar_true(fast_task), fast_wt),
            "slow, after a change": lambda: after_change(slow_task, slow_wt, True),
            "slow, nothing new": lambda: f.t(bar_true(slow_task), slow_wt, env=slow_env),
            "git status": lambda: f.t(["git", "status", "--porcelain"], fast_wt),
        },
        p.repeat,
        p.warmup,
    )
    return [
        ratio_row(
            "14",
            "speed layer on: `bar run -- true` after a small change ÷ `git status`",
            s,
            "fast, after a change",
            "git status",
            None,
        ),
        ratio_row(
            "14b",
            "speed layer on: `bar run -- true`, nothing new ÷ `git status`",
            s,
            "fast, nothing new",
            "git status",
            None,
        ),
        ratio_row(
            "14c",
            "`BAR_FAST=0`: `bar run -- true` after a small change ÷ `git status`",
            s,
            "slow, after a change",
            "git status",
            None,
        ),
        ratio_row(
            "14d",
            "`BAR_FAST=0`: `bar run -- true`, nothing new ÷ `git status`",
            s,
            "slow, nothing new",
            "git status",
            None,
        ),
    ]


# --- 24. the floor of an exact look -----------------------------------------------------


# how long the task's watcher may take to stage a one-line edit ahead of the next command
# (docs/internals/fast.md: 2 ms of quiet, then a `git add` and `git write-tree`)
QUIET = 0.3


def fig24(f: Fixture, p: Params) -> list[Row]:
    """What git alone costs for the looks a recorded step cannot skip, against `git
    status` outside the step, beside bar doing them, all in the same rounds.

    Every look stats every recorded file (docs/internals/fast.md: a write through a
    second name, or a memory map, reaches no watch): `git diff-files` on a copy of the
    task's side index is that stat, and nothing more. A step is two looks, one for hand
    edits before it and its own after; a step after a hand edit records the edit between
    them (`git add` of the path and `git write-tree`); a checkpoint that finds a change is
    one look and the same record."""
    repo, task, wt, pool = _project(f)
    bar_true: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"]
    f.t(bar_true, wt)  # (the side index warm, its stamps written)
    env = _look_env(f, repo, task, wt, "floor")
    add = ["git", "-c", "core.splitIndex=true", "add", "--", pool[0]]
    n = Counter()

    def looks(count: int, record: bool) -> Callable[[], float]:
        def call() -> float:
            if record:
                edits.small_change(wt, pool, 20_000 + n())
                time.sleep(QUIET)  # (git alone: the task's watcher done staging the edit)
            took = sum(f.t(LOOK, wt, env=env) for _ in range(count))
            if record:
                took += f.t(add, wt, env=env) + f.t(["git", "write-tree"], wt, env=env)
            return took

        return call

    def bar_after_change() -> float:
        edits.small_change(wt, pool, n())
        return f.t(bar_true, wt)

    s = interleave(
        {
            "one look": looks(1, False),
            "two looks": looks(2, False),
            "look + record": looks(1, True),
            "two looks + record": looks(2, True),
            "bar run (nothing new)": lambda: f.t(bar_true, wt),
            "bar run (new change)": bar_after_change,
            "git status": lambda: f.t(["git", "status", "--porcelain"], wt),
        },
        p.repeat,
        p.warmup,
        settle=TYPED,
    )
    return [
        ratio_row(
            "24-look",
            "one exact look: `git diff-files` on the side index (a stat of every recorded "
            "file) ÷ `git status --porcelain`",
            s,
            "one look",
            "git status",
            None,
        ),
        ratio_row(
            "24-1b",
            "floor of 1b: two looks (for hand edits, then the step's) ÷ `git status --porcelain`",
            s,
            "two looks",
            "git status",
            None,
        ),
        ratio_row(
            "24-1",
            "floor of 1: two looks and a one-line edit recorded (`git add PATH` + `git "
            "write-tree`) ÷ `git status --porcelain`",
            s,
            "two looks + record",
            "git status",
            None,
        ),
        ratio_row(
            "24-11",
            "floor of 11-changed: one look and the edit recorded ÷ `git status --porcelain`",
            s,
            "look + record",
            "git status",
            None,
        ),
        ratio_row(
            "24-1b-bar",
            "`bar run -- true`, nothing new ÷ its floor (two looks)",
            s,
            "bar run (nothing new)",
            "two looks",
            None,
        ),
        ratio_row(
            "24-1-bar",
            "`bar run -- true` after a one-line edit ÷ its floor (two looks, the edit recorded)",
            s,
            "bar run (new change)",
            "two looks + record",
            None,
        ),
    ]


from ui_figures import fig13  # noqa: E402  (it uses the helpers above)

FIGURES: dict[int, tuple[str, Callable[[Fixture, Params], list[Row]]]] = {
    1: ("bar run ÷ git status", fig1),
    2: ("snapshot ÷ git status", fig2),
    3: ("rollback ÷ git checkout, and as steps grow", fig3),
    4: ("apply ÷ git plumbing", fig4),
    5: ("task new ÷ git worktree add", fig5),
    6: ("long ledger ÷ short ledger", fig6),
    7: ("start-up ÷ python -c pass", fig7),
    8: ("peak memory", fig8),
    9: ("bar ÷ stepback", fig9),
    10: ("confined ÷ unconfined start of a step", fig10),
    11: ("tool-call checkpoints", fig11),
    12: ("git processes per command", fig12),
    13: ("bar ui pages", fig13),
    14: ("the speed layer on and off", fig14),
    24: ("the floor of an exact look", fig24),
}
# left out of --quick (unless named with --only): their set-up alone takes over ten seconds
FULL_ONLY = frozenset({13})
