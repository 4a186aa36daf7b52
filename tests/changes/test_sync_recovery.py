"""``bar task sync`` killed at every crash point: the next command finishes it or it never
happened, and the task's base always matches its last recorded state."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from helpers import (
    bar_exe,
    files_in_commit,
    files_on_disk,
    ledger,
    replay_patches,
    sweep,
    task_dir,
)

from conftest import git


def setup(repo: Path) -> tuple[dict[str, str], str]:
    """A task with one step, then main moves on: (the task, main's new tip)."""
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "policy")
    res = bar_exe("task", "new", "crashy", "--json", cwd=repo)
    assert res.code == 0, res.err
    task: dict[str, str] = res.json()
    assert bar_exe("run", "--", "sh", "-c", "echo mine > mine.txt", cwd=repo).code == 0
    # the step wrote the worktree's top directory just before its snapshot, so it is in
    # the racy window and the next command would rescan it, or not, by the clock; one
    # more command, later, settles it: the sync then passes the same crash points always
    time.sleep(0.1)
    assert bar_exe("run", "--", "true", cwd=repo).code == 0
    (repo / "up.txt").write_text("up\n")
    git(repo, "add", "up.txt")
    git(repo, "commit", "-qm", "upstream")
    return task, git(repo, "rev-parse", "main").strip()


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_sigkill_at_every_point_of_a_sync(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = make_repo(name="probe")
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    setup(probe)
    trace = tmp_path / "trace"
    assert bar_exe("task", "sync", cwd=probe, env={"BAR_FAULT_TRACE": str(trace)}).code == 0
    points = trace.read_text().splitlines()
    assert len(points) >= 4
    for n in sweep(len(points)):
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"home{n}"))
        repo = make_repo(name=f"sync{n}")
        task, tip = setup(repo)
        passed = tmp_path / f"trace{n}"
        env = {"BAR_FAULT_AT": str(n), "BAR_FAULT_TRACE": str(passed)}
        res = bar_exe("task", "sync", cwd=repo, env=env)
        # (a path the clock made one point shorter, a rescan left out, never reaches n)
        reached = len(passed.read_text().splitlines()) >= n
        assert res.code == -signal.SIGKILL or not reached, f"point {n} ({points[n - 1]})"
        nxt = bar_exe("run", "--", "true", cwd=repo)
        assert nxt.code == 0, nxt.err
        assert bar_exe("doctor", cwd=repo).code == 0, f"point {n} ({points[n - 1]})"
        steps = ledger(task["id"])
        synced = [s for s in steps if s["kind"] == "sync"]
        base = json.loads((task_dir(task["id"]) / "task.json").read_text())["base_commit"]
        assert base == (tip if synced else task["base_commit"]), f"point {n} ({points[n - 1]})"
        assert not (task_dir(task["id"]) / "sync.json").exists()
        last = [s for s in steps if s.get("snapshot")][-1]["snapshot"]
        wt = Path(task["worktree"])
        assert files_on_disk(wt) == files_in_commit(repo, last)
        assert (wt / "up.txt").exists() == bool(synced), f"point {n} ({points[n - 1]})"
        replayed = replay_patches(repo, task["id"], task["base_commit"], tmp_path / f"r{n}")
        assert replayed == files_in_commit(repo, last)
