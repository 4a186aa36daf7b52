"""The agent's inner commands go through the running step's bar run (bar hook ->
channel -> supervisor)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BAR_EXE, DATA, SUPPORT, bar, bar_exe, ledger, new_task, task_dir, worktree

FAKE_AGENT = str(SUPPORT / "fake_agent.py")


# --- policy in bar run --------------------------------------------------------------


def test_agent_inner_commands_go_through_the_policy(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    res = subprocess.run(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--agent",
            "claude",
            "--",
            sys.executable,
            FAKE_AGENT,
            "--agent",
            "claude",
            "echo benign > ok.txt",
            "rm -rf / --no-preserve-root; touch destroyed.txt",
        ],
        cwd=inited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "RAN: echo benign > ok.txt" in res.stdout
    assert "DENIED: rm -rf /" in res.stdout
    assert (wt / "ok.txt").exists() and not (wt / "destroyed.txt").exists()
    (step,) = ledger(t["id"])
    events = step["policy_events"]
    sources = {e.get("source") for e in events}
    assert sources == {"hook:claude"}
    decisions = {e["command"]: e["decision"] for e in events}
    assert decisions["echo benign > ok.txt"] == "allow"
    assert decisions["rm -rf / --no-preserve-root; touch destroyed.txt"] == "block"
    assert all(e.get("session_id") for e in events)
    # the hook settings were installed for the run only and never recorded
    assert not (wt / ".claude").exists()
    assert step["diff_stat"]["file_list"] == ["ok.txt"]
    assert not (task_dir(t["id"]) / "artifacts/0001.policy.jsonl").exists()


def agent_program(tmp_path: Path, agent: str) -> str:
    """An executable named like the agent that runs the fake one: bar gives Codex its
    hooks on the command line, after the program's name."""
    program = tmp_path / "bin" / agent
    program.parent.mkdir(exist_ok=True)
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} --agent {agent} "$@"\n')
    program.chmod(0o755)
    return str(program)


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_each_agent_reports_what_became_of_its_commands(
    agent: str, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = subprocess.run(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--agent",
            agent,
            "--",
            agent_program(tmp_path, agent),
            "git reset --hard HEAD~3",
            "ls",
            "exit 3",
            # (not `.`: the worktree's .aide/ is read-only to a step, docs/sandbox.md)
            "chmod -R 777 README.md",
        ],
        cwd=inited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "DENIED: git reset --hard" in res.stdout and "RAN: ls" in res.stdout
    assert "RAN: chmod -R 777 README.md" in res.stdout  # nobody at the prompt: warned, not asked
    assert "never called bar's hooks" not in res.stderr
    (step,) = ledger(t["id"])
    got = {e["command"]: (e["decision"], e["answer"], e["outcome"]) for e in step["policy_events"]}
    assert got == {
        "git reset --hard HEAD~3": ("block", "deny", "refused"),
        "ls": ("allow", "none", "ran"),
        # Codex's post-tool event does not say how a command ended (its rollout does, and
        # the fake agent writes none: tests/agents/test_outcomes.py has the real one)
        "exit 3": ("allow", "none", "ran" if agent == "codex" else "failed"),
        "chmod -R 777 README.md": ("warn", "warning", "ran"),
    }
    assert step["agent"] == {"name": agent, "hooks": "home", "interactive": False, "sessions": 1}


def test_an_agent_that_never_calls_the_hooks_is_reported(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", "gemini", "--", "true"],
        cwd=inited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0
    assert "gemini never called bar's hooks in this step" in res.stderr
    # Codex's hooks are in its home for the task, whatever starts it: this one never ran
    res = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", "codex", "--", "true"],
        cwd=inited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "codex never called bar's hooks in this step" in res.stderr


def test_hook_outside_a_run_answers_and_records_nothing(inited: Path) -> None:
    event = {
        "session_id": "s1",
        "transcript_path": "/tmp/t",
        "cwd": str(inited),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git push --force origin main"},
        "tool_use_id": "tu1",
    }
    res = subprocess.run(
        [BAR_EXE, "hook", "claude"],
        input=json.dumps(event).encode(),
        capture_output=True,
        cwd=inited,
        timeout=60,
    )
    assert res.returncode == 2
    assert json.loads(res.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    event["tool_input"] = {"command": "ls -la"}
    res = subprocess.run(
        [BAR_EXE, "hook", "claude"],
        input=json.dumps(event).encode(),
        capture_output=True,
        cwd=inited,
        timeout=60,
    )
    assert res.returncode == 0 and res.stdout == b""
    res = subprocess.run(
        [BAR_EXE, "hook", "claude"], input=b"{not json", capture_output=True, cwd=inited, timeout=60
    )
    assert res.returncode == 2 and b"Traceback" not in res.stderr and res.stderr


def test_agent_setup_prints_settings(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "agent", "setup", "claude")
    assert res.code == 0 and ".claude/settings.local.json" in res.out
    assert "hook claude" in res.out and "PreToolUse" in res.out


# --- interactive ----------------------------------------------------------------------


def test_only_judgements_cross_the_channel(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Anything else sent to a running step's socket is dropped; a forged but well-formed
    event is judged (and, with no agent in the step, recorded nowhere)."""
    t = new_task(capfd)
    wt = worktree(t)
    script = (
        "import socket, sys, json\n"
        "from bar.base.socket_path import Address\n"
        "def send(data):\n"
        "    s = socket.socket(socket.AF_UNIX); s.connect(Address(sys.argv[1]).name)\n"
        "    s.sendall(data)\n"
        "    s.shutdown(socket.SHUT_WR); out = s.recv(65536); s.close(); return out\n"
        "assert send(b'garbage') == b''\n"
        "assert send(b'bar1 ledger append {}\\n{}') == b''\n"
        "assert send(b'bar1 hook nobody\\n{}') == b''\n"
        "event = {'hook_event_name': 'PreToolUse', 'tool_name': 'Bash', 'session_id': 's1',\n"
        "         'tool_input': {'command': 'git push --force origin main'}}\n"
        "reply = send(b'bar1 hook claude\\n' + json.dumps(event).encode())\n"
        "assert reply.startswith(b'2\\n'), reply\n"
    )
    res = bar_exe(
        "run",
        "--no-pty",
        "--",
        sys.executable,
        "-c",
        script.replace("sys.argv[1]", "__import__('os').environ['BAR_SOCKET']"),
        cwd=wt,
    )
    assert res.code == 0, res.err
    (step,) = ledger(t["id"])
    assert step["policy_events"] == []
    assert not (task_dir(t["id"]) / "bar.sock").exists()


def test_a_supervisor_that_cannot_start_leaves_no_step_behind(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    own = Path(os.environ["HOME"]) / ".claude"
    own.mkdir(exist_ok=True)
    (own / "settings.json").write_text("{not json")  # (the agent's home is made from it)
    res = bar(capfd, "run", "--no-pty", "--agent", "claude", "--", "true")
    assert res.code == 8 and "settings.json" in res.err
    assert not (task_dir(t["id"]) / "running.json").exists()
    (own / "settings.json").unlink()
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    # no run was recorded for the command that never started, interrupted or otherwise
    assert [s["kind"] for s in ledger(t["id"])] == ["run"]
    assert not any(s.get("interrupted") for s in ledger(t["id"]))


def test_a_hook_whose_bar_run_took_the_event_and_did_not_answer_is_blocked() -> None:
    """``--unanswered WHY`` (the compiled bar's, when the running step it reached gave no
    answer): the call is blocked in the agent's own format, saying why; nothing is asked."""
    for agent in ("claude", "codex", "gemini"):
        res = subprocess.run(
            [BAR_EXE, "hook", agent, "--unanswered", "bar run did not answer (timed out)"],
            input=b'{"hook_event_name": "PreToolUse"}',
            capture_output=True,
            timeout=60,
        )
        assert res.returncode == 2, agent
        assert b"did not answer (timed out)" in res.stderr and json.loads(res.stdout), agent


def test_hook_help_is_help_not_a_denial() -> None:
    res = bar_exe("hook", "claude", "--help")
    assert res.code == 0 and "deny" not in res.out and "usage: bar hook" in res.out
    assert bar_exe("hook").code == 2


def test_a_step_without_an_agent_takes_no_hook_events_into_its_record(inited: Path) -> None:
    """Any process of a step can reach its socket: with no agent running there, an event
    is a made-up one. It is answered (the policy still judges it) and recorded nowhere."""
    task = new_task_json(inited)
    forge = DATA / "forge_hook.py"
    script = (
        f'{sys.executable} {forge} "$BAR_SOCKET" "rm -rf /"; '
        f'{sys.executable} {forge} "$BAR_SOCKET" "echo made-up"'
    )
    res = bar_exe("run", "--no-pty", "--", "sh", "-c", script, cwd=inited)
    assert res.code == 0 and "answered: 2" in res.out, res.out + res.err
    (step,) = ledger(task)
    assert step["policy_events"] == [] and "agent" not in step
    assert not list(task_dir(task).glob("artifacts/*.checkpoints.jsonl"))


def new_task_json(repo: Path) -> str:
    res = bar_exe("task", "new", "plain", "--json", cwd=repo)
    assert res.code == 0, res.err
    task_id: str = res.json()["id"]
    return task_id
