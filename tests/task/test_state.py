"""What `bar task list`, `task show` and `bar status` say a task's state is: running,
applied, active, closed, or missing its worktree."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BAR_EXE,
    SWEEP_SEED,
    bar,
    calls_to,
    new_task,
    parsed_steps,
    run_sh,
    worktree,
)

from conftest import git


def listed(capfd: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    res = bar(capfd, "task", "list", "--all", "--json")
    assert res.code == 0, res.err
    return {row["name"]: row for row in res.json()}


def test_a_new_task_is_active_and_its_json_keeps_the_old_fields(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "plain")
    run_sh(capfd, "echo hi > a.txt")
    row = listed(capfd)["plain"]
    assert row["status"] == "active" and row["active"] is True and row["steps"] == 1
    assert row["state"] == "active"
    assert row["running"] is False and row["applied"] is False
    assert row["worktree_missing"] is False
    line = next(x for x in bar(capfd, "task", "list").out.splitlines() if "plain" in x)
    assert " active " in line and "1 step" in line


def test_an_applied_task_says_so_until_a_step_changes_a_file(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "landing")
    run_sh(capfd, "echo feature > feature.txt")
    assert bar(capfd, "apply", "-m", "Add the feature").code == 0
    row = listed(capfd)["landing"]
    assert (row["state"], row["applied"]) == ("applied", True)
    assert "applied" in bar(capfd, "task", "list").out
    assert "state       applied" in bar(capfd, "task", "show").out
    status = bar(capfd, "status")
    assert ", applied, 2 steps" in status.out  # the apply is a step of its own
    assert bar(capfd, "status", "--json").json()["task"]["state"] == "applied"
    assert bar(capfd, "run", "--", "true").code == 0  # (changes nothing: still applied)
    assert bar(capfd, "run", "--", "sh", "-c", "echo feature > feature.txt").code == 0
    assert listed(capfd)["landing"]["state"] == "applied"
    run_sh(capfd, "echo more >> feature.txt")
    row = listed(capfd)["landing"]
    assert (row["state"], row["applied"]) == ("active", False)


def test_an_apply_undone_by_a_reset_of_the_target_is_not_applied(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "reset")
    run_sh(capfd, "echo feature > feature.txt")
    before = git(inited_clean, "rev-parse", "main").strip()
    assert bar(capfd, "apply", "-m", "Add the feature").code == 0
    assert listed(capfd)["reset"]["state"] == "applied"
    git(inited_clean, "reset", "-q", "--hard", before)  # someone takes it back off main
    row = listed(capfd)["reset"]
    assert (row["state"], row["applied"]) == ("active", False)
    assert "applied" not in bar(capfd, "status").out
    assert bar(capfd, "apply", "-m", "Again").code == 0  # lands again, and says so again
    assert listed(capfd)["reset"]["state"] == "applied"


def test_applying_an_earlier_state_is_not_applied(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "partial")
    run_sh(capfd, "echo one > one.txt")
    run_sh(capfd, "echo two > two.txt")
    res = bar(capfd, "apply", "--at", "1", "-m", "Only the first step")
    assert res.code == 0, res.err
    assert listed(capfd)["partial"]["state"] == "active"


def test_a_closed_task_is_closed(inited_clean: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd, "done")
    assert bar(capfd, "task", "close").code == 0
    row = listed(capfd)["done"]
    assert (row["state"], row["status"]) == ("closed", "closed")
    assert row["worktree_missing"] is False  # a closed task has no worktree to miss
    assert "closed" in bar(capfd, "task", "list", "--all").out


def test_a_missing_worktree_is_said_everywhere_with_the_repair(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "lost")
    run_sh(capfd, "echo kept > kept.txt")
    shutil.rmtree(worktree(t))
    row = listed(capfd)["lost"]
    assert (row["state"], row["worktree_missing"]) == ("missing-worktree", True)
    human = bar(capfd, "task", "list")
    assert "missing worktree" in human.out and "bar doctor --repair" in human.out
    shown = bar(capfd, "task", "show", "lost").out
    assert "state       missing worktree" in shown and "bar doctor --repair" in shown
    status = bar(capfd, "status")
    assert status.code == 0
    assert f"worktree  {worktree(t)} is missing" in status.out
    assert "`bar doctor --repair`" in status.out
    assert bar(capfd, "status", "--json").json()["task"]["worktree_missing"] is True
    assert bar(capfd, "doctor", "--repair").code == 0
    assert (worktree(t) / "kept.txt").read_text() == "kept\n"
    assert listed(capfd)["lost"]["state"] == "active"


def test_a_task_with_a_step_under_way_is_running(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "busy")
    new_task(capfd, "idle")
    wt = worktree(t)
    script = "touch started; while [ ! -e go ]; do sleep 0.05; done"
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--task", "busy", "--", "sh", "-c", script],
        cwd=inited_clean,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + 120
        while not (wt / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the step never started"
            time.sleep(0.05)
        rows = listed(capfd)
        assert (rows["busy"]["state"], rows["busy"]["running"]) == ("running", True)
        assert rows["idle"]["state"] == "active"
        line = next(x for x in bar(capfd, "task", "list").out.splitlines() if "busy" in x)
        assert "running" in line
        status = bar(capfd, "status", "--task", "busy")
        assert ", running, " in status.out and "running   step 0001" in status.out
    finally:
        (wt / "go").touch()
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert listed(capfd)["busy"]["state"] == "active"


def test_a_decision_answered_after_an_apply_leaves_it_applied(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A `decision` step changes no file: the task still holds what it applied."""
    new_task(capfd, "asked")
    run_sh(capfd, "echo feature > feature.txt")
    assert bar(capfd, "apply", "-m", "Add the feature").code == 0
    question = (
        '{"task": "t", "source": "s", "items": [{"id": 1, "title": "next?", '
        '"options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}]}]}'
    )
    assert bar(capfd, "decide", "submit", question).code == 0
    assert bar(capfd, "decide", "answer", "--choose", "1=a").code == 0
    row = listed(capfd)["asked"]
    assert (row["state"], row["applied"], row["steps"]) == ("applied", True, 3)


