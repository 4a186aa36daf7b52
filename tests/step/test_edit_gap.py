"""Hand edits around a step are not the step's (docs/internals/record.md, "The record never
lies").

Between the look for hand edits and the moment the step's command is released there are
tens of milliseconds of bar's own work (the manual step's record, the policy, the
confinement, the intent), and between the command's end and its snapshot a few more. A
file the developer saves in either gap is theirs: it must never appear in the step's
patch, only in a ``manual`` step. Each test runs with the speed layer on and with
``BAR_FAST=0``, which must record the same steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    bar_exe,
    drain,
    end_drain,
    ledger,
    new_task,
    plain_git_tree,
    recorded_tree,
    worktree,
)


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def _changed(repo: Path, step: dict[str, Any]) -> set[str]:
    out = subprocess.run(
        ["git", "diff-tree", "-r", "--name-only", "-z", step["snapshot_before"], step["snapshot"]],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


class _AtEveryPoint:
    """The developer saving ``name`` at every crash point bar passes: bar's fault trace is
    a FIFO, so bar waits at each point until it is read, and the file is written before
    each read. Every save so lands while bar is stopped at one of its points: in the look
    for hand edits, between it and the command, after the command."""

    def __init__(self, fifo: Path, target: Path) -> None:
        self.fifo, self.target = fifo, target
        self.labels: list[str] = []
        self.saves = 0
        self.stop = False
        os.mkfifo(fifo)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            self.saves += 1
            self.target.write_bytes(b"save %d\n" % self.saves)
            data = drain(self.fifo)
            if self.stop:
                return
            self.labels += data.decode().splitlines()

    def close(self) -> None:
        self.stop = True
        end_drain(self.fifo)
        self.thread.join(10)


def test_saves_at_every_point_of_a_run_are_never_the_steps(
    inited: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path
) -> None:
    task = new_task(capfd)
    wt = worktree(task)
    (wt / "editor.txt").write_text("first\n")
    (wt / "sub").mkdir()
    (wt / "sub" / "deep.txt").write_text("deep\n")
    saver = _AtEveryPoint(tmp_path / "trace", wt / "editor.txt")
    try:
        ran = bar_exe(
            "run",
            "--",
            "sh",
            "-c",
            "echo own > own.txt; echo more >> sub/deep.txt",
            cwd=wt,
            env={"BAR_FAULT_TRACE": str(tmp_path / "trace")},
        )
    finally:
        saver.close()
    assert ran.code == 0, ran.err
    gap = [lbl for lbl in saver.labels if "running.json" in lbl]
    assert gap, saver.labels  # (saves landed between the look and the command)
    steps = ledger(task["id"])
    runs = [s for s in steps if s["kind"] == "run"]
    assert len(runs) == 1, (steps, ran.err, saver.labels)
    assert _changed(inited, runs[0]) == {"own.txt", "sub/deep.txt"}
    # the saves made after the look are a manual step after it, at once
    after = [s for s in steps if int(s["step_id"]) > int(runs[0]["step_id"])]
    assert [s["kind"] for s in after] == ["manual"]
    assert "editor.txt" in _changed(inited, after[0])
    # and nothing is lost: the next look records the last save
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(inited, task) == plain_git_tree(wt, tmp_path)


def test_where_git_converts_a_split_step_keeps_its_raw_bytes(
    inited: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path
) -> None:
    """Where git converts line endings (``core.autocrlf``), every snapshot carries the
    bytes on disk beside its tree (``bar.git.exact``): the run step whose tree is made
    from the look's (the saves that landed after its start taken out) too, so that a
    rollback to it writes them, and the next look finds nothing new to record."""
    subprocess.run(["git", "config", "core.autocrlf", "true"], cwd=inited, check=True)
    task = new_task(capfd)
    wt = worktree(task)
    (wt / "editor.txt").write_text("first\n")
    saver = _AtEveryPoint(tmp_path / "trace", wt / "editor.txt")
    try:
        ran = bar_exe(
            "run",
            "--",
            "sh",
            "-c",
            "printf 'crlf\\r\\n' > own.txt",
            cwd=wt,
            env={"BAR_FAULT_TRACE": str(tmp_path / "trace")},
        )
    finally:
        saver.close()
    assert ran.code == 0, ran.err
    steps = ledger(task["id"])
    run = next(s for s in steps if s["kind"] == "run")
    assert _changed(inited, run) == {"own.txt"}
    for step in steps:
        raw = subprocess.run(
            ["git", "rev-parse", "-q", "--verify", step["snapshot"] + "^2"],
            cwd=inited,
            capture_output=True,
        )
        assert raw.returncode == 0, f"step {step['step_id']} ({step['kind']}) has no raw parent"
    res = bar(capfd, "rollback", "--to", run["step_id"])
    assert res.code == 0, res.err
    assert (wt / "own.txt").read_bytes() == b"crlf\r\n"


def test_nothing_stamped_before_an_interrupted_step_began_is_its_own(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A step whose bar was killed is recorded by the next command from what changed
    since its state before; a change stamped before the step began (the file clock's
    floor as ``bar run`` began it, kept in its intent) is the developer's all the same,
    as for a step that ran to its end: a look that missed it cannot credit it to the
    step."""
    from bar.base.record import replace
    from bar.model import journals
    from bar.model.project import find_project
    from bar.model.tasks import load_task
    from bar.step import interrupted

    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    task = load_task(find_project(inited).project, t["id"])
    began = time.time_ns() - 1_000_000_000  # (a second ago: the clocks' ticks aside)
    intent = journals.RunIntent(
        pid=0,
        step_id="0002",
        started_at="2026-01-01T00:00:00Z",
        cmd=["true"],
        cwd=".",
        snapshot_before=task.recorded_snapshot(),
        from_ns=began,
    )
    journals.RUN.write(task.paths, intent)
    read = journals.RUN.read(task.paths)
    assert read is not None and read.from_ns == began
    assert not interrupted.bound(task, read).holds(began - 1)
    assert interrupted.bound(task, read).holds(began)
    # (an intent of an older bar, which kept no such moment: as before, the step's)
    assert interrupted.bound(task, replace(read, from_ns=0)).holds(began - 1)
    journals.RUN.clear(task.paths)


