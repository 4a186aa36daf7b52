"""Closing a task (or removing its worktree) moves what no recorded state holds to the
task's trash: nested repositories (their history and uncommitted work), ignored files.
Reopening it (or starting it again) puts them back. Both speed modes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import bar, new_task, run_sh, task_dir, worktree

from conftest import git


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def _task_with_nested_repo(capfd: pytest.CaptureFixture[str]) -> tuple[dict[str, str], Path, str]:
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(
        capfd,
        "printf 'build/\\n*.log\\n' > .gitignore; mkdir vendor && cd vendor && git init -q -b main "
        "&& echo 'int lib;' > lib.c && git add lib.c && git commit -qm vendored",
    )
    head = git(wt / "vendor", "rev-parse", "HEAD").strip()
    # by hand: a commit only the nested repository has, uncommitted work, ignored files
    (wt / "vendor" / "lib.c").write_text("int lib = 2;\n")
    git(wt / "vendor", "commit", "-qam", "only here")
    (wt / "vendor" / "wip.c").write_text("work in progress\n")
    (wt / "build").mkdir()
    (wt / "build" / "out.bin").write_bytes(b"\0\1\2")
    (wt / "debug.log").write_text("log\n")
    assert bar(capfd, "run", "--", "true").code == 0  # (records the new gitlink)
    return t, wt, head


def test_close_moves_nested_repositories_and_ignored_files_aside_and_reopen_puts_them_back(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    t, wt, _head = _task_with_nested_repo(capfd)
    committed = git(wt / "vendor", "rev-parse", "HEAD").strip()
    res = bar(capfd, "status")
    assert "trash" in res.out  # what closing would move is named before it does
    res = bar(capfd, "task", "close")
    assert res.code == 0, res.err
    assert not wt.exists()
    assert "vendor/ (a nested git repository)" in res.err and "trash" in res.err
    listed = bar(capfd, "trash", "--task", t["id"], "--json")
    assert listed.code == 0, listed.err
    (entry,) = listed.json()["entries"]
    kinds = {p["path"]: p["kind"] for p in entry["paths"]}
    assert kinds == {"vendor": "nested-repo", "build": "dir", "debug.log": "file"}
    assert entry["command"] == "bar task close"
    res = bar(capfd, "task", "reopen", t["id"])
    assert res.code == 0, res.err
    assert "put back vendor/" in res.err
    assert git(wt / "vendor", "rev-parse", "HEAD").strip() == committed
    assert (wt / "vendor" / "wip.c").read_text() == "work in progress\n"
    assert (wt / "build" / "out.bin").read_bytes() == b"\0\1\2"
    assert (wt / "debug.log").read_text() == "log\n"
    assert not (task_dir(t["id"]) / "trash").exists() or not os.listdir(task_dir(t["id"]) / "trash")


def test_worktree_remove_then_start_puts_them_back(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    t, wt, _head = _task_with_nested_repo(capfd)
    res = bar(capfd, "worktree", "remove", t["id"])
    assert res.code == 0, res.err
    assert not wt.exists() and "trash" in res.err
    res = bar(capfd, "task", "start", t["id"])
    assert res.code == 0, res.err
    assert (wt / "vendor" / "wip.c").read_text() == "work in progress\n"
    assert (wt / "build" / "out.bin").read_bytes() == b"\0\1\2"
    assert bar(capfd, "run", "--", "true").code == 0  # nothing new to record


def test_delete_refuses_while_the_trash_holds_bytes(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    t, _wt, _head = _task_with_nested_repo(capfd)
    assert bar(capfd, "task", "close").code == 0
    res = bar(capfd, "task", "delete", t["id"], "--dry-run", "--json")
    assert res.code == 0, res.err
    assert any("trash holds" in lost for lost in json.loads(res.out)["lost"])
    res = bar(capfd, "task", "delete", t["id"])
    assert res.code != 0 and "trash holds 3 paths" in res.err
    assert bar(capfd, "task", "delete", t["id"], "--force").code == 0
    assert not task_dir(t["id"]).exists()
