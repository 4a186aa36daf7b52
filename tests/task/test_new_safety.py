"""``bar task new`` runs none of the developer's hooks, and leaves nothing half-made.

A failure partway (git cannot check the worktree out, the side index cannot be seeded,
the disk is full when task.json is written) undoes what was made; a bar killed partway
leaves a half-made task that later commands ignore and that the next ``bar task new`` or
``bar doctor --repair`` clears, never a phantom task or a stray worktree or branch.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, bar_exe, new_task, project_dir, sweep

from conftest import MakeRepo, git

HOOKS = ("post-checkout", "reference-transaction", "pre-commit", "post-commit", "pre-push")


def write_hooks(folder: Path, marker: Path, *, exit_code: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = folder / name
        hook.write_text(f'#!/bin/sh\necho "{name} $*" >> "{marker}"\nexit {exit_code}\n')
        hook.chmod(0o755)


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "policy")
    return repo


def leftovers(repo: Path) -> dict[str, Any]:
    """What bar's tasks have left in the repository and under BAR_HOME."""
    worktrees = [
        line.split(" ", 1)[1]
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]
    pdir = project_dir()
    return {
        "worktrees": sorted(w for w in worktrees if Path(w).resolve() != repo.resolve()),
        "branches": sorted(
            git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/bar/").split()
        ),
        "refs": sorted(git(repo, "for-each-ref", "--format=%(refname)", "refs/bar/").split()),
        "task_dirs": sorted(p.name for p in (pdir / "tasks").iterdir())
        if (pdir / "tasks").is_dir()
        else [],
        "workspaces": sorted(
            p.name
            for p in (pdir / "workspaces").iterdir()
            # the worktree registry, and a write of it a kill cut short (inert; doctor
            # removes it)
            if not p.name.startswith(("index.json", ".index.json."))
        )
        if (pdir / "workspaces").is_dir()
        else [],
    }


def active_task_id() -> str | None:
    value = json.loads((project_dir() / "state.json").read_text())["active_task_id"]
    return value if isinstance(value, str) else None


def assert_sane(res: Any, *codes: int) -> None:
    assert "Traceback" not in res.err, res.err
    assert res.code in codes, (res.code, res.out, res.err)


# --- (a) no hook of the developer runs ------------------------------------------------


@pytest.mark.parametrize("exit_code", [0, 1])
@pytest.mark.parametrize("where", ["git-dir", "hooks-path"])
def test_task_new_runs_none_of_the_developers_hooks(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path, where: str, exit_code: int
) -> None:
    """Hooks that succeed must not run; hooks that fail must not run either (a failing
    ``post-checkout`` made ``git worktree add`` fail after it had made the worktree)."""
    marker = tmp_path / "hooks-ran"
    if where == "git-dir":
        write_hooks(inited / ".git" / "hooks", marker, exit_code=exit_code)
    else:
        write_hooks(tmp_path / "my-hooks", marker, exit_code=exit_code)
        git(inited, "config", "core.hooksPath", str(tmp_path / "my-hooks"))
    # the hooks are live: git runs them for the developer's own commands
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=inited)
    assert marker.exists()
    marker.unlink()

    made = new_task(capfd, "hooked")
    assert not marker.exists(), f"bar ran the developer's hooks: {marker.read_text()}"
    assert Path(made["worktree"], "README.md").exists()
    assert git(inited, "rev-parse", made["branch"]).strip() == made["base_commit"]
    assert leftovers(inited)["worktrees"] == [made["worktree"]]


# --- (b) a failure partway leaves nothing ---------------------------------------------


