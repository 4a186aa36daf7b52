"""The record never lies (docs/internals/record.md): attacks on the shortcuts, each run for real.

Every test here makes the worktree change in a way one of bar's shortcuts (the side
index's stat cache, the watches, the stamps, the resident process) could miss, then
checks that the ledger's last state is what ``git add -A`` writes from a fresh index of
the worktree, and that a rollback says nothing that is not so. Each runs with the speed
layer on and with ``BAR_FAST=0``, in-process and through the installed executable (which
a resident process may serve).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SETTLE,
    bar,
    bar_exe,
    init_clean,
    ledger,
    new_task,
    plain_git_tree,
    recorded_tree,
    seen_alive_after,
    set_config,
    sweep,
    task_dir,
    watcher_started,
    worktree,
)

Bar = Callable[..., Any]


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


@pytest.fixture(params=["in-process", "executable"])
def run(request: pytest.FixtureRequest, capfd: pytest.CaptureFixture[str]) -> Bar:
    """``bar ARGS`` in this process, or through the installed ``bar`` (served by the bar
    home's resident process once one runs)."""
    if request.param == "in-process":
        return lambda *args, cwd=None: bar(capfd, *args)
    return lambda *args, cwd=None: bar_exe(*args, cwd=cwd or Path.cwd())


def _task(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, run: Bar
) -> tuple[dict[str, Any], Path]:
    """A task three steps in (with the speed layer on, its watcher is watching)."""
    if os.environ.get("BAR_FAST") == "0":
        init_clean(repo, capfd)
        task = new_task(capfd)
        wt = worktree(task)
        for _ in range(3):
            assert bar(capfd, "run", "--", "true").code == 0
    else:
        task, wt = watcher_started(capfd, repo)
    monkeypatch.chdir(wt)
    return task, wt


def _start_of_a_second() -> None:
    """Wait until a second has just begun: what follows runs within it."""
    time.sleep(1.0 - time.time() % 1 + 0.01)


def _check(repo: Path, task: dict[str, Any], wt: Path, tmp: Path) -> None:
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp)


def test_a_same_size_rewrite_in_the_second_of_the_record_with_its_mtime_set_back(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
    run: Bar,
) -> None:
    """A step writes ``f`` and sets its mtime back (its ctime is then in the second of the
    step's record, its mtime long before); in that same second the file is rewritten
    with as many bytes and its mtime set back again. git, which compares times to the
    second, sees no change: the next record must."""
    task, wt = _task(repo, capfd, monkeypatch, run)
    for _attempt in range(5):
        _start_of_a_second()
        began = int(time.time())
        res = run("run", "--", "sh", "-c", "printf aaaa > f; touch -d @1000000000 f", cwd=wt)
        assert res.code == 0, res.err
        (wt / "f").write_text("bbbb")
        os.utime(wt / "f", (1_000_000_000, 1_000_000_000))
        if int(time.time()) == began:
            break  # (else the second ran out: again)
    res = run("run", "--", "true", cwd=wt)
    assert res.code == 0, res.err
    _check(repo, task, wt, tmp_path)
    assert ledger(task["id"])[-2]["kind"] == "manual"
    # a rollback over it first records it; undoing the rollback brings it back
    assert run("rollback", "--to", "base", cwd=wt).code == 0
    assert not (wt / "f").exists()
    assert run("undo", cwd=wt).code == 0
    assert (wt / "f").read_text() == "bbbb"


def test_a_write_through_a_hard_link_from_outside_is_recorded(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
    run: Bar,
) -> None:
    """A file of the worktree has a second name outside it: writes through that name
    reach no watch of the worktree's, between steps and during one (a confined step may
    write a directory it is allowed, such as ``~/.cache``). Each is recorded, and a rollback
    never overwrites one unrecorded."""
    task, wt = _task(repo, capfd, monkeypatch, run)
    (wt / "f.txt").write_text("one\n")
    assert run("run", "--", "true", cwd=wt).code == 0
    shared = tmp_path / "shared"  # (a step's /tmp is its own: this one it may write)
    shared.mkdir()
    set_config(sandbox={"allow_write": [str(shared)]})
    outside = shared / "outside-name"
    os.link(wt / "f.txt", outside)
    time.sleep(SETTLE)
    assert run("run", "--", "true", cwd=wt).code == 0
    outside.write_text("two\n")  # a hand edit, through the other name
    assert run("run", "--", "true", cwd=wt).code == 0
    _check(repo, task, wt, tmp_path)
    assert (wt / "f.txt").read_text() == "two\n"
    # a step that writes through it
    res = run("run", "--", "sh", "-c", f"printf 'three\\n' > {outside}", cwd=wt)
    assert res.code == 0, res.err
    _check(repo, task, wt, tmp_path)
    assert ledger(task["id"])[-1]["diff_stat"]["files"] == 1
    # a hand edit, then a rollback: the edit is recorded first, and comes back with undo
    outside.write_text("four\n")
    first = ledger(task["id"])[0]["step_id"]
    assert run("rollback", "--to", first, cwd=wt).code == 0
    assert run("undo", cwd=wt).code == 0
    assert (wt / "f.txt").read_text() == "four\n"


