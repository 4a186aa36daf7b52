"""After a rollback the next command trusts what the rollback wrote (no rescan of its
directories), and still sees every change made by hand right after it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers import SETTLE, bar, git_argvs, git_commands, ledger, new_task, run_sh, worktree

from bar import api
from bar.git import racy
from bar.history import steps


def _plain_git_tree(wt: Path, tmp: Path) -> str:
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp / "oracle-index")}
    subprocess.run(["git", "add", "-A"], cwd=wt, env=env, check=True)
    return subprocess.run(
        ["git", "write-tree"], cwd=wt, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _steps_back_and_forth(capfd: pytest.CaptureFixture[str]) -> None:
    run_sh(capfd, "mkdir -p src/a && echo 1 > src/a/one.txt && echo x > top.txt")
    run_sh(
        capfd,
        "mkdir -p src/b/c && echo 2 > src/b/c/two.txt && rm top.txt && echo 1b >> src/a/one.txt",
    )


@pytest.mark.parametrize("watcher", [True, False], ids=["watcher", "stamps"])
def test_the_command_after_a_rollback_rescans_nothing(
    inited_clean: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    watcher: bool,
) -> None:
    """The stamps a restore writes hold: the next command adds nothing. With a watcher,
    it lists no directory either (the restore told the watcher which of its own writes
    it found as written); every recorded file is statted in any case."""
    if not watcher:
        monkeypatch.setenv("BAR_WATCHER_IDLE", "0")
    t = new_task(capfd)
    wt = worktree(t)
    _steps_back_and_forth(capfd)
    time.sleep(SETTLE)  # the last run wrote its directories inside its racy window:
    assert bar(capfd, "run", "--", "true").code == 0  # rescanned now, and trusted after
    for i, to in enumerate(("1", "2", "base", "2")):
        trace = tmp_path / f"rollback-{i}.json"
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        assert bar(capfd, "rollback", "--to", to).code == 0
        ran = git_commands(trace)
        # the look for hand edits (diff-files) finds none: nothing is added (the files
        # written have their stat data noted: ``add --refresh``); the configuration is
        # read once, the trees looked up together; the restore writes the side index's
        # differing entries (which keeps its cache of trees) and checks out only their
        # files, into its staging directory
        added = [a for a in git_argvs(trace) if "add" in a and "--refresh" not in a]
        assert not added and "write-tree" not in ran
        assert ran.count("checkout-index") <= 1 and "read-tree" not in ran
        assert "checkout" not in ran
        assert ran.count("config") <= 1
        assert ran.count("rev-parse") <= 2 and ran.count("cat-file") == 1
        trace = tmp_path / f"run-{i}.json"
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        task = api.get_task(api.open_project(), t["id"])
        # (a restore whose writes outlasted a second, as on a loaded machine, leaves the
        # files it wrote in that second to be hashed again: ``bar.git.racy``)
        suspected = racy.suspects(task.index)
        res = bar(capfd, "run", "--", "true")  # right after: well inside the racy window
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        assert res.code == 0, res.err
        if not suspected:
            assert "add" not in git_commands(trace) and "write-tree" not in git_commands(trace)
        assert git_commands(trace).count("diff-files") == 2  # the look, and the step's
        last = ledger(t["id"])[-1]
        assert last["kind"] == "run" and last["diff_stat"]["files"] == 0
        assert steps.current_tree(task) == _plain_git_tree(wt, tmp_path)


def test_changes_made_right_after_a_rollback_are_recorded(
    inited_clean: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    _steps_back_and_forth(capfd)
    assert bar(capfd, "rollback", "--to", "1").code == 0  # removes src/b, rewrites src/a
    (wt / "src" / "a" / "new.txt").write_text("made by hand\n")  # where it just wrote
    (wt / "top.txt").unlink()  # one it brought back
    assert bar(capfd, "rollback", "--to", "2").code == 0  # records them first, undoable
    kinds = [s["kind"] for s in ledger(t["id"])]
    assert kinds[-2:] == ["manual", "rollback"]
    assert sorted(ledger(t["id"])[-2]["diff_stat"]["file_list"]) == ["src/a/new.txt", "top.txt"]
    (wt / "src" / "b" / "c" / "later.txt").write_text("in a directory it made\n")
    (wt / "src" / "b" / "d").mkdir()
    (wt / "src" / "b" / "d" / "deep.txt").write_text("deeper\n")
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    manual = ledger(t["id"])[-2]
    assert manual["kind"] == "manual"
    assert sorted(manual["diff_stat"]["file_list"]) == ["src/b/c/later.txt", "src/b/d/deep.txt"]
    task = api.get_task(api.open_project(), t["id"])
    assert steps.current_tree(task) == _plain_git_tree(wt, tmp_path)
    assert git_tree(wt, ledger(t["id"])[-1]["snapshot"]) == _plain_git_tree(wt, tmp_path)


def git_tree(wt: Path, commit: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", f"{commit}^{{tree}}"],
        cwd=wt,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
