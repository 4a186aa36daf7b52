"""A partial watch (or none) on a loaded machine: every file a step or a hand edit makes
is recorded, whatever the timing.

bar's watches can cover fewer directories than a worktree has (``BAR_WATCHES``: the budget
partly used; ``BAR_MARKS=0``: no fanotify mark for the rest), and the directories beyond
the budget are judged by the ctimes stamped for them (``bar.changes.fast.rescan``). On an
idle machine a directory changed a moment before a snapshot is distrusted (the racy
window) and rescanned whatever its stamp says, which hides a directory nothing stamps; on
a loaded one every stamp is old enough to be trusted. So every test here waits past the
racy window (``SETTLE``) before each command, as a loaded machine would, and plays the
sequence that once left ``d/b.txt`` out of the record (a directory whose last recorded
file went, then a file made in it), then the ways the same look could go wrong: deeper
trees, many files, a link or a file where the directory was, names that are not UTF-8, a
directory removed and made again between two looks, the watcher killed and replaced, the
kernel's event queue overflowing, a change in the tick of the stamps. The speed layer on
with a partial watch and with none, and off (``BAR_FAST=0``: every look stats).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
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
    side_index_of,
    watcher_started,
    worktree,
)

from bar.changes.fast import stamps, watcher

# the item's step: it makes d/b.txt in a directory that lost its last recorded file
STEP = "mkdir -p d/e f/g/h; echo 1 > top.md; echo 1 > d/b.txt"


@pytest.fixture(params=["fast-partial", "fast-none", "slow"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The speed layer on with two of bar's inotify watches and no fanotify mark (the root
    and one directory watched, the rest statted), or with no watch at all (every
    directory statted); or off (``BAR_FAST=0``: no watch, every look stats)."""
    monkeypatch.setenv("BAR_MARKS", "0")
    monkeypatch.setenv("BAR_WATCHES", "2" if request.param == "fast-partial" else "0")
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


@pytest.fixture
def speed(mode: str) -> str:
    return "slow" if mode == "slow" else "fast"


@pytest.fixture
def watches(mode: str) -> str:
    return "partial" if mode == "fast-partial" else "none"


def _started(
    capfd: pytest.CaptureFixture[str],
    repo: Path,
    speed: str,
    watches: str,
    prepare: Callable[[Path], None],
) -> tuple[dict[str, Any], Path]:
    """A task whose worktree was ``prepare``d and recorded, watched by a partial watcher
    where the mode has one, its stamps past the racy window."""

    def made(wt: Path) -> None:
        (wt / "p" / "q").mkdir(parents=True)  # (the watch's second directory: never changed)
        prepare(wt)

    if speed == "fast" and watches == "partial":
        task, wt = watcher_started(capfd, repo, made)
        said = watcher.status(side_index_of(task))
        assert said is not None and said["partial"] is True, said
    else:
        init_clean(repo, capfd)
        task = new_task(capfd)
        wt = worktree(task)
        made(wt)
        for _ in range(2):
            assert bar(capfd, "run", "--", "true").code == 0
    time.sleep(SETTLE)
    return task, wt


def _step(capfd: pytest.CaptureFixture[str], script: str) -> None:
    """Run ``script`` as a step, after the racy window of the last record."""
    time.sleep(SETTLE)
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    time.sleep(SETTLE)


def _recorded_as_git_sees_it(
    repo: Path, task: dict[str, Any], wt: Path, tmp_path: Path, speed: str
) -> None:
    """The last record is the tree plain git writes; in the fast mode every directory on
    disk is stamped or ignored (each is looked at by the next command)."""
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    if speed != "fast":
        return
    noted = stamps.noted(side_index_of(task)) or {}
    known = {str(d) for d in noted.get("dirs") or []}
    ignored = {str(d) for d in noted.get("ignored") or []}
    for top, subdirs, _ in os.walk(wt):
        rel = os.path.relpath(top, wt)
        rel = "" if rel == "." else rel
        if rel in ignored:
            subdirs.clear()
            continue
        subdirs[:] = [d for d in subdirs if d != ".git"]
        assert rel in known, f"{rel!r} is neither stamped nor ignored"


def _the_item(wt: Path) -> None:
    """The hand edits before the item's step: a link to a.txt, a.txt written, d's last
    recorded file removed (d and d/e stay, holding nothing recorded)."""
    (wt / "top.md").symlink_to("a.txt")
    (wt / "a.txt").write_text("by hand\n")
    (wt / "d" / "e" / "c.txt").unlink()


def _tree_of_the_item(wt: Path) -> None:
    (wt / ".gitignore").write_text("*.log\n")
    for rel in ("d/e/c.txt", "f/g/h/i.txt", "d/e/y.log"):
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_text(f"{rel}\n")