def test_a_rollback_across_a_gitignore_change_records_what_it_unignores(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
    run: Bar,
) -> None:
    """A step ignores ``*.log`` and makes logs; a rollback to before it brings back a
    ``.gitignore`` that does not ignore them: they are part of the state the rollback
    leaves, recorded as such (bar status is clean, closing keeps nothing unrecorded).
    Undoing the rollback ignores them again, and leaves them where they are."""
    task, wt = _task(repo, capfd, monkeypatch, run)
    before = ledger(task["id"])[-1]["step_id"]
    res = run("run", "--", "sh", "-c", "echo '*.log' > .gitignore; echo made > build.log", cwd=wt)
    assert res.code == 0, res.err
    (wt / "hand.log").write_text("by hand\n")
    assert run("run", "--", "true", cwd=wt).code == 0
    assert run("rollback", "--to", before, cwd=wt).code == 0
    _check(repo, task, wt, tmp_path)
    assert (wt / "build.log").exists() and (wt / "hand.log").exists()
    status = bar(capfd, "status", "--json")
    assert status.code == 0 and status.json()["unrecorded_changes"] is False, status.out
    assert run("undo", cwd=wt).code == 0
    _check(repo, task, wt, tmp_path)
    assert (wt / "build.log").read_text() == "made\n"  # ignored again, and untouched
    assert (wt / "hand.log").read_text() == "by hand\n"


