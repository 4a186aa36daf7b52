"""A real agent uses ``bar mcp`` inside a confined step of ``bar run --agent``.

Claude Code (the version pinned in the Makefile, ``make agents``) runs against the
project's mock model, which calls bar's MCP tools as a model would (``mcp__bar__*``):
it reads the task's status, labels a state, asks the developer a question, starts the
task's flow and rolls back to one of its own checkpoints. Everything is then checked
from outside, in bar's record; nothing in the step could write it but its ``bar run``.
"""

from __future__ import annotations

import json
import sys
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


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_bars_tools_reach_the_first_turn_when_its_server_starts_slowly(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """On a loaded machine ``bar mcp`` may take seconds to start. The agent must wait for
    it, not begin the conversation without bar's tools (Codex leaves out an optional
    server that is not up within a second, Claude Code one not up within five)."""
    agent_binary(agent)
    new_task(capfd)
    slow = tmp_path / "bin" / "bar"  # bar, starting its MCP server six seconds late
    slow.parent.mkdir()
    slow.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        "if sys.argv[1:2] == ['mcp']:\n    time.sleep(6)\n"
        "from bar.cli.entry import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    slow.chmod(0o755)
    with MockServer([Answer("Nothing to do.")]) as server:
        setup = AgentSetup(agent, server.url)
        res = setup.run_in_bar(inited, "nothing", bar=str(slow))
        first = next(r for r in server.model.requests if r.main)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "status" in _bar_tools(first.body), json.dumps(first.body)[:4000]


def _bar_tools(body: dict[str, Any]) -> set[str]:
    """The names of bar's MCP tools a model request offers, in each agent's naming."""
    names: set[str] = set()
    for tool in body.get("tools", []) or []:
        for decl in tool.get("functionDeclarations", []) or []:  # Gemini
            names.add(decl["name"])
        if tool.get("name") == "mcp__bar":  # Codex: one namespace per server
            names |= {f"mcp__bar__{t['name']}" for t in tool.get("tools", [])}
        else:  # Claude Code
            names.add(str(tool.get("name", "")))
    prefixes = ("mcp__bar__", "mcp_bar_")  # Claude Code's and Gemini's
    return {n.removeprefix(p) for n in names for p in prefixes if n.startswith(p)}