def test_steps_that_changed_nothing_since_an_apply_are_passed_over_unparsed(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # an agent that ran the tests a thousand times since the apply: bar status and task
    # list read those lines' bytes, never build their steps, and still say "applied"
    task = new_task(capfd, "tested")
    run_sh(capfd, "echo feature > feature.txt")
    assert bar(capfd, "apply", "-m", "Add the feature").code == 0
    for _ in range(3):
        assert bar(capfd, "run", "--", "true").code == 0
    path = Path(os.environ["BAR_HOME"]).glob(f"projects/*/tasks/{task['id']}/ledger.jsonl")
    ledger = next(path)
    lines = ledger.read_bytes().splitlines()
    newest = json.loads(lines[-1])
    with ledger.open("ab") as fh:  # as many more, numbered on
        for n in range(int(newest["step_id"]) + 1, int(newest["step_id"]) + 301):
            fh.write(json.dumps({**newest, "step_id": f"{n:04d}"}, separators=(",", ":")).encode())
            fh.write(b"\n")
    built = parsed_steps(monkeypatch)
    assert listed(capfd)["tested"]["state"] == "applied"
    assert len(built) < 20, len(built)
    built.clear()
    assert ", applied, " in bar(capfd, "status").out
    assert len(built) < 20, len(built)


def _ledger_of(task: dict[str, Any]) -> Path:
    return next(Path(os.environ["BAR_HOME"]).glob(f"projects/*/tasks/{task['id']}/ledger.jsonl"))


def _append_like(ledger: Path, rec: dict[str, Any], count: int) -> None:
    """``count`` more lines like ``rec``, numbered on from the ledger's newest."""
    for line in reversed(ledger.read_bytes().splitlines()):
        with contextlib.suppress(ValueError):
            newest = int(json.loads(line)["step_id"])
            break
    with ledger.open("ab") as fh:
        for n in range(newest + 1, newest + 1 + count):
            fh.write(json.dumps({**rec, "step_id": f"{n:04d}"}, separators=(",", ":")).encode())
            fh.write(b"\n")


def _applied_then_idle(capfd: pytest.CaptureFixture[str], name: str) -> tuple[dict[str, Any], Path]:
    """A task whose step changed a file, applied, then a step that changed nothing: the
    task and its ledger (three lines: the change, the apply, the idle step)."""
    task = new_task(capfd, name)
    run_sh(capfd, f"echo {name} > {name}.txt")
    assert bar(capfd, "apply", "-m", f"Add {name}").code == 0
    assert bar(capfd, "run", "--", "true").code == 0
    return task, _ledger_of(task)


def _looked_at(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The ledger lines ``bar.task.applied`` looks at from now on in this process."""
    from bar.task import applied

    return calls_to(monkeypatch, applied, "surely_unchanged")


def test_a_ledger_read_back_far_is_read_again_only_from_where_it_was_read_to(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # an agent that ran the tests 3,000 times since the apply: the first bar status reads
    # those lines once and keeps what they said; the next reads only the lines since
    _, ledger = _applied_then_idle(capfd, "tested")
    unchanged = json.loads(ledger.read_bytes().splitlines()[-1])
    _append_like(ledger, unchanged, 3000)
    kept = ledger.with_name("ledger.applied.json")
    looked = _looked_at(monkeypatch)
    assert ", applied, " in bar(capfd, "status").out
    assert len(looked) > 3000 and kept.exists()
    since = 0  # lines appended since what is kept was kept (256 or more: kept again)
    for more in (10, 300, 5):
        looked.clear()
        _append_like(ledger, unchanged, more)
        since += more
        assert listed(capfd)["tested"]["state"] == "applied"
        assert since - 1 <= len(looked) <= since + 1, (more, since, len(looked))
        since = 0 if since >= 256 else since
    # a step that changes a file: the new lines alone say so, and an apply again
    run_sh(capfd, "echo more > more.txt")
    assert listed(capfd)["tested"]["state"] == "active"
    assert bar(capfd, "apply", "-m", "More").code == 0
    assert listed(capfd)["tested"]["state"] == "applied"


def test_what_was_kept_of_a_ledger_is_not_trusted_once_the_ledger_is_another(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ledger = _applied_then_idle(capfd, "t")
    lines = ledger.read_bytes().splitlines(keepends=True)
    change, applied, unchanged = (json.loads(x) for x in lines[-3:])
    _append_like(ledger, unchanged, 400)
    assert listed(capfd)["t"]["applied"] is True
    kept = ledger.with_name("ledger.applied.json")
    assert json.loads(kept.read_bytes())["seen"]["apply"] == applied["step_id"]
    looked = _looked_at(monkeypatch)

    # the same bytes in a new file (as bar doctor --repair writes one): read whole again
    copy = ledger.with_name("copy")
    copy.write_bytes(ledger.read_bytes())
    copy.replace(ledger)
    assert listed(capfd)["t"]["applied"] is True
    assert len(looked) > 400
    # the last line it read rewritten in place, one that changed files in its stead: not
    # taken for what was kept
    looked.clear()
    data = ledger.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    back = {**unchanged, "step_id": json.loads(data[cut:])["step_id"]}  # (the change undone)
    back.update(snapshot_before=change["snapshot"], snapshot=change["snapshot_before"])
    line = json.dumps(back, separators=(",", ":")).encode()
    with ledger.open("r+b") as fh:
        fh.seek(cut)
        fh.write(line + b"\n")
        fh.truncate()
    assert listed(capfd)["t"]["applied"] is False
    # a kept file that is no summary, or names a longer ledger: read whole, never trusted
    for junk in (b"{", b'{"format": 1}', b"[]"):
        kept.write_bytes(junk)
        assert listed(capfd)["t"]["applied"] is False
    kept.unlink()
    os.mkfifo(kept)  # (never opened to wait for a writer)
    assert listed(capfd)["t"]["applied"] is False


def _reference(task: Any) -> bool:
    """Whether the task's state is applied, as bar read it before it kept anything: the
    whole way back from the newest line to the newest step that changed files."""
    from bar.model.records import ApplyStep, DecisionStep
    from bar.model.tasks import still_landed

    apply = None
    state = None
    for step in task.ledger.iter_reverse(warn=False):
        if isinstance(step, DecisionStep):
            continue
        if isinstance(step, ApplyStep):
            if apply is None:
                if not step.snapshot:
                    return False
                apply = step
            continue
        if not step.snapshot:
            continue
        state = state or step.snapshot
        if step.snapshot_before != step.snapshot:
            return apply is not None and apply.snapshot == state and still_landed(task, apply)
    return (
        apply is not None
        and apply.snapshot == (state or task.base_commit)
        and (still_landed(task, apply))
    )


def test_what_is_kept_never_changes_the_answer(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # lines like the ones a task writes (a change, a step that changed nothing, an apply,
    # one with no state, a decision, an unreadable one) appended at random, a summary
    # kept after every read: the answer is always the one read the whole way back
    import random

    from bar import api
    from bar.task import applied

    monkeypatch.setattr(applied, "KEEP_AFTER", 1)
    task, ledger = _applied_then_idle(capfd, "t")
    recs = [json.loads(x) for x in ledger.read_bytes().splitlines()]
    change, apply, same = recs[0], recs[1], recs[2]
    undone = {
        **change,
        "snapshot_before": change["snapshot"],
        "snapshot": change["snapshot_before"],
    }
    kinds: list[bytes | dict[str, Any]] = [
        change,
        undone,
        same,
        apply,
        {**apply, "snapshot": None},
        {**same, "snapshot": None, "snapshot_before": None},
        b"not a step",
    ]
    rng = random.Random(f"{SWEEP_SEED}:applied")  # (each day's seed draws other lines)
    for _ in range(60):
        picked = rng.choice(kinds)
        if isinstance(picked, bytes):
            with ledger.open("ab") as fh:
                fh.write(picked + b"\n")
        else:
            _append_like(ledger, picked, rng.randint(1, 3))
        if rng.random() < 0.1:
            ledger.with_name("ledger.applied.json").unlink(missing_ok=True)
        opened = api.get_task(api.open_project(inited_clean), task["id"])
        assert applied.is_applied(opened) == _reference(opened)
