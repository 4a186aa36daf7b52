"""``bar export --format atif``: a task's agent sessions as an ATIF trajectory
(``bar.formats.atif``). Every document is checked by the Harbor project's own validator
(``harbor.utils.trajectory_validator``, the reference models of ATIF), never by a copy of
its rules; then what it says is checked against what bar recorded. The sessions are
real steps: ``bar run --agent claude`` of a stand-in that writes Claude Code's transcript
and calls bar's hooks (tests/support/session_writer.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    ledger,
    new_task,
    run_fake_agent,
    run_sh,
    run_writer,
    set_config,
    worktree,
)

validator = pytest.importorskip("harbor.utils.trajectory_validator")

MODEL = "claude-sonnet-4-5"
SECRET = "s3cr3t-value-of-the-api-key-0451"

SCRIPT: list[dict[str, Any]] = [
    {"prompt": f"Add a discount; the key is {SECRET}"},
    {"say": "I will write the discount module first."},
    {"write": "discount.py", "text": "RATE = 0.1\n"},
    {"tool": "Read", "input": {"file_path": "missing.py"}, "result": "no such file", "ok": False},
    {"subagent": "Explore", "turns": [{"prompt": "find the tests"}, {"say": "tests/ has 3"}]},
    {"interrupt": True},
    {"prompt": "also round it"},
    {"write": "cart.py", "text": "def total(items):\n    return round(sum(items), 2)\n"},
    {"say": "Done."},
]


def valid(doc: dict[str, Any], tmp_path: Path) -> None:
    """The Harbor validator accepts ``doc`` (as a file, as a reader gets it)."""
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(doc))
    check = validator.TrajectoryValidator()
    assert check.validate(path), check.get_errors()


@pytest.fixture
def agent_task(
    inited_clean: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    """A task: a plain step, then two agent sessions (the script, then a short one)."""
    monkeypatch.setenv("MY_API_KEY", SECRET)
    set_config(agents={"prices": {MODEL: {"input": 3, "output": 15, "cache_read": 0.3}}})
    t = new_task(capfd)
    wt = worktree(t)
    run_sh(capfd, "echo plain > plain.txt")
    run_writer(wt, tmp_path, SCRIPT, "long")
    run_writer(wt, tmp_path, [{"prompt": "say hi"}, {"say": "hi"}], "short")
    return t


def export(capfd: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    res = bar(capfd, "export", "--format", "atif", *args)
    assert res.code == 0, res.err
    doc: dict[str, Any] = json.loads(res.out)
    return doc


def test_a_task_is_bars_trajectory_with_each_session_embedded(
    agent_task: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    doc = export(capfd)
    valid(doc, tmp_path)
    assert doc["schema_version"] == "ATIF-v1.7"
    assert doc["agent"]["name"] == "bar"
    steps = ledger(agent_task["id"])
    agent_steps = [s for s in steps if s.get("session")]
    assert [s["step_id"] for s in agent_steps] == ["0002", "0003"]  # not the plain step
    # one dispatch per agent step, each referring to its session's trajectory
    assert len(doc["steps"]) == 2
    sessions = {t["trajectory_id"]: t for t in doc["subagent_trajectories"]}
    for dispatch, step in zip(doc["steps"], agent_steps, strict=True):
        assert dispatch["llm_call_count"] == 0
        (call,) = dispatch["tool_calls"]
        assert call["function_name"] == "bar.run" and call["arguments"]["cmd"] == step["cmd"]
        (result,) = dispatch["observation"]["results"]
        (ref,) = result["subagent_trajectory_ref"]
        session = sessions[ref["trajectory_id"]]
        assert session["session_id"] == step["session"]["session_id"] == ref["session_id"]
        assert result["extra"]["exit_code"] == step["exit_code"]
    # the totals are the ledger's, the cost only because every answer is priced
    total = doc["final_metrics"]
    assert total["total_completion_tokens"] == sum(
        s["session"]["output_tokens"] for s in agent_steps
    )
    assert total["total_cached_tokens"] == sum(
        s["session"]["cache_read_tokens"] for s in agent_steps
    )
    assert total["total_cost_usd"] == pytest.approx(
        sum(s["session"]["cost_usd"] for s in agent_steps), abs=1e-6
    )


def test_a_sessions_steps_follow_its_events(
    agent_task: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    doc = export(capfd, "--step", "2")
    valid(doc, tmp_path)
    step = ledger(agent_task["id"])[1]
    assert doc["trajectory_id"] == f"bar://task/{agent_task['id']}/step/0002"
    assert doc["agent"] == {
        "name": "claude",
        "version": doc["agent"]["version"],
        "model_name": MODEL,
    }
    said = [(s["source"], s["message"]) for s in doc["steps"] if s["source"] != "agent"]
    assert said[0] == ("user", "Add a discount; the key is ***")  # scrubbed, as recorded
    assert ("system", "The person stopped the agent mid-turn.") in said
    assert said[-1] == ("user", "also round it")
    calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for s in doc["steps"]:
        for c in s.get("tool_calls", []):
            calls.setdefault(c["function_name"], (s, c))  # the first call of each tool
    assert set(calls) >= {"Write", "Read", "Task"}
    # a call and its result on one step; the checkpoint a write made; a failed tool
    write_step, write = calls["Write"]
    assert write["extra"]["checkpoint"] == "0002.1"
    (result,) = write_step["observation"]["results"]
    assert result["source_call_id"] == write["tool_call_id"] and result["extra"]["ok"] is True
    read_step, read = calls["Read"]
    failed = next(
        r
        for r in read_step["observation"]["results"]
        if r["source_call_id"] == read["tool_call_id"]
    )
    assert failed == {
        "source_call_id": read["tool_call_id"],
        "content": "no such file",
        "extra": {"ok": False},
    }
    # every answer's tokens on its step (the subagent's on its own); together, the session's
    (sub,) = doc["subagent_trajectories"]
    answers = [s for t in (doc, sub) for s in t["steps"] if "metrics" in s]
    assert all(s["llm_call_count"] == 1 and s["model_name"] == MODEL for s in answers)
    session = step["session"]
    assert len(answers) == session["turns"]
    prompt = sum(s["metrics"]["prompt_tokens"] for s in answers)
    assert (
        prompt
        == doc["final_metrics"]["total_prompt_tokens"]
        == (
            session["input_tokens"]
            + session["cache_read_tokens"]
            + session.get("cache_write_tokens", 0)
        )
    )
    assert doc["final_metrics"]["total_cost_usd"] == pytest.approx(session["cost_usd"])
    # the subagent: its own trajectory, which the Task call that started it refers to
    assert sub["agent"]["name"] == "Explore"
    assert [(s["source"], s["message"]) for s in sub["steps"]] == [
        ("user", "find the tests"),
        ("agent", "tests/ has 3"),
    ]
    task_step, task_call = calls["Task"]
    refs = [
        ref
        for r in task_step["observation"]["results"]
        if r.get("source_call_id") == task_call["tool_call_id"]
        for ref in r.get("subagent_trajectory_ref", [])
    ]
    assert refs == [{"trajectory_id": sub["trajectory_id"]}]


def test_nothing_secret_leaves(
    agent_task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    for args in ((), ("--step", "2")):
        res = bar(capfd, "export", "--format", "atif", *args)
        assert res.code == 0 and SECRET not in res.out and "***" in res.out


def test_writes_a_file_whole(
    agent_task: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json"
    res = bar(capfd, "export", "--format", "atif", "-o", str(out))
    assert res.code == 0, res.err
    assert "Wrote an ATIF trajectory (2 agent sessions) of task t1" in res.out
    valid(json.loads(out.read_text()), tmp_path)
    assert not list(tmp_path.glob(".t.json.part"))


def test_a_task_or_step_without_a_session_is_refused(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run_sh(capfd, "echo plain > plain.txt")
    res = bar(capfd, "export", "--format", "atif")
    assert res.code == 3 and "has no agent session to export" in res.err
    assert "bar run --agent" in res.err
    res = bar(capfd, "export", "--format", "atif", "--step", "1")
    assert res.code == 3 and "step 0001 of task t1 kept no agent session" in res.err
    res = bar(capfd, "export", "--format", "agent-trace", "--step", "1")
    assert res.code == 2 and "--step goes with --format atif or otel" in res.err


@pytest.mark.parametrize(
    "agent, tools",
    [("codex", ["exec_command"] * 2), ("gemini", ["write_file", "run_shell_command"])],
)
def test_codex_and_gemini_sessions_are_trajectories_too(
    inited_clean: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    agent: str,
    tools: list[str],
) -> None:
    t = new_task(capfd)
    run_fake_agent(agent, worktree(t), tmp_path, "do it", "write:a.txt=hello", "echo b >> a.txt")
    doc = export(capfd, "--step", "1")
    valid(doc, tmp_path)
    assert doc["agent"]["name"] == agent
    assert [s["source"] for s in doc["steps"]] == ["user", "agent", "agent", "agent"]
    calls = [c for s in doc["steps"] for c in s.get("tool_calls", [])]
    assert [c["function_name"] for c in calls] == tools
    for s in doc["steps"][1:3]:  # each call's result on the step that made it
        (result,) = s["observation"]["results"]
        assert result["source_call_id"] == s["tool_calls"][0]["tool_call_id"]
    session = ledger(t["id"])[0]["session"]
    assert doc["final_metrics"]["total_completion_tokens"] == session["output_tokens"]
