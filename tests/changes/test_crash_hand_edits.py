"""A restore killed midway, then edits by hand: recovery finishes only the restore's own
writes and records the hand edits first (bar.step.recovery; docs/internals/record.md,
"The record never lies")."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers import bar_exe, files_in_commit, files_on_disk, ledger, task_dir

from conftest import git


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def setup_task(repo: Path) -> dict[str, str]:
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "policy")
    res = bar_exe("task", "new", "crashy", "--json", cwd=repo)
    assert res.code == 0, res.err
    task: dict[str, str] = res.json()
    script = "echo one > f.txt; mkdir -p d/e; echo deep > d/e/g.txt"
    assert bar_exe("run", "--", "sh", "-c", script, cwd=repo).code == 0
    script = "echo two > f.txt; rm -r d; echo new > n.txt"
    assert bar_exe("run", "--", "sh", "-c", script, cwd=repo).code == 0
    return task


KILLS = {
    "rollback": (["rollback", "--to", "1"], "before restoring the worktree"),
    "rollback-after": (["rollback", "--to", "1"], "after restoring the worktree"),
    "undo": (["undo"], "before restoring the worktree"),
    "undo-after": (["undo"], "after restoring the worktree"),
    # f.txt removed, its new version not yet in: the gap is the rollback's, not a hand's
    # deletion (the recovery writes it)
    "rollback-between": (
        ["rollback", "--to", "1"],
        "between a file's removal and its replacement@2",
    ),
    # n.txt taken out of the worktree (to be compared before it is deleted): still the
    # worktree's, not a hand's deletion, when the recovery looks for hand edits
    "rollback-captured": (["rollback", "--to", "1"], "with a file captured"),
}


@pytest.mark.parametrize("kind", sorted(KILLS))
def test_hand_edits_after_a_killed_restore_are_kept(
    kind: str, speed: str, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo({"README.md": "hello\n", "keep.txt": "kept\n", "sub/deep/k.txt": "k\n"})
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    task = setup_task(repo)
    wt = Path(task["worktree"])
    args, at = KILLS[kind]
    res = bar_exe(*args, cwd=repo, env={"BAR_FAULT_AT": at})
    assert res.code == -signal.SIGKILL, res.err
    assert (task_dir(task["id"]) / "rollback.json").exists()
    # by hand, after the crash: a new file, edits of files equal in both states
    (wt / "hand.txt").write_text("by hand\n")
    (wt / "keep.txt").write_text("edited by hand\n")
    (wt / "sub" / "deep" / "k.txt").write_text("deep hand edit\n")
    (wt / "sub" / "new dir").mkdir()
    (wt / "sub" / "new dir" / "h\xe9.txt").write_text("accent\n")
    for cmd in (["status"], ["log"], ["run", "--", "true"]):
        res = bar_exe(*cmd, cwd=repo)
        assert res.code == 0, (cmd, res.err)
    disk = files_on_disk(wt)
    assert disk["hand.txt"] == b"-:by hand\n"
    assert disk["keep.txt"] == b"-:edited by hand\n"
    assert disk["sub/deep/k.txt"] == b"-:deep hand edit\n"
    assert disk["sub/new dir/h\xe9.txt"] == b"-:accent\n"
    steps = ledger(task["id"])
    manual = [s for s in steps if s["kind"] == "manual"]
    assert manual, [s["kind"] for s in steps]
    assert {"hand.txt", "keep.txt"} <= set(manual[0]["diff_stat"]["file_list"])
    # the restore's own paths reached its target, the hand edits stayed
    assert disk["f.txt"] == b"-:one\n"
    assert disk["d/e/g.txt"] == b"-:deep\n"
    assert "n.txt" not in disk
    last = [s for s in steps if s.get("snapshot")][-1]["snapshot"]
    assert files_in_commit(repo, last) == disk


def test_hand_edits_of_the_restores_own_paths_are_kept(
    speed: str, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path the rollback writes, edited by hand to neither state, and a file made by
    hand where the rollback makes a directory: kept and recorded; the rest is finished."""
    repo = make_repo({"README.md": "hello\n", "keep.txt": "kept\n"})
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    task = setup_task(repo)
    wt = Path(task["worktree"])
    res = bar_exe(
        "rollback", "--to", "1", cwd=repo, env={"BAR_FAULT_AT": "before restoring the worktree"}
    )
    assert res.code == -signal.SIGKILL, res.err
    (wt / "f.txt").write_text("neither\n")  # the rollback writes it: "one"
    (wt / "d").write_text("a file in the way\n")  # the rollback makes d/e/g.txt
    (wt / "link").symlink_to("keep.txt")
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    res = bar_exe("run", "--", "true", cwd=repo)  # a second look finds nothing more
    assert res.code == 0, res.err
    disk = files_on_disk(wt)
    assert disk["f.txt"] == b"-:neither\n"
    assert disk["d"] == b"-:a file in the way\n"
    assert disk["link"] == b"-> keep.txt"
    assert "n.txt" not in disk  # the rollback's own removal was finished
    kinds = [s["kind"] for s in ledger(task["id"])]
    assert kinds == ["run", "run", "manual", "rollback", "run", "run"], kinds
    last = [s for s in ledger(task["id"]) if s.get("snapshot")][-1]["snapshot"]
    assert files_in_commit(repo, last) == disk
    # undoing the finished rollback gives back the hand-edited state exactly
    assert bar_exe("undo", cwd=repo).code == 0
    manual = next(s for s in ledger(task["id"]) if s["kind"] == "manual")
    assert files_on_disk(wt) == files_in_commit(repo, manual["snapshot"])


