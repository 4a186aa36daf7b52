"""The sessions of the released agent CLIs, kept by bar (docs/sessions.md).

Each test drives a real agent (``make agents``) against a scripted mock model that says
known things and reports known token counts, and checks what bar kept of the session:
the prompt, the replies and the tool calls in order, each call linked to the checkpoint
it made, the mock's token counts, secrets masked; a budget below the scripted usage
stops the agent and says why; a resumed Claude session continues its record in the new
step; a Claude subagent's calls carry its id.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, ledger, new_task, task_dir, worktree
from mock_models import Answer, MockServer, Shell, Stall, Tool, WriteFile
from real_agents import AgentSetup, agent_binary

SECRET = "ghp_" + "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"  # a GitHub token's shape
USAGE = (120, 7, 30)  # each answer: fresh input, output, cached input


def session(t: dict[str, Any], step: str = "0001") -> list[dict[str, Any]]:
    path = task_dir(t["id"]) / f"artifacts/{step}.session.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_real_agents_session_is_kept_with_its_calls_and_tokens(
    agent: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary(agent)
    t = new_task(capfd)
    wt = worktree(t)
    script = [
        WriteFile(str(wt / "notes.txt"), "alpha\n"),
        Shell(f"echo {SECRET} > token.txt; echo token written"),
        Answer("I wrote the notes and the token."),
    ]
    prompt = f"write the notes; the deploy key is {SECRET}"
    with MockServer(script, usage=USAGE) as server:
        res = AgentSetup(agent, server.url).run_in_bar(inited, prompt)
    assert res.returncode == 0, res.stdout + res.stderr
    (step,) = ledger(t["id"])
    events = session(t)
    raw = (task_dir(t["id"]) / "artifacts/0001.session.jsonl").read_text()
    assert SECRET not in raw and "***" in raw  # in the prompt and in the tool's result

    talk = [(e["type"], e.get("role")) for e in events if e["type"] in ("message", "tool_call")]
    assert talk == [
        ("message", "user"),
        ("tool_call", None),
        ("tool_call", None),
        ("message", "assistant"),
    ]
    prompt_event = next(e for e in events if e["type"] == "message")
    assert prompt_event["text"] == prompt.replace(SECRET, "***")
    assert events[-1]["type"] in ("message", "usage")
    reply = [e for e in events if e["type"] == "message"][-1]
    assert reply["text"] == "I wrote the notes and the token."

    calls = [e for e in events if e["type"] == "tool_call"]
    results = {e["id"]: e for e in events if e["type"] == "tool_result"}
    assert [c["checkpoint"] for c in calls] == ["0001.1", "0001.2"]
    assert all(results[c["id"]]["ok"] for c in calls)
    assert "token written" in results[calls[1]["id"]]["summary"]
    # the first call's checkpoint patch is the edit that call made
    cps = [
        json.loads(x)
        for x in (task_dir(t["id"]) / step["artifacts"]["checkpoints"]).read_text().splitlines()
    ]
    first = next(c for c in cps if c.get("checkpoint") == "0001.1")
    assert first["diff_stat"]["file_list"] == ["notes.txt"]
    assert "+alpha" in (task_dir(t["id"]) / first["patch"]).read_text()
    listed = bar(capfd, "log", "--json").json()[0]["checkpoint_list"]  # (amends applied)
    assert [c["call_id"] for c in listed] == [c["id"] for c in calls]  # linked both ways

    usages = [e for e in events if e["type"] == "usage"]
    assert len(usages) == 3  # one per answer of the model
    assert {(u["input_tokens"], u["output_tokens"], u["cache_read_tokens"]) for u in usages} == {
        USAGE
    }
    s = step["session"]
    assert (s["agent"], s["turns"], s["tool_calls"]) == (agent, 3, 2)
    assert (s["input_tokens"], s["output_tokens"], s["cache_read_tokens"]) == (360, 21, 90)
    assert s["session_id"] and s["model"] and s["agent_version"]
    assert "cost_usd" not in s  # no price given: never guessed
    assert step["artifacts"]["session"] == "artifacts/0001.session.jsonl"


def test_a_price_table_gives_each_answer_its_cost(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("claude")
    t = new_task(capfd)
    config = Path(bar(capfd, "status", "--json").json()["config"])
    with config.open("a") as f:
        f.write("  prices:\n    'claude-*': {input: 3, output: 15, cache_read: 0.3}\n")
    text = config.read_text().replace("  prices: {}", "", 1)
    config.write_text(text)
    with MockServer([Answer("Nothing to do.")], usage=USAGE) as server:
        res = AgentSetup("claude", server.url).run_in_bar(inited, "look")
    assert res.returncode == 0, res.stdout + res.stderr
    (step,) = ledger(t["id"])
    (usage,) = [e for e in session(t) if e["type"] == "usage"]
    expected = round((120 * 3 + 7 * 15 + 30 * 0.3) / 1_000_000, 6)
    assert usage["cost_usd"] == expected and step["session"]["cost_usd"] == expected


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_budget_below_the_scripted_usage_stops_the_agent(
    agent: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each answer is 15 tokens; past 40 the agent's next tool call is refused and the
    agent is stopped: the later commands never run, and the step says why."""
    agent_binary(agent)
    t = new_task(capfd)
    wt = worktree(t)
    script = [Shell(f"touch ran-{i}.txt") for i in range(1, 9)] + [Answer("all done")]
    with MockServer(script) as server:
        res = AgentSetup(agent, server.url).run_in_bar(
            inited, "touch them all", options=("--max-tokens", "40")
        )
    (step,) = ledger(t["id"])
    assert step["stopped"] == "budget", res.stderr
    assert "over --max-tokens 40" in res.stderr and "stopped: budget" in res.stderr
    assert res.returncode != 0  # never a success, whatever the agent said when stopped
    ran = sorted(p.name for p in wt.glob("ran-*.txt"))
    assert ran == ["ran-1.txt", "ran-2.txt"], ran  # 30 tokens; the third answer passes 40
    assert not (wt / "ran-8.txt").exists()
    assert step["session"]["input_tokens"] + step["session"]["output_tokens"] > 40


