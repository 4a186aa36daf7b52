"""The task board through ``bar mcp``: the "try it" tour of reference 002 done by an MCP
client, as a lead agent would, and the files it leaves checked against the seed's shapes.
Then the same tools from inside a confined step, where they become orders."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, new_task, project_dir, task_dir
from test_server import calls, data

SEED_WORKTREE_KEYS = {"name", "path", "branch", "task_id", "status"}


def seed_events() -> list[dict[str, Any]]:
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_the_seed_tour_through_bar_mcp(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert bar(capfd, "init").code == 0
    # 1. Create tasks for backend auth and frontend login page, then list tasks.
    # 2. Create a worktree for task 1, and one for task 2 bound to it.
    # 3. Run "git status --short" in the first worktree.
    # 4. Keep the second worktree, then list worktrees and inspect worktree events.
    created_a, created_b, listed, started, claimed, ran, kept, wts, evs = calls(
        repo,
        ("task_create", {"name": "auth-refactor", "description": "backend auth"}),
        ("task_create", {"name": "ui-login", "description": "frontend login page"}),
        ("task_list", {"status": "pending"}),
        ("task_start", {"task": "auth-refactor"}),
        ("task_claim", {"task": "ui-login", "owner": "agent-b", "start": True}),
        ("task_run", {"task": "auth-refactor", "command": "echo new > n.txt; git status --short"}),
        ("worktree_keep", {"task": "ui-login"}),
        ("worktree_list", {}),
        ("events", {"limit": 50}),
    )
    a, b = data(created_a)["task"], data(created_b)["task"]
    assert a["board"] == {"status": "pending", "owner": "", "worktree": ""}
    assert [t["name"] for t in data(listed)["tasks"]] == ["auth-refactor", "ui-login"]
    assert data(started)["task"]["board"]["status"] == "in_progress"
    assert data(claimed)["task"]["board"] == {
        "status": "in_progress",
        "owner": "agent-b",
        "worktree": "ui-login",
    }
    run = data(ran)
    assert run["step"]["exit_code"] == 0 and "?? n.txt" in run["output"]
    assert run["step"]["diff_stat"]["file_list"] == ["n.txt"]
    assert data(kept)["worktree"]["status"] == "kept"
    assert {e["name"]: e["status"] for e in data(wts)["worktrees"]} == {
        "auth-refactor": "active",
        "ui-login": "kept",
    }
    assert "worktree.keep" in [e["event"] for e in data(evs)["events"]]
    # 5. Remove the first worktree with complete_task, then list tasks/worktrees/events.
    removed, tasks_all, wts_all, evs_all, bad = calls(
        repo,
        ("worktree_remove", {"task": "auth-refactor", "complete_task": True}),
        ("task_list", {"status": "all"}),
        ("worktree_list", {"all": True}),
        ("events", {"limit": 5}),
        ("task_claim", {"task": "ui-login", "owner": "agent-c"}),
    )
    assert data(removed)["task"]["board"]["status"] == "completed"
    assert {t["name"]: t["board"]["status"] for t in data(tasks_all)["tasks"]} == {
        "auth-refactor": "completed",
        "ui-login": "in_progress",
    }
    assert {e["name"]: e["status"] for e in data(wts_all)["worktrees"]} == {
        "auth-refactor": "removed",
        "ui-login": "kept",
    }
    assert [e["event"] for e in data(evs_all)["events"]][-3:] == [
        "worktree.remove.before",
        "worktree.remove.after",
        "task.completed",
    ]
    assert bad.is_error and "already claimed by agent-b" in bad.content[0].text

    # the files on disk have the seed's shapes
    index = json.loads((project_dir() / "workspaces" / "index.json").read_text())
    assert isinstance(index["worktrees"], list)
    for entry in index["worktrees"]:
        assert set(entry) >= SEED_WORKTREE_KEYS
        assert entry["status"] in ("active", "kept", "removed")
    for event in seed_events():
        assert {"event", "ts", "task", "worktree"} <= set(event)
        assert isinstance(event["ts"], float)
        if event["event"].startswith("worktree."):
            assert {"name", "path"} <= set(event["worktree"]), event
        if event["event"].startswith("worktree.") and event["event"].endswith((".after", "keep")):
            assert "status" in event["worktree"], event
        if event["task"]:
            assert {"id", "status"} <= set(event["task"]), event
    seen = [e["event"] for e in seed_events()]
    for name in (
        "task.created",
        "worktree.create.before",
        "worktree.create.after",
        "worktree.keep",
        "worktree.remove.before",
        "worktree.remove.after",
        "task.completed",
    ):
        assert name in seen
    for t in (a, b):
        rec = json.loads((task_dir(t["id"]) / "task.json").read_text())
        assert rec["status"] in ("active", "closed") and set(rec["board"]) == {
            "status",
            "owner",
            "worktree",
        }


CLIENT = """
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (r, w), ClientSession(r, w) as client:
        await client.initialize()
        out = {}
        for name, args in [
            ("task_create", {"name": "sub-job", "description": "for another agent"}),
            ("worktree_remove", {"task": os.environ["BAR_TASK_ID"], "complete_task": True}),
            ("task_run", {"task": "sub-job", "command": "true"}),
            ("task_list", {}),
        ]:
            res = await client.call_tool(name, args)
            out[name] = {"error": res.is_error, "text": res.content[0].text}
        print(json.dumps(out))

asyncio.run(main())
"""


def test_inside_a_step_the_board_tools_are_orders_to_its_bar_run(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    lead = new_task(capfd, "lead")
    script = repo / "client.py"
    script.write_text(textwrap.dedent(CLIENT))
    res = bar(capfd, "run", "--no-pty", "--", sys.executable, str(script), BAR_EXE)
    assert res.code == 0, res.err
    said = json.loads(res.out.strip().splitlines()[-1])
    assert not said["task_create"]["error"], said
    assert json.loads(said["task_create"]["text"])["task"]["board"]["status"] == "pending"
    assert said["worktree_remove"]["error"]
    assert "cannot remove its own worktree" in said["worktree_remove"]["text"]
    assert said["task_run"]["error"] and "outside any step" in said["task_run"]["text"]
    names = [t["name"] for t in json.loads(said["task_list"]["text"])["tasks"]]
    assert names == ["lead", "sub-job"]
    listed = {r["name"]: r for r in bar(capfd, "task", "list", "--json").json()}
    assert listed["sub-job"]["board"]["status"] == "pending"
    assert listed["lead"]["board"]["status"] == "in_progress"
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    created = [json.loads(x) for x in lines if '"task.created"' in x][-1]
    assert created["task"]["name"] == "sub-job"
    assert created["by"] == {"task": lead["id"], "step": "0001"}
    assert Path(lead["worktree"]).is_dir()
