"""What the command line shows of an agent's session (docs/sessions.md):
``bar show STEP --session``, the session line of ``bar log``, the totals of ``bar task show``
and ``bar status``, and a step bar stopped past its budget.

The sessions come from the fake agent (tests/support/fake_agent.py ``--transcript``),
which writes each agent's transcript in its own format, so these run without npm;
tests/session/test_real_sessions.py drives the released CLIs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonshape
import pytest
from helpers import (
    BAR_EXE,
    FAKE_AGENT_PATH,
    Shared,
    bar,
    bar_exe,
    ledger,
    new_task,
    set_config,
    shared_repo,
    task_dir,
)

AGENTS = ("claude", "codex", "gemini")
MODEL = {"claude": "claude-opus-4-8", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro"}
SHELL = {"claude": "Bash", "codex": "exec_command", "gemini": "run_shell_command"}
EDIT = {"claude": "Write", "codex": "exec_command", "gemini": "write_file"}
PROMPT = (
    "Write the notes, add a line to them, then clean up everything you made along the way; "
    "tell me when you are done."
)
# the tool calls, and the checkpoint each makes: the policy refuses the third (no change,
# no checkpoint); a shell command makes one even when it changes nothing
COMMANDS = ("write:notes.txt=alpha", "echo more >> notes.txt", "rm -rf /", "exit 3")
CHECKPOINTS = ["0001.1", "0001.2", None, "0001.3"]
USAGE = (100, 20, 1000)  # each answer of the model: fresh input, output, cached input
ANSWERS = len(COMMANDS) + 1  # one per tool call, and the last reply


def agent_program(tmp_path: Path, agent: str) -> str:
    """An executable named like the agent, running the fake one with its transcript."""
    program = tmp_path / "bin" / agent
    program.parent.mkdir(exist_ok=True)
    program.write_text(
        f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT_PATH} --agent {agent} --transcript "$@"\n'
    )
    program.chmod(0o755)
    return str(program)


def run_agent(
    cwd: Path, tmp_path: Path, agent: str, *args: str, bar_args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``bar run --agent AGENT`` of the fake agent (in a child: its output is its own)."""
    program = agent_program(tmp_path, agent)
    return subprocess.run(
        [BAR_EXE, "run", "--no-pty", *bar_args, "--agent", agent, "--", program, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_script(cwd: Path, tmp_path: Path, agent: str) -> None:
    usage = ",".join(map(str, USAGE))
    res = run_agent(cwd, tmp_path, agent, "--prompt", PROMPT, "--usage", usage, *COMMANDS)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="module")
def scripted_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], tuple[Shared, dict[str, Any]]]]:
    """The script run by AGENT, once for the tests that only read what it left (made at
    the first that asks, ``shared_repo``): ``bar init``, a task, then ``run_script``, as
    a test does in its own repository."""
    made: dict[str, tuple[Shared, dict[str, Any]]] = {}

    def fill(agent: str, repo: Path) -> dict[str, Any]:
        assert bar_exe("init", cwd=repo).code == 0
        task = bar_exe("task", "new", "t1", "--json", cwd=repo)
        assert task.code == 0, task.err
        run_script(repo, repo.parent, agent)
        return dict(task.json())

    def run(agent: str) -> tuple[Shared, dict[str, Any]]:
        if agent not in made:
            made[agent] = shared_repo(
                tmp_path_factory, f"faces-{agent}", lambda repo: fill(agent, repo)
            )
        return made[agent]

    yield run
    for shared, _ in made.values():
        shared.fsck()