def test_a_checkout_that_fails_leaves_no_branch_worktree_or_task(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """git creates the branch, then fails to check the worktree out (a required smudge
    filter fails): bar deletes the branch it made and leaves no task behind."""
    before = new_task(capfd, "first")
    (inited / ".gitattributes").write_text("*.txt filter=broken\n")
    (inited / "a.txt").write_text("x\n")
    git(inited, "add", ".gitattributes", "a.txt")
    git(inited, "commit", "-qm", "filtered")
    git(inited, "config", "filter.broken.smudge", "false")
    git(inited, "config", "filter.broken.required", "true")
    expected = leftovers(inited)

    res = bar(capfd, "task", "new", "broken")
    assert_sane(res, 1, 9)
    assert res.code != 0
    assert leftovers(inited) == expected
    assert active_task_id() == before["id"]
    assert "broken" not in bar(capfd, "task", "list").out
    doc = bar(capfd, "doctor")
    assert doc.code == 0 and "problem" not in doc.out + doc.err, doc.out + doc.err


@pytest.mark.parametrize("failure", ["seed", "task.json"])
def test_a_failure_after_the_worktree_is_made_undoes_it(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    from bar.errors import GitError, WriteFailed
    from bar.history import side_index
    from bar.task import new as task_new

    expected = leftovers(inited)
    with monkeypatch.context() as patch:
        if failure == "seed":

            def fail_seed(*args: object, **kwargs: object) -> None:
                raise GitError(["git", "read-tree"], 128, stderr=b"fatal: No space left on device")

            patch.setattr(side_index, "seed_index", fail_seed)
        else:
            real = task_new.write_json_atomic

            def disk_full(path: Path, obj: object) -> None:
                if Path(path).name == "task.json":
                    raise WriteFailed(f"could not write {path}: No space left on device")
                real(path, obj)

            patch.setattr(task_new, "write_json_atomic", disk_full)
        res = bar(capfd, "task", "new", "doomed")
    assert_sane(res, 1, 9)
    assert res.code != 0
    assert leftovers(inited) == expected
    assert active_task_id() is None
    assert bar(capfd, "doctor").code == 0
    assert new_task(capfd, "fine")["name"] == "fine"


# --- (c) killed partway: nothing half-made survives ------------------------------------


def trace_points(repo: Path, trace: Path) -> list[str]:
    res = bar_exe("task", "new", "probe", cwd=repo, env={"BAR_FAULT_TRACE": str(trace)})
    assert res.code == 0, res.err
    return [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]


def setup(make_repo: MakeRepo, name: str) -> Path:
    repo = make_repo(name=name)
    assert bar_exe("init", cwd=repo).code == 0
    return repo


def check_after_kill(repo: Path, n: int) -> None:
    """Right after the kill: every command works, no phantom task shows, and doctor
    reports what was left half-made without failing."""
    active = active_task_id()
    if active is not None:  # only a task that is whole can be the active one
        tdir = project_dir() / "tasks" / active
        assert (tdir / "task.json").is_file(), f"point {n}: phantom active task {active}"
        assert (project_dir() / "workspaces" / active / "README.md").is_file()
    listed = bar_exe("task", "list", "--json", cwd=repo)
    assert_sane(listed, 0)
    for row in listed.json():  # a listed task is whole and usable
        assert Path(row["worktree"], "README.md").is_file(), f"point {n}: half-made {row}"
    assert_sane(bar_exe("status", cwd=repo), 0)
    doc = bar_exe("doctor", cwd=repo)
    assert_sane(doc, 0)
    tasks = project_dir() / "tasks"
    if tasks.is_dir() and any(not (d / "task.json").exists() for d in tasks.iterdir()):
        assert "half-made" in doc.out or "empty task directory" in doc.out, doc.out


def check_clean_or_complete(repo: Path, n: int) -> None:
    """After clearing: the killed task is gone without a trace, or whole and usable."""
    left = leftovers(repo)
    ids = set(left["task_dirs"])
    for task_id in ids:
        tdir = project_dir() / "tasks" / task_id
        rec = json.loads((tdir / "task.json").read_text())
        assert not (tdir / "creating.json").exists()
        res = bar_exe("run", "--task", rec["id"], "--", "true", cwd=repo)
        assert res.code == 0, f"point {n}: {res.err}"
    assert set(left["workspaces"]) == ids, f"point {n}: {left}"
    assert len(left["worktrees"]) == len(ids), f"point {n}: {left}"
    assert len(left["branches"]) == len(ids), f"point {n}: {left}"
    assert left["refs"] == sorted(f"refs/bar/tasks/{i}" for i in ids), f"point {n}: {left}"


# a kill once the worktree is made, named by its point's label (not its number in a
# probe's trace, which would cost a probe and count on every point before it)
AFTER_THE_WORKTREE = {"BAR_FAULT_AT": "after adding the worktree"}


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
@pytest.mark.parametrize("cleared_by", ["doctor", "task-new"])
def test_sigkill_at_every_point_of_task_new(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleared_by: str
) -> None:
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    points = trace_points(setup(make_repo, "probe"), tmp_path / "trace")
    assert len(points) >= 10, points
    for n in sweep(len(points)):
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"home{n}"))
        repo = setup(make_repo, f"r{n}")
        res = bar_exe("task", "new", "killed", cwd=repo, env={"BAR_FAULT_AT": str(n)})
        assert res.code == -signal.SIGKILL, f"point {n} ({points[n - 1]}) did not crash"
        check_after_kill(repo, n)
        if cleared_by == "doctor":
            doc = bar_exe("doctor", "--repair", cwd=repo)
            assert_sane(doc, 0)
            check_clean_or_complete(repo, n)
            assert "everything checks out" in bar_exe("doctor", cwd=repo).out, f"point {n}"
            other = bar_exe("task", "new", "other", "--json", cwd=repo)
            assert other.code == 0, other.err
        else:
            other = bar_exe("task", "new", "other", "--json", cwd=repo)
            assert other.code == 0, other.err
            assert active_task_id() == other.json()["id"]
            check_clean_or_complete(repo, n)
        ran = bar_exe("run", "--", "true", cwd=repo)
        assert ran.code == 0, f"point {n}: {ran.err}"
        assert bar_exe("doctor", cwd=repo).code == 0


