"""The task's watcher (``bar.changes.fast.watcher``): the step's watch kept between commands.

A step that ends with a watch hands it to a watcher process; the commands that follow ask
it what changed instead of statting every file. These tests drive real ``bar`` commands
against a real watcher process and compare every snapshot with plain git's, and check
that the watcher is never trusted where it cannot know: a state recorded behind its back,
a confined caller, a killed or hung watcher, a write inotify cannot see.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    BAR_EXE,
    SETTLE,
    bar,
    init_clean,
    ledger,
    needs_fanotify,
    new_task,
    plain_git_tree,
    recorded_tree,
    side_index_of,
    task_dir,
    watcher_started,
    worktree,
)

from bar.changes.fast import rescan, watcher, watches
from conftest import git


def _git_ran(trace: Path) -> list[str]:
    """The git subcommands a GIT_TRACE2_EVENT file saw start (none: no file)."""
    lines = trace.read_text().splitlines() if trace.exists() else []
    return [json.loads(line)["name"] for line in lines if json.loads(line)["event"] == "cmd_name"]


def _recorded_without_a_stat(
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    repo: Path,
    task: dict[str, object],
    wt: Path,
) -> None:
    """``bar run -- true`` records the worktree as plain git sees it, and statted no
    directory: the watcher said where entries changed (every recorded file is statted
    all the same, by ``git diff-files``)."""

    def walked(*args: object) -> None:
        raise AssertionError("the stamped directories were statted")

    with monkeypatch.context() as m:
        m.setattr(rescan, "_changed_dirs", walked)
        assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def _alive(pid: int) -> bool:
    """Running (a watcher the test process started and never waits for is a zombie
    once it exits)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _wait_gone(pid: int, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _unstamped(wt: Path, index: Path) -> set[str]:
    """The directories of the worktree that the stamps of ``index`` name neither as
    looked at nor as ignored (those under an ignored one, or in a nested repository,
    need not be)."""
    from bar.changes.fast import stamps

    noted = stamps.noted(index) or {}
    known = {str(d) for d in noted.get("dirs") or []}
    ignored = {str(d) for d in noted.get("ignored") or []}
    missing: set[str] = set()
    for top, subdirs, _ in os.walk(wt):
        rel = os.path.relpath(top, wt)
        rel = "" if rel == "." else rel
        if rel in ignored or (rel and (wt / rel / ".git").exists()):
            subdirs.clear()
            continue
        subdirs[:] = [d for d in subdirs if d != ".git"]
        if rel not in known:
            missing.add(rel)
    return missing


def _pid(task: dict[str, object]) -> int:
    said = watcher.status(side_index_of(task))
    assert said is not None
    return int(said["pid"])


@pytest.mark.parametrize(
    ("seed", "watches", "marks"),
    [
        (0, None, None),
        (1, None, None),
        (2, None, None),
        (3, None, None),
        (4, "2", "0"),
        (5, "3", "0"),
        pytest.param(8, "1", None, marks=needs_fanotify),
    ],
)
def test_what_the_watcher_says_gives_the_tree_plain_git_gives(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    watches: str | None,
    marks: str | None,
) -> None:
    """Random hand edits between steps and random edits by steps, each step recorded
    from what the watcher reported (no directory statted; every recorded file is, by
    ``git diff-files``): every snapshot equals the tree ``git add -A`` writes from a
    fresh index. With ``watches`` (``BAR_WATCHES``: bar's inotify budget) smaller than
    the worktree's directories and no fanotify mark (``marks``: ``BAR_MARKS``), the watch
    is partial and the rest are statted; with marks, they watch the rest: the same."""
    if watches is not None:
        monkeypatch.setenv("BAR_WATCHES", watches)
    if marks is not None:
        monkeypatch.setenv("BAR_MARKS", marks)
    task, wt = watcher_started(capfd, repo, lambda wt: (wt / "p" / "q").mkdir(parents=True))
    said = watcher.status(side_index_of(task))
    assert said is not None and said["partial"] is (marks == "0"), said
    assert (said["marked"] > 0) is (watches is not None and marks is None), said
    rng = random.Random(seed)
    names = ["a.txt", "d/b.txt", "d/e/c.txt", "f/g/h/i.txt", "x.log", "d/e/y.log", "top.md"]
    (wt / ".gitignore").write_text("*.log\n")

    def edit() -> str:
        rel = rng.choice(names)
        path = wt / rel
        what = rng.choice(["write", "write", "delete", "chmod", "rmdir", "rename", "link"])
        if what == "write":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{rng.random()}\n")
        elif what == "delete" and path.exists():
            path.unlink()
        elif what == "chmod" and path.is_file():
            path.chmod(path.stat().st_mode ^ 0o111)
        elif what == "rmdir" and path.parent != wt and path.parent.is_dir():
            subprocess.run(["rm", "-rf", str(path.parent)], check=True)
        elif what == "rename" and path.exists():
            other = wt / rng.choice(names)
            other.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, other)
        elif what == "link" and not path.is_symlink() and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to("a.txt")
        return f"{what} {rel}"

    pid = _pid(task)
    for n in range(8):
        for _ in range(rng.randint(1, 4)):
            edit()
        script = "; ".join(f"echo {n} > {rng.choice(names)}" for _ in range(2))
        script = f"mkdir -p d/e f/g/h; {script}"
        trace = tmp_path / f"trace-{n}.json"
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        argv = ["sh", "-c", script] if n % 2 else ["true"]
        res = bar(capfd, "run", "--", *argv)
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        assert res.code == 0, res.err
        assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
        # whatever the timing (a busy machine trusts every stamp: none is recent), every
        # directory is looked at by the next command: watched, or stamped and statted
        assert _unstamped(wt, side_index_of(task)) == set()
    assert _pid(task) == pid  # one watcher all along
    said = watcher.status(side_index_of(task))
    assert said is not None
    assert watches is None or marks is None or said["watched"] == int(watches)


