"""An editor saving while bar writes: a rollback or an apply never overwrites a save that
landed after bar verified the path (compare before replace: bar.changes.guarded;
docs/internals/record.md, "The record never lies")."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import (
    SWEEP_SHARE,
    Ran,
    bar,
    bar_exe,
    drain,
    end_drain,
    files_in_commit,
    git_commands,
    ledger,
    new_task,
    run_sh,
    task_dir,
    worktree,
)

from bar.changes import guarded
from bar.git import racy
from conftest import git

# 30 races each way in make test-long, the sweeps' share of them (8 at least) in make test
TRIALS = max(8, round(30 * SWEEP_SHARE))
# an editor autosaving every 2 ms, in place (open, truncate, write), for a burst that
# starts after a delay; it says which save was its last
AUTOSAVE = """
import sys, time
path, delay, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
time.sleep(delay)
for i in range(count):
    with open(path, "w") as f:
        f.write(f"autosave {i} of {sys.argv[4]}\\n")
    time.sleep(0.002)
"""


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def autosaving(path: Path, delay: float, tag: str, count: int = 15) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", AUTOSAVE, str(path), str(delay), str(count), tag]
    )


def last_save(proc: subprocess.Popen[bytes], count: int = 15) -> bytes:
    assert proc.wait(timeout=60) == 0
    return f"autosave {count - 1} of {proc.args[-1]}\n".encode()  # type: ignore[index]


# 150 files in 7 folders, the folders made once (a mkdir process for each file was most of the step)
MANY = "mkdir -p d0 d1 d2 d3 d4 d5 d6; for i in $(seq 1 150); do echo {v} $i > d$((i % 7))/f$i.txt; done"


@pytest.mark.slow  # TRIALS races each way
def test_an_autosave_during_apply_is_never_overwritten(
    speed: str, inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = inited_clean
    rng = random.Random(62)
    duration, lost, raced = 0.3, [], 0
    for n in range(TRIALS):
        new_task(capfd, f"t{n}")
        run_sh(capfd, f"echo task {n} > doc.txt; " + MANY.format(v=n))
        saver = autosaving(repo / "doc.txt", rng.uniform(0, duration), f"apply {n}")
        began = time.monotonic()
        res = bar_exe("apply", "-m", f"trial {n}", cwd=repo)
        duration = max(0.05, time.monotonic() - began)
        want = last_save(saver)
        got = (repo / "doc.txt").read_bytes()
        if got != want:
            lost.append((n, res.code, got, res.err[-300:]))
        raced += "changed while bar applied" in res.err
        # the developer takes the save into main, so that the next task starts from it
        for stray in repo.glob("doc.txt.bar-raced-*"):
            stray.unlink()
        if res.code != 0:
            bar(capfd, "task", "close", "--force", f"t{n}")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"saved {n}", "--allow-empty")
    assert lost == [], f"{len(lost)} of {TRIALS} autosaves lost ({raced} raced): {lost[:3]}"


@pytest.mark.slow  # TRIALS races each way
@pytest.mark.parametrize("eol", ["as-is", "autocrlf"])
def test_an_autosave_during_rollback_is_never_lost(
    speed: str, eol: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``autocrlf``: the files the steps write LF are stored as they are and git's
    checkout would write them CRLF, so the rollback writes their exact bytes (raw
    trees): staged where git's checkout staged its own, moved in by the same guard."""
    if eol == "autocrlf":
        git(inited, "config", "core.autocrlf", "true")
    t = new_task(capfd, "t")
    wt = worktree(t)
    run_sh(capfd, "echo one > doc.txt; " + MANY.format(v="one"))
    run_sh(capfd, "echo two > doc.txt; " + MANY.format(v="two"))
    rng = random.Random(62)
    duration, lost = 0.3, []
    for n in range(TRIALS):
        saver = autosaving(wt / "doc.txt", rng.uniform(0, duration), f"rollback {n}")
        began = time.monotonic()
        res = bar_exe(*(["rollback", "--to", "1"] if n % 2 else ["undo"]), cwd=inited)
        duration = max(0.05, time.monotonic() - began)
        want = last_save(saver)
        assert res.code == 0, res.err
        if (wt / "doc.txt").read_bytes() == want:
            continue
        held = [
            s["step_id"]
            for s in ledger(t["id"])
            if s.get("snapshot")
            and files_in_commit(inited, s["snapshot"]).get("doc.txt") == b"-:" + want
        ]
        if not held:
            lost.append((n, (wt / "doc.txt").read_bytes(), res.err[-300:]))
    assert lost == [], f"{len(lost)} of {TRIALS} autosaves held by no state: {lost[:3]}"


