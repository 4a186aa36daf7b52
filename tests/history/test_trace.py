"""``bar export --format agent-trace``: a task's attribution as Agent Trace records
(``bar.history.trace``). Every record is checked by hand against the facts of the
format's JSON schema (cursor/agent-trace ``schemas/trace-record.json``): required keys,
no others, types, the UUID and version patterns, line ranges inside the file at the
record's commit. The agent is the fake one (tests/support/fake_agent.py), run by the
``bar`` executable, so its session is read as a real agent's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    bar_exe,
    ledger,
    new_task,
    run_claude,
    run_sh,
    worktree,
)

from bar.history import trace

PROMPT = "Write the notes and add a line to them."
MODEL = "claude-opus-4-8"  # what the fake Claude Code reports

# --- the format, as its schema has it ------------------------------------------------

_UUID = re.compile(
    r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-"
    r"[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"
)
_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?Z$")
_CONTRIBUTORS = ("human", "ai", "mixed", "unknown")


def _keys(obj: object, required: set[str], allowed: set[str], where: str) -> dict[str, Any]:
    assert isinstance(obj, dict), f"{where} is not an object"
    assert required <= obj.keys(), f"{where} lacks {required - obj.keys()}"
    assert obj.keys() <= allowed, f"{where} has keys the schema refuses: {obj.keys() - allowed}"
    return obj


def _check_contributor(obj: object, where: str) -> None:
    c = _keys(obj, {"type"}, {"type", "model_id"}, where)
    assert c["type"] in _CONTRIBUTORS, where
    if "model_id" in c:
        assert isinstance(c["model_id"], str) and 0 < len(c["model_id"]) <= 250, where


def _check_uri(value: object, where: str) -> None:
    assert isinstance(value, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$", value), where


def check_record(rec: object, repo: Path) -> dict[str, Any]:
    """``rec`` is a valid Agent Trace record, and its ranges lie inside the files as its
    commit has them."""
    r = _keys(
        rec,
        {"version", "id", "timestamp", "files"},
        {"version", "id", "timestamp", "vcs", "tool", "files", "metadata"},
        "record",
    )
    assert isinstance(r["version"], str) and _VERSION.match(r["version"])
    assert isinstance(r["id"], str) and _UUID.match(r["id"])
    assert isinstance(r["timestamp"], str) and _TIME.match(r["timestamp"])
    vcs = _keys(r["vcs"], {"type", "revision"}, {"type", "revision"}, "vcs")
    assert vcs["type"] == "git" and re.fullmatch(r"[0-9a-f]{40}", vcs["revision"])
    tool = _keys(r["tool"], {"name", "version"}, {"name", "version"}, "tool")
    assert isinstance(tool["name"], str) and isinstance(tool["version"], str)
    assert isinstance(r["metadata"], dict) and all(isinstance(k, str) for k in r["metadata"])
    assert isinstance(r["files"], list)
    for f in r["files"]:
        f = _keys(f, {"path", "conversations"}, {"path", "conversations"}, "file")
        assert isinstance(f["path"], str) and not f["path"].startswith("/")
        lines = _lines_at(repo, vcs["revision"], f["path"])
        assert isinstance(f["conversations"], list)
        for c in f["conversations"]:
            c = _keys(c, {"ranges"}, {"url", "contributor", "ranges", "related"}, "conversation")
            if "url" in c:
                _check_uri(c["url"], "conversation url")
            if "contributor" in c:
                _check_contributor(c["contributor"], "contributor")
            for rel in c.get("related", []):
                rel = _keys(rel, {"type", "url"}, {"type", "url"}, "related")
                assert isinstance(rel["type"], str)
                _check_uri(rel["url"], "related url")
            assert isinstance(c["ranges"], list) and c["ranges"]
            for rg in c["ranges"]:
                rg = _keys(
                    rg,
                    {"start_line", "end_line"},
                    {"start_line", "end_line", "content_hash", "contributor"},
                    "range",
                )
                start, end = rg["start_line"], rg["end_line"]
                assert type(start) is int and type(end) is int
                assert 1 <= start <= end <= len(lines), (f["path"], rg, len(lines))
                if "content_hash" in rg:
                    assert rg["content_hash"] == trace.content_hash(lines[start - 1 : end])
                if "contributor" in rg:
                    _check_contributor(rg["contributor"], "range contributor")
    return r


def _lines_at(repo: Path, commit: str, path: str) -> list[str]:
    data = subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, check=True
    ).stdout
    return data.decode().splitlines()


def export(capfd: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    res = bar(capfd, "export", "--format", "agent-trace", *args)
    assert res.code == 0, res.err
    return [json.loads(line) for line in res.out.splitlines()]


def conversations(rec: dict[str, Any], path: str) -> list[dict[str, Any]]:
    (f,) = [f for f in rec["files"] if f["path"] == path]
    return list(f["conversations"])


def texts(repo: Path, rec: dict[str, Any], path: str, conv: dict[str, Any]) -> list[str]:
    """The lines a conversation claims, as the record's commit has them."""
    lines = _lines_at(repo, rec["vcs"]["revision"], path)
    return [line for r in conv["ranges"] for line in lines[r["start_line"] - 1 : r["end_line"]]]


