"""Getting into a task and bringing one back: task path, shell, reopen, and apply from a
closed task, on real repositories with real git and real child processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BAR_EXE,
    bar,
    bar_exe,
    fault_trace,
    files_in_commit,
    files_on_disk,
    ledger,
    new_task,
    point_at,
    project_dir,
    run_sh,
    set_config,
    sweep,
    task_dir,
    timed,
    worktree,
)

from conftest import git


def events() -> list[str]:
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    return [json.loads(line)["event"] for line in lines]


def task_json(task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((task_dir(task_id) / "task.json").read_text())
    return data


def worked_task(capfd: pytest.CaptureFixture[str], name: str = "work") -> dict[str, Any]:
    """A task whose agent committed one file and left others uncommitted: an executable,
    a link, a deletion."""
    t = new_task(capfd, name)
    run_sh(capfd, "echo one > a.txt && git add a.txt && git commit -qm 'agent commit'")
    run_sh(
        capfd,
        "printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh && ln -s a.txt link "
        "&& rm README.md && mkdir -p 'dir with space' && echo x > 'dir with space/é'",
    )
    return t


# --- bar task path -------------------------------------------------------------------


def test_task_path_prints_the_worktree_and_nothing_else(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a = new_task(capfd, "alpha")
    b = new_task(capfd, "beta")
    res = bar(capfd, "task", "path", "alpha")
    assert (res.code, res.out, res.err) == (0, f"{a['worktree']}\n", "")
    data = bar(capfd, "task", "path", "alpha", "--json").json()
    assert data == {"task_id": a["id"], "name": "alpha", "worktree": a["worktree"], "exists": True}
    # what a user types: cd into the active task (beta) from the checkout
    proc = subprocess.run(
        ["sh", "-c", f'cd "$({BAR_EXE} task path)" && pwd -P'],
        cwd=inited_clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{Path(b['worktree']).resolve()}\n"


def test_task_path_of_an_unknown_task_exits_3(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = bar(capfd, "task", "path", "nope")
    assert res.code == 3 and res.out == "" and "no task" in res.err


def test_task_path_of_a_removed_worktree_still_prints_it_and_says_how_back(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "gone")
    assert bar(capfd, "task", "close").code == 0
    res = bar(capfd, "task", "path", "gone")
    assert res.code == 1 and res.out == f"{t['worktree']}\n"
    assert "is gone" in res.err and f"bar task reopen {t['id']}" in res.err
    data = bar(capfd, "task", "path", "gone", "--json")
    assert data.code == 1 and data.json()["exists"] is False


# --- bar task reopen -----------------------------------------------------------------


def test_reopen_recreates_the_worktree_exactly_as_last_recorded(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked_task(capfd)
    steps = ledger(t["id"])
    snapshot, head = steps[-1]["snapshot"], steps[-1]["head"]
    assert bar(capfd, "task", "close").code == 0
    assert not worktree(t).exists()
    res = bar(capfd, "task", "reopen", "work")
    assert res.code == 0, res.err
    assert "recreated" in res.out
    wt = worktree(t)
    # the oracle: the worktree holds exactly the last snapshot (uncommitted work included)
    assert files_on_disk(wt) == files_in_commit(inited_clean, snapshot)
    assert git(wt, "rev-parse", "HEAD").strip() == head
    assert git(wt, "symbolic-ref", "--short", "HEAD").strip() == t["branch"]
    assert git(wt, "log", "-1", "--format=%s").strip() == "agent commit"
    rec = task_json(t["id"])
    assert rec["status"] == "active" and rec["closed_at"] is None
    assert json.loads((project_dir() / "state.json").read_text())["active_task_id"] == t["id"]
    assert events()[-3:] == ["worktree.create.before", "worktree.create.after", "task.reopened"]
    assert "none unrecorded" in bar(capfd, "status").out
    # the task goes on where it stopped: nothing is taken for a hand edit
    run_sh(capfd, "echo more >> a.txt")
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "run", "run"]


def test_reopen_of_a_kept_worktree_uses_it_and_records_later_edits(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked_task(capfd)
    assert bar(capfd, "task", "close", "--keep-worktree").code == 0
    (worktree(t) / "after.txt").write_text("edited after closing\n")
    res = bar(capfd, "task", "reopen", t["id"], "--json")
    assert res.code == 0, res.err
    assert res.json()["recreated"] is False and res.json()["status"] == "active"
    assert (worktree(t) / "after.txt").exists()
    run_sh(capfd, "true")
    assert [s["kind"] for s in ledger(t["id"])][-2:] == ["manual", "run"]


def test_reopen_refuses_an_open_task_and_a_deleted_branch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "open")
    res = bar(capfd, "task", "reopen", "open")
    assert res.code == 1 and "is open" in res.err and "bar task switch" in res.err
    assert bar(capfd, "task", "close").code == 0
    git(inited_clean, "branch", "-D", t["branch"])
    res = bar(capfd, "task", "reopen", "open")
    assert res.code == 3 and "was deleted" in res.err
    assert task_json(t["id"])["status"] == "closed" and not worktree(t).exists()


def test_reopen_refuses_while_the_branch_is_checked_out_elsewhere(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = new_task(capfd, "busy")
    assert bar(capfd, "task", "close").code == 0
    other = tmp_path / "other"
    git(inited_clean, "worktree", "add", "-q", str(other), t["branch"])
    res = bar(capfd, "task", "reopen", "busy")
    assert res.code == 1 and str(other) in res.err and "switch" in res.err
    assert task_json(t["id"])["status"] == "closed"


def test_reopen_picks_the_closed_task_of_a_shared_name(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    old = new_task(capfd, "same")
    assert bar(capfd, "task", "close").code == 0
    fresh = new_task(capfd, "same")
    # the name picks the closed one, whose name the open one holds now: refused
    res = bar(capfd, "task", "reopen", "same")
    assert res.code == 1 and f"task {old['id']} cannot be reopened" in res.err
    assert task_json(old["id"])["status"] == "closed"
    assert task_json(fresh["id"])["status"] == "active"


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_a_reopen_stopped_anywhere_is_finished_by_running_it_again(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = worked_task(capfd)
    snapshot = ledger(t["id"])[-1]["snapshot"]
    assert bar(capfd, "task", "close").code == 0
    # each point by its label and how many of that label came before it: the number of
    # points varies with timing (a stamps or racy file is written only when the clock says)
    points = fault_trace(inited_clean, tmp_path, "task", "reopen", t["id"])
    assert len(points) >= 4
    for n in sweep(len(points)):
        assert bar(capfd, "task", "close", t["id"]).code == 0
        at = point_at(points, n, t["id"], t["id"])
        killed = bar_exe("task", "reopen", t["id"], cwd=inited_clean, env={"BAR_FAULT_AT": at})
        if killed.code == 0 and timed(at):
            continue  # (the clock did not call for that file this time)
        assert killed.code == -9, (n, at, killed.err)
        again = bar(capfd, "task", "reopen", t["id"])
        if again.code == 1:  # stopped after the task was marked active: it was done
            assert "is open" in again.err
        else:
            assert again.code == 0, (n, again.err)
        assert files_on_disk(worktree(t)) == files_in_commit(inited_clean, snapshot), n
        assert "none unrecorded" in bar(capfd, "status").out, n
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "run"]


# --- bar shell -----------------------------------------------------------------------


def test_shell_is_one_recorded_step_like_run_pty(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    typed = b"echo typed > in-shell.txt\nmkdir sub && echo two > sub/f\nexit 3\n"
    res = bar_exe("shell", cwd=inited_clean, input=typed, env={"SHELL": "/bin/sh"})
    assert res.code == 3, res.err
    assert res.err.startswith(f"bar: shell in task t1 (worktree {t['worktree']}); exit to record")
    (step,) = ledger(t["id"])
    assert step["cmd"] == ["/bin/sh"] and step["pty"] is True and step["exit_code"] == 3
    assert step["diff_stat"]["file_list"] == ["in-shell.txt", "sub/f"]
    assert step["artifacts"]["cast"] == "artifacts/0001.cast"
    assert (worktree(t) / "in-shell.txt").read_text() == "typed\n"


def test_shell_without_SHELL_runs_bin_sh(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = bar_exe("shell", "--task", t["id"], cwd=inited_clean, input=b"exit\n", env={"SHELL": ""})
    assert res.code == 0, res.err
    assert ledger(t["id"])[0]["cmd"] == ["/bin/sh"]


def test_the_policy_judges_the_shell_itself(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited_clean / ".bar" / "policy.yaml").write_text(
        "version: 1\nrules:\n  - name: no-shells\n    pattern: '^sh$'\n"
        "    action: block\n    reason: no interactive shells here\n"
    )
    set_config(policy={"enabled": True})
    t = new_task(capfd)
    res = bar_exe("shell", cwd=inited_clean, input=b"touch ran\nexit\n", env={"SHELL": "/bin/sh"})
    assert res.code == 126 and "blocked" in res.err
    (step,) = ledger(t["id"])
    assert step["blocked"] is True and step["policy_events"][0]["rule"] == "no-shells"
    assert not (worktree(t) / "ran").exists()


def test_shell_help_says_it_is_one_step_and_what_is_checked_inside(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "shell", "--help")
    assert res.code == 0
    text = " ".join(res.out.split())
    assert "recorded as ONE step" in text and "not steps of their own" in text
    assert "every program they start is judged by the policy as it starts" in text


def test_shell_in_a_closed_task_is_refused_without_a_banner(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "shut")
    assert bar(capfd, "task", "close").code == 0
    res = bar(capfd, "shell", "--task", "shut")
    assert res.code == 1 and "closed" in res.err and "shell in task" not in res.err
    assert "bar task reopen" in res.err


# --- apply from a closed task ----------------------------------------------------------


def test_a_closed_task_applies_from_its_snapshot_without_a_worktree(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked_task(capfd)
    snapshot = ledger(t["id"])[-1]["snapshot"]
    assert bar(capfd, "task", "close").code == 0
    dry = bar(capfd, "apply", "--task", "work", "--dry-run")
    assert dry.code == 0, dry.err
    assert "would change" in dry.out and "run.sh" in dry.out
    assert git(inited_clean, "rev-parse", "main").strip() != snapshot
    res = bar(capfd, "apply", "--task", "work", "-m", "Land closed work")
    assert res.code == 0, res.err
    assert git(inited_clean, "rev-parse", "main^{tree}") == git(
        inited_clean, "rev-parse", f"{snapshot}^{{tree}}"
    )
    assert files_on_disk(inited_clean) == {
        **files_in_commit(inited_clean, snapshot),
        **_bar_files(inited_clean),
    }
    step = ledger(t["id"])[-1]
    assert step["kind"] == "apply" and step["snapshot"] == snapshot
    assert step["head"] == git(inited_clean, "rev-parse", t["branch"]).strip()
    assert not worktree(t).exists()


def _bar_files(repo: Path) -> dict[str, bytes]:
    return {".bar/policy.yaml": b"-:" + (repo / ".bar" / "policy.yaml").read_bytes()}


def test_a_closed_task_merges_its_branch_without_a_worktree(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked_task(capfd)
    snapshot = ledger(t["id"])[-1]["snapshot"]
    assert bar(capfd, "task", "close").code == 0
    res = bar(capfd, "apply", "--task", "work", "--mode", "merge")
    assert res.code == 0, res.err
    parents = git(inited_clean, "rev-list", "--parents", "-n1", "main").split()
    assert len(parents) == 3  # a merge commit
    tip = git(inited_clean, "rev-parse", t["branch"]).strip()
    assert parents[2] == tip  # the uncommitted work was committed on the task branch
    assert git(inited_clean, "log", "-1", "--format=%s", f"{tip}~1").strip() == "agent commit"
    assert git(inited_clean, "rev-parse", f"{tip}^{{tree}}") == git(
        inited_clean, "rev-parse", f"{snapshot}^{{tree}}"
    )


def test_merge_mode_of_a_closed_task_whose_branch_was_deleted_says_why(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = worked_task(capfd)
    assert bar(capfd, "task", "close").code == 0
    git(inited_clean, "branch", "-D", t["branch"])
    before = git(inited_clean, "rev-parse", "main")
    res = bar(capfd, "apply", "--task", "work", "--mode", "merge")
    assert res.code == 3 and "was deleted" in res.err and "--mode commit" in res.err
    assert git(inited_clean, "rev-parse", "main") == before
    assert bar(capfd, "apply", "--task", "work").code == 0  # commit mode needs no branch


def test_after_apply_at_an_earlier_state_the_next_step_sees_no_hand_edits(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo 1 > one")
    run_sh(capfd, "echo 2 > two")
    assert bar(capfd, "apply", "--at", "1").code == 0
    assert "none unrecorded" in bar(capfd, "status").out
    run_sh(capfd, "true")
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "run", "apply", "run"]
