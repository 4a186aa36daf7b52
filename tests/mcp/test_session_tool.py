"""The ``session`` tool of ``bar mcp``: what an agent said and did in a step of its own
task, a page at a time. Driven by the official MCP SDK's client against a real ``bar mcp``
child, over a real agent step (``bar run --agent claude`` of a stand-in that writes
Claude Code's transcript and calls bar's hooks, ``session_writer.py``); checked against
what bar kept (the ledger's ``session`` and ``NNNN.session.jsonl``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import SUPPORT, bar, ledger, new_task, task_dir, worktree
from test_server import calls, data, session

WRITER = SUPPORT / "session_writer.py"
SCRIPT: list[dict[str, Any]] = [
    {"prompt": "add a greeting"},
    {"say": "Writing it."},
    {"write": "hello.txt", "text": "hello\n"},
    {"tool": "Bash", "input": {"command": "cat hello.txt"}, "result": "hello"},
    {"tool": "Read", "input": {"file_path": "nope.txt"}, "result": "not found", "ok": False},
    {"say": "x" * 5000},
    {"say": "Done."},
]


def agent_step(capfd: pytest.CaptureFixture[str], tmp: Path, script: list[dict[str, Any]]) -> None:
    """``bar run --agent claude`` of the stand-in playing ``script`` in the active task."""
    path = tmp / "script.json"
    path.write_text(json.dumps(script))
    ran = bar(capfd, "run", "--agent", "claude", "--", sys.executable, str(WRITER), str(path))
    assert ran.code == 0, ran.err


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    """A task with a plain step (1) and an agent step (2)."""
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "sh", "-c", "echo one > a.txt").code == 0
    agent_step(capfd, tmp_path, SCRIPT)
    return t


def stored(task: dict[str, Any], step: str = "0002") -> tuple[dict[str, Any], list[Any]]:
    rec = next(r for r in ledger(task["id"]) if r["step_id"] == step)
    lines = (task_dir(task["id"]) / rec["artifacts"]["session"]).read_text().splitlines()
    return rec["session"], [json.loads(line) for line in lines]


def test_the_tool_is_listed_without_a_task_to_name(task: dict[str, Any]) -> None:
    async def go() -> Any:
        async with session(worktree(task)) as client:
            return await client.list_tools()

    tool = next(t for t in anyio.run(go).tools if t.name == "session")
    schema = tool.input_schema
    assert schema["required"] == ["step"]
    assert set(schema["properties"]) == {"step", "start", "limit", "max_bytes"}
    assert tool.annotations is not None and tool.annotations.read_only_hint
    assert tool.description and "checkpoint" in tool.description


def test_a_steps_session_is_what_bar_kept(task: dict[str, Any]) -> None:
    summary, events = stored(task)
    (whole,) = calls(worktree(task), ("session", {"step": "2"}))
    rec = data(whole)
    assert rec["task_id"] == task["id"] and rec["step"] == "0002"
    assert rec["session"] == summary
    assert rec["events"] == events
    assert rec["total_events"] == len(events) and rec["first"] == 0 and rec["next"] is None
    assert "truncated" not in rec
    assert summary["model"] == "claude-sonnet-4-5" and summary["tool_calls"] == 3
    writes = [e for e in events if e["type"] == "tool_call" and e["name"] == "Write"]
    assert [e.get("checkpoint") for e in writes] == ["0002.1"]  # its call, linked
    failed = [e for e in events if e["type"] == "tool_result" and not e["ok"]]
    assert [e["summary"] for e in failed] == ["not found"]


def test_pages_from_the_start_and_from_the_end(task: dict[str, Any]) -> None:
    _, events = stored(task)
    total = len(events)
    first, last, past = calls(
        worktree(task),
        ("session", {"step": "0002", "limit": 4}),
        ("session", {"step": "2", "start": -3}),
        ("session", {"step": "2", "start": total + 5}),
    )
    assert data(first)["events"] == events[:4] and data(first)["next"] == 4
    end = data(last)
    assert end["events"] == events[-3:] and end["first"] == total - 3 and end["next"] is None
    assert data(past)["events"] == [] and data(past)["next"] is None

    # walking the pages the tool points to gives back every event, once
    walked: list[Any] = []
    start: int | None = 0

    async def walk() -> None:
        nonlocal start
        async with session(worktree(task)) as client:
            while start is not None:
                page = data(
                    await client.call_tool("session", {"step": "2", "start": start, "limit": 3})
                )
                assert page["first"] == start
                walked.extend(page["events"])
                start = page["next"]

    anyio.run(walk)
    assert walked == events


def test_a_page_past_max_bytes_is_cut_and_says_so(task: dict[str, Any]) -> None:
    _, events = stored(task)
    long = next(i for i, e in enumerate(events) if e.get("text") == "x" * 5000)
    before, alone, tail = calls(
        worktree(task),
        ("session", {"step": "2", "max_bytes": 600}),
        ("session", {"step": "2", "start": long, "limit": 1, "max_bytes": 1000}),
        ("session", {"step": "2", "start": -4, "max_bytes": 600}),
    )
    rec = data(before)
    shown = rec["events"]
    assert 0 < len(shown) < len(events) and shown == events[: len(shown)]
    assert rec["truncated"] == {"events": {"shown": len(shown), "asked": len(events)}}
    assert rec["next"] == len(shown)  # where the next page starts
    assert len(json.dumps(shown, ensure_ascii=False).encode()) <= 600
    # an event too long by itself comes with its text cut, and a marker that says so
    (cut,) = data(alone)["events"]
    assert cut["text"].startswith("x" * 400) and "[bar: truncated:" in cut["text"]
    assert cut["truncated"] == {"text": {"shown_bytes": 500, "total_bytes": 5000}}
    # from the end, the last events are the ones kept
    end = data(tail)
    assert end["events"] == events[-len(end["events"]) :] and len(end["events"]) < 4
    assert end["first"] == len(events) - len(end["events"]) and end["next"] is None


def test_only_a_step_of_this_task_that_kept_a_session(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    other = new_task(capfd, "other")
    agent_step(capfd, tmp_path, [{"prompt": "theirs"}, {"say": "secret plans"}])
    assert stored(other, "0001")[0]["turns"] == 1
    plain, missing, checkpoint, bad, theirs = calls(
        worktree(task),
        ("session", {"step": "1"}),
        ("session", {"step": "9"}),
        ("session", {"step": "2.1"}),
        ("session", {"step": "HEAD"}),
        ("session", {"step": "1"}),
        args=("--task", task["id"]),
    )
    assert plain.is_error and "bar: step 0001 kept no agent session" in plain.content[0].text
    assert "hint: a step run with --agent keeps one" in plain.content[0].text
    assert missing.is_error and "no step 0009 in this task" in missing.content[0].text
    assert checkpoint.is_error and "'2.1' is not a step of this task" in checkpoint.content[0].text
    assert bad.is_error and "'HEAD' is not a step of this task" in bad.content[0].text
    # step 1 of the other task kept one; this task's step 1 did not: never the other's
    assert theirs.is_error and "secret plans" not in theirs.content[0].text
    (mine,) = calls(worktree(other), ("session", {"step": "1"}), args=("--task", other["id"]))
    assert [e.get("text") for e in data(mine)["events"] if e["type"] == "message"] == [
        "theirs",
        "secret plans",
    ]