def test_an_ignore_rule_outside_the_worktree_that_changes_is_seen(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
    run: Bar,
) -> None:
    """The repository's ``info/exclude`` ignores a file; then it stops ignoring it: the
    file is recorded at the next step, though no directory of the worktree changed."""
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("secret-notes.txt\n")
    task, wt = _task(repo, capfd, monkeypatch, run)
    (wt / "secret-notes.txt").write_text("notes\n")
    assert run("run", "--", "true", cwd=wt).code == 0
    time.sleep(SETTLE)
    assert run("run", "--", "true", cwd=wt).code == 0
    assert (
        "secret-notes.txt"
        not in subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", ledger(task["id"])[-1]["snapshot"]],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    exclude.write_text("")
    assert run("run", "--", "true", cwd=wt).code == 0
    _check(repo, task, wt, tmp_path)


def _points(wt: Path, tmp: Path, *args: str) -> list[str]:
    """The crash points ``bar ARGS`` passes, in order (it runs, to learn them)."""
    trace = tmp / "points.txt"
    trace.unlink(missing_ok=True)
    assert bar_exe(*args, cwd=wt, env={"BAR_FAULT_TRACE": str(trace)}).code == 0
    return [line.split(" ", 1)[1] for line in trace.read_text().splitlines()]


def _killed(wt: Path, at: str, *args: str) -> bool:
    """``bar ARGS`` killed (SIGKILL) at the first crash point named ``at``; False if it
    passed none of that name this time (it then ran to its end)."""
    res = bar_exe(*args, cwd=wt, env={"BAR_FAULT_AT": at})
    assert res.code in (0, -9), (res.code, res.err)
    return res.code == -9


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_an_interrupted_rollback_is_finished_only_once_a_hand_edit_is_recorded(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
) -> None:
    """``bar rollback`` killed at each of its crash points, then files edited by hand
    (one the rollback changes, one it does not know): the next command records the
    edits as a manual step before it finishes the rollback, and the rollback then
    writes only its own paths the hand left alone: both edits stay as they are."""
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    journal = task_dir(task["id"]) / "rollback.json"
    assert bar(capfd, "run", "--", "sh", "-c", "echo 1 > a.txt").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo 2 > a.txt; echo b > b.txt").code == 0
    points = _points(wt, tmp_path, "rollback", "--to", "1")
    assert bar(capfd, "undo").code == 0  # (back to the second state)
    labels = list(dict.fromkeys(points))  # (each at its first passing)
    for label in (labels[n - 1] for n in sweep(len(labels))):
        steps_before = len(ledger(task["id"]))
        if not _killed(wt, label, "rollback", "--to", "1"):
            assert bar(capfd, "undo").code == 0
            continue
        # begun (its journal written), not yet recorded (no ledger line)
        began = journal.exists() and len(ledger(task["id"])) == steps_before
        (wt / "a.txt").write_text(f"hand {label}\n")
        (wt / "c.txt").write_text(f"hand {label}\n")
        res = bar(capfd, "status")
        assert res.code == 0, res.err
        assert bar(capfd, "run", "--", "true").code == 0
        _check(repo, task, wt, tmp_path)
        kinds = [s["kind"] for s in ledger(task["id"])]
        assert "manual" in kinds[-4:], (label, kinds)
        if not began:  # killed before it began or once recorded: nothing to finish
            assert (wt / "a.txt").read_text() == f"hand {label}\n"
            assert bar(capfd, "rollback", "--to", "2").code == 0
            continue
        # the rollback was finished where the hand left its paths alone (b.txt removed, as
        # in step 1); what the hand made is kept (docs/internals/record.md, "The record
        # never lies"), recorded both before and after the rollback
        assert not (wt / "b.txt").exists(), label
        assert (wt / "a.txt").read_text() == f"hand {label}\n", label
        assert (wt / "c.txt").read_text() == f"hand {label}\n", label
        rollback = next(s for s in reversed(ledger(task["id"])) if s["kind"] == "rollback")
        assert bar(capfd, "rollback", "--to", str(int(rollback["step_id"]) - 1)).code == 0
        assert (wt / "a.txt").read_text() == f"hand {label}\n", label
        assert (wt / "c.txt").read_text() == f"hand {label}\n"
        assert bar(capfd, "rollback", "--to", "2").code == 0  # (for the next round)


def test_an_interrupted_step_is_credited_only_with_what_it_made(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
) -> None:
    """``bar run`` killed while its command runs; then a file is edited by hand. The
    step is recorded as interrupted with what its command made, the hand edit as a
    manual step of its own."""
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    assert bar(capfd, "run", "--", "true").code == 0
    # how an earlier step ended, left by a bar killed while it cleared it: not this one's
    stale = {"step_id": "0001", "exit_code": 7, "signal": None, "ended_at": "2026-01-01T00:00:00Z"}
    (task_dir(task["id"]) / "running.ended").write_text(json.dumps(stale))
    proc = subprocess.Popen(
        [
            str(Path(os.sys.executable).parent / "bar"),
            "run",
            "--",
            "sh",
            "-c",
            "echo step > by-step.txt; echo edited > README.md; sleep 60",
        ],
        cwd=wt,
        # (run by bar itself: a served step is in the resident's session, and dies with
        # its killed caller a moment later, not at once)
        env={**os.environ, "BAR_RESIDENT_IDLE": "0"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (wt / "README.md").read_text().startswith("edited") and time.monotonic() < deadline:
        time.sleep(0.05)
    seen_alive_after(task["id"], wt / "README.md", wt / "by-step.txt")
    os.killpg(proc.pid, 9)  # bar and its command, all at once
    proc.wait()
    time.sleep(0.05)
    (wt / "by-hand.txt").write_text("hand\n")
    assert bar(capfd, "run", "--", "true").code == 0
    steps = ledger(task["id"])
    interrupted = next(s for s in steps if s.get("interrupted"))
    assert interrupted.get("exit_code") is None
    assert sorted(interrupted["diff_stat"]["file_list"]) == ["README.md", "by-step.txt"]
    manual = steps[steps.index(interrupted) + 1]
    assert manual["kind"] == "manual" and manual["diff_stat"]["file_list"] == ["by-hand.txt"]
    _check(repo, task, wt, tmp_path)


def test_a_step_killed_after_its_command_ended_keeps_its_exit_code(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    speed: str,
) -> None:
    """bar killed at each crash point after its command ended, then a file edited by
    hand at once: the step is recorded with the command's exit code, not as interrupted,
    and with what its command made (the edit goes to a manual step), and what bar says
    of it is so."""
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    ref = f"refs/bar/tasks/{task['id']}"
    for n in range(4):
        step = f"{len(ledger(task['id'])) + 1:04d}"
        label = [
            f"before writing {step}.patch",
            f"before moving {ref}",
            "before appending to ledger.jsonl",
            "after appending to ledger.jsonl",
        ][n]
        assert _killed(wt, label, "run", "--", "sh", "-c", f"echo {n} > f.txt; exit 3")
        (wt / "by-hand.txt").write_text(f"{n}\n")
        res = bar(capfd, "run", "--", "true")
        assert res.code == 0, res.err
        steps = ledger(task["id"])
        recorded = next(s for s in steps if s["step_id"] == step)
        assert recorded["exit_code"] == 3 and not recorded.get("interrupted"), (label, recorded)
        if n < 3:  # (3: recorded before the edit was made)
            assert recorded["diff_stat"]["file_list"] == ["f.txt"], (label, recorded)
        manual = steps[steps.index(recorded) + 1]
        assert manual["kind"] == "manual", (label, manual)
        assert manual["diff_stat"]["file_list"] == ["by-hand.txt"], (label, manual)
        assert (n == 3) != ("exited 3" in res.err), res.err  # (3: it was recorded)
        _check(repo, task, wt, tmp_path)
