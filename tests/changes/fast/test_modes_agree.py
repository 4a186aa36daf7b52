"""The speed layer and the plain look (``BAR_FAST=0``) record the same states, and neither
writes inside a nested repository (nested repositories are foreign:
docs/internals/record.md, "Nothing is destroyed that was not recorded").

Every test runs both ways (the ``speed`` fixture), through the real ``bar`` commands.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SETTLE,
    bar,
    init_clean,
    ledger,
    new_task,
    plain_git_tree,
    recorded_tree,
    watcher_started,
    worktree,
)


@pytest.fixture(params=["fast", "stamps", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default; ``stamps``: with no watcher between
    commands, so each looks by the stamped ctimes) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    if request.param == "stamps":
        monkeypatch.setenv("BAR_WATCHER_IDLE", "0")
    return str(request.param)


def _task(repo: Path, capfd: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], Path]:
    """A task three steps in (with the speed layer on, its watcher is watching)."""
    if os.environ.get("BAR_FAST") == "0" or os.environ.get("BAR_WATCHER_IDLE") == "0":
        init_clean(repo, capfd)
        task = new_task(capfd)
        for _ in range(3):
            assert bar(capfd, "run", "--", "true").code == 0
        return task, worktree(task)
    return watcher_started(capfd, repo)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def _nested_commit(path: Path, name: str = "lib.c", text: str = "int x;\n") -> None:
    """A commit by hand in the repository at ``path`` (made if it is not one)."""
    if not (path / ".git").exists():
        _git(path.parent, "init", "-q", path.name)
    (path / name).write_text(text)
    _git(path, "add", name)
    _git(path, "-c", "user.name=d", "-c", "user.email=d@x", "commit", "-qm", name)


def _git_dir_state(repo: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and directory under a repository's ``.git``, with its size, mode and
    mtime: what any write there changes."""
    found: dict[str, tuple[int, int, int]] = {}
    top = repo / ".git"
    for here, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            st = os.lstat(os.path.join(here, name))
            rel = os.path.relpath(os.path.join(here, name), top)
            found[rel] = (st.st_size, st.st_mode, st.st_mtime_ns)
    return found


def _same_record(repo: Path, task: dict[str, Any], wt: Path, tmp: Path) -> None:
    got, want = recorded_tree(repo, task), plain_git_tree(wt, tmp)
    assert _git(repo, "ls-tree", "-r", got) == _git(repo, "ls-tree", "-r", want)


