"""``bar task new --meta`` and ``bar task edit``: a task's metadata set from the command
line, each change recorded in events.jsonl from what to what, values scrubbed, and every
mistake one sentence that names the key, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, bar_exe, new_task, project_dir, task_dir, worktree

from bar.errors import ExitCode


def task_json(task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((task_dir(task_id) / "task.json").read_text())
    return data


def events() -> list[dict[str, Any]]:
    path = project_dir() / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_task_new_sets_metadata_keys(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(
        capfd,
        "meta",
        "-d",
        "ship it",
        "--meta",
        "ticket=SHOP-142",
        "--meta",
        "note=key sk-ant-abcdefghijklmnopqrstuvwxyz0123456789 leaked",
        "--meta",
        "api_key=hunter2hunter2",
        "--meta",
        "empty=",
    )
    assert t["metadata"] == task_json(t["id"])["metadata"]
    assert task_json(t["id"])["metadata"] == {
        "description": "ship it",
        "ticket": "SHOP-142",
        "note": "key *** leaked",  # a token it quotes is masked
        "api_key": "***",  # a key that names a secret keeps no value
        "empty": "",
    }
    shown = bar(capfd, "task", "show", "meta")
    assert "  meta        ticket=SHOP-142\n" in shown.out and "hunter2" not in shown.out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--meta", "ticket"], "--meta 'ticket' is not KEY=VALUE"),
        (["--meta", "=x"], "a key is 1 to 64 printable characters"),
        (["--meta", "a=1", "--meta", "a=2"], "--meta a is given twice"),
        (["--meta", "tags=x"], "--meta tags: tags has its own option"),
        (["--meta", "description=x"], "description has its own option"),
    ],
)
def test_a_bad_meta_makes_no_task(
    inited: Path, capfd: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    res = bar(capfd, "task", "new", "never", *args)
    assert res.code == ExitCode.USAGE and said in res.err, res.err
    assert bar(capfd, "task", "list", "--json").json() == []


def test_edit_changes_each_part_and_records_each_change(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "fix", "-d", "first words", "--tag", "bug", "--meta", "team=web")
    res = bar(
        capfd,
        "task",
        "edit",
        "fix",
        "-d",
        "better words",
        "--tag",
        "urgent",
        "--untag",
        "bug",
        "--meta",
        "reviewer=ana",
        "--unset-meta",
        "team",
        "--json",
    )
    assert res.code == 0, res.err
    shown = res.json()
    changed = {
        "description": {"from": "first words", "to": "better words"},
        "reviewer": {"from": None, "to": "ana"},
        "tags": {"from": ["bug"], "to": ["urgent"]},
        "team": {"from": "web", "to": None},
    }
    assert shown["changed"] == changed and shown["id"] == t["id"]
    rec = task_json(t["id"])
    assert rec["metadata"] == {"description": "better words", "tags": ["urgent"], "reviewer": "ana"}
    assert rec["version"] == 1 and rec["updated_at"] > t["updated_at"]
    last = events()[-1]
    assert last["event"] == "task.edited" and last["task"]["id"] == t["id"]
    assert last["changed"] == changed
    text = bar(capfd, "events", "-n", "1").out
    assert "task.edited" in text and "changed description, reviewer, tags, team" in text
    # the description goes, and the words say what changed
    res = bar(capfd, "task", "edit", "-d", "")
    assert res.code == 0 and 'description: "better words" -> (none)' in res.out
    assert "description" not in task_json(t["id"])["metadata"]


def test_an_edit_that_changes_nothing_writes_nothing(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "same", "--meta", "team=web", "--tag", "a")
    before = (task_dir(t["id"]) / "task.json").read_bytes()
    count = len(events())
    res = bar(capfd, "task", "edit", "--meta", "team=web", "--tag", "a")
    assert res.code == 0 and "nothing changed" in res.out
    assert bar(capfd, "task", "edit", "--json", "--tag", "a").json()["changed"] == {}
    assert (task_dir(t["id"]) / "task.json").read_bytes() == before
    assert len(events()) == count


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "nothing to change"),
        (["--unset-meta", "nope"], "--unset-meta nope: the task has no metadata key 'nope'"),
        (["--untag", "nope"], "--untag nope: the task has no such tag"),
        (["--meta", "team=x", "--unset-meta", "team"], "contradict each other"),
        (["--unset-meta", "tags"], "tags has its own option"),
        (["--tag", " "], "a tag cannot be empty"),
    ],
)
def test_a_mistaken_edit_says_which_key_and_writes_nothing(
    inited: Path, capfd: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    t = new_task(capfd, "keep", "--meta", "team=web", "--tag", "a")
    before = (task_dir(t["id"]) / "task.json").read_bytes()
    res = bar(capfd, "task", "edit", *args)
    assert res.code == ExitCode.USAGE and said in res.err, res.err
    assert (task_dir(t["id"]) / "task.json").read_bytes() == before
    if "nope" in said and "metadata" in said:
        assert "hint: its keys: team" in res.err


def test_a_closed_task_can_be_edited_and_a_running_one_cannot(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    done = new_task(capfd, "done")
    assert bar(capfd, "task", "close", "done").code == 0
    assert bar(capfd, "task", "edit", "done", "--meta", "outcome=shipped").code == 0
    assert task_json(done["id"])["metadata"] == {"outcome": "shipped"}
    busy = new_task(capfd, "busy")
    wt = worktree(busy)
    script = "touch started; while [ ! -e go ]; do sleep 0.05; done"
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--task", "busy", "--", "sh", "-c", script],
        cwd=inited,
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
        res = bar_exe("task", "edit", "busy", "-d", "while it runs", cwd=inited)
        assert res.code == ExitCode.LOCKED and "is running a step" in res.err
        assert "edit it when the step has ended" in res.err
    finally:
        (wt / "go").touch()
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert bar(capfd, "task", "edit", "busy", "-d", "after it ran").code == 0


def test_edit_help_teaches(inited: Path) -> None:
    res = bar_exe("task", "edit", "--help", cwd=inited)
    assert res.code == 0
    for words in ("--unset-meta KEY", "--untag T", "task.edited", "bar task edit -d ''"):
        assert words in res.out, words
