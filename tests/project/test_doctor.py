"""``bar doctor``: what it finds, what it repairs, and that its exit code tells the truth.

Doctor exits 0 only when nothing is left: check-only, when it found no error; with
``--repair``, when every error was repaired and no repair failed. Otherwise it exits 8.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    bar_exe,
    bar_home,
    files_in_commit,
    files_on_disk,
    ledger,
    new_task,
    task_dir,
    worktree,
)

from conftest import git

PROBLEMS_REMAIN = 8


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """An initialised repository (policy committed) with a task of two steps."""
    assert bar(capfd, "init").code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "add bar policy")
    made = new_task(capfd, "doc")
    for i in range(2):
        res = bar(capfd, "run", "--", "sh", "-c", f"echo {i} > f{i}.txt")
        assert res.code == 0, res.err
    return made


def ref_lock(repo: Path, task: dict[str, Any]) -> Path:
    return repo / ".git" / f"{task['snapshot_ref']}.lock"


def leave_ref_lock(repo: Path, task: dict[str, Any], *, age: float = 3600) -> Path:
    """The ``<ref>.lock`` a ``git update-ref`` killed mid-way leaves behind."""
    lock = ref_lock(repo, task)
    lock.write_text(git(repo, "rev-parse", task["snapshot_ref"]))
    then = time.time() - age
    os.utime(lock, (then, then))
    return lock


def doctor(capfd: pytest.CaptureFixture[str]) -> tuple[int, str, dict[str, Any]]:
    """Check-only doctor, as text and as JSON: both must tell the same story."""
    text = bar(capfd, "doctor")
    as_json = bar(capfd, "doctor", "--json")
    data: dict[str, Any] = as_json.json()
    assert as_json.code == text.code
    assert data["ok"] is (text.code == 0)
    return text.code, text.out, data


def snapshot_matches_worktree(repo: Path, task: dict[str, Any]) -> None:
    last = [s for s in ledger(task["id"]) if s.get("snapshot")][-1]["snapshot"]
    assert git(repo, "rev-parse", task["snapshot_ref"]).strip() == last
    assert files_in_commit(repo, last) == files_on_disk(worktree(task))


# --- a stale lock on the snapshot ref ----------------------------------------------------


def test_a_run_after_a_stale_ref_lock_records_its_step(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    lock = leave_ref_lock(repo, task)
    res = bar(capfd, "run", "--", "sh", "-c", "echo 2 > f2.txt")
    assert res.code == 0, res.err
    assert "lock" in res.err and str(lock) in res.err  # said on stderr
    assert not lock.exists()
    steps = ledger(task["id"])
    assert [s["step_id"] for s in steps] == ["0001", "0002", "0003"]
    assert steps[-1]["kind"] == "run" and steps[-1]["cmd"] == ["sh", "-c", "echo 2 > f2.txt"]
    assert not steps[-1].get("interrupted")
    assert steps[-1]["diff_stat"]["file_list"] == ["f2.txt"]
    snapshot_matches_worktree(repo, task)


def test_a_fresh_stale_ref_lock_is_removed_too(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """Created a moment ago (a kill right before this command): still bar's to remove."""
    lock = leave_ref_lock(repo, task, age=0)
    res = bar(capfd, "rollback")
    assert res.code == 0, res.err
    assert not lock.exists()
    assert ledger(task["id"])[-1]["kind"] == "rollback"
    snapshot_matches_worktree(repo, task)


