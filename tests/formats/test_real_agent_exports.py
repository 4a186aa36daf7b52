"""The field's formats of sessions the released agent CLIs really ran: Claude Code, Codex
CLI and Gemini CLI (``make agents``) against a scripted mock model, through ``bar run``,
then exported. Each ATIF document passes Harbor's validator and says what the session
did; the OTLP/JSON export parses into OpenTelemetry's own protobuf message with a tool
span per call; a Claude subagent is a trajectory of its own, referred to by the call
that started it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, ledger, new_task, worktree
from mock_models import Answer, MockServer, Shell, Tool, WriteFile
from real_agents import AgentSetup, agent_binary

validator = pytest.importorskip("harbor.utils.trajectory_validator")
pytest.importorskip("opentelemetry.sdk")
from google.protobuf.json_format import ParseDict  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)


def _valid(doc: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(doc))
    check = validator.TrajectoryValidator()
    assert check.validate(path), check.get_errors()


def _spans(doc: dict[str, Any]) -> list[Any]:
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    request = ParseDict(doc, ExportTraceServiceRequest())
    return [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_real_agents_session_exports_as_atif_and_spans(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary(agent)
    t = new_task(capfd)
    wt = worktree(t)
    script = [
        WriteFile(str(wt / "notes.txt"), "alpha\n"),
        Shell("echo done > done.txt"),
        Answer("Both written."),
    ]
    with MockServer(script, usage=(120, 7, 30)) as server:
        res = AgentSetup(agent, server.url).run_in_bar(inited, "write the notes")
    assert res.returncode == 0, res.stdout + res.stderr
    (step,) = ledger(t["id"])

    res = bar(capfd, "export", "--format", "atif", "--step", "1")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    _valid(doc, tmp_path)
    assert doc["agent"]["name"] == agent and doc["session_id"] == step["session"]["session_id"]
    assert doc["steps"][0] == {**doc["steps"][0], "source": "user", "message": "write the notes"}
    calls = [(s, c) for s in doc["steps"] for c in s.get("tool_calls", [])]
    assert [c.get("extra", {}).get("checkpoint") for _, c in calls] == ["0001.1", "0001.2"]
    for s, c in calls:  # each call's result on the step that made it
        ids = [r.get("source_call_id") for r in s["observation"]["results"]]
        assert c["tool_call_id"] in ids
    answers = [s for s in doc["steps"] if "metrics" in s]
    assert (
        sum(s["metrics"]["completion_tokens"] for s in answers) == step["session"]["output_tokens"]
    )
    assert doc["steps"][-1]["message"] == "Both written."

    res = bar(capfd, "export", "--format", "otel")
    assert res.code == 0, res.err
    spans = _spans(json.loads(res.out))
    names = [s.name for s in spans]
    assert f"invoke_agent {agent}" in names
    assert len([n for n in names if n.startswith("execute_tool ")]) == 2


def test_a_real_claude_subagent_is_a_trajectory_of_its_own(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("claude")
    t = new_task(capfd)
    wt = worktree(t)
    delegate = Tool(
        "Agent",
        {
            "description": "write the file",
            "prompt": "SUBTASK: write sub.txt",
            "subagent_type": "general-purpose",
        },
    )
    with MockServer(
        [delegate, Answer("the subagent did it")],
        subscripts={
            "SUBTASK": [WriteFile(str(wt / "sub.txt"), "from the subagent\n"), Answer("sub done")]
        },
    ) as server:
        res = AgentSetup("claude", server.url).run_in_bar(inited, "delegate it")
    assert res.returncode == 0, res.stdout + res.stderr
    res = bar(capfd, "export", "--format", "atif", "--step", "1")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    _valid(doc, tmp_path)
    (sub,) = doc["subagent_trajectories"]
    assert sub["agent"]["name"] == "general-purpose"
    assert [c["function_name"] for s in sub["steps"] for c in s.get("tool_calls", [])] == ["Write"]
    refs = [
        ref["trajectory_id"]
        for s in doc["steps"]
        for c in s.get("tool_calls", [])
        if c["function_name"] == "Agent"
        for r in s["observation"]["results"]
        if r.get("source_call_id") == c["tool_call_id"]
        for ref in r.get("subagent_trajectory_ref", [])
    ]
    assert refs == [sub["trajectory_id"]]