def test_the_file_a_step_makes_in_a_directory_that_left_the_tree_is_recorded(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    watches: str,
) -> None:
    """The step that once left ``d/b.txt`` on disk and out of the record: every stamp
    trusted (each command past the racy window), d judged by its ctime (beyond the
    watch's two directories, or nothing watched). d left the tree with its last recorded
    file, so it is stamped as an untracked directory, and the file the step makes in it
    moves its ctime: recorded by the step."""
    task, wt = _started(capfd, repo, speed, watches, _tree_of_the_item)
    _the_item(wt)
    _step(capfd, STEP)
    _recorded_as_git_sees_it(repo, task, wt, tmp_path, speed)
    last = ledger(str(task["id"]))[-1]
    assert last["kind"] == "run" and last["cmd"][-1] == STEP
    shown = bar(capfd, "show", last["step_id"]).out
    assert "d/b.txt" in shown and "a.txt" in shown


@pytest.mark.parametrize(
    "shape", ["deep", "many files", "a link in the way", "a file in the way", "not UTF-8"]
)
def test_directories_that_left_the_tree_stay_looked_at(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    watches: str,
    shape: str,
) -> None:
    """The same miss, attacked: a deep chain of directories that all leave the tree at
    once (a file made at each level later), many files removed at once, a link or a file
    put where a directory was, a directory named with bytes that are not UTF-8. Each
    file made afterwards, by hand and by a step, is recorded."""
    odd = os.fsdecode(b"n\xff")
    deep = "a/b/c/d/e/f"

    def prepare(wt: Path) -> None:
        _tree_of_the_item(wt)
        (wt / deep).mkdir(parents=True)
        (wt / deep / "last.txt").write_text("last\n")
        (wt / "m").mkdir()
        for n in range(300):
            (wt / "m" / f"{n:03}.txt").write_text(f"{n}\n")
        (wt / odd / "sub").mkdir(parents=True)
        (wt / odd / "sub" / "last.txt").write_text("last\n")

    task, wt = _started(capfd, repo, speed, watches, prepare)
    if shape == "deep":
        (wt / deep / "last.txt").unlink()
        _step(capfd, "true")  # recorded: a/ .. a/b/c/d/e/f hold nothing recorded now
        (wt / "a" / "b" / "hand.txt").write_text("by hand, two levels down\n")
        _step(capfd, "echo 1 > a/b/c/d/step.txt; echo 1 > a/b/c/d/e/f/step.txt; echo 1 > a/s.txt")
    elif shape == "many files":
        _step(capfd, "rm m/*.txt")
        (wt / "m" / "hand.txt").write_text("by hand\n")
        _step(capfd, "echo 1 > m/step.txt; mkdir -p m/new; echo 1 > m/new/deeper.txt")
    elif shape == "a link in the way":
        (wt / "d" / "e" / "c.txt").unlink()
        (wt / "d" / "e" / "y.log").unlink()
        (wt / "d" / "e").rmdir()
        (wt / "d" / "e").symlink_to("../p")
        _step(capfd, "true")
        (wt / "p" / "q" / "through.txt").write_text("through a link: p/q's own\n")
        _step(capfd, "echo 1 > d/b.txt; echo 1 > d/e/q/step.txt")
    elif shape == "a file in the way":
        subprocess.run(["rm", "-rf", str(wt / "d" / "e")], check=True)
        (wt / "d" / "e").write_text("a file where the directory was\n")
        _step(capfd, "true")
        _step(capfd, "rm d/e; mkdir -p d/e/g; echo 1 > d/e/g/c.txt; echo 1 > d/b.txt")
    else:
        (wt / odd / "sub" / "last.txt").unlink()
        _step(capfd, "true")
        (wt / odd / "hand.txt").write_text("by hand\n")
        _step(capfd, 'for d in n?; do echo 1 > "$d/sub/step.txt"; echo 1 > "$d/step.txt"; done')
    _recorded_as_git_sees_it(repo, task, wt, tmp_path, speed)
    time.sleep(SETTLE)
    assert bar(capfd, "run", "--", "true").code == 0  # nothing left for the next look
    assert ledger(str(task["id"]))[-1]["kind"] == "run"
    assert ledger(str(task["id"]))[-2]["kind"] != "manual"


@pytest.mark.parametrize("when", ["by hand between two looks", "within the step"])
def test_a_directory_removed_and_made_again_is_looked_at_anew(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    watches: str,
    when: str,
) -> None:
    """``rm -rf d`` then ``mkdir -p d/e``: the new d and d/e are other directories, whose
    ctimes no stamp holds (made after every stamp was taken, none can match one by
    chance). What is made in them is recorded, whether the directories were made again
    by hand before the step or by the step itself."""
    task, wt = _started(capfd, repo, speed, watches, _tree_of_the_item)
    subprocess.run(["rm", "-rf", str(wt / "d")], check=True)
    if when == "by hand between two looks":
        (wt / "d" / "e").mkdir(parents=True)
        (wt / "d" / "e" / "c.txt").write_text("the same name, made again\n")
        _step(capfd, "true")
        _step(capfd, "echo 1 > d/b.txt; echo 2 > d/e/made.txt")
    else:
        _step(capfd, "mkdir -p d/e; echo 1 > d/b.txt; echo 2 > d/e/c.txt")
        _step(capfd, "rm -rf d; mkdir -p d/e; echo 3 > d/e/again.txt")
    _recorded_as_git_sees_it(repo, task, wt, tmp_path, speed)