_EDITOR = r"""
import os, sys, time
target, pause, resume, log = sys.argv[1:5]
n = 0
while not os.path.exists(resume + ".end"):
    if os.path.exists(pause) and not os.path.exists(resume):
        time.sleep(0.0003)
        continue
    n += 1
    with open(target, "w") as f:
        f.write("save %d\n" % n)
    with open(log, "a") as f:
        f.write("%d\n" % n)
    time.sleep(0.003)
"""


@pytest.mark.parametrize("round_", range(3))
def test_an_editor_saving_every_few_ms_is_not_the_steps(
    inited: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path, round_: int
) -> None:
    """An editor saving a file every 3 ms from before ``bar run`` until after it; the step
    writes another file, first thing, and the editor stops saving once it sees that file
    (within a third of a millisecond), until the step's command has ended. So at most one
    save can land while the step runs; the many saves made between the look for hand
    edits and the command are a ``manual`` step's, as are those after it."""
    task = new_task(capfd)
    wt = worktree(task)
    (wt / "editor.txt").write_text("save 0\n")
    out = tmp_path / "out"
    out.mkdir()
    pause, resume, log = wt / "own.txt", out / "resume", out / "log"
    editor = subprocess.Popen(
        [sys.executable, "-c", _EDITOR, str(wt / "editor.txt"), str(pause), str(resume), str(log)]
    )
    try:
        time.sleep(0.1)
        script = f"echo own > own.txt; cat editor.txt > {out}/seen; sleep 0.05; : > {resume}"
        ran = bar_exe("run", "--no-sandbox", "--", "sh", "-c", script, cwd=wt)
        time.sleep(0.05)
    finally:
        (out / "resume.end").write_text("")
        editor.wait(10)
    assert ran.code == 0, ran.err
    steps = ledger(task["id"])
    run = next(s for s in steps if s["kind"] == "run")
    changed = _changed(inited, run)
    assert "own.txt" in changed
    if "editor.txt" in changed:  # one save in flight when own.txt appeared, at most
        show = ["git", "show"]
        before = subprocess.run(
            [*show, f"{run['snapshot_before']}:editor.txt"], cwd=inited, capture_output=True
        ).stdout
        made = subprocess.run(
            [*show, f"{run['snapshot']}:editor.txt"], cwd=inited, capture_output=True
        ).stdout
        first, last = int(before.split()[1]), int(made.split()[1])
        assert last - first <= 1, (first, last, (out / "seen").read_text())
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(inited, task) == plain_git_tree(wt, tmp_path)


