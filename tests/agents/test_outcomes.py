"""The ledger says what became of each command an agent ran, never what bar asked for
(docs/agents.md, "What a step records"), with the released CLIs against the mock models: a
Codex command that failed is "failed" (its post-tool event carries no exit code: its rollout
does), one the model left running is "ran" (no post-tool event follows it at all), and a
command Gemini CLI blocked itself is "refused". A call made in a subagent names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, task_dir, worktree
from mock_models import Answer, MockServer, Shell, Tool
from test_real_agents import AgentSetup, agent_binary


def _outcomes(task_id: str) -> dict[str, str | None]:
    (step,) = ledger(task_id)
    return {e["command"]: e.get("outcome") for e in step["policy_events"]}


def test_codex_outcomes_come_from_its_rollout(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("codex")
    t = new_task(capfd)
    failing = "sh -c 'echo out; exit 3'"
    left = "sleep 1; echo later > later.txt"
    script = [
        Shell(failing),
        Tool("exec_command", {"cmd": left, "yield_time_ms": 250}),  # returns while it runs
        Shell("echo fine > fine.txt"),
        Answer("Done."),
    ]
    with MockServer(script) as server:
        res = AgentSetup("codex", server.url).run_in_bar(inited, "work")
        results = server.model.tool_results("openai")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Process running with session ID" in results[1], results
    assert _outcomes(t["id"]) == {failing: "failed", left: "ran", "echo fine > fine.txt": "ran"}


def test_a_command_gemini_blocked_itself_is_refused(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("gemini")
    t = new_task(capfd)
    blocked = "echo $(whoami) > who.txt"  # Gemini CLI refuses command substitution
    failing = "sh -c 'exit 3'"
    script = [Shell(blocked), Shell(failing), Shell("echo hi > hi.txt"), Answer("Done.")]
    with MockServer(script) as server:
        res = AgentSetup("gemini", server.url).run_in_bar(inited, "work")
    assert res.returncode == 0, res.stdout + res.stderr
    assert not (worktree(t) / "who.txt").exists()
    assert _outcomes(t["id"]) == {blocked: "refused", failing: "failed", "echo hi > hi.txt": "ran"}


def test_a_call_made_in_a_subagent_names_it(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Claude Code sends ``agent_id`` and ``agent_type`` in the hook events of a call
    made in a subagent (its Task tool): the policy event and the checkpoint keep them.
    Events any process can send: one whose call is in no transcript of the agent's is
    marked unverified."""
    t = new_task(capfd)
    base = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(worktree(t)),
        "tool_name": "Bash",
        "tool_use_id": "toolu_7",
        "agent_id": "a3f",
        "agent_type": "Explore",
        "tool_input": {"command": "echo sub > sub.txt"},
    }
    pre = json.dumps({**base, "hook_event_name": "PreToolUse"})
    post = json.dumps(
        {**base, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "", "stderr": ""}}
    )
    agent = tmp_path / "claude"
    agent.write_text(
        f"#!/bin/sh\nprintf '%s' '{pre}' | {BAR_EXE} hook claude\n"
        f"echo sub > sub.txt\nprintf '%s' '{post}' | {BAR_EXE} hook claude\n"
    )
    agent.chmod(0o755)
    res = bar_exe("run", "--no-pty", "--agent", "claude", "--", str(agent), cwd=inited)
    assert res.code == 0, res.err
    (step,) = ledger(t["id"])
    (event,) = step["policy_events"]
    assert (event["agent_id"], event["agent_type"], event["outcome"]) == ("a3f", "Explore", "ran")
    lines = (task_dir(t["id"]) / "artifacts" / "0001.checkpoints.jsonl").read_text().splitlines()
    (checkpoint,) = [json.loads(line) for line in lines]
    assert (checkpoint["agent_id"], checkpoint["agent_type"]) == ("a3f", "Explore")
    assert checkpoint["diff_stat"]["file_list"] == ["sub.txt"]
    # no agent wrote a transcript with this call: a process made it up, and it shows
    assert checkpoint["verified"] is False
    log = bar(capfd, "log", "--tools")
    assert "unverified" in log.out, log.out
