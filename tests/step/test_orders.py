"""Orders (bar.changes.orders): a change to a task's files from inside a running step is done by
that step's bar run, the one writer; with no step running, by the caller under the lock.
Real steps, real confinement, real sockets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, task_dir, worktree

from bar import api
from bar.api import orders
from bar.changes.orders import NotInsideStep
from bar.errors import ExitCode

ORDER = """\
import json, sys
from bar import api
from bar.api import orders
from bar.errors import BarError
task = api.get_task(api.open_project())
try:
    print("ORDER " + json.dumps(orders.order(task, sys.argv[1], json.loads(sys.argv[2]))))
except BarError as exc:
    print("ORDER " + json.dumps({"error": str(exc), "hint": exc.hint, "code": exc.exit_code}))
"""


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "order.py"
    path.write_text(ORDER)
    return f"{sys.executable} {path}"


def answers(out: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in out.splitlines() if line.startswith("ORDER ")]


def test_a_checkpoint_inside_a_confined_step_is_taken_by_its_bar_run(
    inited: Path, capfd: pytest.CaptureFixture[str], script: str
) -> None:
    t = new_task(capfd)
    home = os.environ["BAR_HOME"]
    res = bar_exe(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        f'echo one > a.txt; {script} checkpoint \'{{"label": "half way"}}\'; '
        f"touch {home}/planted && echo WROTE-HOME; echo two > b.txt",
        cwd=worktree(t),
    )
    assert res.code == 0, res.err
    (said,) = answers(res.out)
    assert said["state"] == "0001.1" and said["running"] is True
    assert said["checkpoint"]["tool"] == "checkpoint" and said["checkpoint"]["label"] == "half way"
    # the step is confined: it could not write bar's files itself
    assert "WROTE-HOME" not in res.out and not (Path(home) / "planted").exists()
    (step,) = ledger(t["id"])
    assert step["sandbox"]["enabled"] is True
    cps = api.checkpoints(api.get_task(api.open_project()), "0001")
    assert [(c.kind, c.label, c.diff_stat.file_list) for c in cps] == [
        ("tool", "half way", ("a.txt",)),
        ("residual", None, ("b.txt",)),
    ]
    assert bar(capfd, "show", "1.1").code == 0


def test_with_no_step_running_a_checkpoint_records_hand_edits(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    task = api.get_task(api.open_project())
    assert orders.order(task, "checkpoint", {"label": "x"})["state"] == "base"
    (worktree(t) / "hand.txt").write_text("by hand\n")
    said = orders.order(task, "checkpoint", {"label": "after my edit"})
    assert said["state"] == "0001" and said["running"] is False and said["checkpoint"] is None
    (step,) = ledger(t["id"])
    assert step["kind"] == "manual" and step["snapshot"] == said["snapshot"]


def test_the_agent_rolls_its_own_task_back_inside_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str], script: str
) -> None:
    t = new_task(capfd)
    res = bar_exe(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        f'echo one > a.txt; {script} checkpoint \'{{"label": "one"}}\'; '
        f'echo two > b.txt; {script} rollback \'{{"to": "1.1"}}\'; '
        f'{script} rollback \'{{"to": "77"}}\'',
        cwd=worktree(t),
    )
    assert res.code == 0, res.err
    _, back, unknown = answers(res.out)
    assert back["target"] == "1.1" and back["checkpoint"]["kind"] == "rollback"
    assert unknown["code"] == ExitCode.NOT_FOUND and "77" in unknown["error"]
    assert sorted(os.listdir(worktree(t))) == [".aide", ".git", "README.md", "a.txt"]
    (step,) = ledger(t["id"])
    assert step["diff_stat"]["file_list"] == ["a.txt"]
    assert bar(capfd, "rollback", "--to", "1.2").code == 0  # undoable like any rollback
    assert (worktree(t) / "b.txt").read_text() == "two\n"


def test_an_inside_order_from_outside_and_an_outside_one_from_inside_are_refused(
    inited: Path, capfd: pytest.CaptureFixture[str], script: str
) -> None:
    t = new_task(capfd)
    task = api.get_task(api.open_project())
    with pytest.raises(NotInsideStep) as no_step:
        orders.order(task, "rollback", {"to": "base"})
    assert no_step.value.exit_code == ExitCode.USAGE and "no step is running" in str(no_step.value)
    # a step that waits: from outside, while it runs
    go, stop = worktree(t) / "go", Path(str(worktree(t)) + "-stop")
    submit = json.dumps(
        {
            "input": {
                "task": "t",
                "source": "s",
                "items": [
                    {
                        "id": 1,
                        "title": "which",
                        "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
                    }
                ],
            }
        }
    )
    answer = json.dumps({"decisions": [{"id": 1, "chosen": "a"}]})
    proc = subprocess.Popen(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--",
            "sh",
            "-c",
            f"{script} decide.submit '{submit}'; {script} decide.answer '{answer}'; touch go; "
            f"while [ ! -e {stop} ]; do sleep 0.05; done; rm go",
        ],
        cwd=worktree(t),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert go.exists()
        with pytest.raises(Exception) as outside:
            orders.order(task, "rollback", {"to": "base"})
        assert getattr(outside.value, "exit_code", None) == ExitCode.USAGE
        assert "not part of it" in str(outside.value)
        # the person answers from outside while the step runs: queued after it
        done = orders.order(task, "decide.answer", answer and json.loads(answer))
        assert done["queued"] is True and done["step"] is None
    finally:
        stop.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    submitted, refused = answers(out.decode())
    assert submitted["session_id"] and refused["code"] == ExitCode.USAGE
    assert "for the developer" in refused["error"] and "bar decide answer" in refused["hint"]
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["run", "decision"]
    assert steps[1]["session_id"] == submitted["session_id"]
    assert steps[1]["snapshot"] == steps[0]["snapshot"] == steps[1]["snapshot_before"]
    assert not (task_dir(t["id"]) / "queued-steps.jsonl").exists()


def test_an_unknown_order_is_a_bad_command_line(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    task = api.get_task(api.open_project())
    with pytest.raises(Exception) as bad:
        orders.order(task, "format-disk", {})
    assert getattr(bad.value, "exit_code", None) == ExitCode.USAGE and "format-disk" in str(
        bad.value
    )


def test_a_queued_step_left_by_a_crash_is_appended_by_the_next_command(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from bar.history import queued as queued_steps
    from bar.model.records import DecisionStep

    t = new_task(capfd)
    task = api.get_task(api.open_project())
    step = DecisionStep(
        step_id="0001",
        started_at="2025-01-15T10:00:00.000Z",
        ended_at="2025-01-15T10:00:00.000Z",
        duration_ms=0,
        session_id="2025-01-15T10-00-00",
        decisions=[{"id": 1, "chosen": "a"}],
    )
    queued_steps.queue(task, step.to_record())
    assert bar(capfd, "run", "--", "true").code == 0  # recovery appends it first
    kinds = [(s["step_id"], s["kind"]) for s in ledger(t["id"])]
    assert kinds == [("0001", "decision"), ("0002", "run")]
    assert bar(capfd, "log").code == 0