def test_a_resumed_claude_session_continues_its_record(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("claude")
    t = new_task(capfd)
    wt = worktree(t)
    with MockServer([WriteFile(str(wt / "a.txt"), "one\n"), Answer("first done")]) as server:
        setup = AgentSetup("claude", server.url)
        assert setup.run_in_bar(inited, "first part").returncode == 0
    first = ledger(t["id"])[0]["session"]
    # (the mock plays the turn after the tool results the conversation carries: one)
    later = [Answer("never played"), WriteFile(str(wt / "b.txt"), "two\n"), Answer("second done")]
    with MockServer(later) as server:
        setup = AgentSetup("claude", server.url)
        res = setup.run_in_bar(inited, "second part", extra=("--resume", first["session_id"]))
    assert res.returncode == 0, res.stdout + res.stderr
    second = ledger(t["id"])[1]
    assert second["session"]["session_id"] == first["session_id"]
    assert second["session"]["resumed_from"] == "0001"
    prompts = [e["text"] for e in session(t, "0002") if e.get("role") == "user"]
    assert prompts == ["second part"]  # the first step's part stays in the first step
    (call,) = [e for e in session(t, "0002") if e["type"] == "tool_call"]
    assert call["checkpoint"] == "0002.1"
    assert second["session"]["turns"] == 2


def test_a_claude_subagents_calls_carry_its_id(
    inited: Path, capfd: pytest.CaptureFixture[str]
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
    assert (wt / "sub.txt").read_text() == "from the subagent\n"
    events = session(t)
    (start,) = [e for e in events if e["type"] == "subagent"]
    parent = next(e for e in events if e["type"] == "tool_call" and e["name"] == "Agent")
    assert start["parent_call"] == parent["id"]
    assert start["agent_type"] == "general-purpose"
    (write,) = [e for e in events if e["type"] == "tool_call" and e["name"] == "Write"]
    assert write["agent_id"] == start["agent_id"] and write["checkpoint"] == "0001.1"
    (step,) = ledger(t["id"])
    assert step["session"]["subagents"] == 1


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_an_interrupted_turn_is_recorded_where_it_happened(
    agent: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the agent waits for the model, after one tool call: the session
    keeps the prompt and the call, then an ``interrupt``: written by the agent (Codex),
    or told from a turn its transcript leaves unanswered (Claude Code, Gemini CLI)."""
    agent_binary(agent)
    t = new_task(capfd)
    with MockServer([Shell("touch one.txt"), Stall()]) as server:
        setup = AgentSetup(agent, server.url)
        proc = subprocess.Popen(
            [BAR_EXE, "run", "--no-pty", "--agent", agent, "--", *setup.argv("go")],
            cwd=inited,
            env={**os.environ, **setup.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 120
            while sum(r.main for r in server.model.requests) < 2:
                assert time.monotonic() < deadline, "the agent never asked the model again"
                assert proc.poll() is None, proc.communicate()[1]
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
    (step,) = ledger(t["id"])
    events = session(t)
    kinds = [e["type"] for e in events if e["type"] != "usage"]
    assert kinds[:3] == ["message", "tool_call", "tool_result"], err
    assert events[1]["checkpoint"] == "0001.1"
    assert kinds[3:] == ["interrupt"], (kinds, err)
    assert step["session"]["interrupts"] == 1 and step["exit_code"] != 0


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_secret_in_the_prompt_leaves_the_agent_s_own_records_and_resume_still_works(
    agent: str, inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The developer hands the agent a secret in the prompt: once the session ended, no
    file the agent wrote in its home for the task holds it (its transcript, its history
    of prompts), and a Claude session resumed from that transcript goes on."""
    agent_binary(agent)
    secret = "prompt-secret-5f1e2d3c4b5a6978"
    monkeypatch.setenv("DEPLOY_TOKEN", secret)
    t = new_task(capfd)
    with MockServer([Answer("noted")]) as server:
        setup = AgentSetup(agent, server.url)
        res = setup.run_in_bar(inited, f"deploy with the token {secret}")
    assert res.returncode == 0, res.stdout + res.stderr
    home = task_dir(t["id"]) / "agents" / agent
    holding = [
        str(p)
        for p in home.rglob("*")
        if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes()
    ]
    assert holding == []
    masked = [p for p in home.rglob("*") if p.is_file() and b"the token ***" in p.read_bytes()]
    assert masked  # (the prompt was kept, masked)
    if agent != "claude":
        return
    first = ledger(t["id"])[0]["session"]
    with MockServer([Answer("second done")]) as server:
        setup = AgentSetup("claude", server.url)
        res = setup.run_in_bar(inited, "go on", extra=("--resume", first["session_id"]))
    assert res.returncode == 0 and "second done" in res.stdout, res.stdout + res.stderr
    assert ledger(t["id"])[1]["session"]["session_id"] == first["session_id"]
