"""Many bar processes at once, and bar processes that die: nothing is lost or mixed up.

Every test here runs the installed ``bar`` executable in real child processes against a real
repository (docs/internals/record.md, "Many commands at once"): tasks are created and run in
parallel, writers race for one task's lock, waiters are told whom they wait for, give up
when asked to, and a lock whose holder was SIGKILLed never blocks the next command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BAR_EXE,
    Ran,
    bar,
    bar_exe,
    files_in_commit,
    ledger,
    new_task,
    project_dir,
    replay_patches,
    running_task,
    seen_alive_after,
    set_config,
    task_dir,
)

from conftest import git

TASKS = 4
RUNS_PER_TASK = 8
PATIENCE = 120.0  # seconds: generous, for a loaded 2-core machine


def wait_until(what: str, cond: Callable[[], bool], timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def exe(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Ran:
    return bar_exe(*args, cwd=cwd, env={"BAR_QUIET": "1", **(env or {})}, timeout=300)


def assert_clean_error(res: Ran) -> None:
    assert "Traceback" not in res.err, res.err
    assert res.code != 70, res.err


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON-lines file; a line that does not parse fails the test."""
    records = []
    for n, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if line:
            rec = json.loads(line)
            assert isinstance(rec, dict), f"line {n} of {path} is not an object"
            records.append(rec)
    assert path.read_bytes().endswith(b"\n"), f"{path} ends in a torn line"
    return records


def assert_ledger_sound(repo: Path, task: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    """Gap-free step ids, every line parses, the patches replay to the last snapshot."""
    steps = read_lines(task_dir(task["id"]) / "ledger.jsonl")
    assert [s["step_id"] for s in steps] == [f"{n:04d}" for n in range(1, len(steps) + 1)]
    snapshots = [s["snapshot"] for s in steps if s.get("snapshot")]
    last = snapshots[-1] if snapshots else task["base_commit"]
    assert git(repo, "rev-parse", task["snapshot_ref"]).strip() == last
    replayed = replay_patches(repo, task["id"], task["base_commit"], tmp / f"replay-{task['id']}")
    assert replayed == files_in_commit(repo, last)
    for step in steps:  # each step's snapshot chains onto the one before it
        if step.get("snapshot") and step["snapshot"] != step["snapshot_before"]:
            parent = git(repo, "rev-parse", f"{step['snapshot']}^").strip()
            assert parent == step["snapshot_before"]
    assert not (task_dir(task["id"]) / "running.json").exists()
    leftovers = [p.name for p in (task_dir(task["id"]) / "artifacts").glob("*.tmp")]
    assert leftovers == []
    return steps


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    # the developer commits the policy file bar init wrote (the policy stays enabled)
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "add bar policy")
    return repo


# --- many tasks, many runs ----------------------------------------------------------


