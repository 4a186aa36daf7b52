"""Rollback, undo and redo move aside what no recorded state holds (SPEC §3 "Nothing is
destroyed that was not recorded"): a nested repository a rollback turns into a file, ignored
files under a directory that becomes a file, an ignored file where a tracked one lands. Each
runs with the speed layer on and with ``BAR_FAST=0``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, run_sh, task_dir, worktree

from conftest import git


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def nested_repo(path: Path, files: dict[str, str]) -> str:
    """A git repository at ``path`` with one commit of ``files``; its HEAD."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "vendored")
    return git(path, "rev-parse", "HEAD").strip()


def trash_entries(task_id: str) -> list[dict[str, object]]:
    root = task_dir(task_id) / "trash"
    if not root.is_dir():
        return []
    return [json.loads((d / "manifest.json").read_text()) for d in sorted(root.iterdir())]


def test_rollback_moves_a_nested_repository_aside_and_undo_puts_it_back(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """The issue's reproduction: step 1 writes a file ``vendor``; step 2 makes it a git
    repository of one commit; by hand ``vendor/lib.c`` is edited and ``vendor/wip.c``
    added. ``rollback --to 1`` moves the repository to the trash (and says so); ``undo``
    brings it back whole: its .git, its history, its uncommitted work."""
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "printf 'a file vendor\\n' > vendor")
    run_sh(
        capfd,
        "rm vendor && mkdir vendor && cd vendor && git init -q -b main && "
        "echo 'int lib;' > lib.c && git add lib.c && git commit -qm vendored",
    )
    head = git(wt / "vendor", "rev-parse", "HEAD").strip()
    (wt / "vendor" / "lib.c").write_text("int lib = 2; /* by hand */\n")
    (wt / "vendor" / "wip.c").write_text("work in progress\n")
    res = bar(capfd, "rollback", "--to", "1")
    assert res.code == 0, res.err
    assert (wt / "vendor").is_file() and (wt / "vendor").read_text() == "a file vendor\n"
    assert "vendor" in res.err and "trash" in res.err and "nested git repository" in res.err
    (entry,) = trash_entries(t["id"])
    assert [p["path"] for p in entry["paths"]] == ["vendor"]  # type: ignore[index]
    assert entry["paths"][0]["kind"] == "nested-repo"  # type: ignore[index]
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert (wt / "vendor" / ".git").is_dir()
    assert git(wt / "vendor", "rev-parse", "HEAD").strip() == head
    assert (wt / "vendor" / "lib.c").read_text() == "int lib = 2; /* by hand */\n"
    assert (wt / "vendor" / "wip.c").read_text() == "work in progress\n"
    assert "put back" in res.err
    assert trash_entries(t["id"]) == []  # restored: the entry is gone
    steps = ledger(t["id"])
    assert tree(wt, steps[-1]["snapshot"]) == tree(wt, steps[1]["snapshot"])  # the gitlink


def tree(wt: Path, commit: str) -> str:
    return git(wt, "rev-parse", f"{commit}^{{tree}}").strip()