def test_a_save_through_a_file_the_rollback_captured_stands_in_place_of_its_version(
    speed: str, inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An editor holding ``doc.txt`` open saves into it (truncate, write) after the
    rollback captured it as recorded and moved the target's version in: that save is the
    newest of the path, and the worktree holds it after the rollback, not the target's
    version (which the state restored holds), nor is it moved to the trash. The save is
    made while bar waits at a point of its own (``_saving_at_the_second_capture``)."""
    t = new_task(capfd, "t")
    wt = worktree(t)
    run_sh(capfd, "echo one > doc.txt; echo one > z.txt")
    run_sh(capfd, "echo two > doc.txt; echo two > z.txt")
    res, held = _saving_at_the_second_capture(inited, wt / "doc.txt", tmp_path / "trace")
    assert res.code == 0, res.err
    assert held, "bar passed the point after z.txt's capture before the save"
    assert (wt / "doc.txt").read_bytes() == b"saved through the open file\n", res.err
    assert (wt / "z.txt").read_bytes() == b"one\n"
    assert "kept as changed: doc.txt;" in res.err, res.err
    assert "trash" not in res.err, res.err
    last = ledger(t["id"])[-1]
    assert last["kind"] == "rollback"
    assert (
        files_in_commit(inited, last["snapshot"])["doc.txt"] == b"-:saved through the open file\n"
    )
    assert not [p for p in wt.iterdir() if "bar-raced" in p.name]


def _saving_at_the_second_capture(repo: Path, doc: Path, fifo: Path) -> tuple[Ran, bool]:
    """``bar rollback --to 1`` with an editor holding ``doc`` open, which saves into it
    once bar has captured its second file (``z.txt``, ``doc`` written by then), and
    whether bar was held meanwhile. bar's fault trace is a FIFO: at each point bar waits
    for a reader in the open, writes the point's line, and waits for that reader to close
    (``bar.base.faults``). The save is made when the read line is that capture's, before
    the FIFO is opened again: bar waits at its next point meanwhile. Held: the next
    point's line came after the save."""
    editor = os.open(doc, os.O_WRONLY)
    os.mkfifo(fifo)
    seen: list[int] = []  # the numbers of the points whose lines were read
    saved_at: list[int] = []  # the point after which the editor saved

    def at_each_point() -> None:
        captures = 0
        while line := drain(fifo).decode().rstrip("\n"):
            seen.append(int(line.split(" ", 1)[0]))
            captures += line.endswith(" with a file captured")
            if captures == 2 and not saved_at:
                os.ftruncate(editor, 0)
                os.pwrite(editor, b"saved through the open file\n", 0)
                saved_at.append(seen[-1])

    reader = threading.Thread(target=at_each_point, daemon=True)
    reader.start()
    try:
        res = bar_exe("rollback", "--to", "1", cwd=repo, env={"BAR_FAULT_TRACE": str(fifo)})
    finally:
        end_drain(fifo)
        reader.join(10)
        os.close(editor)
    return res, bool(saved_at) and saved_at[0] + 1 in seen


def test_a_rollback_that_outlasts_a_second_leaves_no_suspects(
    speed: str, inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The files a rollback moves in from its staging directory look as if written in
    place (their ctime no newer than their mtime): a rollback that lasts past the end of
    a second leaves no entry for the next command to hash again (``bar.git.racy``);
    with the speed layer a command after one that left none adds nothing, and whatever
    was left, that command records nothing new."""
    t = new_task(capfd, "t")
    run_sh(capfd, "echo one > doc.txt; " + MANY.format(v="one"))
    run_sh(capfd, "echo two > doc.txt; " + MANY.format(v="two"))
    time.sleep(1.1)  # (the runs' own second is over)
    index = task_dir(t["id"]) / "index"
    ops = (["rollback", "--to", "1"], ["undo"], ["redo"])
    for n, (args, start) in enumerate(zip(ops, (0.65, 0.75, 0.85), strict=True)):
        # begun late in a second: git's writes into the staging directory and the moves
        # into the worktree fall on both sides of its end
        while not start <= time.time() % 1 < start + 0.05:
            time.sleep(0.005)
        res = bar(capfd, *args)
        assert res.code == 0, res.err
        # a loaded machine can leave the moves in the second the index was written, or
        # keep the rereading of the second before from clearing them: those are hashed
        # again by the next look (a cost, measured by bench/, not an error); what it
        # records must be nothing
        suspects = racy.suspects(index)
        steps_before = len(ledger(t["id"]))
        time.sleep(1.1)  # (past git's own racily clean second)
        trace = tmp_path / f"run-{n}.json"
        res = bar_exe("run", "--", "true", cwd=inited, env={"GIT_TRACE2_EVENT": str(trace)})
        assert res.code == 0, res.err
        assert [s["kind"] for s in ledger(t["id"])[steps_before:]] == ["run"], args
        if speed == "fast" and not suspects:
            assert "add" not in git_commands(trace), args
    assert [s["kind"] for s in ledger(t["id"])][-6:] == ["rollback", "run"] * 3


def _blob(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


RECORDED = b"recorded\n"


def _an_editor_holding_doc_txt(tmp_path: Path) -> tuple[Path, guarded.Guard, int]:
    """A worktree whose ``doc.txt`` holds ``RECORDED``, a guard writing it, and an
    editor's descriptor of the file, open for writing: its save is on its way."""
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / "doc.txt").write_bytes(RECORDED)
    return wt, guarded.Guard(wt, tmp_path / "aside"), os.open(wt / "doc.txt", os.O_WRONLY)


def _replace_doc_txt(guard: guarded.Guard, tmp_path: Path) -> None:
    new = tmp_path / "new"
    new.write_bytes(b"the target's\n")
    assert guard.replace("doc.txt", (_blob(RECORDED),), new, _blob(b"the target's\n"))


@pytest.mark.parametrize("how", ["remove", "replace"])
def test_a_save_in_place_through_a_file_open_before_the_capture_is_kept(
    how: str, tmp_path: Path
) -> None:
    """An editor that saves by truncating and writing the file it holds open: bar
    captures the file (renames it aside) between the open and the write, finds it
    holding the recorded bytes and drops it; the write then lands in the captured file.
    The captured file is hashed again once the restore is written: the save is the
    newest of the path, and stands there (in place of bar's version, where bar wrote
    one: that version is held by the state restored)."""
    wt, guard, editor = _an_editor_holding_doc_txt(tmp_path)
    if how == "remove":
        assert guard.remove("doc.txt", (_blob(RECORDED),))
    else:
        _replace_doc_txt(guard, tmp_path)
    os.ftruncate(editor, 0)
    os.write(editor, b"saved after the capture\n")
    os.close(editor)
    guard.close()
    assert guard.raced == [guarded.Raced("doc.txt", wt / "doc.txt")]
    assert (wt / "doc.txt").read_bytes() == b"saved after the capture\n"
    assert sorted(p.name for p in wt.iterdir()) == ["doc.txt"]


@pytest.mark.parametrize("how", ["in place", "a new file"])
def test_a_save_after_bars_version_was_put_in_stays_over_one_into_the_captured_file(
    how: str, tmp_path: Path
) -> None:
    """The editor's write lands in the file bar captured, then the editor saves again,
    into the version bar put at the path (``in place``) or as a new file there: that
    last save is the newest, and stays; the one before is kept beside it, never
    dropped, and both are said."""
    wt, guard, editor = _an_editor_holding_doc_txt(tmp_path)
    _replace_doc_txt(guard, tmp_path)
    os.ftruncate(editor, 0)
    os.write(editor, b"save 1\n")
    os.close(editor)
    if how == "in place":
        (wt / "doc.txt").write_bytes(b"save 2\n")
    else:
        (wt / "doc.txt").unlink()
        (wt / "doc.txt").write_bytes(b"save 2\n")
    guard.close()
    assert (wt / "doc.txt").read_bytes() == b"save 2\n"
    assert [r.path for r in guard.raced] == ["doc.txt", "doc.txt"]
    (aside,) = [r.kept for r in guard.raced if r.kept != wt / "doc.txt"]
    assert aside.read_bytes() == b"save 1\n" and aside.parent == wt
