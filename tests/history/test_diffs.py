"""``bar diff --unrecorded``: what the worktree holds that no step recorded, as plain git
sees it, without recording anything or touching the task's own files."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, run_sh, task_dir, worktree


def fingerprint(task_id: str) -> dict[str, str]:
    """Every file of the task's directory (ledger, side index, artifacts) by content."""
    root = task_dir(task_id)
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def git_diff(wt: Path) -> str:
    """What plain git says the worktree changed since the task branch's last commit
    (the oracle: here the last step's snapshot is that commit)."""
    subprocess.run(["git", "add", "-A"], cwd=wt, check=True)
    out = subprocess.run(
        ["git", "diff", "--cached", "--no-color", "HEAD"], cwd=wt, capture_output=True, check=True
    ).stdout.decode()
    subprocess.run(["git", "reset", "-q"], cwd=wt, check=True)
    return out


def test_unrecorded_shows_hand_edits_and_records_nothing(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(
        capfd,
        "printf 'a\\nb\\n' > kept.txt; echo gone > gone.txt; git add -A; "
        "git -c user.name=a -c user.email=a@b commit -qm s",
    )
    assert bar(capfd, "diff", "--unrecorded").out == ""  # nothing unrecorded yet
    (wt / "kept.txt").write_text("a\nB\nc\n")
    (wt / "gone.txt").unlink()
    (wt / "new file.txt").write_text("new\n")
    before = fingerprint(t["id"])
    status = bar(capfd, "status")
    assert "bar diff --unrecorded" in status.out
    res = bar(capfd, "diff", "--unrecorded")
    assert res.code == 0
    assert res.out == git_diff(wt)
    for name in ("+B", "+c", "-b", "gone.txt", "new file.txt"):
        assert name in res.out
    stat = bar(capfd, "diff", "--unrecorded", "--stat").out
    assert "3 files changed" in stat
    js = bar(capfd, "diff", "--unrecorded", "--json").json()
    assert js["unrecorded"] is True and js["diff_stat"]["files"] == 3
    assert js["diff_stat"]["additions"] == 3 and "+B" in js["patch"]
    assert fingerprint(t["id"]) == before  # no step, no side index write, no artifact
    assert len(ledger(t["id"])) == 1
    # the next step records exactly that
    run_sh(capfd, "true")
    manual = ledger(t["id"])[1]
    assert manual["kind"] == "manual" and manual["diff_stat"] == js["diff_stat"]
    assert bar(capfd, "diff", "--unrecorded").out == ""


def test_unrecorded_from_a_state(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo one > one.txt")
    (worktree(t) / "two.txt").write_text("two\n")
    js = bar(capfd, "diff", "--from", "base", "--unrecorded", "--json").json()
    assert sorted(js["diff_stat"]["file_list"]) == ["one.txt", "two.txt"]
    res = bar(capfd, "diff", "--unrecorded", "--to", "1")
    assert res.code == 2 and "--to" in res.err
