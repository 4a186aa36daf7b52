"""A rename is one file changed, however bar counts: the step's record (bar run's line,
bar log, bar show), bar diff --stat and bar apply say the same numbers, as git does; the
patch still replays (a deletion and an addition), and its file list names both paths."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import bar, files_on_disk, init_clean, ledger, new_task, replay_patches, worktree

BODY = "".join(f"line {n}\n" for n in range(20))


def counted(text: str) -> str:
    found = re.search(r"(\d+ files? \+\d+ -\d+)", text)
    assert found, text
    return found[1]


def test_a_rename_counts_once_everywhere(
    repo: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (repo / "utils.py").write_text(BODY)
    (repo / "legacy.py").write_text("old\nold\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "files"], cwd=repo, check=True)
    init_clean(repo, capfd)
    t = new_task(capfd)
    script = "mv utils.py helpers.py && echo more >> helpers.py && rm legacy.py && echo n > new.py"
    ran = bar(capfd, "run", "--", "sh", "-c", script)
    assert ran.code == 0, ran.err
    # a rename with one line added, a deletion of two lines, an addition of one
    assert counted(ran.err) == "3 files +2 -2"
    step = ledger(str(t["id"]))[-1]
    assert step["diff_stat"]["files"] == 3
    assert sorted(step["diff_stat"]["file_list"]) == [
        "helpers.py",
        "legacy.py",
        "new.py",
        "utils.py",
    ]
    assert counted(bar(capfd, "log").out) == "3 files +2 -2"
    assert counted(bar(capfd, "show").out) == "3 files +2 -2"
    stat = bar(capfd, "diff", "--json").json()["diff_stat"]
    assert (stat["files"], stat["additions"], stat["deletions"]) == (3, 2, 2)
    assert "3 files changed, 2 insertions(+), 2 deletions(-)" in bar(capfd, "diff", "--stat").out
    assert counted(bar(capfd, "apply", "--dry-run").out) == "3 files +2 -2"
    # the patch is a deletion and an addition, and replays to the recorded state
    patch = Path(t["worktree"]).parent.parent / "tasks" / str(t["id"]) / step["artifacts"]["patch"]
    assert "rename from" not in patch.read_text()
    replayed = replay_patches(repo, str(t["id"]), str(t["base_commit"]), tmp_path / "replay")
    assert replayed == files_on_disk(worktree(t))


def test_a_change_that_renames_nothing_is_counted_as_before(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    init_clean(repo, capfd)
    new_task(capfd)
    ran = bar(capfd, "run", "--", "sh", "-c", "echo a > a.txt && echo b > b.txt")
    assert counted(ran.err) == "2 files +2 -0"
    ran = bar(capfd, "run", "--", "sh", "-c", "rm a.txt && echo c > c.txt")  # not alike
    assert counted(ran.err) == "2 files +1 -1"
