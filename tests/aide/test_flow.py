"""bar flow: the seed's FlowStatus (with only the seed's keys and times) and commit
messages, bar's own states beside it, the errors, --rollback, bar log's phases, a flow
action from inside a running step, and the file an older bar wrote."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BAR_EXE,
    bar,
    bar_exe,
    files_in_commit,
    ledger,
    new_task,
    set_config,
    task_dir,
    worktree,
)

from bar.aide import flow
from bar.errors import ExitCode
from conftest import git


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert bar(capfd, "init").code == 0
    return new_task(capfd)


def flow_file(t: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((task_dir(t["id"]) / "flow-status.json").read_bytes())
    return data


def states_file(t: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((task_dir(t["id"]) / "flow-states.json").read_bytes())
    return data


# seed 004 §6: ISO 8601 to the second with the offset; task_id as a file name's timestamp
SEED_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d")
SEED_ID = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d")
SEED_ENTRY = {"timestamp", "action", "phase", "step", "summary", "git_commit"}


def message_of(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%B", commit).strip()


def test_the_seed_history_through_the_commands(
    task: dict[str, Any], repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    script = [
        ("start", "开始任务: 实现用户认证模块", None),
        ("next-step", "流程图设计完成", "flow.puml"),
        ("next-part", "流程设计完成，开始实现", None),
        ("issue", "测试覆盖率较低，后续需要补充", None),
        ("next-step", "完成用户模型定义", "user.py"),
    ]
    for action, summary, made in script:
        if made:
            (wt / made).write_text(f"{made}\n")
        res = bar(capfd, "flow", action, summary)
        assert res.code == 0, res.err
    status = flow_file(task)
    assert list(status) == ["task_id", "current_phase", "current_step", "started_at", "history"]
    assert (status["current_phase"], status["current_step"]) == ("impl", 5)
    assert SEED_ID.fullmatch(status["task_id"]) and SEED_TIME.fullmatch(status["started_at"])
    assert status["started_at"] == status["history"][0]["timestamp"]
    seed = [
        ("start", "flow-design", 1),
        ("next-step", "flow-design", 2),
        ("next-part", "impl", 3),
        ("issue", "impl", 4),
        ("next-step", "impl", 5),
    ]
    assert [(e["action"], e["phase"], e["step"]) for e in status["history"]] == seed
    for entry, (_, summary, _) in zip(status["history"], script, strict=True):
        assert set(entry) == SEED_ENTRY and SEED_TIME.fullmatch(entry["timestamp"])
        assert entry["summary"] == summary
    messages = [message_of(repo, e["git_commit"]) for e in status["history"]]
    assert messages == [
        "[bar] flow-design: 开始任务: 实现用户认证模块",
        "[bar] flow-design: 流程图设计完成",
        "[bar] impl: 流程设计完成，开始实现",
        "[bar] impl issue: 测试覆盖率较低，后续需要补充",
        "[bar] impl: 完成用户模型定义",
    ]
    # each commit holds the worktree of its moment: the hand edits were recorded first
    last = files_in_commit(repo, status["history"][-1]["git_commit"])
    assert last["user.py"] == b"-:user.py\n" and "user.py" not in files_in_commit(
        repo, status["history"][3]["git_commit"]
    )
    assert [s["kind"] for s in ledger(task["id"])] == ["manual", "manual"]
    # kept reachable: refs/bar/flow/<id>/ holds the commits made for the flow's messages
    kept = git(repo, "for-each-ref", "--format=%(objectname)", f"refs/bar/flow/{task['id']}/")
    assert {e["git_commit"] for e in status["history"]} <= set(kept.split())
    assert bar(capfd, "flow", "status", "--json").json() == status
    # bar's own file: each entry's state (what --rollback returns to) and exact time
    kept = states_file(task)
    assert kept["version"] == 1
    assert [e["git_commit"] for e in kept["entries"]] == [
        e["git_commit"] for e in status["history"]
    ]
    assert [e["state"] for e in kept["entries"]] == ["base", "0001", "0001", "0001", "0002"]
    assert all(e["at"].endswith("Z") and "." in e["at"] for e in kept["entries"])
    shown = bar(capfd, "flow", "status").out
    assert "phase impl, step 5" in shown and "完成用户模型定义" in shown
    # bar log: a header per phase; --json: each step's phase
    log = bar(capfd, "log").out.splitlines()
    assert log[0] == "phase flow-design" and log[2] == "phase impl"
    assert [s["phase"] for s in bar(capfd, "log", "--json").json()] == ["flow-design", "impl"]
    assert flow.phase_of(status["history"], "2000-01-01T00:00:00.000Z") is None


def test_each_error_says_so_and_changes_nothing(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "flow", "next-step", "too early")
    assert (
        res.code == ExitCode.ERROR and "has not started" in res.err and "bar flow start" in res.err
    )
    assert not (task_dir(task["id"]) / "flow-status.json").exists()
    set_config(flow={"phases": ["design", "build"]})
    assert bar(capfd, "flow", "start", "go").code == 0
    for args, said in (
        (["start", "again"], "has started already"),
        (["back-part", "no"], "design is the first phase"),
        (["back-step", "no"], "no step to go back to in phase design"),
        (["back-part", "--to", "build", "no"], "build is not a phase before design"),
    ):
        res = bar(capfd, "flow", *args)
        assert res.code == ExitCode.ERROR and said in res.err, (args, res.err)
    assert bar(capfd, "flow", "next-part", "built").code == 0
    res = bar(capfd, "flow", "next-part", "past the end")
    assert res.code == ExitCode.ERROR and "build is the last phase" in res.err
    assert len(flow_file(task)["history"]) == 2
    set_config(flow={"phases": ["a b"]})
    assert bar(capfd, "flow", "status").code == ExitCode.CORRUPT


def test_back_step_and_back_part_roll_back_when_asked(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "flow", "start", "begin").code == 0
    (wt / "design.md").write_text("v1\n")
    assert bar(capfd, "flow", "next-step", "designed").code == 0
    assert bar(capfd, "flow", "next-part", "to impl").code == 0
    (wt / "code.py").write_text("one\n")
    assert bar(capfd, "flow", "next-step", "first code").code == 0
    (wt / "more.py").write_text("two\n")
    assert bar(capfd, "flow", "next-step", "more code").code == 0
    # back-step without --rollback: only the record moves
    assert bar(capfd, "flow", "back-step", "more.py is wrong").code == 0
    assert (wt / "more.py").exists()
    res = bar(capfd, "flow", "back-step", "--rollback", "the first code too", "--json")
    assert res.code == 0, res.err
    done = res.json()
    assert done["rollback"]["kind"] == "rollback" and done["entry"]["phase"] == "impl"
    assert sorted(p.name for p in wt.iterdir() if p.name not in (".git", ".aide")) == [
        "README.md",
        "design.md",
    ]
    assert message_of(task_repo(task), done["entry"]["git_commit"]) == (
        "[bar] impl back-step: the first code too"
    )
    # an ordinary rollback step: undoable
    assert bar(capfd, "undo").code == 0 and (wt / "more.py").exists()
    res = bar(capfd, "flow", "back-part", "--rollback", "redesign", "--json")
    assert res.code == 0, res.err
    assert res.json()["flow"]["current_phase"] == "flow-design"
    assert sorted(p.name for p in wt.iterdir() if p.name not in (".git", ".aide")) == ["README.md"]
    assert bar(capfd, "flow", "next-step", "--rollback", "x").code == ExitCode.USAGE


def task_repo(t: dict[str, Any]) -> Path:
    return Path(t["repo_root"])


def test_a_flow_action_inside_a_running_step_is_a_checkpoint_of_it(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "flow", "start", "begin").code == 0
    res = bar_exe(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        "echo v1 > model.py && bar flow next-step 'finished the user model' && "
        "echo v2 > model.py && bar flow next-step 'tuned it' && bar flow issue 'slow' && "
        "echo v3 > model.py && bar flow back-step --rollback 'v2 was wrong'",
        cwd=worktree(task),
        env={"PATH": f"{Path(BAR_EXE).parent}:{os.environ['PATH']}"},
    )
    assert res.code == 0, res.err
    status = flow_file(task)
    history = status["history"]
    assert all(set(e) == SEED_ENTRY for e in history)
    states = [e["state"] for e in states_file(task)["entries"]]
    assert states == ["base", "0001.1", "0001.2", "0001.3", "0001.6"]
    assert (
        message_of(task_repo(task), history[1]["git_commit"])
        == "[bar] flow-design: finished the user model"
    )
    assert message_of(task_repo(task), history[3]["git_commit"]) == "[bar] flow-design issue: slow"
    (step,) = ledger(task["id"])
    assert step["checkpoints"] == 6  # 3 flow entries, residual, rollback, the back-step's own
    assert (worktree(task) / "model.py").read_text() == "v1\n"
    log = bar(capfd, "log", "--json").json()
    assert log[0]["phase"] == "flow-design"


def test_the_file_an_older_bar_wrote_is_read_and_written_back_in_the_seeds_shape(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "flow", "start", "begin").code == 0
    (wt / "model.py").write_text("v1\n")
    assert bar(capfd, "flow", "next-step", "the model").code == 0
    (wt / "model.py").write_text("v2\n")
    assert bar(capfd, "flow", "next-step", "a new rate").code == 0
    # as an older bar wrote it: its task id, times to the millisecond, `state` in each entry
    kept = states_file(task)["entries"]
    old = flow_file(task)
    old["task_id"] = task["id"]
    for entry, mine in zip(old["history"], kept, strict=True):
        moment = datetime.fromisoformat(mine["at"]).astimezone()
        entry["timestamp"] = moment.isoformat(timespec="milliseconds")
        entry["state"] = mine["state"]
    old["started_at"] = old["history"][0]["timestamp"]
    path = task_dir(task["id"]) / "flow-status.json"
    path.write_text(json.dumps(old, indent=2))
    (task_dir(task["id"]) / "flow-states.json").unlink()
    # read: in the seed's shape, the file left as it is
    shown = bar(capfd, "flow", "status", "--json").json()
    assert all(
        set(e) == SEED_ENTRY and SEED_TIME.fullmatch(e["timestamp"]) for e in shown["history"]
    )
    assert shown["task_id"] == task["id"] and json.loads(path.read_text()) == old
    assert [s["phase"] for s in bar(capfd, "log", "--json").json()] == ["flow-design"] * 2
    # the old entries' states are what --rollback returns to
    res = bar(capfd, "flow", "back-step", "--rollback", "the rate was right", "--json")
    assert res.code == 0, res.err
    assert (wt / "model.py").read_text() == "v1\n"
    # written back: the seed's keys and times only, bar's states and times in its own file
    new = flow_file(task)
    assert new["task_id"] == task["id"] and SEED_TIME.fullmatch(new["started_at"])
    assert all(set(e) == SEED_ENTRY and SEED_TIME.fullmatch(e["timestamp"]) for e in new["history"])
    again = states_file(task)["entries"]
    assert [e["state"] for e in again[:3]] == [e["state"] for e in old["history"]]
    assert [e["at"] for e in again[:3]] == [e["timestamp"] for e in old["history"]]
    assert again[3]["state"] == res.json()["entry"]["state"]


def test_the_repository_may_name_the_phases_and_yours_win(
    task: dict[str, Any], repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (repo / ".bar" / "config.yaml").write_text("version: 1\nflow:\n  phases: [spec, code]\n")
    assert bar(capfd, "flow", "start", "go", "--json").json()["flow"]["current_phase"] == "spec"
    set_config(flow={"phases": ["mine", "yours"]})
    res = bar(capfd, "flow", "next-part", "on", "--json")
    assert res.code == ExitCode.ERROR and "spec is not one of flow.phases (mine, yours)" in res.err


def test_help_teaches_with_examples() -> None:
    for action in (*flow.ACTIONS, "status"):
        res = bar_exe("flow", action, "--help")
        assert res.code == 0 and "example" in res.out, action
