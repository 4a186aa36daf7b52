"""Crash recovery: bar killed at every crash point loses nothing (bar.step.recovery)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import (
    BAR_EXE,
    bar_exe,
    files_in_commit,
    files_on_disk,
    ledger,
    project_dir,
    replay_patches,
    seen_alive_after,
    sweep,
    task_dir,
    timed,
)

from conftest import git


def setup_task(repo: Path) -> dict[str, str]:
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "policy")
    res = bar_exe("task", "new", "crashy", "--json", cwd=repo)
    assert res.code == 0, res.err
    task: dict[str, str] = res.json()
    for i in range(2):
        assert bar_exe("run", "--", "sh", "-c", f"echo {i} > f{i}.txt", cwd=repo).code == 0
    return task


def check_consistent(repo: Path, task: dict[str, str], tmp: Path) -> list[dict[str, object]]:
    lines = (task_dir(task["id"]) / "ledger.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in lines if line.strip()]  # every line parses
    assert [s["step_id"] for s in steps] == [f"{i:04d}" for i in range(1, len(steps) + 1)]
    last = [s for s in steps if s.get("snapshot")][-1]["snapshot"]
    assert replay_patches(repo, task["id"], task["base_commit"], tmp) == files_in_commit(repo, last)
    if Path(task["worktree"]).is_dir():
        assert files_on_disk(Path(task["worktree"])) == files_in_commit(repo, last)
    assert not (task_dir(task["id"]) / "running.json").exists()
    assert not (task_dir(task["id"]) / "rollback.json").exists()
    return steps


def crash_points(repo: Path, args: list[str], trace: Path) -> int:
    res = bar_exe(*args, cwd=repo, env={"BAR_FAULT_TRACE": str(trace)})
    assert res.code in (0, 1), res.err
    return len(trace.read_text().splitlines())


def after_crash(repo: Path, task: dict[str, str], tmp: Path) -> list[dict[str, object]]:
    doc = bar_exe("doctor", "--repair", cwd=repo)
    assert doc.code == 0, doc.out + doc.err
    nxt = bar_exe("run", "--", "true", cwd=repo)
    assert nxt.code == 0, nxt.err
    assert bar_exe("doctor", cwd=repo).code == 0
    return check_consistent(repo, task, tmp)


COMMANDS = {
    "run": ["run", "--", "sh", "-c", "echo crashed > made-by-step.txt; rm f0.txt"],
    "rollback": ["rollback", "--to", "1"],
    "apply": ["apply", "-m", "crash test"],
}


FSIZE_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
from bar.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigkill_at_every_write_point(
    command: str, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe_repo = make_repo(name="probe")
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    probe = setup_task(probe_repo)
    total = crash_points(probe_repo, COMMANDS[command], tmp_path / "trace")
    assert total >= 4, "the command passes too few crash points to be tested"
    # each point by its label and how many of that label came before it: the number of
    # points varies with timing (a stamps file is rewritten only when stamps went stale)
    labels = [line.split(" ", 1)[1] for line in (tmp_path / "trace").read_text().splitlines()]
    for n in sweep(len(labels)):
        label = labels[n - 1]
        home = tmp_path / f"home{n}"
        monkeypatch.setenv("BAR_HOME", str(home))
        repo = make_repo(name=f"{command}{n}")
        task = setup_task(repo)
        main_before = git(repo, "rev-parse", "main").strip()
        at = f"{label.replace(probe['id'], task['id'])}@{labels[:n].count(label)}"
        res = bar_exe(*COMMANDS[command], cwd=repo, env={"BAR_FAULT_AT": at})
        if res.code == 0 and timed(label):
            continue  # (the clock did not call for that file this time: no such point)
        assert res.code == -signal.SIGKILL, f"point {n} ({at}) did not crash: {res.err}"
        steps = after_crash(repo, task, tmp_path / f"replay{n}")
        wt = Path(task["worktree"])
        if command == "run" and (wt / "made-by-step.txt").exists():
            # the step's work survived the crash and is attributed to it
            recorded = [s for s in steps if "made-by-step.txt" in s["diff_stat"]["file_list"]]  # type: ignore[index]
            assert recorded and recorded[0]["kind"] == "run"
        if command == "apply":
            landed = git(repo, "rev-parse", "main").strip() != main_before
            applied = [s for s in steps if s["kind"] == "apply"]
            assert bool(applied) == landed, f"point {n}: apply landed={landed} recorded={applied}"
            assert not (repo / ".git/index.lock").exists(), f"point {n}: the index lock was left"
            if landed:
                assert git(repo, "status", "--porcelain") == ""


def start_a_long_step(repo: Path, task: dict[str, str]) -> subprocess.Popen[bytes]:
    """``bar run`` of a step that writes work.txt and then sleeps, in a process group
    of its own; returns once the file is written. Unconfined: a confined command has a
    session of its own, and these tests kill bar's group, command included."""
    wt = Path(task["worktree"])
    # bar itself runs the step, to be killed with it (a step the resident serves dies
    # with its caller a moment later: tests/changes/fast/test_resident.py)
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-sandbox", "--", "sh", "-c", "echo partial > work.txt; sleep 60"],
        cwd=repo,
        start_new_session=True,
        env={**os.environ, "BAR_RESIDENT_IDLE": "0"},
    )
    # its content, not the file alone: the shell makes the file, then writes to it, and a
    # write after bar was killed is rightly no step's
    deadline = time.time() + 60
    while not _holds(wt / "work.txt", b"partial\n") and time.time() < deadline:
        time.sleep(0.05)
    # bar shows it is alive 100 times a second: what the step wrote before that is its own
    # (a write in the last instant before bar was killed is credited to no step:
    # ``bar.step.interrupted``)
    seen_alive_after(task["id"], wt / "work.txt")
    return proc