def test_a_file_the_killed_restore_had_taken_out_and_the_hand_made_again(
    speed: str, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback was killed with ``n.txt`` taken out of the worktree (to be compared
    before it is deleted); then a file is made by hand at that path. The hand's file
    stays and is recorded; the one the rollback had taken out goes to the trash."""
    repo = make_repo({"README.md": "hello\n"})
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    task = setup_task(repo)
    wt = Path(task["worktree"])
    res = bar_exe("rollback", "--to", "1", cwd=repo, env={"BAR_FAULT_AT": "with a file captured"})
    assert res.code == -signal.SIGKILL, res.err
    assert not (wt / "n.txt").exists()
    (wt / "n.txt").write_text("made again by hand\n")
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert "taken out n.txt" in res.err
    disk = files_on_disk(wt)
    assert disk["n.txt"] == b"-:made again by hand\n"
    assert disk["f.txt"] == b"-:one\n"
    last = [s for s in ledger(task["id"]) if s.get("snapshot")][-1]["snapshot"]
    assert files_in_commit(repo, last) == disk
    listed = bar_exe("trash", "--json", cwd=repo)
    assert listed.code == 0, listed.err
    assert "n.txt" in listed.out


def test_where_git_converts_a_rollback_finished_around_hand_edits_writes_the_states_bytes(
    speed: str, make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``core.autocrlf=true``: git's checkout of an LF file writes CRLF, so the states
    carry the LF bytes beside their trees. A rollback killed before it wrote, then a hand
    edit: the recovery finishes it around the edit, and the files it writes come back
    as the target held them (LF), the edit as the hand left it (CRLF)."""
    repo = make_repo({"README.md": "hello\n", "keep.txt": "kept\n"})
    git(repo, "config", "core.autocrlf", "true")
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    task = setup_task(repo)
    wt = Path(task["worktree"])
    res = bar_exe(
        "rollback", "--to", "1", cwd=repo, env={"BAR_FAULT_AT": "before restoring the worktree"}
    )
    assert res.code == -signal.SIGKILL, res.err
    (wt / "keep.txt").write_bytes(b"edited by hand\r\n")
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert (wt / "f.txt").read_bytes() == b"one\n"
    assert (wt / "d" / "e" / "g.txt").read_bytes() == b"deep\n"
    assert (wt / "keep.txt").read_bytes() == b"edited by hand\r\n"
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert [s["kind"] for s in ledger(task["id"])][-1] == "run"  # (nothing more by hand)