def test_sigkill_while_clearing_a_half_made_task(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next ``bar task new`` is itself killed at each point of clearing what the first
    left: ``bar doctor --repair`` then clears the rest."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-undo"))
    repo = setup(make_repo, "probe-undo")
    assert bar_exe("task", "new", "killed", cwd=repo, env=AFTER_THE_WORKTREE).code < 0
    trace = tmp_path / "trace-undo"
    assert bar_exe("task", "new", "other", cwd=repo, env={"BAR_FAULT_TRACE": str(trace)}).code == 0
    labels = [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]
    last_undo = max(i for i, label in enumerate(labels) if label.startswith("undo:"))
    assert last_undo >= 4, labels
    for m in range(1, last_undo + 2):
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"undo{m}"))
        repo = setup(make_repo, f"undo{m}")
        env = AFTER_THE_WORKTREE
        assert bar_exe("task", "new", "killed", cwd=repo, env=env).code == -signal.SIGKILL
        env = {"BAR_FAULT_AT": str(m)}
        res = bar_exe("task", "new", "other", cwd=repo, env=env)
        assert res.code == -signal.SIGKILL, f"point {m} ({labels[m - 1]}) did not crash"
        check_after_kill(repo, m)
        assert_sane(bar_exe("doctor", "--repair", cwd=repo), 0)
        check_clean_or_complete(repo, m)
        assert "killed" not in bar_exe("task", "list", cwd=repo).out
        assert "everything checks out" in bar_exe("doctor", cwd=repo).out, f"point {m}"


def test_a_branch_that_moved_since_is_kept(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the worktree was made; someone then committed on the branch: the
    half-made task is cleared, but the branch holds work and is kept."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo = setup(make_repo, "moved")
    res = bar_exe("task", "new", "killed", cwd=repo, env=AFTER_THE_WORKTREE)
    assert res.code == -signal.SIGKILL
    (wt,) = leftovers(repo)["worktrees"]
    git(Path(wt), "commit", "-q", "--allow-empty", "-m", "work")
    (branch,) = leftovers(repo)["branches"]
    doc = bar_exe("doctor", "--repair", cwd=repo)
    assert_sane(doc, 0)
    assert "kept" in doc.out, doc.out
    left = leftovers(repo)
    assert left["branches"] == [branch] and left["worktrees"] == [] and left["task_dirs"] == []
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "work"


def test_a_half_made_worktree_holding_new_files_is_kept(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone wrote into the half-made task's worktree: clearing it would lose that, so
    doctor keeps it and says so (exit 8), and ``bar task new`` still works."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo = setup(make_repo, "work")
    assert bar_exe("task", "new", "killed", cwd=repo, env=AFTER_THE_WORKTREE).code < 0
    (wt,) = leftovers(repo)["worktrees"]
    (Path(wt) / "notes.txt").write_text("mine\n")
    doc = bar_exe("doctor", "--repair", cwd=repo)
    assert_sane(doc, 8)
    assert "holds files no checkout made" in doc.out, doc.out
    assert (Path(wt) / "notes.txt").read_text() == "mine\n"
    other = bar_exe("task", "new", "other", "--json", cwd=repo)
    assert other.code == 0 and "could not clear" in other.err, other.err
    (Path(wt) / "notes.txt").unlink()
    assert_sane(bar_exe("doctor", "--repair", cwd=repo), 0)
    assert leftovers(repo)["task_dirs"] == [other.json()["id"]]
    assert len(leftovers(repo)["branches"]) == 1


HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_task_being_created_by_a_live_bar_is_left_alone(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While its task lock is held (its maker is alive), a task being made is neither
    reported nor cleared; once the lock is free, doctor clears it."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo = setup(make_repo, "live")
    assert bar_exe("task", "new", "killed", cwd=repo, env=AFTER_THE_WORKTREE).code < 0
    (task_id,) = leftovers(repo)["task_dirs"]
    lock = project_dir() / "tasks" / task_id / "task.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        before = leftovers(repo)
        assert bar_exe("doctor", "--repair", cwd=repo).code == 0
        other = bar_exe("task", "new", "other", "--json", cwd=repo)
        assert other.code == 0, other.err
        after = leftovers(repo)
        assert task_id in after["task_dirs"] and set(before["worktrees"]) <= set(after["worktrees"])
    finally:
        holder.kill()
        holder.wait()
    assert bar_exe("doctor", "--repair", cwd=repo).code == 0
    assert leftovers(repo)["task_dirs"] == [other.json()["id"]]