@pytest.fixture
def scripted(
    scripted_runs: Callable[[str], tuple[Shared, dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[str], dict[str, Any]]:
    """Enter AGENT's shared run (its home, its repository the current directory): its task."""

    def enter(agent: str) -> dict[str, Any]:
        shared, task = scripted_runs(agent)
        shared.enter(monkeypatch)
        return task

    return enter


def stored(task_id: str, step: str = "0001") -> list[dict[str, Any]]:
    path = task_dir(task_id) / f"artifacts/{step}.session.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def shape(name: str, value: Any) -> None:
    """``value`` is as docs/json.md documents ``name``."""
    shapes = jsonshape.shapes()
    defs = {k: v for k, v in shapes.items() if k.startswith("$")}
    jsonshape.check(value, shapes[name], defs, name)


# --- the stored session -------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_an_agents_session_keeps_its_prompt_calls_checkpoints_and_tokens(
    agent: str, scripted: Callable[[str], dict[str, Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    t = scripted(agent)
    (step,) = ledger(t["id"])
    assert step["artifacts"]["session"] == "artifacts/0001.session.jsonl"
    events = stored(t["id"])

    messages = [(e["role"], e["text"]) for e in events if e["type"] == "message"]
    assert messages == [("user", PROMPT), ("assistant", "Done: 4 tool call(s).")]
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == [EDIT[agent], SHELL[agent], SHELL[agent], SHELL[agent]]
    assert [c.get("checkpoint") for c in calls] == CHECKPOINTS
    command = "cmd" if agent == "codex" else "command"
    assert [c["input"][command] for c in calls[1:]] == list(COMMANDS[1:])
    # each checkpoint names the call that made it: linked both ways
    listed = bar(capfd, "log", "--json").json()[0]["checkpoint_list"]
    assert [c["call_id"] for c in listed] == [c["id"] for c in calls if c.get("checkpoint")]
    results = {e["id"]: e for e in events if e["type"] == "tool_result"}
    assert [c["id"] in results for c in calls] == [True] * 4
    assert results[calls[0]["id"]]["ok"] and results[calls[1]["id"]]["ok"]

    usages = [e for e in events if e["type"] == "usage"]
    assert len(usages) == ANSWERS
    assert {
        (u["model"], u["input_tokens"], u["output_tokens"], u["cache_read_tokens"]) for u in usages
    } == {(MODEL[agent], *USAGE)}
    session = step["session"]
    assert session["agent"] == agent and session["model"] == MODEL[agent]
    assert session["session_id"].startswith("fake-")
    assert (session["turns"], session["tool_calls"]) == (ANSWERS, 4)
    assert (session["input_tokens"], session["output_tokens"], session["cache_read_tokens"]) == (
        USAGE[0] * ANSWERS,
        USAGE[1] * ANSWERS,
        USAGE[2] * ANSWERS,
    )
    assert "cost_usd" not in session  # no price for the model: no cost, never a guess
    assert bar(capfd, "log", "--json").json()[0]["session"] == session  # (the ledger's own)


@pytest.mark.parametrize(("agent", "call"), [(agent, call) for agent in AGENTS for call in (2, 3)])
def test_a_refused_or_failing_call_reads_as_failed(
    agent: str, call: int, scripted: Callable[[str], dict[str, Any]]
) -> None:
    """The policy refused the third call (Codex tells its model in words only) and the fourth
    exited 3 (Gemini CLI's call succeeds, its output says how the command ended)."""
    t = scripted(agent)
    events = stored(t["id"])
    calls = [e for e in events if e["type"] == "tool_call"]
    (result,) = [e for e in events if e["type"] == "tool_result" and e["id"] == calls[call]["id"]]
    assert result["ok"] is False


# --- bar show STEP --session ----------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_show_session_prints_the_conversation(
    agent: str, scripted: Callable[[str], dict[str, Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    t = scripted(agent)
    res = bar(capfd, "show", "1", "--session")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].startswith(f"session of step 0001  {agent}")
    assert "session fake-" in lines[0]
    # the prompt, wrapped under its label
    (first,) = [n for n, line in enumerate(lines) if line.startswith("user ")]
    assert lines[first + 1].startswith(" " * 11) and not lines[first + 2].startswith(" " * 11)
    assert lines[first].split(None, 1)[1] + " " + lines[first + 1].strip() == PROMPT
    tools = [line for line in lines if line.startswith("tool ")]
    edit = "apply_patch notes.txt" if agent == "codex" else "notes.txt"
    assert tools[0].split() == ["tool", EDIT[agent], *edit.split(), "→", "0001.1"]
    assert tools[1].endswith("echo more >> notes.txt  → 0001.2")
    assert tools[2].endswith("rm -rf /")  # refused: no checkpoint
    assert tools[3].endswith("exit 3  → 0001.3")
    results = [
        line.split("  ")[1].strip()
        for line in lines
        if line.startswith(("  ok ", "  failed ", "  exit "))
    ]
    # the failing command's exit code is its status, and what it printed is shown, not
    # the agent's framing of it (``Process exited with code 3``, ``Exit code 3``, ...)
    assert results == ["ok", "ok", "failed", "exit 3"]
    (failing,) = [line for line in lines if line.startswith("  exit 3")]
    assert failing.split(None, 2)[2] == "(no output)"
    assert "assistant  Done: 4 tool call(s)." in lines
    cached = f"{USAGE[2] * ANSWERS / 1000:.1f}k cached"
    assert lines[-1] == (
        f"{MODEL[agent]} · {ANSWERS} turns · 4 tool calls · {USAGE[0] * ANSWERS} in, "
        f"{USAGE[1] * ANSWERS} out, {cached}"
    )

    data = bar(capfd, "show", "1", "--session", "--json").json()
    shape("bar show --json", data)
    assert data["step"] == "0001" and data["session"] == ledger(t["id"])[0]["session"]
    assert data["events"] == stored(t["id"])
    assert "checkpoint" not in data

    # the plain view names the session, and where to see it
    plain = bar(capfd, "show", "1").out
    assert f"session   {MODEL[agent]} · {ANSWERS} turns · 4 tool calls" in plain
    assert "(bar show 0001 --session)" in plain


def test_show_session_of_a_checkpoint_stops_at_its_call(
    scripted: Callable[[str], dict[str, Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    t = scripted("claude")
    events = stored(t["id"])
    data = bar(capfd, "show", "1.2", "--session", "--json").json()
    shape("bar show --json", data)
    assert (data["step"], data["checkpoint"]) == ("0001", "0001.2")
    call = next(e for e in events if e.get("checkpoint") == "0001.2")
    upto = events.index(call)
    result = next(e for e in events[upto:] if e["type"] == "tool_result")
    assert data["events"] == [*events[: upto + 1], result]
    text = bar(capfd, "show", "0001.2", "--session").out
    assert "(up to the tool call of checkpoint 0001.2)" in text
    assert "echo more >> notes.txt  → 0001.2" in text
    assert "rm -rf" not in text and "assistant" not in text

    missing = bar(capfd, "show", "1.7", "--session")
    assert missing.code == 3 and "step 0001 has no checkpoint 7" in missing.err


def test_show_session_of_a_residual_says_no_call_made_it(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A change no hook reported (a subagent that skips hooks) is a checkpoint of its own,
    which no tool call of the session made."""
    new_task(capfd)
    res = run_agent(inited, tmp_path, "claude", "echo one > a.txt", "silent:b.txt=quiet")
    assert res.returncode == 0, res.stderr
    cps = bar(capfd, "log", "--json").json()[0]["checkpoint_list"]
    assert [c["kind"] for c in cps] == ["tool", "residual"]
    shown = bar(capfd, "show", "1.2", "--session")
    assert shown.code == 3
    assert "no tool call in the session of step 0001 made checkpoint 0001.2" in shown.err
    assert "changes no hook reported" in shown.err
    assert "bar show 0001 --session" in shown.err


def test_show_session_marks_a_subagents_events(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A subagent's start, its calls marked with its id, and an interruption (events a
    Claude Code session with the Task tool holds; added here to the stored session)."""
    t = new_task(capfd)
    run_script(inited, tmp_path, "claude")
    path = task_dir(t["id"]) / "artifacts/0001.session.jsonl"
    at = stored(t["id"])[-1]["at"]
    more = [
        {
            "type": "subagent",
            "agent_id": "a7f3",
            "agent_type": "Explore",
            "parent_call": "toolu_9",
            "at": at,
        },
        {
            "type": "message",
            "role": "user",
            "text": "look \x1b[2J around",
            "at": at,
            "agent_id": "a7f3",
        },
        {
            "type": "tool_call",
            "id": "toolu_s1",
            "name": "Bash",
            "input": {"command": "ls -la"},
            "at": at,
            "agent_id": "a7f3",
        },
        {
            "type": "tool_result",
            "id": "toolu_s1",
            "ok": True,
            "summary": "\nnotes.txt\n",
            "at": at,
            "agent_id": "a7f3",
        },
        {"type": "interrupt", "at": at},
    ]
    with path.open("a") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in more)
    lines = bar(capfd, "show", "1", "--session").out.splitlines()
    tail = lines[lines.index("subagent   a7f3 (Explore), started by call toolu_9") :]
    assert tail[1:5] == [
        "  [a7f3] user       look \\x1b[2J around",  # (never sent to the terminal as is)
        "  [a7f3] tool       Bash   ls -la",  # (the tools are a column: Task above)
        "  [a7f3]   ok       notes.txt",
        "interrupt  the agent was stopped mid-turn",
    ]
    assert bar(capfd, "show", "1", "--session", "--json").json()["events"][-5:] == more


def test_a_step_without_a_session(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo hi > a.txt").code == 0
    res = bar(capfd, "show", "1", "--session")
    assert res.code == 0
    assert res.out.startswith("Step 0001 kept no agent session")
    data = bar(capfd, "show", "1", "--session", "--json").json()
    assert data == {"step": "0001", "session": None, "events": []}
    shape("bar show --json", data)
    assert bar(capfd, "show", "9", "--session").code == 3  # no such step
    assert "session" not in ledger(t["id"])[0]
    assert len(bar(capfd, "log").out.splitlines()) == 1  # no session line under it
    shown = bar(capfd, "task", "show", "--json").json()
    assert shown["session_totals"] is None
    assert "agents" not in bar(capfd, "task", "show").out
    assert bar(capfd, "status", "--json").json()["task"]["session_totals"] is None
    assert "agents" not in bar(capfd, "status").out


# --- bar log, bar task show, bar status -----------------------------------------------


def test_log_shows_each_agent_steps_model_turns_and_tokens(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run_script(inited, tmp_path, "claude")
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    res = run_agent(inited, tmp_path, "gemini", "--usage", "1500,40,0", "echo x > y.txt")
    assert res.returncode == 0, res.stderr
    lines = bar(capfd, "log").out.splitlines()
    assert lines[0].startswith("0001  run  exit 0")
    assert lines[1] == "      claude-opus-4-8 · 5 turns · 500 in, 100 out, 5.0k cached"
    assert lines[2].strip() == "3 checkpoints (bar log --tools lists them)"
    assert lines[3].startswith("0002  run  exit 0")  # not an agent's: nothing under it
    assert lines[4].startswith("0003  run  exit 0")
    assert lines[5] == "      gemini-2.5-pro · 2 turns · 3.0k in, 80 out"
    tools = bar(capfd, "log", "--tools", "-n", "1").out.splitlines()
    assert tools[1] == lines[5] and tools[2].split()[0] == "0003.1"


def test_task_show_and_status_add_up_the_agent_steps(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_script(inited, tmp_path, "claude")
    run_script(inited, tmp_path, "codex")
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    totals = {
        "steps": 2,
        "turns": 2 * ANSWERS,
        "tool_calls": 8,
        "input_tokens": 2 * ANSWERS * USAGE[0],
        "output_tokens": 2 * ANSWERS * USAGE[1],
        "cache_read_tokens": 2 * ANSWERS * USAGE[2],
        "models": ["claude-opus-4-8", "gpt-5-codex"],
    }
    shown = bar(capfd, "task", "show", "--json").json()
    shape("bar task show --json", shown)
    assert shown["session_totals"] == totals
    status = bar(capfd, "status", "--json").json()
    shape("bar status --json", status)
    assert status["task"]["session_totals"] == totals
    line = (
        "2 agent steps · 10 turns · 8 tool calls · 1.0k in, 200 out, 10.0k cached"
        " · claude-opus-4-8, gpt-5-codex"
    )
    assert f"  agents      {line}" in bar(capfd, "task", "show").out.splitlines()
    assert f"agents    {line}" in bar(capfd, "status").out.splitlines()
    assert t["id"] in bar(capfd, "status").out


def test_a_priced_model_shows_its_cost(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    # US dollars per million tokens: each answer costs 100*15 + 20*75 + 1000*1.5 = 4500e-6
    set_config(
        agents={"prices": {"claude-opus-4-8": {"input": 15, "output": 75, "cache_read": 1.5}}}
    )
    run_script(inited, tmp_path, "claude")
    (step,) = ledger(t["id"])
    assert step["session"]["cost_usd"] == pytest.approx(ANSWERS * 0.0045)
    cost = f"${ANSWERS * 0.0045:.4f}"
    assert bar(capfd, "log").out.splitlines()[1].endswith(f"5.0k cached · {cost}")
    assert bar(capfd, "show", "1", "--session").out.splitlines()[-1].endswith(cost)
    shown = bar(capfd, "task", "show", "--json").json()
    assert shown["session_totals"]["cost_usd"] == pytest.approx(ANSWERS * 0.0045)
    assert f" · {cost} · claude-opus-4-8" in bar(capfd, "status").out


# --- a budget -------------------------------------------------------------------------


def test_a_step_stopped_past_its_budget_says_so(
    inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each answer reports 15 tokens: the second passes --max-tokens 20, and bar stops the
    agent before its command runs."""
    t = new_task(capfd)
    res = run_agent(
        inited,
        tmp_path,
        "claude",
        "touch a1",
        "touch a2",
        "touch a3",
        bar_args=("--max-tokens", "20"),
    )
    assert res.returncode != 0
    assert "RAN: touch a1" in res.stdout and "RAN: touch a2" not in res.stdout
    (step,) = ledger(t["id"])
    assert step["stopped"] == "budget"
    row = bar(capfd, "log").out.splitlines()[0]
    assert row.split("  ")[2] == "stopped: budget"
    shown = bar(capfd, "show", "1").out
    assert "stopped   by bar: the agent's session passed its budget" in shown
    assert "result    stopped: budget" in shown
    talk = bar(capfd, "show", "1", "--session").out.splitlines()
    assert "interrupt  the agent was stopped mid-turn" in talk
    tools = [line for line in talk if line.startswith("tool ")]
    assert tools[:2] == ["tool       Bash  touch a1  → 0001.1", "tool       Bash  touch a2"]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_resumed_session_names_the_step_it_continues(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    for prompt, command in (("first", "echo 1 > one.txt"), ("second", "echo 2 > two.txt")):
        res = run_agent(
            inited,
            tmp_path,
            agent,
            "--session-id",
            "fake-0123456789ab",
            "--prompt",
            prompt,
            command,
        )
        assert res.returncode == 0, res.stderr
    first, second = ledger(t["id"])
    assert second["session"]["session_id"] == first["session"]["session_id"] == "fake-0123456789ab"
    assert second["session"]["resumed_from"] == "0001"
    assert "resumed_from" not in first["session"]
    # each step keeps its own part of the one transcript
    said = [e["text"] for e in stored(t["id"], "0002") if e.get("role") == "user"]
    assert said == ["second"]
    assert [e.get("checkpoint") for e in stored(t["id"], "0002") if e["type"] == "tool_call"] == [
        "0002.1"
    ]
    head = bar(capfd, "show", "2", "--session").out.splitlines()[0]
    assert head.endswith("session fake-0123456789ab, resumed from step 0001")