def _holds(path: Path, content: bytes) -> bool:
    try:
        return path.read_bytes() == content
    except FileNotFoundError:
        return False


def test_killed_during_the_command_records_an_interrupted_step(repo: Path, tmp_path: Path) -> None:
    task = setup_task(repo)
    proc = start_a_long_step(repo, task)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    os.killpg(proc.pid, signal.SIGKILL)  # the orphaned command too
    doc = bar_exe("doctor", "--json", cwd=repo)
    assert doc.code == 0
    assert any("interrupted" in f["message"] for f in doc.json()["findings"])
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0 and "interrupted" in res.err
    steps = check_consistent(repo, task, tmp_path / "replay")
    crashed = steps[2]
    assert crashed["interrupted"] is True and crashed["exit_code"] is None
    assert crashed["diff_stat"]["file_list"] == ["work.txt"]  # type: ignore[index]
    assert steps[3]["cmd"] == ["true"]


def test_an_interrupted_step_lasts_until_bar_died_not_until_it_was_found(
    repo: Path, tmp_path: Path
) -> None:
    task = setup_task(repo)
    proc = start_a_long_step(repo, task)
    time.sleep(2.5)  # the step runs a while (its heartbeat touches running.json)...
    killed_at = time.time()
    os.killpg(proc.pid, signal.SIGKILL)  # ...then bar and its command are killed
    proc.wait(timeout=30)
    time.sleep(6)  # and only later does a command find it
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0 and "interrupted" in res.err
    crashed = [s for s in ledger(task["id"]) if s.get("interrupted")][-1]
    found_after = (time.time() - killed_at) * 1000
    # it ran at least the 2.5 s, and ended near the kill (the heartbeat is 1 s), long
    # before it was found
    assert 2000 <= crashed["duration_ms"] < found_after - 3000, crashed


