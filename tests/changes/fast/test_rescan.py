"""What a read-only look at the worktree (``apply --dry-run``, ``status``, a rollback's
plan) sees: the tree a snapshot would record, from the stamps, without a full rescan."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers import SETTLE, bar, new_task, worktree

from bar import api
from bar.history import steps


def _plain_git_tree(wt: Path, tmp: Path) -> str:
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp / "oracle-index")}
    subprocess.run(["git", "add", "-A"], cwd=wt, env=env, check=True)
    return subprocess.run(
        ["git", "write-tree"], cwd=wt, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_current_tree_from_the_stamps_equals_plain_git(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    wt = worktree(new_task(capfd))
    (wt / "docs").mkdir()
    (wt / "docs" / "a.md").write_text("a\n")
    assert bar(capfd, "run", "--", "true").code == 0  # recorded; the stamps are written
    task = api.get_task(api.open_project(), "t1")
    recorded = task.recorded_snapshot()
    assert steps.current_tree(task, recorded) == _plain_git_tree(wt, tmp_path)
    assert not steps.has_unrecorded_changes(task)

    (wt / "README.md").write_text("changed by hand\n")
    (wt / "docs" / "a.md").unlink()
    (wt / "docs" / "new").mkdir()
    (wt / "docs" / "new" / "b.md").write_text("b\n")
    (wt / "tool.sh").write_text("#!/bin/sh\n")
    (wt / "tool.sh").chmod(0o755)
    expected = _plain_git_tree(wt, tmp_path)
    assert steps.current_tree(task, recorded) == expected == steps.current_tree(task)
    assert steps.has_unrecorded_changes(task)
    assert task.recorded_snapshot() == recorded  # looking recorded nothing


def test_ignored_directories_are_not_stamped_and_hide_nothing(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Build output and caches git ignores are neither stamped nor watched (thousands of
    directories on a large repository); directories holding only ignored files, or
    nothing, still are, so a file made in one later is recorded."""
    from bar.changes.fast import stamps

    assert bar(capfd, "init").code == 0
    wt = worktree(new_task(capfd))
    (wt / ".gitignore").write_text("/build/\n__pycache__/\n*.log\n")
    (wt / "build" / "a" / "b").mkdir(parents=True)
    (wt / "build" / "a" / "b" / "out.o").write_text("o\n")
    (wt / "pkg" / "__pycache__").mkdir(parents=True)
    (wt / "pkg" / "m.py").write_text("x = 1\n")
    (wt / "logs").mkdir()
    (wt / "logs" / "run.log").write_text("log\n")
    (wt / "empty").mkdir()
    assert bar(capfd, "run", "--", "true").code == 0  # a full scan: .gitignore is new
    task = api.get_task(api.open_project(), "t1")
    stamped = set(stamps.stamped_dirs(task.index) or ())
    assert {"", "pkg", "logs", "empty"} <= stamped
    assert not stamped & {"build", "build/a", "build/a/b", "pkg/__pycache__"}

    (wt / "logs" / "notes.txt").write_text("kept\n")
    (wt / "empty" / "e.txt").write_text("e\n")
    (wt / "build" / "a" / "b" / "more.o").write_text("o\n")
    (wt / "pkg" / "__pycache__" / "m.pyc").write_text("c\n")
    expected = _plain_git_tree(wt, tmp_path)
    recorded = task.recorded_snapshot()
    assert steps.current_tree(task, recorded) == expected
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0 and "warning" not in res.err
    task = api.get_task(api.open_project(), "t1")
    snapshot = task.recorded_snapshot()
    tree = subprocess.run(
        ["git", "-C", str(wt), "rev-parse", snapshot + "^{tree}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert tree == expected


@pytest.mark.parametrize("left", ["empty", "cut", "index older"])
def test_stamps_a_crash_of_the_machine_left_behind_are_found_out(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], left: str
) -> None:
    """The stamps are written without fsync: after a crash of the machine they may be
    empty, cut short, or newer than the side index beside them (its rename lost). None
    of these can hide a change: the next snapshot rescans everything."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("BAR_WATCHER_IDLE", "0")  # (the stamps alone say what to look at)
    try:
        assert bar(capfd, "init").code == 0
        wt = worktree(new_task(capfd))
        assert bar(capfd, "run", "--", "sh", "-c", "mkdir d && echo 0 > d/zero.txt").code == 0
        task = api.get_task(api.open_project(), "t1")
        stamps_file = task.index.with_name("index.stamps")
        older_index = task.index.read_bytes()
        # a new file in a directory the stamps then note as unchanged since (its ctime
        # past the racy window): only the side index it was added to holds it
        (wt / "d" / "one.txt").write_text("one\n")
        time.sleep(SETTLE)
        assert bar(capfd, "run", "--", "true").code == 0
        if left == "empty":
            stamps_file.write_bytes(b"")
        elif left == "cut":
            stamps_file.write_bytes(stamps_file.read_bytes()[:-7])
        else:  # the stamps of the last snapshot beside the index of the one before
            task.index.write_bytes(older_index)
        (wt / "two.txt").write_text("by hand\n")
        assert bar(capfd, "run", "--", "true").code == 0
        last = api.get_task(api.open_project(), "t1").recorded_snapshot()
        tree = subprocess.run(
            ["git", "rev-parse", f"{last}^{{tree}}"],
            cwd=wt,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert tree == _plain_git_tree(wt, tmp_path)
    finally:
        monkeypatch.undo()


def test_many_files_edited_in_place_are_added_by_their_directories(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # git matches every index entry against every pathspec: thousands of edited files
    # named one by one made `git add` quadratic (a minute for 20,000). Past rescan's
    # limit their directories are named instead, and the tree is still exactly git's.
    from bar.changes.fast import rescan

    # the look is asked here, not by a command: a watcher staging the edits ahead of it
    # (on a busy machine, while they are still being made) rewrites the side index, and
    # the stamps rightly no longer speak for it
    monkeypatch.setenv("BAR_WATCHER_STAGE", "0")
    wt = _settled_task(capfd)
    many = rescan._MAX_PATHS + 200
    for i in range(many):
        sub = wt / f"pkg{i % 3}" / f"m{i % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.txt").write_text(f"{i}\n")
    (wt / "one.txt").write_text("one\n")
    assert bar(capfd, "run", "--", "true").code == 0
    task = api.get_task(api.open_project(), "t1")
    recorded = task.recorded_snapshot()
    time.sleep(SETTLE)
    for path in wt.glob("pkg*/m*/f*.txt"):
        path.write_text(path.read_text() + "edited\n")
    (wt / "one.txt").write_text("edited too\n")
    found = rescan.changed_since(wt, task.index, recorded)
    assert found is not None and len(found) <= rescan._MAX_PATHS
    assert "pkg0/m0" in found and "one.txt" in found
    assert steps.current_tree(task, recorded) == _plain_git_tree(wt, tmp_path)
    assert bar(capfd, "run", "--", "true").code == 0
    assert task.recorded_snapshot() != recorded
    assert steps.tree_of(task, task.recorded_snapshot()) == _plain_git_tree(wt, tmp_path)


def test_more_untracked_directories_than_are_stamped_hide_nothing(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Untracked directories are stamped up to a bound; past it, a file made in one of
    the others would move no stamped directory (and no watch sees it): the stamps say
    they are partial and every look is whole, so the file is recorded."""
    from bar.changes.fast import rescan, stamps

    monkeypatch.setenv("BAR_WATCHER_STAGE", "0")
    assert bar(capfd, "init").code == 0
    wt = worktree(new_task(capfd))
    many = stamps._MAX_EXTRA + 40
    for i in range(many):
        (wt / "empty" / f"{i:05}").mkdir(parents=True)
    assert bar(capfd, "run", "--", "true").code == 0
    task = api.get_task(api.open_project(), "t1")
    recorded = task.recorded_snapshot()
    noted = stamps.noted(task.index) or {}
    assert noted.get("partial") is True and len(noted["extra"]) == stamps._MAX_EXTRA
    left_out = sorted({f"empty/{i:05}" for i in range(many)} - set(noted["extra"]))
    assert left_out
    (wt / left_out[0] / "made.txt").write_text("by hand\n")
    assert rescan.changed_since(wt, task.index, recorded) is None  # (a whole look)
    said = bar(capfd, "status")
    assert said.code == 0 and "watch     off" in said.out
    assert "each command looks at the whole worktree" in " ".join(said.out.split())
    _the_next_command_records_it(wt, tmp_path, capfd, recorded)


def test_a_chain_of_nested_directories_costs_one_git_a_look(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What git ignores among new untracked directories is asked level by level, of one
    git for the whole walk: a chain of hundreds of nested directories started hundreds of
    gits (and asked each level's ancestors for a .git again: minutes to record for two
    thousand). Each is stamped, so a file made at the bottom later is recorded; the
    ignored directory at the bottom is not (git 2.39 cannot give its verbose answer so
    deep: that question is put again to a git of its own)."""
    monkeypatch.setenv("BAR_WATCHER_STAGE", "0")
    assert bar(capfd, "init").code == 0
    wt = worktree(new_task(capfd))
    (wt / ".gitignore").write_text("ignored/\n")
    deep = wt.joinpath(*["d"] * 600)
    subprocess.run(["mkdir", "-p", f"{deep}/ignored/below"], check=True)  # (os.makedirs recurses)
    try:
        _a_chain_is_stamped(wt, deep, tmp_path, capfd, monkeypatch)
    finally:  # (shutil.rmtree, which removes the test's folder, recurses too)
        subprocess.run(["rm", "-rf", str(wt / "d")], check=False)


def _a_chain_is_stamped(
    wt: Path,
    deep: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bar.changes.fast import stamps

    trace = tmp_path / "git-trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    assert bar(capfd, "run", "--", "true").code == 0
    monkeypatch.delenv("GIT_TRACE")
    asked = [line for line in trace.read_text().splitlines() if "check-ignore" in line]
    assert 1 <= len(asked) <= 4, asked  # (the look for hand edits, the step's snapshot)
    task = api.get_task(api.open_project(), "t1")
    noted = stamps.noted(task.index) or {}
    bottom = "/".join(["d"] * 600)
    assert noted.get("partial") is False and bottom in noted["extra"]
    assert not {f"{bottom}/ignored", f"{bottom}/ignored/below"} & set(noted["extra"])
    time.sleep(SETTLE)
    (deep / "made.txt").write_text("by hand\n")
    _the_next_command_records_it(wt, tmp_path, capfd, task.recorded_snapshot())


@pytest.mark.parametrize("place", ["d/d/d/d/d/d/d/d/d/d", "xyz/abcdefghijklmnop/q"])
def test_a_file_made_in_an_empty_directory_bar_stamped_is_recorded(
    place: str,
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A look of a few paths names the directory whose ctime moved. git 2.39 walks only
    below the common prefix of the pathspecs, taken from the first one, and found
    nothing in a new directory several levels deep named before a path left out (aide's
    files, always): the file went unrecorded, in every later step too."""
    from bar.changes.fast import rescan, stamps

    monkeypatch.setenv("BAR_WATCHER_STAGE", "0")
    wt = _settled_task(capfd)
    (wt / place).mkdir(parents=True)
    assert bar(capfd, "run", "--", "true").code == 0
    task = api.get_task(api.open_project(), "t1")
    recorded = task.recorded_snapshot()
    assert place in ((stamps.noted(task.index) or {}).get("extra") or [])
    time.sleep(SETTLE)
    (wt / place / "made.txt").write_text("by hand\n")
    assert place in (rescan.changed_since(wt, task.index, recorded) or [])
    _the_next_command_records_it(wt, tmp_path, capfd, recorded)


def _settled_task(capfd: pytest.CaptureFixture[str]) -> Path:
    """The worktree of a new task whose first step has laid aide's files (``.aide``),
    past the racy window: a ``.aide/.gitignore`` changed within it rightly has the next
    look take the whole worktree (what is ignored may have changed), where these tests
    want to see the look of a few paths (a warm test process reaches its second step
    within the window)."""
    assert bar(capfd, "init").code == 0
    wt = worktree(new_task(capfd))
    assert bar(capfd, "run", "--", "true").code == 0
    time.sleep(SETTLE)
    return wt


def _the_next_command_records_it(
    wt: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], recorded: str
) -> None:
    """A file made by hand since ``recorded`` is in the tree a look finds, and the next
    command records it as a hand edit: the tree plain git makes of the worktree."""
    task = api.get_task(api.open_project(), "t1")
    expected = _plain_git_tree(wt, tmp_path)
    assert steps.current_tree(task, recorded) == expected
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0 and "1 file changed outside bar" in res.err
    task = api.get_task(api.open_project(), "t1")
    assert steps.tree_of(task, task.recorded_snapshot()) == expected