def test_a_kill_while_moving_the_ref_is_recorded_then_runs_continue(
    repo: Path, task: dict[str, Any], tmp_path: Path
) -> None:
    """bar killed while git held the ref's lock, its command done: the step is recorded
    with its changes and its exit code (the command had ended), and the next step is
    recorded normally."""
    cmd = ["run", "--", "sh", "-c", "echo killed > k.txt"]
    trace = tmp_path / "trace"
    probe = bar_exe(
        "run", "--", "sh", "-c", "echo probe > p.txt", cwd=repo, env={"BAR_FAULT_TRACE": str(trace)}
    )
    assert probe.code == 0, probe.err
    labels = [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]
    # the point by its label, not its number: the points before it vary with the clock
    # (``helpers.timed``)
    point = f"before moving {task['snapshot_ref']}"
    assert point in labels
    killed = bar_exe(*cmd, cwd=repo, env={"BAR_FAULT_AT": f"{point}@1"})
    assert killed.code == -signal.SIGKILL
    lock = leave_ref_lock(repo, task)
    res = bar_exe("run", "--", "sh", "-c", "echo after > a.txt", cwd=repo)
    assert res.code == 0, res.err
    assert "it exited 0; bar stopped" in res.err and "lock" in res.err
    *_, crashed, after = ledger(task["id"])
    assert not crashed.get("interrupted") and crashed["exit_code"] == 0
    assert crashed["diff_stat"]["file_list"] == ["k.txt"]
    assert after["cmd"] == ["sh", "-c", "echo after > a.txt"] and not after.get("interrupted")
    assert after["diff_stat"]["file_list"] == ["a.txt"]
    assert not lock.exists()
    snapshot_matches_worktree(repo, task)
    assert bar_exe("doctor", cwd=repo).code == 0