def test_parallel_tasks_and_runs_lose_nothing(inited: Path, tmp_path: Path) -> None:
    repo = inited
    with ThreadPoolExecutor(max_workers=TASKS) as pool:
        created = list(
            pool.map(lambda n: exe("task", "new", f"par-{n}", "--json", cwd=repo), range(TASKS))
        )
    for res in created:
        assert res.code == 0, res.err
    tasks = [res.json() for res in created]
    assert len({t["id"] for t in tasks}) == TASKS

    def script(n: int) -> list[str]:
        return ["sh", "-c", f"echo {n} >> log.txt; echo {n} > f{n}.txt; echo out-{n}"]

    jobs: list[tuple[str, list[str]]] = []
    for n in range(RUNS_PER_TASK):
        for t in tasks:
            jobs.append((t["id"], ["run", "--task", t["id"], "--no-pty", "--", *script(n)]))
        # readers run alongside the writers and must never fail or see a broken file
        if n % 4 == 0:
            for t in tasks:
                jobs.append((t["id"], ["log", "--task", t["id"]]))
                jobs.append((t["id"], ["status", "--task", t["id"], "--json"]))
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        results = list(pool.map(lambda job: (job, exe(*job[1], cwd=repo)), jobs))
    runs = 0
    for (_tid, args), res in results:
        assert_clean_error(res)
        assert res.code == 0, f"bar {' '.join(args)}: {res.err}"
        runs += args[0] == "run"
    assert runs == TASKS * RUNS_PER_TASK

    for t in tasks:
        steps = assert_ledger_sound(repo, t, tmp_path)
        assert len(steps) == RUNS_PER_TASK
        assert all(s["kind"] == "run" and s["exit_code"] == 0 for s in steps)
        assert sorted(s["cmd"][2] for s in steps) == sorted(script(n)[2] for n in range(8))
        # the steps ran one after another, in ledger order
        order = [s["cmd"][2].split()[1] for s in steps]
        final = files_in_commit(repo, steps[-1]["snapshot"])
        assert final["log.txt"] == b"-:" + "".join(f"{n}\n" for n in order).encode()
        for s in steps:
            output = (task_dir(t["id"]) / s["artifacts"]["output"]).read_text()
            assert f"out-{s['cmd'][2].split()[1]}" in output

    events = read_lines(project_dir() / "events.jsonl")
    assert all(e["version"] == 2 and isinstance(e["ts"], float) for e in events)
    for kind in ("task.created", "worktree.create.before", "worktree.create.after"):
        assert sorted(e["task"]["id"] for e in events if e["event"] == kind) == sorted(
            t["id"] for t in tasks
        )
    registered = json.loads((project_dir() / "workspaces" / "index.json").read_text())
    assert sorted(e["task_id"] for e in registered["worktrees"]) == sorted(t["id"] for t in tasks)
    assert all(e["status"] == "active" for e in registered["worktrees"])
    state = json.loads((project_dir() / "state.json").read_text())
    assert state["active_task_id"] in {t["id"] for t in tasks}


# --- two writers in one task -----------------------------------------------------------


class Holder:
    """A ``bar run`` whose command holds the task until the test releases it."""

    def __init__(self, repo: Path, tmp: Path, *extra: str, name: str = "holder") -> None:
        signals = tmp / "signals"  # (a step's /tmp is its own: this one it may write)
        signals.mkdir(exist_ok=True)
        set_config(sandbox={"allow_write": [str(signals)]})
        self.started = signals / f"{name}.started"
        self.release = signals / f"{name}.release"
        self.err_path = tmp / f"{name}.stderr"
        script = (
            f"echo partial > {name}.txt; touch '{self.started}'; "
            f"while [ ! -e '{self.release}' ]; do sleep 0.05; done; echo done >> {name}.txt"
        )
        self.argv = ["sh", "-c", script]
        with self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [BAR_EXE, "run", *extra, "--no-pty", "--", *self.argv],
                cwd=repo,
                # (run by bar itself: the pid that holds the lock is this process's, not a
                # fork's of the resident)
                env={**os.environ, "BAR_RESIDENT_IDLE": "0"},
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        wait_until("the holder's command to start", self.started.exists)
        # what a step writes before bar's next sign of life (a hundred a second) is its
        # own if bar is killed (``bar.step.interrupted``)
        seen_alive_after(running_task(self.argv), self.started)

    def finish(self) -> int:
        self.release.touch()
        return self.proc.wait(timeout=PATIENCE)

    def stop(self) -> None:
        self.release.touch()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def holder_factory(inited: Path, tmp_path: Path) -> Any:
    made: list[Holder] = []

    def make(*extra: str, name: str = "holder") -> Holder:
        h = Holder(inited, tmp_path, *extra, name=name)
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


