"""The side index stays split: what a snapshot's ``git add`` writes is the few entries
that changed, not the whole index again.

Git keeps in the written part of a split index every entry that replaces a shared one,
and starts a new shared part only when a fifth of the entries are new ones; entries it
wrote as racily clean when it split (right after ``git reset --hard`` made a task's
worktree) are replacements, and so stay there on every write. bar sees a crowded written
part by its header and has the next write start a new shared part (``side_index.crowded``).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers import (
    bar,
    init_clean,
    new_task,
    plain_git_tree,
    recorded_tree,
    side_index_of,
    task_dir,
    worktree,
)

from bar.history import side_index

FILES = 400


def _git_on_index(task: dict[str, object], *args: str, input: bytes | None = None) -> None:
    """Run git on the task's side index as bar does (its own git directory, split)."""
    folder = task_dir(str(task["id"]))
    wt = worktree(task)
    common = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
        cwd=wt,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    env = {
        "GIT_INDEX_FILE": str(folder / "index"),
        "GIT_DIR": str(folder / "git"),
        "GIT_COMMON_DIR": common,
        "GIT_WORK_TREE": str(wt),
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(
        ["git", "-c", "core.splitIndex=true", *args],
        cwd=wt,
        env=env,
        check=True,
        input=input,
        capture_output=True,
    )


def _entries_written(index: Path) -> int:
    """How many entries the written part of a split index holds (its header's count)."""
    return int.from_bytes(index.read_bytes()[8:12], "big")


def test_a_crowded_side_index_is_split_again_by_the_next_snapshot(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    for n in range(FILES):
        (repo / f"d{n % 8}").mkdir(exist_ok=True)
        (repo / f"d{n % 8}" / f"f{n}.txt").write_text(f"{n}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "files"], cwd=repo, check=True)
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    index = side_index_of(task)
    assert bar(capfd, "run", "--", "true").code == 0
    # every entry replaced (a mode changed and changed back): git keeps them all in the
    # written part, as it keeps the entries it wrote racily clean
    names = (
        b"\0".join(p.relative_to(wt).as_posix().encode() for p in sorted(wt.rglob("*.txt"))) + b"\0"
    )
    for mode in ("+x", "-x"):
        _git_on_index(task, "update-index", f"--chmod={mode}", "-z", "--stdin", input=names)
    assert _entries_written(index) >= FILES  # (the state this test is about)
    assert side_index.crowded(index)

    # git writes racily clean entries (a file written within the second the index is) as
    # replacements again: the new shared part is written once they are not
    time.sleep(1.1)
    (wt / "d3" / "f3.txt").write_text("a hand edit\n")
    assert bar(capfd, "run", "--", "sh", "-c", "echo step > d5/f5.txt").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    assert not side_index.crowded(index)
    assert _entries_written(index) < 16
    # and it stays small: each write holds what changed since the new shared part
    for n in range(3):
        assert bar(capfd, "run", "--", "sh", "-c", f"echo {n} >> d1/f1.txt").code == 0
        assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
        assert _entries_written(index) < 16


def test_an_index_that_is_not_split_or_not_there_is_not_crowded(tmp_path: Path) -> None:
    assert not side_index.crowded(tmp_path / "missing")
    (tmp_path / "short").write_bytes(b"DIRC\0\0")
    assert not side_index.crowded(tmp_path / "short")
    (tmp_path / "other").write_bytes(b"XXXX" + bytes(4) + (1000).to_bytes(4, "big"))
    assert not side_index.crowded(tmp_path / "other")
    (tmp_path / "full").write_bytes(b"DIRC" + bytes(4) + side_index.CROWDED.to_bytes(4, "big"))
    assert side_index.crowded(tmp_path / "full")


def test_the_shared_part_is_read_for_racy_entries_only_when_a_write_made_it(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write of a split index sets its shared part's time to now, so the time of
    the shared part says nothing: one written anew is a new file in its folder. The
    check for racily clean entries after a write (``bar.git.racy``) reads the shared
    part only then: not after a step that wrote the small part alone."""
    from bar.base import file_clock
    from bar.git import racy

    for n in range(FILES):
        (repo / f"f{n}.txt").write_text(f"{n}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "files"], cwd=repo, check=True)
    init_clean(repo, capfd)
    task = new_task(capfd)
    index = side_index_of(task)
    assert bar(capfd, "run", "--", "sh", "-c", "echo 1 >> f1.txt").code == 0
    own = task_dir(str(task["id"])) / "git"
    read: list[int] = []
    real = racy._has_racy

    def spy(data: bytes, *args: int) -> bool | None:
        read.append(len(data))
        return real(data, *args)

    monkeypatch.setattr(racy, "_has_racy", spy)
    # (the first writes after a task's worktree was made start new shared parts: its
    # entries were written racily clean: ``side_index.crowded``)
    for n in range(5):
        since = file_clock.tick_after(file_clock.floor())
        assert bar(capfd, "run", "--", "sh", "-c", f"echo {n} >> f2.txt").code == 0
        if own.stat().st_mtime_ns < since:
            break
    shared = racy._shared_part(index.read_bytes(), own, 20)
    assert shared is not None and shared.stat().st_mtime_ns >= since
    assert own.stat().st_mtime_ns < since  # (kept, its time set to now)
    read.clear()
    racy.needed(index, since)
    assert shared.stat().st_size not in read and read  # (the written part was read)

    read.clear()
    since = file_clock.tick_after(file_clock.floor())
    _git_on_index(
        task, "-c", "splitIndex.maxPercentChange=0", "update-index", "--chmod=+x", "f3.txt"
    )
    made = racy._shared_part(index.read_bytes(), own, 20)
    assert made is not None and made != shared
    racy.needed(index, since)
    assert made.stat().st_size in read