def test_bar_never_writes_inside_a_nested_repository(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """A nested repository with uncommitted work (which ``git add`` of its gitlink would
    ask about with ``git status`` inside it: a process that refreshes and writes its
    index, split if bar's own split-index setting reached it) keeps every file of its
    ``.git`` as it was over runs, a rollback, an undo, a close, a reopen and an apply."""
    task, wt = _task(repo, capfd)
    assert bar(capfd, "run", "--", "sh", "-c", "echo 1 > a.txt").code == 0
    first = ledger(task["id"])[-1]["step_id"]
    vendor = wt / "deep" / "vendor"
    vendor.mkdir(parents=True)
    _nested_commit(vendor)
    _nested_commit(wt / "other")
    for nested in (vendor, wt / "other"):
        (nested / "lib.c").write_text("int y;\n")  # uncommitted: dirty
        (nested / "wip.c").write_text("wip\n")  # untracked
    assert bar(capfd, "run", "--", "sh", "-c", "echo 2 > a.txt").code == 0
    _same_record(repo, task, wt, tmp_path)
    before = {n: _git_dir_state(n) for n in (vendor, wt / "other")}

    def unchanged(what: str) -> None:
        for nested, was in before.items():
            assert _git_dir_state(nested) == was, f"{what} wrote inside {nested.name}/.git"

    steps = [
        ("run", ["run", "--", "sh", "-c", "echo 3 > a.txt"]),
        ("run", ["run", "--", "true"]),
        ("status", ["status"]),
        ("rollback", ["rollback", "--to", first]),
        ("undo", ["undo"]),
        ("run", ["run", "--", "sh", "-c", "echo 4 > a.txt"]),
    ]
    for what, args in steps:
        res = bar(capfd, *args)
        assert res.code == 0, (what, res.err)
        if what == "rollback":  # (to a state before them: both moved to the trash, whole)
            assert not vendor.exists() and not (wt / "other").exists()
            assert "deep/vendor/" in bar(capfd, "trash").out
            continue
        unchanged(what)  # (the undo put them back as they were)
    os.chdir(repo)
    res = bar(capfd, "apply", "-m", "land")
    assert res.code == 0, res.err
    unchanged("apply")
    res = bar(capfd, "task", "close", task["id"], "--force")
    assert res.code == 0, res.err
    if vendor.exists():
        unchanged("close")
    res = bar(capfd, "task", "reopen", task["id"])
    assert res.code == 0, res.err
    for nested, was in before.items():
        if nested.exists():
            now = _git_dir_state(nested)
            assert {k: v for k, v in now.items() if k in was} == {
                k: v for k, v in was.items() if k in now
            }
            assert not [k for k in now if "sharedindex" in k]


def test_a_nested_repository_made_empty_then_committed_is_recorded(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """``git init vendor`` by hand (a repository without a commit: git records nothing
    of it), a step, then a commit in it by hand: the next step records it as a gitlink,
    as ``git add -A`` does. Deeper, and several at once, the same. (While one has no
    commit ``git add -A`` refuses to run: the record is compared once each has one.)"""
    task, wt = _task(repo, capfd)
    (wt / "a" / "b" / "c").mkdir(parents=True)
    for rel in ("vendor", "a/b/c/deep", "a/b/other"):
        _git((wt / rel).parent, "init", "-q", (wt / rel).name)
    assert bar(capfd, "run", "--", "true").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo 1 > top.txt").code == 0
    _nested_commit(wt / "vendor")
    _nested_commit(wt / "a/b/c/deep")
    assert bar(capfd, "run", "--", "true").code == 0
    _nested_commit(wt / "a/b/other")
    assert bar(capfd, "run", "--", "true").code == 0
    _same_record(repo, task, wt, tmp_path)
    listed = _git(repo, "ls-tree", "-r", "--name-only", recorded_tree(repo, task)).split()
    assert {"vendor", "a/b/c/deep", "a/b/other"} <= set(listed)
    # a second commit moves the gitlink; a repository a step makes empty, then committed
    _nested_commit(wt / "vendor", "two.c")
    res = bar(capfd, "run", "--", "sh", "-c", "git init -q made && echo 2 > top.txt")
    assert res.code == 0, res.err
    assert bar(capfd, "run", "--", "true").code == 0
    _nested_commit(wt / "made")
    assert bar(capfd, "run", "--", "true").code == 0
    _same_record(repo, task, wt, tmp_path)


@pytest.mark.parametrize("how", ["undo", "rollback"])
def test_a_nested_repository_a_restore_leaves_on_disk_is_recorded(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], speed: str, how: str
) -> None:
    """A nested repository added by hand (recorded by the next command as a manual
    step), then that step undone, or rolled back past: the repository is foreign, so it
    is moved whole to the task's trash, never deleted, and every mode records it gone, as
    ``git add -A`` would; undoing that puts it back, ``.git`` and all, and the record holds
    its gitlink again (a redo, after an undo); one that moved on meanwhile is recorded at its new commit."""
    task, wt = _task(repo, capfd)
    assert bar(capfd, "run", "--", "sh", "-c", "echo 1 > a.txt").code == 0
    first = ledger(task["id"])[-1]["step_id"]
    _nested_commit(wt / "vendor")
    (wt / "d").mkdir()
    _nested_commit(wt / "d" / "lib")
    if how == "undo":  # (the hand edits are recorded first, as a manual step: undone)
        res = bar(capfd, "undo")
    else:
        assert bar(capfd, "run", "--", "true").code == 0
        assert [s["kind"] for s in ledger(task["id"])][-2] == "manual"
        _same_record(repo, task, wt, tmp_path)
        res = bar(capfd, "rollback", "--to", first)
    assert res.code == 0, res.err
    assert not (wt / "vendor").exists() and not (wt / "d" / "lib").exists()
    assert "vendor/" in bar(capfd, "trash").out
    _same_record(repo, task, wt, tmp_path)
    assert bar(capfd, "redo" if how == "undo" else "undo").code == 0
    assert (wt / "vendor" / ".git").is_dir() and (wt / "d" / "lib" / "lib.c").exists()
    _same_record(repo, task, wt, tmp_path)
    # the repository moves on by hand: the next look records its new commit
    _nested_commit(wt / "vendor", "more.c")
    assert bar(capfd, "run", "--", "true").code == 0
    _same_record(repo, task, wt, tmp_path)


@pytest.mark.parametrize(
    "setting", ["core.trustctime=false", "core.checkStat=minimal", "core.ignoreStat=true"]
)
def test_a_same_size_rewrite_with_its_mtime_put_back_is_seen_whatever_the_stat_settings(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], speed: str, setting: str
) -> None:
    """The repository tells git to trust no ctime (``core.trustctime=false``) or to
    compare only the mtime's seconds and the size (``core.checkStat=minimal``), or to mark
    what it adds assume-unchanged (``core.ignoreStat=true``). A file is
    rewritten in place with as many bytes and its mtime put back: only its ctime moved.
    The side index is bar's, not the repository's: every look compares the ctime, and
    records the rewrite; by hand and by a step, deeper and many files at once."""
    key, value = setting.split("=")
    _git(repo, "config", key, value)
    task, wt = _task(repo, capfd)
    names = ["f.txt", "d/e/g.txt", *(f"many/{n}.txt" for n in range(30))]
    script = "; ".join(f"mkdir -p $(dirname {n}); printf aaaa > {n}" for n in names)
    touch = " ".join(names)
    res = bar(capfd, "run", "--", "sh", "-c", f"{script}; touch -d @1000000000 {touch}")
    assert res.code == 0, res.err
    for n in names:  # by hand
        (wt / n).write_text("bbbb")
        os.utime(wt / n, (1_000_000_000, 1_000_000_000))
    assert bar(capfd, "run", "--", "true").code == 0
    _same_record(repo, task, wt, tmp_path)
    assert ledger(task["id"])[-2]["kind"] == "manual"
    # by a step
    rewrite = "; ".join(f"printf cccc > {n}" for n in names)
    res = bar(capfd, "run", "--", "sh", "-c", f"{rewrite}; touch -d @1000000000 {touch}")
    assert res.code == 0, res.err
    _same_record(repo, task, wt, tmp_path)
    assert ledger(task["id"])[-1]["diff_stat"]["files"] == len(names)