def test_second_writer_waits_with_a_notice_and_both_are_recorded(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], holder_factory: Any
) -> None:
    t = new_task(capfd, "race")
    holder = holder_factory()
    err_path = tmp_path / "waiter.stderr"
    with err_path.open("wb") as err:
        waiter = subprocess.Popen(
            [BAR_EXE, "run", "--no-pty", "--", "sh", "-c", "echo second >> holder.txt"],
            cwd=inited,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_until("the waiting notice", lambda: b"waiting for" in err_path.read_bytes())
        notice = err_path.read_text()
        assert notice.startswith("bar: waiting for task race")
        assert f"pid {holder.proc.pid}" in notice
        assert waiter.poll() is None  # still waiting, not failed
        assert holder.finish() == 0
        assert waiter.wait(timeout=PATIENCE) == 0, err_path.read_text()
    finally:
        if waiter.poll() is None:
            waiter.kill()
    steps = assert_ledger_sound(inited, t, tmp_path)
    assert [s["cmd"] for s in steps] == [
        holder.argv,
        ["sh", "-c", "echo second >> holder.txt"],
    ]
    final = files_in_commit(inited, steps[-1]["snapshot"])
    assert final["holder.txt"] == b"-:partial\ndone\nsecond\n"
    assert "Traceback" not in err_path.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--no-wait", "--", "true"],
        ["rollback", "--no-wait"],
        ["apply", "--no-wait"],
    ],
    ids=["run", "rollback", "apply"],
)
def test_no_wait_fails_at_once_with_exit_7(
    inited: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    holder_factory: Any,
    args: list[str],
) -> None:
    t = new_task(capfd, "busy")
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo one > one.txt").code == 0
    holder = holder_factory()
    res = exe(*args, cwd=inited)
    assert holder.proc.poll() is None  # it did not wait for the holder to finish
    assert res.code == 7, res.err
    assert_clean_error(res)
    assert res.err.startswith("bar: task busy") and "is busy" in res.err
    assert f"pid {holder.proc.pid}" in res.err
    assert "waiting for" not in res.err
    assert holder.finish() == 0
    assert [s["step_id"] for s in assert_ledger_sound(inited, t, tmp_path)] == ["0001", "0002"]


def test_lock_timeout_gives_up_with_a_clear_message(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], holder_factory: Any
) -> None:
    t = new_task(capfd, "slow")
    holder = holder_factory()
    res = exe(
        "run", "--no-pty", "--", "touch", "never.txt", cwd=inited, env={"BAR_LOCK_TIMEOUT": "1"}
    )
    assert holder.proc.poll() is None
    assert res.code == 7, res.err
    assert_clean_error(res)
    assert "task slow" in res.err and "is busy" in res.err
    assert "gave up after 1 s" in res.err and "BAR_LOCK_TIMEOUT" in res.err
    assert holder.finish() == 0
    steps = assert_ledger_sound(inited, t, tmp_path)
    assert [s["cmd"] for s in steps] == [holder.argv]
    assert "never.txt" not in files_in_commit(inited, steps[-1]["snapshot"])


def test_lock_of_a_killed_process_is_not_stale(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], holder_factory: Any
) -> None:
    t = new_task(capfd, "killed")
    holder = holder_factory()
    lock = task_dir(t["id"]) / "task.lock"
    assert json.loads(lock.read_text())["pid"] == holder.proc.pid
    # Kill bar itself, not its child: the command is still running (orphaned) and must
    # not keep the task locked either.
    os.kill(holder.proc.pid, signal.SIGKILL)
    assert holder.proc.wait(timeout=PATIENCE) == -signal.SIGKILL
    res = exe(
        "run", "--no-wait", "--no-pty", "--", "sh", "-c", "echo after > after.txt", cwd=inited
    )
    assert res.code == 0, res.err
    assert "interrupted" in res.err  # the dead holder's step is recorded first
    holder.release.touch()
    steps = assert_ledger_sound(inited, t, tmp_path)
    assert [s["step_id"] for s in steps] == ["0001", "0002"]
    assert steps[0]["cmd"] == holder.argv and steps[0]["interrupted"] is True
    assert steps[0]["exit_code"] is None
    assert files_in_commit(inited, steps[0]["snapshot"])["holder.txt"] == b"-:partial\n"
    assert steps[1]["cmd"][-1] == "echo after > after.txt" and steps[1]["exit_code"] == 0
    assert ledger(t["id"]) == steps