def test_a_hard_rollback_killed_inside_git_reset_is_finished(repo: Path, tmp_path: Path) -> None:
    """git's reset, killed with bar, leaves the worktree's index.lock: recovery removes
    the lock its own reset made and finishes the rollback (found by bench/crash_trials)."""
    task = setup_task(repo)
    wt = Path(task["worktree"])
    trace = tmp_path / "trace"
    crash_points(repo, ["rollback", "--hard", "--to", "1"], trace)
    labels = [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]
    assert "after restoring the worktree" in labels  # just before the reset
    assert bar_exe("rollback", "--to", "2", cwd=repo).code == 0  # back where we were
    # by its label: the points before it vary with the clock (``helpers.timed``)
    at = {"BAR_FAULT_AT": "after restoring the worktree@1"}
    res = bar_exe("rollback", "--hard", "--to", "1", cwd=repo, env=at)
    assert res.code == -signal.SIGKILL, res.err
    lock = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-path", "index.lock").strip())
    lock.touch()  # what the killed `git reset` leaves
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert not lock.exists()
    steps = check_consistent(repo, task, tmp_path / "replay")
    assert [s["kind"] for s in steps][-2:] == ["rollback", "run"]


def test_doctor_quarantines_bad_lines_and_numbering_continues(repo: Path, tmp_path: Path) -> None:
    task = setup_task(repo)
    path = task_dir(task["id"]) / "ledger.jsonl"
    with path.open("ab") as fh:
        fh.write(b'{"step_id": "0003", "kind": "run", "cmd": [tr')
    res = bar_exe("doctor", cwd=repo)
    assert res.code == 8 and "unreadable ledger line" in res.out and "--repair" in res.out
    res = bar_exe("doctor", "--repair", cwd=repo)
    assert res.code == 0 and "moved 1 line(s)" in res.out
    corrupt = path.with_name("ledger.jsonl.corrupt").read_bytes()
    assert b'"step_id": "0003"' in corrupt
    assert bar_exe("run", "--", "true", cwd=repo).code == 0
    steps = check_consistent(repo, task, tmp_path / "replay")
    assert [s["step_id"] for s in steps] == ["0001", "0002", "0003"]


def test_doctor_recreates_a_deleted_worktree_at_the_last_state(repo: Path, tmp_path: Path) -> None:
    import shutil

    task = setup_task(repo)
    wt = Path(task["worktree"])
    before = files_on_disk(wt)
    shutil.rmtree(wt)
    res = bar_exe("doctor", "--repair", cwd=repo)
    assert res.code == 0, res.out + res.err
    assert files_on_disk(wt) == before
    assert bar_exe("run", "--", "true", cwd=repo).code == 0
    check_consistent(repo, task, tmp_path / "replay")


def test_doctor_fixes_permissions_and_missing_pieces(repo: Path, tmp_path: Path) -> None:
    task = setup_task(repo)
    tdir = task_dir(task["id"])
    os.chmod(tdir / "ledger.jsonl", 0o644)
    os.chmod(project_dir(), 0o755)
    (tdir / "artifacts" / "0001.patch").unlink()
    git(repo, "update-ref", "-d", task["snapshot_ref"])
    res = bar_exe("doctor", cwd=repo)
    assert res.code == 8
    for text in (
        "0644 should be 0600",
        "0755 should be 0700",
        "0001.patch is missing",
        "snapshot ref is missing",
    ):
        assert text in res.out
    assert bar_exe("doctor", "--repair", cwd=repo).code == 0
    assert bar_exe("doctor", cwd=repo).out.endswith("everything checks out\n")
    assert (tdir / "ledger.jsonl").stat().st_mode & 0o777 == 0o600
    check_consistent(repo, task, tmp_path / "replay")


def test_a_write_that_fails_says_so_and_keeps_the_record(repo: Path, tmp_path: Path) -> None:
    """A full disk, simulated by a file-size limit: the big output cannot be written."""
    import sys

    task = setup_task(repo)
    before = (task_dir(task["id"]) / "ledger.jsonl").read_bytes()
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            FSIZE_LIMITED,
            "run",
            "--",
            sys.executable,
            "-c",
            "print('x' * 1_000_000); open('small.txt', 'w').write('ok')",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in res.stderr
    assert "could not write" in res.stderr and "File too large" in res.stderr
    after = (task_dir(task["id"]) / "ledger.jsonl").read_bytes()
    assert after.startswith(before)  # nothing recorded before was touched
    assert bar_exe("run", "--", "true", cwd=repo).code == 0
    steps = check_consistent(repo, task, tmp_path / "replay")
    assert any("small.txt" in s["diff_stat"]["file_list"] for s in steps)  # type: ignore[index]
