"""The look for hand edits begun while the command loads (``bar.changes.fast.prescan``): its answer is
taken only while it still answers the question, and nothing is lost when it is late."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import bar, bar_exe, files_in_commit, files_on_disk, ledger, new_task

from conftest import git


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert bar(capfd, "init").code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "policy")
    made: dict[str, str] = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0  # stamps of the first state
    return made


def _index(task: dict[str, str]) -> Path:
    from bar.store.layout import bar_home

    found = list(bar_home().glob(f"projects/*/tasks/{task['id']}/index"))
    assert len(found) == 1, found
    return found[0]


def _started(monkeypatch: pytest.MonkeyPatch, task: dict[str, str]) -> object:
    from bar.changes.fast import prescan

    monkeypatch.chdir(task["worktree"])
    prescan.begin(None)
    early = prescan._early
    assert early is not None, "the task in the current directory was found"
    return early


def test_the_answer_is_taken_for_the_same_worktree_and_side_index(
    task: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bar.changes.fast import prescan

    early = _started(monkeypatch, task)
    proc = prescan.claim(Path(task["worktree"]), _index(task))
    assert proc is early.proc  # type: ignore[attr-defined]
    out, _ = proc.communicate()
    assert out == b"" and proc.returncode == 0
    assert prescan.claim(Path(task["worktree"]), _index(task)) is None  # taken once


def test_a_side_index_written_since_makes_it_ask_again(
    task: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bar.changes.fast import prescan

    early = _started(monkeypatch, task)
    index = _index(task)
    data = index.read_bytes()
    index.unlink()
    index.write_bytes(data)  # another bar command restored or recorded meanwhile
    assert prescan.claim(Path(task["worktree"]), index) is None
    assert early.proc.returncode is not None  # type: ignore[attr-defined]  # stopped


def test_another_task_or_an_old_answer_is_not_taken(
    task: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bar.changes.fast import prescan

    _started(monkeypatch, task)
    assert prescan.claim(Path(task["worktree"]).parent, _index(task)) is None
    early = _started(monkeypatch, task)
    monkeypatch.setattr(prescan, "_MAX_AGE", 0.0)
    assert prescan.claim(Path(task["worktree"]), _index(task)) is None
    assert early.proc.returncode is not None  # type: ignore[attr-defined]


def test_an_unclaimed_look_is_stopped(
    task: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bar.changes.fast import prescan

    early = _started(monkeypatch, task)
    prescan.discard()
    assert early.proc.returncode is not None  # type: ignore[attr-defined]
    assert prescan._early is None


def test_inside_a_step_or_for_a_name_nothing_starts(
    task: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bar.changes.fast import prescan

    monkeypatch.chdir(task["worktree"])
    prescan.begin(task["name"])  # a name is resolved (and reported) by the command
    assert prescan._early is None
    monkeypatch.setenv("BAR_STEP_ID", "0001")
    prescan.begin(None)
    assert prescan._early is None


def test_an_edit_made_after_the_early_look_is_recorded_never_lost(
    task: dict[str, str], monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    """The early diff-files has answered; then a file is edited in place before the
    step's watch begins. The step may not see it, but the next command's look does."""
    from bar import api
    from bar.changes.fast import prescan
    from bar.step.run import RunRequest

    wt = Path(task["worktree"])
    early = _started(monkeypatch, task)
    early.proc.wait()  # type: ignore[attr-defined]  # it has looked
    time.sleep(0.06)  # past the racy window of the stamps
    target = wt / git(wt, "ls-files").split()[0]  # a recorded file
    target.write_bytes(target.read_bytes() + b"edited after the look\n")
    loc = api.open_project(wt)
    the_task = api.get_task(loc, task["id"])
    request = RunRequest(argv=["true"], live=False)
    api.run(the_task, request)
    assert prescan._early is None  # claimed by the step's look
    assert bar_exe("run", "--", "true", cwd=wt).code == 0
    steps = ledger(task["id"])
    last = [s for s in steps if s.get("snapshot")][-1]["snapshot"]
    assert files_on_disk(wt) == files_in_commit(repo, last)  # the edit is recorded


def test_a_plain_step_runs_one_diff_files(
    task: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early look is the look for hand edits: diff-files runs once for it, not
    twice (and once more for the step's own snapshot, after its command)."""
    trace = tmp_path / "trace.json"
    wt = Path(task["worktree"])
    (wt / "new.txt").write_text("hand edit\n")
    env = {"GIT_TRACE2_EVENT": str(trace)}
    assert bar_exe("run", "--", "true", cwd=wt, env=env).code == 0
    argvs = [
        json.loads(line).get("argv", [])
        for line in trace.read_text().splitlines()
        if '"event":"start"' in line
    ]
    assert sum("diff-files" in a for a in argvs) == 2, argvs
    assert any(s["kind"] == "manual" for s in ledger(task["id"]))
    assert os.path.exists(wt / "new.txt")