@pytest.mark.parametrize(
    ("how", "watches", "marks"),
    [("by hand", "2", "0"), ("by a step", "0", None), ("by a rollback", "0", None)],
)
def test_a_directory_that_leaves_the_tree_is_still_looked_at(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    watches: str,
    marks: str | None,
) -> None:
    """A directory whose last recorded file goes (``d/e/c.txt``: ``d`` and ``d/e`` hold
    none) but which stays on disk is stamped as an untracked one: a file made in it
    later moves its ctime alone, and is recorded by the next command, whether nothing
    watches (``BAR_WATCHES=0``: every directory statted) or a partial watch leaves it to
    be statted. Each state is recorded past the racy window (``SETTLE``), as on a busy
    machine, so no stamp is distrusted for being recent (which hid the miss)."""
    from bar.changes.fast import stamps

    monkeypatch.setenv("BAR_WATCHES", watches)
    if marks is not None:
        monkeypatch.setenv("BAR_MARKS", marks)

    def prepare(wt: Path) -> None:
        (wt / "d" / "e").mkdir(parents=True)
        (wt / "d" / "e" / "c.txt").write_text("c\n")
        (wt / "n").mkdir()
        (wt / "n" / "keep.log").write_text("ignored\n")
        (wt / ".gitignore").write_text("*.log\n")

    task, wt = watcher_started(capfd, repo, prepare) if watches != "0" else (None, None)
    if task is None:
        init_clean(repo, capfd)
        task = new_task(capfd)
        wt = worktree(task)
        prepare(wt)
        for _ in range(2):
            assert bar(capfd, "run", "--", "true").code == 0
    assert wt is not None
    if how == "by hand":
        (wt / "d" / "e" / "c.txt").unlink()
    elif how == "by a step":
        assert bar(capfd, "run", "--", "rm", "d/e/c.txt").code == 0
    else:  # a step made n/x.txt; the rollback takes it away, and n stays (keep.log)
        assert bar(capfd, "run", "--", "sh", "-c", "echo x > n/x.txt").code == 0
        assert bar(capfd, "rollback").code == 0
    left = "n" if how == "by a rollback" else "d"
    time.sleep(SETTLE)
    assert bar(capfd, "run", "--", "true").code == 0  # stamps it: untracked now
    assert left in (stamps.stamped_dirs(side_index_of(task)) or [])
    time.sleep(SETTLE)
    (wt / left / "b.txt").write_text("made in a directory the tree no longer has\n")
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    manual = ledger(str(task["id"]))[-2]  # recorded as a hand edit, before the step
    assert manual["kind"] == "manual"
    assert f"{left}/b.txt" in bar(capfd, "show", manual["step_id"]).out