def test_a_nested_repository_where_a_directory_of_tracked_files_was(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """A directory of recorded files becomes a nested repository by hand (its files
    gone, ``git init``, a commit): recorded as a gitlink, as git does. A rollback to the
    state that held the files moves the repository whole to the trash and writes them; an
    undo of it puts the repository back as it was. Never git's "Pathspec ... is in
    submodule", never a write inside the repository, and each record is git's."""
    task, wt = _task(repo, capfd)
    res = bar(capfd, "run", "--", "sh", "-c", "mkdir -p d/e && echo 1 > d/x.txt && echo 2 > d/e/y")
    assert res.code == 0, res.err
    first = ledger(task["id"])[-1]["step_id"]
    subprocess.run(["rm", "-rf", str(wt / "d")], check=True)
    (wt / "d").mkdir()
    _nested_commit(wt / "d", "x.txt", "mine\n")
    assert bar(capfd, "run", "--", "true").code == 0
    _same_record(repo, task, wt, tmp_path)
    was = _git_dir_state(wt / "d")
    res = bar(capfd, "rollback", "--to", first)
    assert res.code == 0, res.err
    assert "is in submodule" not in res.err and "free space" not in res.err, res.err
    assert not (wt / "d" / ".git").exists() and (wt / "d" / "x.txt").read_text() == "1\n"
    assert "d/" in bar(capfd, "trash").out
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    _same_record(repo, task, wt, tmp_path)
    res = bar(capfd, "rollback", "--to", ledger(task["id"])[-3]["step_id"])  # (the gitlink)
    assert res.code == 0, res.err
    assert "is in submodule" not in res.err and "free space" not in res.err, res.err
    assert (wt / "d" / ".git").is_dir() and _git_dir_state(wt / "d") == was
    assert (wt / "d" / "x.txt").read_text() == "mine\n"
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0, res.err
    _same_record(repo, task, wt, tmp_path)


@pytest.mark.parametrize("by", ["hand", "moved", "step"])
def test_directories_of_recorded_files_made_repositories_in_place_are_each_one_gitlink(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], speed: str, by: str
) -> None:
    """``git init`` and a commit in directories whose files are recorded, the files left
    where they are: one holding files and a directory of its own, one holding only a
    directory (nothing of its own to rescan: its ``.git`` is all that is new in it), both
    deep under directories nothing else touched; or (``moved``) a repository's ``.git``
    made elsewhere moved into the second, all that is new in the worktree. Each is
    recorded as one gitlink, as git does from a fresh index, whether the look learned of
    it from the watch or from the directories' times; and a later edit elsewhere leaves
    them so."""
    task, wt = _task(repo, capfd)
    script = (
        "mkdir -p a/b/d/e a/b/p/s other && echo 1 > a/b/d/x.txt && echo 2 > a/b/d/e/y "
        "&& echo 3 > a/b/p/s/z && echo 4 > other/o.txt"
    )
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    made = (
        "for d in a/b/d a/b/p; do git init -q $d && git -C $d add -A && "
        "git -C $d -c user.name=d -c user.email=d@x commit -qm init; done"
    )
    # (a look past the racy window of that step: every directory stamped by its ctime,
    # none rescanned for being racy, then past this one's)
    time.sleep(SETTLE)
    assert bar(capfd, "run", "--", "true").code == 0
    time.sleep(SETTLE)
    if by == "hand":
        subprocess.run(["sh", "-c", made], cwd=wt, check=True)
        time.sleep(SETTLE)
        assert bar(capfd, "run", "--", "true").code == 0
    elif by == "moved":
        # a repository's .git made elsewhere and moved into the directory holding only a
        # directory: nothing else is new anywhere, so no path names it
        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(wt / "a/b/p", elsewhere)
        subprocess.run(["sh", "-c", made.replace("a/b/d a/b/p", ".")], cwd=elsewhere, check=True)
        os.rename(elsewhere / ".git", wt / "a/b/p/.git")
        time.sleep(SETTLE)
        assert bar(capfd, "run", "--", "true").code == 0
    else:
        res = bar(capfd, "run", "--", "sh", "-c", made)
        assert res.code == 0, res.err
    _same_record(repo, task, wt, tmp_path)
    listed = _git(repo, "ls-tree", "-r", recorded_tree(repo, task))
    assert "160000 commit" in listed and "\ta/b/p\n" in listed and "a/b/p/" not in listed
    if by != "moved":
        assert "\ta/b/d\n" in listed and "a/b/d/" not in listed
    (wt / "other" / "o.txt").write_text("5\n")
    assert bar(capfd, "run", "--", "true").code == 0
    _same_record(repo, task, wt, tmp_path)