def test_a_watcher_killed_and_replaced_misses_nothing(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    watches: str,
) -> None:
    """The watcher is killed (as a loaded machine's commands may find it hung and drop
    it): the next command looks by itself, the step after hands its own watch to a new
    watcher, which watches other directories than the first (the root and d, the
    shallowest of the tree now), and the item's sequence is recorded all the same."""
    task, wt = _started(capfd, repo, speed, watches, _tree_of_the_item)
    said = watcher.status(side_index_of(task))
    if said is not None:
        os.kill(int(said["pid"]), signal.SIGKILL)
    _step(capfd, "true")  # (looks by itself; its claim is not handed over)
    _step(capfd, "echo 1 > f/g/h/j.txt")  # (a watch of its own, handed to a new watcher)
    _the_item(wt)
    _step(capfd, STEP)
    _recorded_as_git_sees_it(repo, task, wt, tmp_path, speed)
    again = watcher.status(side_index_of(task))
    if speed == "fast" and watches == "partial":
        assert again is not None and said is not None and again["pid"] != said["pid"]


def test_an_overflowed_event_queue_makes_the_next_look_stat_everything(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    watches: str,
) -> None:
    """The kernel drops events past its queue's length (``max_queued_events``) and says
    so once: the watcher, stopped while more than that many events were made, reads the
    overflow and is no longer sure; the next command looks at every directory, and the
    files made meanwhile (in a watched directory and a statted one) are recorded."""
    task, wt = _started(capfd, repo, speed, watches, _tree_of_the_item)
    said = watcher.status(side_index_of(task))
    pid = int(said["pid"]) if said is not None else None
    if pid is not None:
        os.kill(pid, signal.SIGSTOP)
    try:
        (wt / "d" / "b.txt").write_text("made before the queue overflowed\n")
        (wt / "root.txt").write_text("in the watched root\n")
        try:
            with open("/proc/sys/fs/inotify/max_queued_events", "rb") as f:
                limit = int(f.read())
        except (OSError, ValueError):
            limit = 16384
        one, two = wt / "one.log", wt / "two.log"
        for n in range(limit // 2 + 64):  # (alternating: the kernel merges a repeat)
            with open(one if n % 2 else two, "w") as f:
                f.write(str(n))
        (wt / "f" / "late.txt").write_text("made after it overflowed\n")
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
    if pid is not None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = watcher.status(side_index_of(task))
            if now is not None and now["sure"] is False:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the watcher did not read the overflow")
    _step(capfd, "true")
    _recorded_as_git_sees_it(repo, task, wt, tmp_path, speed)
    shown = bar(capfd, "show", ledger(str(task["id"]))[-2]["step_id"]).out
    assert "d/b.txt" in shown and "root.txt" in shown and "f/late.txt" in shown


@pytest.mark.parametrize("after", ["a step", "a rollback"])
def test_a_change_in_the_tick_of_the_stamps_is_recorded(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    watches: str,
    after: str,
) -> None:
    """A directory changed in the very tick bar stamped it (no wait at all after the
    command: on a kernel with multigrain timestamps its ctime may be finer than the
    coarse clock, even later than a coarse reading taken just before). The stamp is
    either racy (rescanned) or older than the change (the ctime moved): the file made
    then is recorded by the next command, after a step and after a rollback, whose
    restored directories are stamped against the kernel's coarse clock."""
    task, wt = _started(capfd, repo, speed, watches, _tree_of_the_item)
    _the_item(wt)
    _step(capfd, "echo 1 > d/e/c.txt; echo 1 > f/g/h/j.txt")
    if after == "a step":
        res = bar(capfd, "run", "--", "sh", "-c", "echo 2 > f/g/h/j.txt; echo 1 > d/made.txt")
    else:
        res = bar(capfd, "rollback")  # (d/e/c.txt and f/g/h/j.txt go again)
    assert res.code == 0, res.err
    (wt / "d" / "e" / "same-tick.txt").write_text("in the tick of the stamps\n")
    (wt / "f" / "g" / "h" / "same-tick.txt").write_text("in the tick of the stamps\n")
    time.sleep(SETTLE)
    assert bar(capfd, "run", "--", "true").code == 0
    _recorded_as_git_sees_it(repo, task, wt, tmp_path, speed)
    shown = bar(capfd, "show", ledger(str(task["id"]))[-2]["step_id"]).out
    assert "d/e/same-tick.txt" in shown and "f/g/h/same-tick.txt" in shown