def test_a_change_is_reported_until_a_snapshot_has_it(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Asking is not forgetting: a command that asked and died before its snapshot
    leaves the path to the next one; a path changed again after the question is kept."""
    task, wt = watcher_started(capfd, repo)
    index = side_index_of(task)
    base = ledger(str(task["id"]))[-1]["snapshot"]
    (wt / "one.txt").write_text("1\n")
    first = watcher.look(index, base)
    assert first is not None and first.paths == {"one.txt"}
    again = watcher.look(index, base)  # (the first asker died)
    assert again is not None and again.paths == {"one.txt"}
    (wt / "one.txt").write_text("2\n")  # changed after the question
    watcher.settle(again, base, full=False)  # as if a snapshot had taken "1"
    after = watcher.look(index, base)
    assert after is not None and after.paths == {"one.txt"}
    assert watcher.look(index, "0" * 40) is not None
    other = watcher.look(index, "0" * 40)
    assert other is not None and other.paths is None  # not the state it watches from
    assert bar(capfd, "run", "--", "true").code == 0
    assert (wt / "one.txt").read_text() == "2\n"
    assert ledger(str(task["id"]))[-2]["kind"] == "manual"


def test_a_state_recorded_behind_its_back_makes_it_unsure_until_a_full_look(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, wt = watcher_started(capfd, repo)
    index = side_index_of(task)
    base = ledger(str(task["id"]))[-1]["snapshot"]
    sight = watcher.look(index, base)
    assert sight is not None
    watcher.settle(sight, "f" * 40, full=False)  # someone else's state
    assert bar(capfd, "run", "--", "sh", "-c", "echo x > made.txt").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)  # a full look
    said = watcher.status(index)
    assert said is not None and said["sure"] is True  # ... which made it sure again
    (wt / "made.txt").write_text("y\n")
    _recorded_without_a_stat(capfd, monkeypatch, tmp_path, repo, task, wt)


def test_a_write_inotify_cannot_see_is_found_by_the_next_full_look(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write through a memory map whose file was closed makes no inotify event: the
    watcher cannot report it, and asks for a full look every VERIFY seconds."""
    monkeypatch.setenv("BAR_WATCHER_VERIFY", "1")
    task, wt = watcher_started(capfd, repo, lambda wt: (wt / "mapped.bin").write_bytes(b"a" * 4096))
    with open(wt / "mapped.bin", "r+b") as f:
        view = mmap.mmap(f.fileno(), 4096)
    view[:4] = b"bbbb"  # after the close: no event
    view.flush()
    view.close()
    time.sleep(1.2)
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_a_killed_or_hung_watcher_is_not_waited_for(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task, wt = watcher_started(capfd, repo)
    os.kill(_pid(task), signal.SIGKILL)
    (wt / "after-kill.txt").write_text("k\n")
    assert bar(capfd, "run", "--", "true").code == 0  # its socket is left: refused
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    assert bar(capfd, "run", "--", "true").code == 0  # (this one handed over anew)
    pid = _pid(task)
    os.kill(pid, signal.SIGSTOP)
    try:
        (wt / "after-stop.txt").write_text("s\n")
        assert bar(capfd, "run", "--", "true").code == 0  # waits TIMEOUT, then looks
        assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _wait_gone(pid)  # woken, it finds its socket gone and exits


def test_it_answers_no_confined_process(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A command confined by a step (no_new_privs) reaches the socket's path but gets no
    answer: it could otherwise make the watcher forget a change it made."""
    task, _ = watcher_started(capfd, repo)
    probe = (
        "import ctypes, json, socket, sys\n"
        "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(sys.argv[1])\n"
        's.sendall(b\'{"op": "exit"}\\n\')\n'
        "s.shutdown(socket.SHUT_WR)\n"
        "print(s.recv(1000).decode())\n"
    )
    pid = _pid(task)
    ran = subprocess.run(
        [sys.executable, "-c", probe, "watcher.sock"],
        capture_output=True,
        text=True,
        cwd=task_dir(str(task["id"])),
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"error": "refused"}
    assert _alive(pid)


def test_it_exits_when_idle_when_asked_and_when_its_task_goes(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (idle long enough for the three steps that start it and make it sure to come
    # before it exits, on a loaded machine too: one second was not, once in CI)
    monkeypatch.setenv("BAR_WATCHER_IDLE", "4")
    task, _ = watcher_started(capfd, repo)
    assert _wait_gone(_pid(task))
    assert not (task_dir(str(task["id"])) / "watcher.sock").exists()
    monkeypatch.setenv("BAR_WATCHER_IDLE", "60")
    for _ in range(2):
        assert bar(capfd, "run", "--", "true").code == 0
    pid = _pid(task)
    watcher.stop(side_index_of(task))
    assert _wait_gone(pid)
    for _ in range(2):
        assert bar(capfd, "run", "--", "true").code == 0
    pid = _pid(task)
    assert bar(capfd, "task", "close", str(task["id"])).code == 0
    assert _wait_gone(pid)
    assert _wait_gone(pid)


def test_no_watcher_is_started_when_the_idle_time_is_zero(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAR_WATCHER_IDLE", "0")
    init_clean(repo, capfd)
    task = new_task(capfd)
    for _ in range(3):
        assert bar(capfd, "run", "--", "true").code == 0
    assert not watcher.running(side_index_of(task))


def test_a_rollback_leaves_it_sure(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restore writes the side index, the stamps and the files together: the watcher
    moves to the restored state, keeping the paths the restore wrote (it saw them)."""
    task, wt = watcher_started(capfd, repo)
    assert bar(capfd, "run", "--", "sh", "-c", "mkdir -p n/m && echo 1 > n/m/f").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo 2 > n/m/f && echo 3 > g").code == 0
    time.sleep(SETTLE)
    assert bar(capfd, "rollback").code == 0
    said = watcher.status(side_index_of(task))
    assert said is not None and said["sure"] is True
    (wt / "n" / "m" / "f").write_text("hand\n")
    _recorded_without_a_stat(capfd, monkeypatch, tmp_path, repo, task, wt)


@pytest.mark.parametrize(
    "marks", [False, pytest.param(True, marks=needs_fanotify)], ids=["inotify", "fanotify"]
)
def test_a_file_system_mounted_in_the_worktree_is_recorded_as_git_sees_it(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    marks: bool,
) -> None:
    """A file system mounted on a directory of a watched worktree, written in, then
    unmounted: no watch hears of either, so the watcher sees the mount table move and
    gives up; each step records what plain git sees, the mount's files and then the
    directory's own again."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system takes root")
    if marks:
        monkeypatch.setenv("BAR_WATCHES", "1")

    def prepare(wt: Path) -> None:
        (wt / "m").mkdir()
        (wt / "m" / "keep.txt").write_text("under the mount\n")

    task, wt = watcher_started(capfd, repo, prepare)
    done = subprocess.run(["mount", "-t", "tmpfs", "bar-test", str(wt / "m")], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        (wt / "m" / "on-the-mount.txt").write_text("x\n")
        assert bar(capfd, "run", "--", "true").code == 0
        assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    finally:
        subprocess.run(["umount", str(wt / "m")], check=True)
    for _ in range(2):  # (the second from a new watch, on the directory itself again)
        assert bar(capfd, "run", "--", "true").code == 0
        assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    (wt / "m" / "later.txt").write_text("y\n")
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_watchers_leave_the_user_inotify_room(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editors need inotify too: past ``MAX_RUNNING`` watchers in a bar home, a step
    keeps its watch to itself (and its task looks by statting, as without one)."""
    monkeypatch.setattr(watcher, "MAX_RUNNING", 1)
    first, _ = watcher_started(capfd, repo)
    second = new_task(capfd, "t2")
    for _ in range(3):
        assert bar(capfd, "run", "--task", "t2", "--", "true").code == 0
    assert watcher.running(side_index_of(first)) and not watcher.running(side_index_of(second))


def test_a_commit_in_a_nested_repository_is_recorded_by_the_next_command(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A nested repository's commit writes only under its own .git, which nothing
    watches: the watcher reads its HEAD at every question."""

    def nested(wt: Path) -> None:
        (wt / "sub").mkdir()
        git(wt / "sub", "init", "-q", "-b", "main")
        (wt / "sub" / "f").write_text("1\n")
        git(wt / "sub", "add", "f")
        git(wt / "sub", "commit", "-qm", "one")

    task, wt = watcher_started(capfd, repo, nested)
    sub = wt / "sub"
    (sub / "f").write_text("2\n")
    git(sub, "commit", "-qam", "two")
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_a_write_through_a_hard_link_is_recorded_under_both_names(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The kernel reports the name written through, not the file's other names."""
    task, wt = watcher_started(capfd, repo)
    (wt / "one.txt").write_text("1\n")
    os.link(wt / "one.txt", wt / "two.txt")
    assert bar(capfd, "run", "--", "true").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo more >> one.txt").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    assert ledger(str(task["id"]))[-1]["diff_stat"]["files"] == 2


def test_what_a_snapshot_leaves_out_is_reported_again(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A path a step excludes (an agent's settings file bar restores) is not taken as
    looked at: the next look names it again."""
    from bar import api
    from bar.history import snapshot

    task, wt = watcher_started(capfd, repo)
    (wt / "kept").mkdir()
    (wt / "kept" / "settings.json").write_text("{}\n")
    (wt / "other.txt").write_text("o\n")
    the_task = api.get_task(api.open_project(), str(task["id"]))
    before = the_task.recorded_snapshot()
    snap = snapshot.take(
        the_task.worktree, the_task.index, the_task.snapshot_ref, before, "a checkpoint", ["kept"]
    )
    sight = watcher.look(side_index_of(task), snap.commit)
    assert sight is not None and sight.paths is not None
    assert "kept" in sight.paths or "kept/settings.json" in sight.paths
    assert "other.txt" not in sight.paths


def test_bar_without_new_privileges_starts_no_watcher(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Where bar itself runs with no_new_privs (a container that sets it), a confined
    command cannot be told from bar: no watcher is started."""
    init_clean(repo, capfd)
    task = new_task(capfd)
    wrapper = (
        "import ctypes, os, sys\n"
        "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n"
    )
    from helpers import BAR_EXE

    for _ in range(3):
        ran = subprocess.run(
            [sys.executable, "-c", wrapper, BAR_EXE, "run", "--", "true"],
            cwd=worktree(task),
            capture_output=True,
            text=True,
        )
        assert ran.returncode == 0, ran.stderr
    assert not watcher.running(side_index_of(task))


def test_bar_status_says_whether_the_worktree_is_watched(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task, _ = watcher_started(capfd, repo)
    res = bar(capfd, "status", "--json")
    watch = json.loads(res.out)["watch"]
    assert watch["mode"] == "watching" and watch["pid"] == _pid(task) and watch["dirs"] >= 1
    assert "watch     on: " in bar(capfd, "status").out
    watcher.stop(side_index_of(task))
    assert _wait_gone(watch["pid"])
    watch = json.loads(bar(capfd, "status", "--json").out)["watch"]
    assert watch["mode"] == "scanning" and "no watcher is running" in watch["reason"]
    assert "watch     off, every file is statted" in bar(capfd, "status").out


def _claimed_elsewhere(wanted: int) -> tuple[subprocess.Popen[str], list[str]]:
    """Another process holding a claim of ``wanted`` watches until its stdin closes; what
    it was granted (watches, marks)."""
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from bar.changes.fast import watches\n"
            f"c = watches.claim({wanted}); print(c.granted, c.marks, flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert other.stdout is not None
    return other, other.stdout.readline().split()


def test_all_holders_share_half_of_the_users_watches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One budget for every task: each holder claims its share under a lock, a claim is
    granted what the live holders leave, and the claims of dead processes are let go."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    with open("/proc/sys/fs/inotify/max_user_watches") as f:
        assert watches.budget() == int(f.read()) // 2
    monkeypatch.setenv("BAR_WATCHES", "5000")
    monkeypatch.setenv("BAR_MARKS", "0")
    other, granted = _claimed_elsewhere(3000)
    try:
        assert granted == [str(3000 + watches.HEADROOM), "0"]
        mine = watches.claim(3000)
        assert mine.granted == 5000 - 3000 - watches.HEADROOM  # what is left: a partial watch
        assert watches.held() == (5000, 0)
        mine.release()
        assert watches.held() == (3000 + watches.HEADROOM, 0)
    finally:
        other.communicate("")
    assert watches.held() == (0, 0)  # its holder is gone
    assert watches.claim(3000).granted == 3000 + watches.HEADROOM
    monkeypatch.setenv("BAR_WATCHES", "0")
    assert watches.claim(1).granted == 0


@needs_fanotify
def test_a_claim_short_of_watches_is_granted_marks_from_a_budget_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the inotify budget cannot grant is granted in fanotify marks, from half of
    the user's marks (``BAR_MARKS``), shared by every holder like the watches; with no
    watches at all (``BAR_WATCHES=0``), no marks either."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    with open("/proc/sys/fs/fanotify/max_user_marks") as f:
        assert watches.mark_budget() == int(f.read()) // 2
    monkeypatch.setenv("BAR_WATCHES", "100")
    monkeypatch.setenv("BAR_MARKS", "2000")
    other, granted = _claimed_elsewhere(500)
    try:
        # 500 directories and room for 1,000 new ones: the 100 watches, then marks
        assert granted == ["100", "1400"]
        mine = watches.claim(500)  # no watch left; what is left of the marks
        assert (mine.granted, mine.marks) == (0, 600)
        assert watches.held() == (100, 2000)
        mine.release()
    finally:
        other.communicate("")
    assert watches.held() == (0, 0)
    monkeypatch.setenv("BAR_WATCHES", "5000")
    whole = watches.claim(10)  # (watches enough: no mark)
    assert (whole.granted, whole.marks) == (10 + watches.HEADROOM, 0)
    whole.release()
    monkeypatch.setenv("BAR_WATCHES", "0")
    nothing = watches.claim(10)
    assert (nothing.granted, nothing.marks) == (0, 0)


def test_a_partial_watch_is_said_and_a_full_budget_means_scanning(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fewer watches than directories: the watcher watches what it may and says so;
    none left: the task is scanned, and ``bar status`` says why."""

    def dirs(wt: Path) -> None:
        for rel in ("a/b", "c/d/e", "f"):
            (wt / rel).mkdir(parents=True)
            (wt / rel / "x.txt").write_text("x\n")

    monkeypatch.setenv("BAR_WATCHES", "3")
    monkeypatch.setenv("BAR_MARKS", "0")
    task, wt = watcher_started(capfd, repo, dirs)
    watch = json.loads(bar(capfd, "status", "--json").out)["watch"]
    assert watch["mode"] == "partial" and watch["dirs"] == 3 and watch["scanned"] >= 4
    assert "watch     partial: 3 directories watched" in bar(capfd, "status").out
    (wt / "c" / "d" / "e" / "y.txt").write_text("in a directory nobody watches\n")
    (wt / "a" / "b" / "x.txt").write_text("edited in place, unwatched\n")
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    assert "c/d/e/y.txt" in bar(capfd, "diff", "--from", "2").out
    second = new_task(capfd, "t2")
    for _ in range(2):  # the budget is the first task's: none left for this one
        assert bar(capfd, "run", "--task", "t2", "--", "true").code == 0
    assert not watcher.running(side_index_of(second))
    said = json.loads(bar(capfd, "status", "--task", "t2", "--json").out)["watch"]
    assert said["mode"] == "scanning" and "held by other tasks" in said["reason"]


@pytest.mark.parametrize(
    ("budget", "marks"),
    [(10, 0), pytest.param(4, 6, marks=needs_fanotify)],
    ids=["watches", "and-marks"],
)
def test_tasks_stepping_at_once_never_hold_more_than_the_budget(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    budget: int,
    marks: int,
) -> None:
    """Six tasks of four directories each step at once, twice, with budgets of ten
    watches, or of four watches and six fanotify marks: the claims are granted under one
    lock, so the watchers hold no more than the budgets between them (some partial,
    some none), and every task records what plain git sees."""
    monkeypatch.setenv("BAR_WATCHES", str(budget))
    monkeypatch.setenv("BAR_MARKS", str(marks))
    init_clean(repo, capfd)
    names = [f"t{i}" for i in range(6)]
    tasks = [new_task(capfd, name) for name in names]
    for name, task in zip(names, tasks, strict=True):
        wt = worktree(task)
        for rel in ("a/b", "c"):
            (wt / rel).mkdir(parents=True)
            (wt / rel / "f.txt").write_text(f"{name}\n")
    for n in range(3):
        runs = [
            subprocess.Popen(
                [BAR_EXE, "run", "--task", name, "--", "sh", "-c", f"echo {n} > a/b/g.txt"],
                cwd=repo,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for name in names
        ]
        for run in runs:
            _, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
    held = marked = 0
    for task in tasks:
        said = watcher.status(side_index_of(task))
        held += int(said["watched"]) if said is not None else 0
        marked += int(said["marked"]) if said is not None else 0
        assert recorded_tree(repo, task) == plain_git_tree(worktree(task), tmp_path)
    assert 0 < held <= budget + marks
    assert marked <= marks
    claimed = watches.held()
    assert claimed[0] <= budget and claimed[1] <= marks


def test_a_claim_handed_to_a_watcher_moves_only_under_the_claims_lock() -> None:
    """A claim is handed to the watcher that takes the watches by renaming its file; a
    rename while another claim counts the holders (between its listing of the folder and
    its read of the file) would hide it from that count, which would then grant its
    watches a second time (seen as six tasks' watchers holding 12 of a budget of 10). So
    the rename waits for the lock the counting holds."""
    import fcntl
    import threading

    claim = watches.claim(3)
    folder = watches._folder()
    (before,) = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
    watcher = subprocess.Popen(["sleep", "60"])
    try:
        lock = os.open(folder / ".lock", os.O_RDWR)
        fcntl.flock(lock, fcntl.LOCK_EX)
        handing = threading.Thread(target=claim.hand_to, args=(watcher.pid,))
        handing.start()
        handing.join(0.3)
        assert handing.is_alive()
        assert [p.name for p in folder.iterdir() if not p.name.startswith(".")] == [before]
        os.close(lock)
        handing.join(30)
        (after,) = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
        assert after.startswith(f"{watcher.pid}.")
        assert watches.held()[0] == claim.granted
    finally:
        watcher.kill()
        watcher.wait()


def test_a_claim_of_watches_is_the_users_alone() -> None:
    """The files of ``$BAR_HOME/watches/`` are 0600, as everything else bar keeps there."""
    from bar.changes.fast import watches

    claim = watches.claim(10)
    try:
        (held,) = [p for p in watches._folder().iterdir() if not p.name.startswith(".")]
        assert held.stat().st_mode & 0o777 == 0o600
        assert held.parent.stat().st_mode & 0o777 == 0o700
    finally:
        claim.release()