def test_a_nested_repository_under_files_head_tracks_when_a_conversion_switches(
    repo: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """The worktree's HEAD tracks a file in ``d/`` (a step committed it), which a later
    step removes. By hand, ``d`` becomes a nested repository and a ``.gitattributes``
    comes in the same breath: the conversion switch starts the side index over from
    HEAD, which holds ``d``'s file. The look records ``d`` as one gitlink all the same,
    as git does from a fresh index, never the nested repository's files one by one."""
    task, wt = _task(repo, capfd)
    script = "mkdir d && echo 1 > d/x.txt && git add d && git commit -qm d"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    assert bar(capfd, "run", "--", "rm", "-r", "d").code == 0
    (wt / "d").mkdir()
    _nested_commit(wt / "d")
    (wt / ".gitattributes").write_text("* text=auto\n")
    assert bar(capfd, "run", "--", "true").code == 0
    manual = [s for s in ledger(task["id"]) if s["kind"] == "manual"][-1]
    for step in (manual, ledger(task["id"])[-1]):
        listed = _git(repo, "ls-tree", "-r", step["snapshot"])
        assert "160000 commit" in listed and "\td\n" in listed, (step["step_id"], listed)
        assert "\td/" not in listed, (step["step_id"], listed)


def test_a_failed_add_says_what_git_refused_and_free_space_only_for_a_full_disk() -> None:
    """The hint of a snapshot git could not write names what happened."""
    from bar.history.side_index import _failed_hint

    full = [b"error: unable to write new index file", b"fatal: No space left on device"]
    assert _failed_hint(full) is None  # (``SnapshotFailed``'s own: free space)
    said = _failed_hint([b"fatal: Pathspec 'd/x' is in submodule 'd'"])
    assert said is not None and "is in submodule 'd'" in said and "free space" not in said
