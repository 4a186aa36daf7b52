"""A real agent uses ``bar mcp`` inside a confined step of ``bar run --agent``.

Claude Code (the version pinned in the Makefile, ``make agents``) runs against the
project's mock model, which calls bar's MCP tools as a model would (``mcp__bar__*``):
it reads the task's status, labels a state, asks the developer a question, starts the
task's flow and rolls back to one of its own checkpoints. Everything is then checked
from outside, in bar's record; nothing in the step could write it but its ``bar run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, ledger, new_task, task_dir, worktree
from mock_models import Answer, MockServer, Shell, Tool, WriteFile
from test_real_agents import AgentSetup, agent_binary

QUESTION = {
    "task": "t1",
    "source": "claude",
    "items": [
        {
            "id": 1,
            "title": "Keep the notes short?",
            "options": [
                {"value": "yes", "label": "Yes", "score": 70, "pros": ["quick"]},
                {"value": "no", "label": "No"},
            ],
            "recommend": "yes",
        }
    ],
}


def test_claude_steers_its_own_task_through_bar_mcp(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("claude")
    t = new_task(capfd)
    wt = worktree(t)
    notes = wt / "notes.txt"
    script = [
        Tool("mcp__bar__status"),
        WriteFile(str(notes), "first\n"),  # checkpoint 1.1
        Tool("mcp__bar__checkpoint", {"label": "notes written"}),  # 1.2
        Shell("echo second >> notes.txt"),  # 1.3
        Tool("mcp__bar__rollback", {"to": "1.1"}),  # 1.4: back to "first"
        Tool("mcp__bar__log", {"n": 1}),
        Tool("mcp__bar__decide_submit", {"input": QUESTION}),
        Tool("mcp__bar__flow", {"action": "start", "summary": "write the notes"}),
        Answer("All done."),
    ]
    with MockServer(script) as server:
        setup = AgentSetup("claude", server.url)
        res = setup.run_in_bar(inited, "keep notes")
        results = server.model.tool_results("anthropic")
        tools = next(r for r in server.model.requests if r.main).body["tools"]
    assert res.returncode == 0, res.stdout + res.stderr
    assert {f"mcp__bar__{n}" for n in ("status", "checkpoint", "rollback", "flow")} <= {
        tool["name"] for tool in tools
    }  # from the first turn on: the server is connected before the model is asked
    assert len(results) == 8 and not [r for r in results if r.endswith("[is_error]")], results
    status = json.loads(results[0])
    assert status["task"]["id"] == t["id"] and status["running"]["step_id"] == "0001"

    # from outside: the step, its checkpoints, the decision and the flow are recorded
    (step,) = ledger(t["id"])
    assert step["exit_code"] == 0 and step["sandbox"]["enabled"] is True
    assert notes.read_text() == "first\n"  # the rollback through bar mcp
    log = bar(capfd, "log", "--tools")
    assert log.code == 0
    assert "notes written" in log.out, log.out
    cps: list[dict[str, Any]] = bar(capfd, "log", "--json").json()[0]["checkpoint_list"]
    (back,) = [c for c in cps if c["kind"] == "rollback"]
    assert back["target"].endswith("1.1"), cps
    pending = json.loads((task_dir(t["id"]) / "decisions" / "pending.json").read_text())
    assert pending["items"] == QUESTION["items"] and pending["_meta"]["session_id"]
    flow = json.loads((task_dir(t["id"]) / "flow-status.json").read_text())
    assert [(h["action"], h["summary"]) for h in flow["history"]] == [("start", "write the notes")]
    # bar's MCP entries went with its hooks
    assert not (wt / ".claude").exists() and not (wt / ".mcp.json").exists()
