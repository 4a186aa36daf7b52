"""The board's moves killed at every crash point (``bar.base.faults``): starting a planned
task, and closing one out. After each kill the same command run again finishes the move,
``bar doctor --repair`` leaves nothing to report, and the worktree holds exactly the last
recorded state."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from helpers import bar_exe, fault_trace, point_at, project_dir, sweep, task_dir, timed

from conftest import MakeRepo, git


def setup(make_repo: MakeRepo, name: str) -> Path:
    repo = make_repo(name=name)
    assert bar_exe("init", cwd=repo).code == 0
    config = project_dir() / "config.yaml"
    config.write_text(config.read_text().replace("enabled: true", "enabled: false"))
    return repo


def planned_with_work(repo: Path) -> str:
    """A planned task that was started, did a step and had its worktree removed: its next
    start must bring the step's file back."""
    made = bar_exe("task", "new", "job", "--plan", "--json", cwd=repo)
    assert made.code == 0, made.err
    task_id: str = made.json()["id"]
    ran = bar_exe("run", "--task", "job", "--", "sh", "-c", "echo work > w.txt", cwd=repo)
    assert ran.code == 0, ran.err
    assert bar_exe("worktree", "remove", "job", cwd=repo).code == 0
    return task_id


def board(task_id: str) -> dict[str, str]:
    data: dict[str, str] = json.loads((task_dir(task_id) / "task.json").read_text())["board"]
    return data


def doctor_clean(repo: Path, n: int) -> None:
    fixed = bar_exe("doctor", "--repair", cwd=repo)
    assert fixed.code == 0, f"point {n}: {fixed.out}{fixed.err}"
    again = bar_exe("doctor", "--json", cwd=repo)
    assert again.code == 0 and again.json()["findings"] == [], f"point {n}: {again.out}"


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_sigkill_at_every_point_of_task_start(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    probe = setup(make_repo, "probe")
    probe_id = planned_with_work(probe)
    points = fault_trace(probe, tmp_path, "task", "start", "job")
    assert len(points) >= 5, points
    for n in sweep(len(points)):
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"home{n}"))
        repo = setup(make_repo, f"r{n}")
        task_id = planned_with_work(repo)
        at = point_at(points, n, probe_id, task_id)
        killed = bar_exe("task", "start", "job", cwd=repo, env={"BAR_FAULT_AT": at})
        if killed.code == 0 and timed(at):
            continue  # the clock did not call for that file this time: no such point
        assert killed.code == -signal.SIGKILL, f"point {n} ({at}) did not crash"
        listed = bar_exe("task", "list", "--json", cwd=repo)
        assert listed.code == 0, f"point {n}: {listed.err}"
        if n % 2:  # half the time doctor first, half the time the command again
            doctor_clean(repo, n)
        again = bar_exe("task", "start", "job", cwd=repo)
        assert again.code == 0, f"point {n} ({points[n - 1]}): {again.err}"
        wt = project_dir() / "workspaces" / task_id
        assert (wt / "w.txt").read_text() == "work\n", f"point {n}"
        assert board(task_id) == {"status": "in_progress", "owner": "", "worktree": "job"}
        doctor_clean(repo, n)
        status = bar_exe("status", "--json", "--task", "job", cwd=repo)
        assert status.json()["unrecorded_changes"] is False, f"point {n}"
        ran = bar_exe("run", "--task", "job", "--", "true", cwd=repo)
        assert ran.code == 0, f"point {n}: {ran.err}"


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_sigkill_at_every_point_of_closing_out(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    probe = setup(make_repo, "probe")
    probe_id = planned_with_work(probe)
    assert bar_exe("task", "start", "job", cwd=probe).code == 0
    points = fault_trace(probe, tmp_path, "worktree", "remove", "job", "--complete")
    for n in sweep(len(points)):
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"close{n}"))
        repo = setup(make_repo, f"c{n}")
        task_id = planned_with_work(repo)
        assert bar_exe("task", "start", "job", cwd=repo).code == 0
        at = point_at(points, n, probe_id, task_id)
        killed = bar_exe(
            "worktree", "remove", "job", "--complete", cwd=repo, env={"BAR_FAULT_AT": at}
        )
        if killed.code == 0 and timed(at):
            continue  # the clock did not call for that file this time: no such point
        assert killed.code == -signal.SIGKILL, f"point {n} ({at}) did not crash"
        if n % 2:
            doctor_clean(repo, n)
        rec = json.loads((task_dir(task_id) / "task.json").read_text())
        if rec["status"] == "active":  # the close did not happen: it is run again
            again = bar_exe("task", "close", "job", cwd=repo)
            assert again.code == 0, f"point {n} ({points[n - 1]}): {again.err}"
        assert board(task_id) == {"status": "completed", "owner": "", "worktree": ""}
        assert not (project_dir() / "workspaces" / task_id).exists(), f"point {n}"
        doctor_clean(repo, n)
        snapshot = git(repo, "rev-parse", f"refs/bar/tasks/{task_id}").strip()
        assert git(repo, "show", f"{snapshot}:w.txt") == "work\n"