# --- a task with an agent -------------------------------------------------------------


def run_agent(cwd: Path, tmp_path: Path, *commands: str) -> None:
    run_claude(cwd, tmp_path, PROMPT, *commands)


@pytest.fixture
def agent_task(
    inited_clean: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """A task whose first step is an agent session that writes notes.txt (two tool
    calls), and whose second is a hand edit of README.md."""
    t = new_task(capfd)
    wt = worktree(t)
    run_agent(wt, tmp_path, "write:notes.txt=alpha", "echo beta >> notes.txt")
    (wt / "README.md").write_text("hello\nedited by hand\n")
    run_sh(capfd, "true")  # records the hand edit first, as a manual step
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "manual", "run"]
    return t


def test_an_agents_lines_are_ai_with_its_model_and_a_hand_edit_is_human(
    agent_task: dict[str, Any], inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (rec,) = export(capfd)
    check_record(rec, inited_clean)
    step = ledger(agent_task["id"])[0]
    assert rec["vcs"]["revision"] == ledger(agent_task["id"])[-1]["snapshot"]  # the last state
    assert sorted(f["path"] for f in rec["files"]) == ["README.md", "notes.txt"]

    # each tool call is a conversation of the agent's, with its model and its session
    notes = conversations(rec, "notes.txt")
    assert [c["url"] for c in notes] == [
        f"bar://task/{agent_task['id']}/step/0001.1",
        f"bar://task/{agent_task['id']}/step/0001.2",
    ]
    session_id = step["session"]["session_id"]
    for c in notes:
        assert c["contributor"] == {"type": "ai", "model_id": f"anthropic/{MODEL}"}
        assert c["related"] == [
            {"type": "session", "url": f"bar://task/{agent_task['id']}/session/{session_id}"}
        ]
    assert [texts(inited_clean, rec, "notes.txt", c) for c in notes] == [["alpha"], ["beta"]]

    # the hand edit is a person's; the line of the base is nobody's here
    (readme,) = conversations(rec, "README.md")
    assert readme["contributor"] == {"type": "human"}
    assert "related" not in readme
    assert texts(inited_clean, rec, "README.md", readme) == ["edited by hand"]

    meta = rec["metadata"]["dev.bar"]
    assert (meta["task_id"], meta["task_name"], meta["state"]) == (agent_task["id"], "t1", "0003")
    about = meta["conversations"][notes[0]["url"]]
    assert about["step"] == "0001.1" and about["tool"] == "Write"
    assert about["session_id"] == session_id and about["prompt"] == PROMPT
    assert meta["conversations"][notes[1]["url"]]["command"] == "echo beta >> notes.txt"
    assert meta["conversations"][readme["url"]]["step"] == "0002"
    assert "prompt" not in meta["conversations"][readme["url"]]


def test_an_applied_commit_gets_its_own_record_with_the_lines_where_it_has_them(
    agent_task: dict[str, Any], inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """main moved after the task began (a line above the task's): the apply's record is
    at the applied commit, and its ranges name the lines where that commit has them."""
    repo = inited_clean
    (repo / "README.md").write_text("title\nhello\n")
    subprocess.run(["git", "commit", "-qam", "a title"], cwd=repo, check=True)
    assert bar(capfd, "apply", "--task", agent_task["id"]).code == 0
    applied = subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (repo / "README.md").read_text() == "title\nhello\nedited by hand\n"

    (rec,) = export(capfd, "--task", "t1")  # the last state is the one applied: one record
    check_record(rec, repo)
    assert rec["vcs"]["revision"] == applied
    assert rec["metadata"]["dev.bar"]["apply_step"] == "0004"
    (readme,) = conversations(rec, "README.md")
    assert readme["ranges"][0]["start_line"] == 3  # line 2 in the task's state
    assert texts(repo, rec, "README.md", readme) == ["edited by hand"]
    assert [texts(repo, rec, "notes.txt", c) for c in conversations(rec, "notes.txt")] == [
        ["alpha"],
        ["beta"],
    ]

    # a step after the apply: its state gets a record of its own, at its snapshot
    run_sh(capfd, "echo gamma >> notes.txt")
    first, last = export(capfd)
    for rec2 in (first, last):
        check_record(rec2, repo)
    assert first == rec  # the same record again: the same id, nothing counted twice
    assert last["vcs"]["revision"] == ledger(agent_task["id"])[-1]["snapshot"]
    assert last["metadata"]["dev.bar"]["apply_step"] is None
    run = conversations(last, "notes.txt")[-1]
    assert run["contributor"] == {"type": "unknown"}  # a plain command: bar cannot tell
    assert texts(repo, last, "notes.txt", run) == ["gamma"]


def test_the_executable_writes_the_records_to_a_file(
    agent_task: dict[str, Any], inited_clean: Path, tmp_path: Path
) -> None:
    out = tmp_path / "trace.jsonl"
    res = bar_exe("export", "--format", "agent-trace", "-o", str(out), cwd=inited_clean)
    assert res.code == 0, res.err
    assert "Wrote 1 Agent Trace record (2 files) of task t1" in res.out
    (line,) = out.read_text().splitlines()
    check_record(json.loads(line), inited_clean)
    again = bar_exe("export", "--format", "agent-trace", "--task", "t1", cwd=inited_clean)
    assert again.out == out.read_text()


def test_a_task_that_wrote_nothing_exports_nothing(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = bar(capfd, "export", "--format", "agent-trace")
    assert (res.code, res.out) == (0, "")
    assert "no record to export" in res.err
    bad = bar(capfd, "export", "--format", "agent-trail")
    assert bad.code == 2 and "agent-trace" in bad.err


def test_lines_a_sync_brought_in_are_not_the_tasks(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """main changed the file the task changes; the sync merged that in: the line is
    main's, not the task's."""
    repo = inited_clean
    t = new_task(capfd)
    run_sh(capfd, "echo task >> README.md")
    (repo / "README.md").write_text("top\nhello\n")
    subprocess.run(["git", "commit", "-qam", "top"], cwd=repo, check=True)
    assert bar(capfd, "task", "sync").code == 0
    assert (worktree(t) / "README.md").read_text() == "top\nhello\ntask\n"
    (rec,) = export(capfd)
    check_record(rec, repo)
    assert rec["vcs"]["revision"] == ledger(t["id"])[-1]["snapshot"]
    (only,) = conversations(rec, "README.md")
    assert only["url"].endswith("/step/0001")
    assert texts(repo, rec, "README.md", only) == ["task"]


@pytest.mark.parametrize(
    ("agent", "model", "expected"),
    [
        ("claude", "claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
        ("codex", "gpt-5-codex", "openai/gpt-5-codex"),
        ("codex", "o3", "openai/o3"),
        ("codex", "codex-mini-latest", "openai/codex-mini-latest"),
        ("gemini", "gemini-2.5-pro", "google/gemini-2.5-pro"),
        ("claude", "anthropic/claude-opus-4-5", "anthropic/claude-opus-4-5"),
        ("claude", "opus", "anthropic/opus"),  # the agent says whose it is
        ("other", "mystery", "mystery"),
        ("claude", "", None),
        ("claude", None, None),
    ],
)
def test_model_ids_name_their_provider(agent: str, model: str | None, expected: str | None) -> None:
    assert trace.model_id({"agent": agent, "model": model}) == expected


def test_lines_move_with_their_text() -> None:
    ours = ["a", "mine", "b", "c"]
    theirs = ["new", "a", "mine", "b", "changed"]
    assert trace.line_map(ours, theirs) == {1: 2, 2: 3, 3: 4}
    assert [(r.start_line, r.end_line) for r in trace.ranges([2, 3, 5], theirs)] == [
        (2, 3),
        (5, 5),
    ]
