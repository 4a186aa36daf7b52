"""The cheap "nothing changed since the last snapshot" check never misses a hand edit.

Before each step bar compares directory mtimes and the side index's stat data instead of
rescanning the worktree. These tests backdate every mtime so the check is trusted (not
racy), then make each kind of edit and require that it is recorded as a manual step.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bar.snapshot import unchanged_since
from helpers import bar, ledger, new_task, project_dir, worktree


@pytest.fixture
def settled(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert bar(capfd, "init").code == 0
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    t = new_task(capfd)
    wt = worktree(t)
    (wt / "sub" / "deep").mkdir(parents=True)
    (wt / "sub" / "deep" / "f.txt").write_text("abc\n")
    (wt / "g.txt").write_text("hello\n")
    old = time.time() - 60
    for path in [wt, *wt.rglob("*")]:
        if ".git" not in path.relative_to(wt).parts or path == wt:
            os.utime(path, (old, old), follow_symlinks=False)
    assert bar(capfd, "run", "--", "true").code == 0  # records the files, stamps are trusted
    assert bar(capfd, "run", "--", "true").code == 0
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["manual", "run", "run"]
    index = project_dir() / "tasks" / t["id"] / "index"
    assert unchanged_since(wt, index, steps[-1]["snapshot"])  # the fast path is taken
    return t


def _same_size_same_mtime(wt: Path) -> None:
    # git compares ctime to the second: an edit that also restores size and mtime within
    # the second of the last scan escapes git itself (and so bar); a second later it
    # cannot
    time.sleep(1.1)
    path = wt / "g.txt"
    st = path.stat()
    path.write_text("HELLO\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


EDITS = {
    "modify": lambda wt: (wt / "g.txt").write_text("changed\n"),
    "modify keeping size and mtime": _same_size_same_mtime,
    "create in a subdirectory": lambda wt: (wt / "sub" / "deep" / "new.txt").write_text("n\n"),
    "create a new directory": lambda wt: (
        (wt / "sub" / "newdir").mkdir() or (wt / "sub" / "newdir" / "x").write_text("x")
    ),
    "delete": lambda wt: (wt / "sub" / "deep" / "f.txt").unlink(),
    "rename": lambda wt: (wt / "g.txt").rename(wt / "h.txt"),
    "chmod": lambda wt: (wt / "g.txt").chmod(0o755),
    "symlink replaces file": lambda wt: ((wt / "g.txt").unlink(), os.symlink("sub", wt / "g.txt")),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_kind_of_hand_edit_is_seen(
    edit: str, settled: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(settled)
    EDITS[edit](wt)
    assert bar(capfd, "run", "--", "true").code == 0
    steps = ledger(settled["id"])
    assert steps[-2]["kind"] == "manual", f"{edit} was not recorded"
    assert steps[-2]["diff_stat"]["files"] >= 1