@pytest.mark.parametrize(
    "script",
    [
        'mv "sp ace" moved',  # its files keep their own ctimes: only the directory moves
        'mv "sp ace" t && mv dir "sp ace" && mv t dir',  # two swapped: every path kept
        # where another .gitattributes converts: the same bytes are another blob there
        'mv "sp ace" conv/m',
        'mkdir -p conv/new/deeper && mv "sp ace" conv/new/deeper/m',
    ],
)
def test_files_a_step_moves_with_their_directory_are_the_steps(
    speed: str,
    inited_clean: Path,
    capfd: pytest.CaptureFixture[str],
    script: str,
    tmp_path: Path,
) -> None:
    """The oracle's find: a step that renames a directory made its files arrive at new
    paths with ctimes from before the step; they are the step's, not a hand's (no
    ``manual`` step after it), and the record holds them where they are."""
    t = new_task(capfd)
    wt = worktree(t)
    files = (
        ("sp ace/d.md", b"\x00\xffbinary\r\n"),
        ("sp ace/t.txt", b"mixed\r\nand\n"),
        ("dir/b.txt", b"b\n"),
        ("conv/.gitattributes", b"* text=auto eol=crlf\n*.md text\n"),
    )
    for rel, data in files:
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_bytes(data)
    assert bar(capfd, "run", "--", "true").code == 0
    time.sleep(0.05)  # (the files' ctimes well before the step)
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    kinds = [s["kind"] for s in ledger(t["id"])]
    assert kinds == ["manual", "run", "run"], (kinds, res.err)  # (the files made by hand)
    assert recorded_tree(inited_clean, t) == plain_git_tree(wt, tmp_path)


def test_an_ignored_file_a_step_commits_is_the_steps(
    inited: Path, capfd: pytest.CaptureFixture[str], speed: str, tmp_path: Path
) -> None:
    """A step that commits a file it did not write (ignored, there from before) changes no
    ctime of it, and still the file enters the record by the step's doing: what the step
    committed is part of the step (docs/internals/record.md, "The record never lies"), not a
    hand edit after it."""
    task = new_task(capfd)
    wt = worktree(task)
    (wt / ".gitignore").write_text("*.log\n")
    (wt / "keep.log").write_text("kept\n")
    assert bar(capfd, "run", "--", "true").code == 0  # (the rules recorded: a manual step)
    time.sleep(0.05)  # (the file's ctime well before the step's first process)
    script = "git add -f keep.log && git -c user.name=s -c user.email=s@x commit -qm c"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    steps = ledger(task["id"])
    run = steps[-1] if steps[-1]["kind"] == "run" else steps[-2]
    assert run["cmd"][-1] == script
    assert "keep.log" in _changed(inited, run)
    assert [s["kind"] for s in steps if int(s["step_id"]) > int(run["step_id"])] == []
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(inited, task) == plain_git_tree(wt, tmp_path)


def test_a_file_edited_after_the_step_in_a_directory_it_made_is_the_hands(
    tmp_path: Path,
) -> None:
    """A directory new since the state before, made within the step's ticks, makes the
    files under it the step's where their own ctimes are older (moved in with it); not
    a file the step made there that a hand edited in place after the step (its ctime
    newer than the step's end): that edit is the developer's."""
    from bar.base import file_clock
    from bar.step import interrupted

    wt = tmp_path / "wt"
    (wt / "old").mkdir(parents=True)
    (wt / "moved-in").mkdir()
    (wt / "moved-in" / "kept.py").write_text("from before\n")
    time.sleep(0.05)
    began = file_clock.tick_after(file_clock.ceiling(), close=True)
    (wt / "pkg" / "sub").mkdir(parents=True)  # the step: a new package, a moved directory
    (wt / "pkg" / "sub" / "mod.py").write_text("the step's\n")
    os.rename(wt / "moved-in", wt / "pkg" / "moved")
    time.sleep(0.05)
    ended = file_clock.tick_after(file_clock.ceiling(), close=True)
    time.sleep(0.05)
    with open(wt / "pkg" / "sub" / "mod.py", "a") as f:  # a hand, after the step
        f.write("the developer's\n")
    bound = interrupted.Bound(ended, inclusive=False, from_ns=began)

    def old_dirs() -> set[str]:
        return {"old"}

    assert interrupted._moved_by_then(wt, "pkg/moved/kept.py", bound, old_dirs)
    assert not interrupted._made_by_then(wt, "pkg/sub/mod.py", bound)
    assert not interrupted._moved_by_then(wt, "pkg/sub/mod.py", bound, old_dirs)
