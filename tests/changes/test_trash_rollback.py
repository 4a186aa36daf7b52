"""Rollback, undo and redo move aside what no recorded state holds
(docs/internals/record.md, "Nothing is destroyed that was not recorded"): a nested
repository a rollback turns into a file, ignored files under a directory that becomes a
file, an ignored file where a tracked one lands. Each runs with the speed layer on and with
``BAR_FAST=0``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import bar, bar_exe, ledger, new_task, run_sh, task_dir, worktree

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


def test_rollback_moves_ignored_files_aside_where_a_directory_becomes_a_file(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """Step 1 writes a file ``d``; step 2 makes ``d/`` a directory; ``d/cache.log`` (and a
    deeper ``d/e/f.log``, a non-UTF-8 name), ignored, were never recorded. Rolling back
    to step 1 moves them to the trash (modes kept); ``undo`` brings ``d/`` back, and the
    ignored files into it (the state it restores held them)."""
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "printf '*.log\\n' > .gitignore; echo file > d")
    run_sh(capfd, "rm d && mkdir -p d/e && echo kept > d/a.txt")
    (wt / "d" / "cache.log").write_text("cached\n")
    (wt / "d" / "e" / "f.log").write_text("deeper\n")
    odd = os.fsencode(wt / "d" / "e") + b"/caf\xe9.log"
    Path(os.fsdecode(odd)).write_bytes(b"latin-1 name\n")
    os.chmod(wt / "d" / "cache.log", 0o751)
    res = bar(capfd, "rollback", "--to", "1")
    assert res.code == 0, res.err
    assert (wt / "d").read_text() == "file\n"
    assert "d/cache.log" in res.err and "trash" in res.err
    (entry,) = trash_entries(t["id"])
    moved = sorted(p["path"] for p in entry["paths"])  # type: ignore[attr-defined]
    assert moved == ["d/cache.log", "d/e/caf\udce9.log", "d/e/f.log"]
    files = task_dir(t["id"]) / "trash" / os.listdir(task_dir(t["id"]) / "trash")[0] / "files"
    assert os.stat(files / "d" / "cache.log").st_mode & 0o777 == 0o751
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert "put back d/cache.log" in res.err
    assert (wt / "d" / "a.txt").read_text() == "kept\n"
    assert (wt / "d" / "cache.log").read_text() == "cached\n"
    assert os.stat(wt / "d" / "cache.log").st_mode & 0o777 == 0o751
    assert (wt / "d" / "e" / "f.log").read_text() == "deeper\n"
    assert Path(os.fsdecode(odd)).read_bytes() == b"latin-1 name\n"
    assert trash_entries(t["id"]) == []
    # ignored: nothing to record
    assert bar(capfd, "run", "--", "true").code == 0
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "run", "rollback", "rollback", "run"]


def test_an_ignored_file_where_the_target_puts_a_tracked_one_is_moved_aside(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """Step 1 writes ``out/x``; step 2 removes it and ignores ``out/``; by hand an
    ignored ``out/x`` is written. Rolling back to step 1 would overwrite it: it goes to
    the trash first."""
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "mkdir out && echo recorded > out/x")
    run_sh(capfd, "rm -r out && echo out/ > .gitignore")
    (wt / "out").mkdir()
    (wt / "out" / "x").write_text("never recorded\n")
    (wt / "out" / "y").write_text("no collision\n")
    res = bar(capfd, "rollback", "--to", "1")
    assert res.code == 0, res.err
    assert (wt / "out" / "x").read_text() == "recorded\n"
    assert (wt / "out" / "y").read_text() == "no collision\n"  # not in the way: left
    (entry,) = trash_entries(t["id"])
    assert [p["path"] for p in entry["paths"]] == ["out/x"]  # type: ignore[attr-defined]
    res = bar(capfd, "trash", "restore", "out/x")
    assert res.code != 0 and "out/x exists" in res.err
    res = bar(capfd, "trash", "restore", "out/x", "--to", str(wt.parent / "elsewhere"))
    assert res.code == 0, res.err
    assert (wt.parent / "elsewhere" / "out" / "x").read_text() == "never recorded\n"


def test_a_file_edited_and_ignored_by_hand_is_never_lost_by_a_rollback(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str
) -> None:
    """In one hand session a recorded file is edited and added to ``.gitignore``; a
    rollback to step 1 records the edit first (or moves it aside): undo brings back the
    edited bytes."""
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo one > a.txt")
    run_sh(capfd, "echo two > a.txt")
    (wt / "a.txt").write_text("edited by hand\n")
    (wt / ".gitignore").write_text("a.txt\n")
    res = bar(capfd, "rollback", "--to", "1")
    assert res.code == 0, res.err
    assert (wt / "a.txt").read_text() == "one\n"
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert (wt / "a.txt").read_text() == "edited by hand\n"
    assert (wt / ".gitignore").read_text() == "a.txt\n"


@pytest.mark.parametrize("hand", [False, True])
def test_an_undo_killed_after_git_wrote_puts_the_nested_repository_back_on_recovery(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str, hand: bool
) -> None:
    """The crash trials' find: ``undo`` of a rollback that moved a nested repository to
    the trash is killed after git wrote the state's files (the gitlink: an empty
    directory) and before the repository came back. The next command finishes the undo:
    the repository is put back whole, and the record holds its gitlink, as the disk does.
    ``hand``: a new file is made by hand after the kill; it is kept and recorded apart."""
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo one > a.txt")
    run_sh(
        capfd,
        "mkdir vendor && cd vendor && git init -q -b main && echo 'int lib;' > lib.c && "
        "git add lib.c && git commit -qm vendored",
    )
    head = git(wt / "vendor", "rev-parse", "HEAD").strip()
    (wt / "vendor" / "wip.c").write_text("work in progress\n")
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert not (wt / "vendor").exists()
    res = bar_exe("undo", cwd=wt, env={"BAR_FAULT_AT": "after moving the target's files in"})
    assert res.code == -9, res.err
    if hand:
        (wt / "hand.txt").write_text("made after the kill\n")
    res = bar(capfd, "run", "--", "true")  # (the next command that changes the task)
    assert res.code == 0, res.err
    assert (wt / "vendor" / ".git").is_dir(), res.err
    assert git(wt / "vendor", "rev-parse", "HEAD").strip() == head
    assert (wt / "vendor" / "wip.c").read_text() == "work in progress\n"
    assert trash_entries(t["id"]) == []
    steps = ledger(t["id"])
    undone = [s for s in steps if s["kind"] == "rollback"][-1]
    assert git(wt, "ls-tree", undone["snapshot"], "vendor").split()[:3] == [
        "160000",
        "commit",
        head,
    ]
    assert bar(capfd, "verify").code == 0
    if hand:
        assert (wt / "hand.txt").read_text() == "made after the kill\n"
        assert [s["kind"] for s in steps[3:]] == ["manual", "rollback", "run"]


def test_a_save_where_the_trash_puts_back_a_file_is_never_written_over(
    inited_clean: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
) -> None:
    """An undo puts back what the rollback moved to the trash, in place of the file the
    state it leaves recorded there; an editor's save that landed at that path since is
    no such file: it stays, and the trash keeps its own."""
    from bar.base import faults

    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "mkdir out && echo recorded > out/x")
    run_sh(capfd, "rm -r out && echo out/ > .gitignore")
    (wt / "out").mkdir()
    (wt / "out" / "x").write_text("never recorded\n")
    res = bar(capfd, "rollback", "--to", "1")
    assert res.code == 0, res.err
    saved = b"saved by an editor during the undo\n"
    passed = faults.point

    def save_then_pass(label: str) -> None:
        if label == "after moving the target's files in":
            (wt / "out").mkdir(exist_ok=True)
            (wt / "out" / "x").write_bytes(saved)
        passed(label)

    monkeypatch.setattr(faults, "point", save_then_pass)
    res = bar(capfd, "undo")
    assert res.code == 0, res.err
    assert (wt / "out" / "x").read_bytes() == saved
    (entry,) = trash_entries(t["id"])
    assert [p["path"] for p in entry["paths"]] == ["out/x"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["file", "link"])
def test_a_move_of_the_trash_never_replaces_what_a_save_made_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The trash's moves (aside, and back) check that nothing is at the destination,
    then move: a save that lands at the destination between the two stays, and the
    move fails with the bytes still at their source (a file or a link is linked, never
    renamed over)."""
    from bar.changes import trash

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    if kind == "file":
        (src / "x").write_bytes(b"the trash's\n")
    else:
        (src / "x").symlink_to("the trash's target")
    checked = trash._lstat_at

    def save_after_the_check(dir_fd: int, name: str) -> os.stat_result | None:
        found = checked(dir_fd, name)
        if dir_fd == held[1]:  # (the destination looked at: an editor saves there now)
            (dst / "x").write_bytes(b"saved meanwhile\n")
        return found

    held = [os.open(src, os.O_RDONLY | os.O_DIRECTORY), os.open(dst, os.O_RDONLY | os.O_DIRECTORY)]
    monkeypatch.setattr(trash, "_lstat_at", save_after_the_check)
    try:
        with pytest.raises(FileExistsError):
            trash._rename_or_copy(held[0], "x", held[1], "x")
    finally:
        for fd in held:
            os.close(fd)
    assert (dst / "x").read_bytes() == b"saved meanwhile\n"
    assert os.path.lexists(src / "x")
