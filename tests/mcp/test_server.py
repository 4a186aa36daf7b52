"""``bar mcp`` driven by the official MCP SDK's own client, as an agent would drive it.

The server runs as a real child process (``bar mcp`` on stdio) against real tasks with
real steps. What it returns is checked against the oracle the CLI already is: the same
dicts ``bar status/log/show/diff --json`` print.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, task_dir, worktree

if TYPE_CHECKING:
    from mcp import ClientSession

TOOLS = {
    "status",
    "log",
    "show",
    "diff",
    "session",
    "checkpoint",
    "rollback",
    "decide_submit",
    "decide_result",
    "flow",
    "flow_status",
}
BOARD_TOOLS = {
    "task_create",
    "task_list",
    "task_claim",
    "task_start",
    "task_unclaim",
    "task_run",
    "task_bind_worktree",
    "worktree_create",
    "worktree_events",
    "worktree_list",
    "worktree_keep",
    "worktree_remove",
    "events",
}


@asynccontextmanager
async def session(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    # (the SDK is loaded by the tests that drive it: ~30 MB a test process would carry
    # from its collection on, which the forks of every step it runs in process copy)
    from mcp.client.stdio import stdio_client

    from mcp import ClientSession, StdioServerParameters

    params = StdioServerParameters(
        command=BAR_EXE,
        args=["mcp", *args],
        cwd=str(cwd),
        env=env if env is not None else dict(os.environ),
    )
    # (the server's stderr: stdio_client's default is the sys.stderr of when it was
    # loaded, here a test's capture, closed once that test ends)
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            yield client


def calls(
    cwd: Path, *requests: tuple[str, dict[str, Any]], args: tuple[str, ...] = ()
) -> list[Any]:
    """Each (tool, arguments) called in one session: its result."""

    async def go() -> list[Any]:
        async with session(cwd, *args) as client:
            return [await client.call_tool(name, arguments) for name, arguments in requests]

    return anyio.run(go)


def data(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def cli_json(capfd: pytest.CaptureFixture[str], *args: str) -> Any:
    ran = bar(capfd, *args, "--json")
    assert ran.code == 0, ran.err
    return json.loads(ran.out)


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """A task with two recorded steps."""
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "sh", "-c", "echo one > a.txt").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "echo two >> a.txt; echo b > b.txt").code == 0
    return t


def test_every_tool_is_listed_with_a_schema(task: dict[str, Any]) -> None:
    async def go() -> Any:
        async with session(worktree(task)) as client:
            return await client.list_tools()

    listed = {t.name: t for t in anyio.run(go).tools}
    assert set(listed) == TOOLS | BOARD_TOOLS
    for tool in listed.values():
        assert tool.input_schema["type"] == "object" and tool.description
    rollback = listed["rollback"].input_schema
    assert rollback["required"] == ["to"]
    assert set(rollback["properties"]) == {"to"}  # no --hard, no other task
    flow = listed["flow"].input_schema["properties"]
    assert "back-step" in json.dumps(flow["action"])
    assert listed["show"].input_schema["required"] == ["step"]


def test_reads_return_what_the_cli_prints(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    status, log, show, diff = calls(
        worktree(task),
        ("status", {}),
        ("log", {"n": 5}),
        ("show", {"step": "2"}),
        ("diff", {"from_state": "1", "to_state": "2"}),
    )
    assert data(status) == cli_json(capfd, "status")
    assert data(log) == {"task_id": task["id"], "steps": cli_json(capfd, "log")}
    assert data(show) == cli_json(capfd, "show", "2")
    assert data(diff) == cli_json(capfd, "diff", "--from", "1", "--to", "2")
    assert "+b" in data(diff)["patch"] and "truncated" not in data(diff)


def test_a_long_diff_is_cut_with_a_marker(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    big = "".join(f"line {i}\n" for i in range(5000))
    assert bar(capfd, "run", "--", "sh", "-c", f"printf '{big[:20000]}' > big.txt").code == 0
    (cut,) = calls(worktree(task), ("diff", {"max_bytes": 1000}))
    rec = data(cut)
    whole = cli_json(capfd, "diff")["patch"]
    assert rec["truncated"] == {"patch": {"shown_bytes": 1000, "total_bytes": len(whole.encode())}}
    assert rec["patch"].startswith(whole[:1000])
    assert "[bar: truncated: 1000 of" in rec["patch"]
    assert rec["diff_stat"] == cli_json(capfd, "diff")["diff_stat"]  # the stat is whole


def test_a_bad_argument_is_a_tool_error_with_bars_sentence(task: dict[str, Any]) -> None:
    bad_step, bad_state, schema, after = calls(
        worktree(task),
        ("show", {"step": "zz"}),
        ("diff", {"from_state": "HEAD~1"}),
        ("log", {"n": -1}),
        ("status", {}),
    )
    assert bad_step.is_error
    assert "bar: 'zz' is not a step id" in bad_step.content[0].text
    assert "hint: step ids look like 0001 or 1" in bad_step.content[0].text
    assert (
        bad_state.is_error and "'HEAD~1' is not a state of this task" in bad_state.content[0].text
    )
    assert schema.is_error  # refused by the schema (n >= 0)
    assert data(after)["task"]["id"] == task["id"]  # the server carried on


def test_checkpoint_and_rollback_with_no_step_running(task: dict[str, Any]) -> None:
    wt = worktree(task)
    before = (wt / "a.txt").read_text()
    checkpoint, rollback = calls(wt, ("checkpoint", {"label": "before"}), ("rollback", {"to": "1"}))
    assert data(checkpoint)["state"] == "0002" and data(checkpoint)["running"] is False
    # the agent's rollback is done by its running step; the developer has bar rollback
    assert rollback.is_error
    assert "no step is running" in rollback.content[0].text
    assert "hint:" in rollback.content[0].text
    assert (wt / "a.txt").read_text() == before
    assert [s["kind"] for s in ledger(task["id"])] == ["run", "run"]


def test_another_tasks_state_is_never_reached(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    other = new_task(capfd, "other")
    assert bar(capfd, "run", "--", "sh", "-c", "echo x > x.txt").code == 0
    theirs = ledger(other["id"])[0]["snapshot"]
    (refused,) = calls(worktree(task), ("rollback", {"to": theirs}), args=("--task", task["id"]))
    assert refused.is_error and "is not a state of this task" in refused.content[0].text
    # inside a step of one task, bar mcp serves no other
    env = {**os.environ, "BAR_TASK_ID": task["id"], "BAR_TASK_NAME": task["name"]}
    proc = subprocess.run(
        [BAR_EXE, "mcp", "--task", other["id"]],
        cwd=worktree(task),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"bar mcp serves only that task, not other ({other['id']})" in proc.stderr


def test_decide_and_flow_through_the_server(task: dict[str, Any]) -> None:
    question = {
        "task": "t1",
        "source": "agent",
        "items": [
            {
                "id": 1,
                "title": "Which cache?",
                "options": [
                    {"value": "lru", "label": "LRU", "score": 80},
                    {"value": "ttl", "label": "TTL"},
                ],
                "recommend": "lru",
            }
        ],
    }
    submit, result, start, status, bad = calls(
        worktree(task),
        ("decide_submit", {"input": question}),
        ("decide_result", {}),
        ("flow", {"action": "start", "summary": "design the cache"}),
        ("flow_status", {}),
        ("decide_submit", {"input": {"task": "t1", "items": []}}),
    )
    sid = data(submit)["session_id"]
    pending = json.loads((task_dir(task["id"]) / "decisions" / "pending.json").read_text())
    assert pending["_meta"]["session_id"] == sid and pending["items"] == question["items"]
    assert result.is_error and "not decided yet" in result.content[0].text
    entry = data(start)["entry"]
    assert entry["action"] == "start" and entry["summary"] == "design the cache"
    flow = data(status)
    assert flow == json.loads((task_dir(task["id"]) / "flow-status.json").read_text())
    assert flow["history"][-1]["summary"] == "design the cache"
    assert bad.is_error and "bar:" in bad.content[0].text


def test_the_server_starts_only_with_its_task(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    ran = bar_exe("mcp", "--task", "nosuch", cwd=repo)
    assert ran.code == 3 and ran.out == ""
    assert "nosuch" in ran.err