def test_doctor_reports_and_repairs_a_stale_ref_lock(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    lock = leave_ref_lock(repo, task)
    code, out, data = doctor(capfd)
    assert code == PROBLEMS_REMAIN
    assert str(lock) in out and "bar doctor --repair" in out
    assert [f["where"] for f in data["remaining"]] == [str(lock)]
    res = bar(capfd, "doctor", "--repair")
    assert res.code == 0, res.out + res.err
    assert "repaired: removed it" in res.out
    assert not lock.exists()
    assert bar(capfd, "doctor").out.endswith("everything checks out\n")
    assert bar(capfd, "run", "--", "true").code == 0
    assert ledger(task["id"])[-1]["cmd"] == ["true"]


def test_doctor_leaves_the_ref_lock_of_a_busy_task_alone(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """A task whose lock a live bar holds may be moving its ref right now."""
    import fcntl

    lock = leave_ref_lock(repo, task)
    with (task_dir(task["id"]) / "task.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        res = bar(capfd, "doctor", "--repair")
    assert lock.exists()
    assert str(lock) not in res.out


# --- journals that cannot be read ------------------------------------------------------

JOURNALS = {
    "running.json": os.urandom(64) + b"\xff",
    "rollback.json": b'{"version": 1, "step_id": "0003", "target": "nowhere"',
    "apply.json": b'{"version": 1, "step": {}}',
}


@pytest.mark.parametrize("name", sorted(JOURNALS))
def test_a_garbled_journal_is_quarantined_and_the_ledger_rules(
    name: str, repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    journal = task_dir(task["id"]) / name
    journal.write_bytes(JOURNALS[name])
    journal.chmod(0o600)
    (worktree(task) / "half-done.txt").write_text("left by the interrupted operation\n")
    assert bar(capfd, "run", "--", "true").code == PROBLEMS_REMAIN  # every command stops

    code, out, data = doctor(capfd)
    assert code == PROBLEMS_REMAIN
    assert f"{name}" in out and "cannot be finished" in out and "problem(s) remain" in out
    assert data["exit_code"] == PROBLEMS_REMAIN
    assert [f["where"] for f in data["remaining"]] == [str(journal)]
    assert data["remaining"][0]["repairable"] is True

    res = bar(capfd, "doctor", "--repair")
    assert res.code == 0, res.out + res.err
    assert not journal.exists()
    kept = journal.with_name(name + ".corrupt")
    assert kept.read_bytes() == JOURNALS[name]  # moved aside, not deleted
    steps = ledger(task["id"])
    assert [s["step_id"] for s in steps] == ["0001", "0002", "0003"]
    assert steps[-1]["kind"] == "manual"  # what the worktree held beyond the ledger
    assert steps[-1]["diff_stat"]["file_list"] == ["half-done.txt"]
    snapshot_matches_worktree(repo, task)

    assert bar(capfd, "doctor").out.endswith("everything checks out\n")
    assert bar(capfd, "run", "--", "true").code == 0


def test_a_journal_from_a_newer_bar_is_kept_and_doctor_fails(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    journal = task_dir(task["id"]) / "rollback.json"
    journal.write_text('{"version": 99}')
    journal.chmod(0o600)
    res = bar(capfd, "doctor", "--repair")
    assert res.code == PROBLEMS_REMAIN
    assert "version 99" in res.out and "1 problem(s) remain" in res.out
    assert journal.read_text() == '{"version": 99}'


# --- the side index ----------------------------------------------------------------------


def test_a_garbled_side_index_is_reseeded(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    index = task_dir(task["id"]) / "index"
    index.write_bytes(os.urandom(4096))
    code, out, data = doctor(capfd)
    assert code == PROBLEMS_REMAIN
    assert "snapshot index" in out and "unreadable" in out
    assert [f["where"] for f in data["remaining"]] == [str(index)]

    res = bar(capfd, "doctor", "--repair")
    assert res.code == 0, res.out + res.err
    assert "rebuilt it from the last snapshot" in res.out
    assert index.stat().st_mode & 0o777 == 0o600
    assert bar(capfd, "doctor").out.endswith("everything checks out\n")
    res = bar(capfd, "run", "--", "sh", "-c", "echo 3 > f3.txt; rm f0.txt")
    assert res.code == 0, res.err
    assert sorted(ledger(task["id"])[-1]["diff_stat"]["file_list"]) == ["f0.txt", "f3.txt"]
    snapshot_matches_worktree(repo, task)


# --- the developer's policy file -----------------------------------------------------------

BROKEN_POLICY = "version: 1\nrules:\n  - name: no-rm\n    pattern: [rm\n"


def test_a_broken_policy_file_is_reported_not_rewritten(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    policy = repo / ".bar" / "policy.yaml"
    policy.write_text(BROKEN_POLICY)
    assert bar(capfd, "run", "--", "true").code == PROBLEMS_REMAIN  # runs stop on it

    code, out, data = doctor(capfd)
    assert code == PROBLEMS_REMAIN
    assert str(policy) in out and "not valid YAML at line 5" in out
    (finding,) = data["remaining"]
    assert finding["where"] == str(policy) and finding["repairable"] is False
    assert "line 5" in finding["message"] and finding["hint"]

    res = bar(capfd, "doctor", "--repair")
    assert res.code == PROBLEMS_REMAIN
    assert "not valid YAML at line 5" in res.out and "1 problem(s) remain" in res.out
    assert policy.read_text() == BROKEN_POLICY  # the developer's file, left as it was


def test_a_broken_policy_file_that_is_switched_off_is_only_a_warning(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    from helpers import set_config

    set_config(policy={"enabled": False})
    (repo / ".bar" / "policy.yaml").write_text(BROKEN_POLICY)
    res = bar(capfd, "doctor")
    assert res.code == 0
    assert "warning" in res.out and "not valid YAML" in res.out


# --- the exit code and the JSON agree --------------------------------------------------------


def test_a_failed_repair_makes_doctor_fail(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """An interrupted step whose journal names a snapshot git no longer has cannot be
    finished: the repair fails, and doctor says so in its text, JSON and exit code."""
    journal = task_dir(task["id"]) / "running.json"
    journal.write_text(
        json.dumps(
            {
                "version": 1,
                "pid": 0,
                "step_id": "0003",
                "started_at": "2024-01-15T10:00:00Z",
                "cmd": ["true"],
                "cwd": ".",
                "snapshot_before": "1" * 40,
            }
        )
    )
    journal.chmod(0o600)
    res = bar(capfd, "doctor", "--repair")
    assert res.code == PROBLEMS_REMAIN
    assert "repair failed" in res.out and "problem(s) remain" in res.out
    res = bar(capfd, "doctor", "--repair", "--json")
    data = res.json()
    assert res.code == PROBLEMS_REMAIN and data["ok"] is False
    assert data["exit_code"] == PROBLEMS_REMAIN
    assert [f["where"] for f in data["remaining"]] == [str(journal)]
    assert data["remaining"][0]["repair_error"]


def test_warnings_alone_do_not_fail_doctor(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    (task_dir(task["id"]) / "ledger.jsonl").chmod(0o644)
    res = bar(capfd, "doctor", "--json")
    data = res.json()
    assert res.code == 0 and data["ok"] is True and data["remaining"] == []
    assert [f["severity"] for f in data["findings"]] == ["warning"]


# --- refs of tasks that no project has ---------------------------------------------------


def test_refs_of_a_task_no_project_has_are_reported_never_deleted(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    orphan = ["refs/bar/tasks/Gone1234", f"refs/bar/bases/Gone1234/{head}"]
    moved = "refs/bar/tasks/Moved123"  # its task is in another project (a moved repository)
    for ref in [*orphan, moved]:
        git(repo, "update-ref", ref, head)
    (bar_home() / "projects" / "elsewhere-0000" / "tasks" / "Moved123").mkdir(parents=True)
    code, out, data = doctor(capfd)
    assert code == 0  # a warning: nothing is broken
    found = [f for f in data["findings"] if "no project here has" in f["message"]]
    assert [(f["severity"], f["where"], f["repairable"]) for f in found] == [
        ("warning", "refs/bar/*/Gone1234", False)
    ]
    assert "2 refs of task Gone1234" in out and orphan[1] in out
    # they may be another BAR_HOME's snapshots: a repair leaves them, the hint says how
    assert bar(capfd, "doctor", "--repair").code == 0
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/bar/").split()
    assert set(orphan) <= set(refs) and moved in refs and task["snapshot_ref"] in refs
    hint = found[0]["hint"]
    command = hint[hint.index("git for-each-ref") :]
    subprocess.run(["sh", "-c", command], cwd=repo, check=True)
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/bar/").split()
    assert not set(orphan) & set(refs) and moved in refs and task["snapshot_ref"] in refs


def _admin(task: dict[str, Any]) -> Path:
    return Path(git(worktree(task), "rev-parse", "--absolute-git-dir").strip())


def test_a_git_lock_a_killed_git_left_in_the_worktree_is_removed(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """A step's git committed; a hard rollback's reset was killed holding ``HEAD.lock``
    (left unreadable, as a killed git may leave it). Doctor names it and its repair
    removes it; a command that takes the task removes it too, and the rollback runs."""
    wt = worktree(task)
    res = bar(
        capfd,
        "run",
        "--",
        "sh",
        "-c",
        "echo c > c.txt && git add c.txt && git -c user.name=a -c user.email=a@b commit -qm c",
    )
    assert res.code == 0, res.err
    for repair in (True, False):
        lock = _admin(task) / "HEAD.lock"
        lock.write_text("")
        lock.chmod(0)
        code, text, _ = doctor(capfd)
        assert code == PROBLEMS_REMAIN and "HEAD.lock" in text and "a git that was stopped" in text
        if repair:
            fixed = bar(capfd, "doctor", "--repair")
            assert fixed.code == 0, fixed.out + fixed.err
            assert not lock.exists()
            continue
        done = bar(capfd, "rollback", "--to", "2", "--hard")
        assert done.code == 0, done.err
        assert not lock.exists() and "removed" in done.err and "HEAD.lock" in done.err
    assert not (wt / "c.txt").exists()
    assert bar(capfd, "doctor").code == 0


def test_a_git_lock_a_live_git_holds_in_the_worktree_is_left_to_it(
    repo: Path, task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """A git of the developer's own holds ``HEAD.lock`` in the worktree (a transaction
    ``git update-ref --stdin`` prepared and keeps open): bar leaves it, and doctor says
    which process holds it; once that git is killed, the next command removes it."""
    wt = worktree(task)
    head = git(wt, "rev-parse", "HEAD").strip()
    holder = subprocess.Popen(
        ["git", "update-ref", "--stdin"], cwd=wt, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        holder.stdin.write(f"start\nupdate HEAD {head}\nprepare\n".encode())
        holder.stdin.flush()
        assert holder.stdout.readline() == b"start: ok\n"
        assert holder.stdout.readline() == b"prepare: ok\n"
        lock = _admin(task) / "HEAD.lock"
        assert lock.exists()
        # (as processes of their own: the git of this test's process would be theirs)
        checked = bar_exe("doctor", cwd=repo)
        assert f"held by a running git (pid {holder.pid})" in checked.out + checked.err
        assert bar_exe("run", "--", "true", cwd=repo).code == 0
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert lock.exists()  # (killed: git's own clean-up never ran)
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    assert not lock.exists() and "HEAD.lock" in res.err
    assert bar(capfd, "doctor").code == 0


# --- permissions: bar's files, and the agents' homes --------------------------------------

# a step of an agent that keeps its own files in its home, with the modes it likes (Codex
# writes its rollouts 0644): a hundred of them, and a token it was given
AGENT_WRITES = (
    'mkdir -p "$CODEX_HOME/sessions/2026/11/27" "$CODEX_HOME/skills/.system" && '
    "for i in $(seq 1 100); do "
    'echo "{}" > "$CODEX_HOME/sessions/2026/11/27/rollout-$i.jsonl"; '
    'echo skill > "$CODEX_HOME/skills/.system/skill-$i.md"; done && '
    'chmod -R go+rX "$CODEX_HOME/sessions" "$CODEX_HOME/skills" && '
    'echo "{\\"token\\": 1}" > "$CODEX_HOME/auth.json" && chmod 600 "$CODEX_HOME/auth.json"'
)


def agent_home(task: dict[str, Any]) -> Path:
    return task_dir(task["id"]) / "agents" / "codex"


def test_files_an_agent_writes_in_its_closed_home_are_no_finding(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "run", "--agent", "codex", "--", "sh", "-c", AGENT_WRITES)
    assert res.code == 0, res.err
    home = agent_home(task)
    loose = home / "sessions" / "2026" / "11" / "27" / "rollout-1.jsonl"
    assert oct(loose.stat().st_mode & 0o777) == oct(0o644)  # as the agent left it
    assert oct(home.stat().st_mode & 0o777) == oct(0o700)
    code, out, data = doctor(capfd)
    assert code == 0 and data["findings"] == [], out
    assert out.strip().endswith("everything checks out")


def test_an_open_agent_home_and_a_readable_token_are_found_and_repaired(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "run", "--agent", "codex", "--", "sh", "-c", AGENT_WRITES).code == 0
    home = agent_home(task)
    home.chmod(0o755)
    (home / "auth.json").chmod(0o644)
    code, out, data = doctor(capfd)
    assert code == 0  # warnings: the project still works
    found = {f["where"]: f["message"] for f in data["findings"]}
    assert found == {
        str(home): "mode 0755 lets other users reach the agent's files (its credentials, "
        "its transcripts): should be 0700",
        str(home / "auth.json"): "mode 0644 lets other users read the agent's credentials: "
        "should be 0600",
    }
    assert f"warning: {home}: mode 0755" in out
    res = bar(capfd, "doctor", "--repair")
    assert res.code == 0 and "set mode 0700" in res.out and "set mode 0600" in res.out
    assert home.stat().st_mode & 0o777 == 0o700
    assert (home / "auth.json").stat().st_mode & 0o777 == 0o600
    assert doctor(capfd)[2]["findings"] == []


def test_the_same_problem_in_many_files_is_one_line_with_a_count_and_an_example(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "run", "--", "sh", "-c", "echo said; echo 2 > f2.txt").code == 0
    artifacts = task_dir(task["id"]) / "artifacts"
    loose = sorted(p for p in artifacts.iterdir() if p.is_file())
    assert len(loose) >= 3  # (patches and an output)
    for path in loose:
        path.chmod(0o644)
    (task_dir(task["id"]) / "ledger.jsonl").chmod(0o640)  # a finding of its own
    code, out, data = doctor(capfd)
    assert code == 0
    assert len(data["findings"]) == len(loose) + 1  # the JSON lists each
    lines = out.splitlines()
    message = "mode 0644 should be 0600 (outputs can hold secrets)"
    assert f"warning: {len(loose)} paths under {artifacts}: {message}" in lines
    (example,) = [line for line in lines if line.startswith("  e.g. ")]
    assert example.endswith(" (`bar doctor --verbose` lists every one)")
    assert Path(example.split()[1]) in loose
    assert sum(1 for line in lines if line.startswith("warning:")) == 2
    assert lines[-1] == f"{len(loose) + 1} problem(s) found"
    every = bar(capfd, "doctor", "--verbose").out.splitlines()
    for path in loose:
        assert f"warning: {path}: {message}" in every
    assert bar(capfd, "doctor", "--repair").code == 0
    assert doctor(capfd)[2]["findings"] == []


def test_what_a_step_leaves_in_its_own_temporary_directories_is_not_bars_to_judge(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """A step's /tmp, /var/tmp and /dev/shm are directories of the task's: the files it
    leaves there are its own, with the modes it gave them, and no finding of bar's."""
    script = "umask 022; for d in /tmp /var/tmp /dev/shm; do echo x > $d/left; mkdir $d/dir; done"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    code, _out, data = doctor(capfd)
    assert code == 0 and data["findings"] == [], data["findings"]
