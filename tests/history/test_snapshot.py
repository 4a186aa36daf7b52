"""bar.history.snapshot: the cheap change check never misses a hand edit; incremental snapshots
equal full ones."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SETTLE,
    bar,
    files_in_commit,
    files_on_disk,
    git_commands,
    ledger,
    new_task,
    project_dir,
    worktree,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar.changes.fast.rescan import unchanged_since
from bar.git import DIFF_FLAGS, parse_numstat, racy
from bar.git.patches import write_patch
from bar.history import steps as ledger_steps
from conftest import git
from test_properties import _check_replay, _run_ops, _start

# edits below the root, so that the root directory's mtime stays put and snapshots take
# the incremental path (a change of the root itself means a full scan)
deep = st.sampled_from(
    ["dir/a.txt", "dir/sub/b.bin", "dir/sub/deep/c", "dir/with space é.txt", "dir/x.sh", "dir/c.md"]
)
deep_op = st.one_of(
    st.builds(
        lambda p, t: {"op": "write", "path": p, "text": t}, deep, st.sampled_from(["", "x", "y\n"])
    ),
    st.builds(lambda p: {"op": "delete", "path": p}, deep),
    st.builds(lambda p, d: {"op": "rename", "path": p, "dest": d}, deep, deep),
    st.builds(lambda p, x: {"op": "chmod", "path": p, "exec": x}, deep, st.booleans()),
    st.builds(lambda p, t: {"op": "symlink", "path": p, "target": t}, deep, deep),
)
step_ops = st.lists(deep_op, min_size=1, max_size=6)


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
    time.sleep(SETTLE)  # a directory's ctime cannot be set back: wait out the window
    assert bar(capfd, "run", "--", "true").code == 0  # records the files, stamps are trusted
    # their ctimes fell in the second of that record (utime moves them): git could not
    # tell an edit in that second from them, so they are looked at again once it is over
    # (``bar.git.racy``)
    time.sleep(1.05 - time.time() % 1)
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


def _backdate(wt: Path) -> None:
    old = time.time() - 120
    for path in [wt, *wt.rglob("*")]:
        if ".git" in path.relative_to(wt).parts and path != wt:
            continue
        os.utime(path, (old, old), follow_symlinks=False)
    time.sleep(SETTLE)  # a directory's ctime cannot be set back: wait out the window


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


@pytest.mark.parametrize("edit", ["modify", "modify keeping size and mtime", "chmod"])
def test_a_hand_edit_that_keeps_the_directories_asks_git_for_no_tree_shape(
    edit: str,
    settled: dict[str, str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # files of the tree changed in place: its directories stand, so the stamps need no
    # diff of the trees (``stamps.shape_of``); git adds, writes the tree and writes the
    # patch, once each (bar writes the commit and moves the ref itself: ``bar.git.object_writer``);
    # a snapshot slower than ``SPLIT_AFTER_S`` (a loaded machine) would have its patch
    # written by two gits at once: this test is of the one git a small change takes
    monkeypatch.setattr(ledger_steps, "SPLIT_AFTER_S", float("inf"))
    # a record whose ``git add`` ran past the end of a second (a loaded machine) leaves
    # suspects to be hashed again by the next look (``bar.git.racy``), a plain edit or not
    suspects_left = bool(racy.suspects(project_dir() / "tasks" / settled["id"] / "index"))
    EDITS[edit](worktree(settled))
    edited_s = (worktree(settled) / "g.txt").stat().st_mtime_ns // 1_000_000_000
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    assert bar(capfd, "run", "--", "true").code == 0
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    ran = git_commands(trace)
    assert "diff-tree" not in ran and "ls-tree" not in ran, ran
    # a file whose ctime moved in the second of the record while its mtime stayed older
    # (a chmod, a ``touch -r``) has its noted stat cleared (``bar.git.racy``), and the step's
    # own snapshot adds it again
    smudged = "update-index" in ran
    # and so does an edit made in the second the look began, when the look wrote the
    # index in a later one: git would call a second edit of that second clean
    suspects_made = index_written_after(trace, edited_s)
    assert not smudged or edit != "modify" or suspects_left or suspects_made, ran
    assert ran.count("add") == ran.count("write-tree") == (2 if smudged else 1), ran
    assert ran.count("diff") == 1, ran
    assert "commit-tree" not in ran and "update-ref" not in ran, ran
    assert ran.count("config") <= (2 if smudged else 1), ran
    assert ledger(settled["id"])[-2]["kind"] == "manual"


def index_written_after(trace: Path, second: int) -> bool:
    """Whether the hand-edit look of a ``GIT_TRACE2_EVENT`` file (its gits before the
    first ``update-index``, the step's snapshot's rehash) wrote the index (an ``add``,
    a ``write-tree``) in a second later than ``second``: then a file whose mtime falls in
    ``second``, at or after the look began, is what ``bar.git.racy`` notes as a suspect."""
    named: dict[str, str] = {}
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "cmd_name":
            if event["name"] == "update-index":
                return False
            named[event["sid"]] = event["name"]
        elif event["event"] == "exit" and named.get(event["sid"]) in ("add", "write-tree"):
            ended = datetime.fromisoformat(event["time"].replace("Z", "+00:00"))
            if int(ended.timestamp()) > second:
                return True
    return False


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(steps=st.lists(step_ops, min_size=1, max_size=3))
def test_incremental_snapshots_equal_full_ones(
    steps: list[list[dict[str, Any]]],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With trusted stamps, snapshots rescan only what changed; they must still be exact."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        task = _start(tmp, capfd, monkeypatch)
        repo, wt = Path(task["repo_root"]), worktree(task)
        for n, ops in enumerate(steps):
            _backdate(wt)
            assert bar(capfd, "run", "--", "true").code == 0  # settles trusted stamps
            _run_ops(capfd, tmp, ops, n)
            last = ledger(task["id"])[-1]["snapshot"]
            assert files_on_disk(wt) == files_in_commit(repo, last)
            # a rollback rewrites the side index itself; the next snapshots must see it
            _backdate(wt)
            assert bar(capfd, "run", "--", "true").code == 0
            assert bar(capfd, "rollback").code == 0
            assert bar(capfd, "run", "--", "true").code == 0
            last = ledger(task["id"])[-1]["snapshot"]
            assert files_on_disk(wt) == files_in_commit(repo, last)
        _check_replay(tmp, task)


def test_the_side_index_stays_private(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """git rewrites an index with the umask's mode; the side index lists every file of the
    task, so it must stay 0600 after runs, hand edits and rollbacks, and doctor agrees."""
    import stat as stat_module

    repo = tmp_path / "private"
    repo.mkdir()
    monkeypatch.chdir(repo)
    subprocess.run(["git", "init", "-q", "-b", "main"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "commit", "-qm", "i"], check=True)
    os.umask(0o022)
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    wt = worktree(t)
    bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo b > b.txt")
    (wt / "c.txt").write_text("hand\n")
    bar(capfd, "status")
    bar(capfd, "run", "--no-pty", "--", "true")
    bar(capfd, "rollback", "--to", "base")
    index = project_dir() / "tasks" / t["id"] / "index"
    assert stat_module.S_IMODE(index.stat().st_mode) == 0o600
    res = bar(capfd, "doctor")
    assert res.code == 0 and "mode" not in res.out, res.out


@pytest.mark.parametrize("split", [False, True], ids=["one-diff", "two-diffs"])
def test_one_diff_gives_the_patch_and_its_stat_exactly(
    make_repo: Any, tmp_path: Path, split: bool
) -> None:
    """The patch artifact is byte for byte git's own patch, and the stat git's numstat,
    whether both come from one `git diff` or from two at once (``split``, a large
    step's): renames (as a deletion and an addition, which replay whatever the shapes),
    binary files, modes, a file that became a link, odd names."""
    repo = make_repo(
        {
            "a.txt": "one\ntwo\n" * 50,
            "old name.txt": "moved\n" * 30,
            "bin.dat": b"\x00\x01\x02" * 100,
            "run.sh": "echo\n",
            "became link": "text\n",
        }
    )
    a = git(repo, "rev-parse", "HEAD").strip()
    (repo / "became link").unlink()
    (repo / "became link").symlink_to("a.txt")
    (repo / "a.txt").write_text("one\nthree\n" * 50)
    (repo / "old name.txt").rename(repo / "new name \u00e9.txt")
    (repo / "bin.dat").write_bytes(b"\x00\x09" * 300)
    (repo / "run.sh").chmod(0o755)
    (repo / "caf\xe9".encode("latin-1").decode("utf-8", "surrogateescape")).write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    b = git(repo, "rev-parse", "HEAD").strip()
    out = tmp_path / "p.patch"
    stat = write_patch(repo, a, b, out, split=split)
    flags = [*DIFF_FLAGS[:3], "--no-renames"]
    plain = subprocess.run(
        ["git", "diff", *flags, "--binary", "--full-index", a, b, "--"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    assert out.read_bytes() == plain
    listed = subprocess.run(
        ["git", "diff", *flags, "--numstat", "-z", a, b, "--"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    # the file list is every path the patch names; the counts are git's with renames
    # detected: the rename (30 lines, one changed name) is one file, not two
    assert stat.file_list == parse_numstat(listed).file_list
    renamed = subprocess.run(
        ["git", "diff", *DIFF_FLAGS, "--numstat", "-z", a, b, "--"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    counted = parse_numstat(renamed)
    assert (stat.files, stat.additions, stat.deletions) == (
        counted.files,
        counted.additions,
        counted.deletions,
    )
    assert stat.files == 6 and {"old name.txt", "new name \u00e9.txt"} <= set(stat.file_list)
    empty = tmp_path / "none.patch"
    assert write_patch(repo, b, b, empty, split=split).files == 0
    assert empty.read_bytes() == b""
