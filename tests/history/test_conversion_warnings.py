"""git's warnings of line endings it will convert are no failure of bar's look: a step that
writes CRLF files where ``core.autocrlf=input`` converts them is recorded, with no word of
files left out, even for a name that holds a newline (git's warning would span two
lines). Both speed modes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, plain_git_tree, recorded_tree, run_sh, worktree


def test_crlf_files_git_converts_are_recorded_without_a_word(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path
) -> None:
    subprocess.run(["git", "config", "core.autocrlf", "input"], cwd=inited_clean, check=True)
    t = new_task(capfd)
    wt = worktree(t)
    res = run_sh(
        capfd, "printf 'a\\r\\nb\\r\\n' > crlf.txt; printf 'mixed\\r\\nand\\n' > 'new\nline'"
    )
    assert "not recorded" not in res.err and "could not be stored" not in res.err, res.err
    assert ledger(t["id"])[-1]["diff_stat"]["files"] == 2
    (wt / "hand.txt").write_bytes(b"by hand\r\n")
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    assert "not recorded" not in res.err, res.err
    assert recorded_tree(inited_clean, t) == plain_git_tree(wt, tmp_path)
