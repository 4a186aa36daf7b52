"""The transcript readers on hand-made lines in each agent's format: what a step keeps,
what it leaves to earlier steps, and what it makes of lines it does not know."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bar.history.checkpoints import Checkpoint
from bar.model.config import Price
from bar.redact import Scrubber
from bar.session.capture import MAX_READ, Capture
from bar.session.events import Usage
from bar.session.prices import cost

START = "2026-11-25T10:00:00.000Z"
BEFORE = "2026-11-25T09:59:59.000Z"


def at(second: int) -> str:
    return f"2026-11-25T10:00:{second:02d}.000Z"


def write(path: Path, records: list[Any], *, raw: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        for r in records:
            f.write(json.dumps(r).encode() + b"\n")
        f.write(raw)


def finish(
    home: Path, agent: str, tmp: Path, checkpoints: tuple[Checkpoint, ...] = (), **kw: Any
) -> Any:
    capture = Capture(home, agent, START, **kw)
    out = tmp / "session.jsonl"
    found = capture.finish(Scrubber(["hunter2-secret"]), out, list(checkpoints))
    events = [json.loads(line) for line in out.read_text().splitlines()] if found else []
    return found, events


def claude_line(kind: str, second: int, content: Any, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "type": kind,
        "timestamp": at(second),
        "sessionId": "s1",
        "version": "2.1.0",
    }
    rec["message"] = {"role": kind, "content": content, **extra.pop("message", {})}
    rec.update(extra)
    return rec


def test_claude_lines_make_events_in_order_with_usage_counted_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50}
    answer = {"id": "msg_1", "model": "claude-x", "usage": usage}
    write(
        home / "projects/k/s1.jsonl",
        [
            claude_line("user", 1, "fix it, password hunter2-secret"),
            claude_line("assistant", 2, [{"type": "text", "text": "Looking."}], message=answer),
            claude_line(
                "assistant",
                2,
                [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
                message=answer,
            ),
            claude_line(
                "user", 3, [{"type": "tool_result", "tool_use_id": "t1", "content": "a\nb"}]
            ),
            claude_line("user", 4, [{"type": "text", "text": "[Request interrupted by user]"}]),
            {"type": "file-history-snapshot", "messageId": "x"},
            {"type": "brand-new-kind", "timestamp": at(5)},
        ],
    )
    cp = Checkpoint("0001", 1, "tool", "a", "b", at(3), at(3), tool="Bash", call_id="t1")
    found, events = finish(home, "claude", tmp_path, (cp,))
    summary, learnt = found
    assert [e["type"] for e in events] == [
        "message",
        "message",
        "tool_call",
        "usage",
        "tool_result",
        "interrupt",
        "unknown",
    ]
    assert events[0]["text"] == "fix it, password ***"
    assert events[2]["checkpoint"] == "0001.1" and events[4]["summary"] == "a\nb"
    assert (events[3]["input_tokens"], events[3]["cache_read_tokens"]) == (100, 50)
    assert events[6]["agent_type"] == "brand-new-kind"
    assert summary["turns"] == 1 and summary["tool_calls"] == 1
    assert summary["interrupts"] == 1 and summary["unknown"] == 1
    assert (summary["session_id"], summary["agent_version"]) == ("s1", "2.1.0")
    assert learnt == []  # (the checkpoint named its call)


def test_lines_of_an_earlier_step_stay_there(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = claude_line("user", 0, "the first step's prompt")
    old["timestamp"] = BEFORE
    write(home / "projects/k/s1.jsonl", [old, claude_line("user", 1, "this step's prompt")])
    _, events = finish(home, "claude", tmp_path)
    assert [e.get("text") for e in events] == ["this step's prompt", None]
    assert events[1]["type"] == "interrupt"  # (a prompt the model never answered)


def test_a_torn_last_line_and_garbage_do_not_stop_the_reader(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(
        home / "projects/k/s1.jsonl",
        [claude_line("user", 1, "hello")],
        raw=b"not json at all\n[1, 2]\n" + b'{"type": "user", "timest',
    )
    (summary, _), events = finish(home, "claude", tmp_path)
    assert [e["type"] for e in events] == ["message", "interrupt"]
    assert summary["unreadable_lines"] == 3


def test_a_link_in_the_home_is_never_followed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    secret = tmp_path / "elsewhere.jsonl"
    write(secret, [claude_line("user", 1, "not the agent's")])
    (home / "projects/k").mkdir(parents=True)
    os.symlink(secret, home / "projects/k/s1.jsonl")
    assert finish(home, "claude", tmp_path) == (None, [])


def test_a_huge_transcript_is_read_up_to_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bar.session.capture as capture

    monkeypatch.setattr(capture, "MAX_READ", 4096)
    home = tmp_path / "home"
    write(home / "projects/k/s1.jsonl", [claude_line("user", 1, "x" * 100)] * 100)
    (summary, _), events = finish(home, "claude", tmp_path)
    assert summary["truncated"] is True and 0 < len(events) < 100
    assert MAX_READ > 4096


def test_codex_rollout_lines_make_events(tmp_path: Path) -> None:
    home = tmp_path / "home"

    def line(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": at(second), "type": kind, "payload": payload}

    write(
        home / "sessions/2026/11/25/rollout-x-c1.jsonl",
        [
            line(0, "session_meta", {"id": "c1", "cli_version": "0.169.0"}),
            line(0, "turn_context", {"model": "gpt-x"}),
            line(
                1,
                "event_msg",
                {
                    "type": "item_completed",
                    "item": {"type": "UserMessage", "content": [{"type": "text", "text": "go"}]},
                },
            ),
            line(
                2,
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": '{"cmd": "false"}',
                    "call_id": "call_1",
                },
            ),
            line(
                2,
                "token_usage_record",
                {
                    "response_id": "r1",
                    "usage": {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 9},
                },
            ),
            line(
                3,
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "call_1",
                    "output": "Process exited with code 1\n",
                },
            ),
            line(
                3,
                "event_msg",
                {"type": "token_count", "info": {"last_token_usage": {"input_tokens": 1}}},
            ),
            line(4, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
            line(5, "mystery", {}),
        ],
    )
    (summary, _), events = finish(home, "codex", tmp_path)
    assert [e["type"] for e in events] == [
        "message",
        "tool_call",
        "usage",
        "tool_result",
        "interrupt",
        "unknown",
    ]
    assert events[1]["input"] == {"cmd": "false"} and events[3]["ok"] is False
    assert (events[2]["input_tokens"], events[2]["cache_read_tokens"]) == (60, 40)
    assert (summary["model"], summary["agent_version"], summary["turns"]) == ("gpt-x", "0.169.0", 1)


def test_gemini_records_written_again_count_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    reply = {
        "id": "g1",
        "timestamp": at(2),
        "type": "gemini",
        "content": "",
        "model": "gem-x",
        "tokens": {"input": 30, "output": 4, "cached": 10, "thoughts": 2},
    }
    call = {
        "id": "w1",
        "name": "write_file",
        "args": {"file_path": "/w/notes.txt", "content": "x"},
        "status": "success",
        "timestamp": at(3),
        "result": [{"functionResponse": {"response": {"output": "written"}}}],
    }
    write(
        home / ".gemini/tmp/p/chats/session-1-g.jsonl",
        [
            {"sessionId": "g", "startTime": at(0), "kind": "main"},
            {
                "$set": {
                    "messages": [
                        {"id": "ctx", "type": "user", "content": [{"text": "<session_context>"}]}
                    ]
                }
            },
            {"id": "u1", "timestamp": at(1), "type": "user", "content": [{"text": "write notes"}]},
            reply,
            {"$set": {"lastUpdated": at(2)}},
            {**reply, "toolCalls": [call]},
            {"id": "i1", "timestamp": at(4), "type": "info", "content": "Request cancelled."},
        ],
    )
    cp = Checkpoint(
        "0001", 1, "tool", "a", "b", at(3), at(3), tool="write_file", paths=("notes.txt",)
    )
    (summary, learnt), events = finish(home, "gemini", tmp_path, (cp,))
    assert [e["type"] for e in events] == [
        "message",
        "tool_call",
        "usage",
        "tool_result",
        "interrupt",
    ]
    assert events[1]["checkpoint"] == "0001.1" and learnt == [(1, "w1")]
    assert (
        events[2]["input_tokens"],
        events[2]["output_tokens"],
        events[2]["cache_read_tokens"],
    ) == (20, 6, 10)
    assert summary["session_id"] == "g" and summary["turns"] == 1


def test_a_price_is_looked_up_by_name_then_pattern_and_never_guessed() -> None:
    table = (("exact-model", Price(1.0, 2.0)), ("claude-*", Price(3.0, 15.0, cache_read=0.3)))
    u = Usage("claude-opus", 1_000_000, 100_000, 10_000)
    assert cost(table, u) == round(3.0 + 1.5 + 0.003, 6)
    assert cost(table, Usage("exact-model", 500_000, 0, 0)) == 0.5
    assert cost(table, Usage("other", 10, 10, 10)) is None
    assert cost(table, Usage(None, 10, 10, 10)) is None


def test_a_directory_swapped_for_a_link_is_never_followed(tmp_path: Path) -> None:
    """The agent writes its home: a link to a directory elsewhere (the developer's own
    transcripts) anywhere on the way to a transcript is not read through."""
    home = tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "k/s1.jsonl", [claude_line("user", 1, "not the agent's")])
    home.mkdir(exist_ok=True)
    os.symlink(elsewhere, home / "projects")
    assert finish(home, "claude", tmp_path) == (None, [])
    (home / "projects").unlink()
    (home / "projects").mkdir()
    os.symlink(elsewhere / "k", home / "projects/k")
    assert finish(home, "claude", tmp_path) == (None, [])


def test_a_home_full_of_files_is_walked_within_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bar.session.found as found

    monkeypatch.setattr(found, "MAX_ENTRIES", 50)
    home = tmp_path / "home"
    for i in range(200):
        (home / "projects" / f"d{i:03d}").mkdir(parents=True)
    assert len(found.transcripts(home / "projects", 4, lambda _, f: True)) == 0


def test_a_hook_events_transcript_is_read_only_inside_the_home(tmp_path: Path) -> None:
    """The path a hook event names (the agent's word) is read only where it lies under
    the home and no link leads there."""
    from bar.agents.rollout import within
    from bar.store.files import read_beneath

    home = tmp_path / "home"
    (home / "sessions").mkdir(parents=True)
    (home / "sessions/r.jsonl").write_text("mine\n")
    (tmp_path / "theirs.jsonl").write_text("theirs\n")
    os.symlink(tmp_path, home / "out")
    assert within(home, str(home / "sessions/r.jsonl")) == home / "sessions/r.jsonl"
    assert within(home, str(home / "../theirs.jsonl")) is None
    assert within(home, "sessions/r.jsonl") is None
    linked = within(home, str(home / "out/theirs.jsonl"))
    assert linked is None or read_beneath(home, linked) is None
    assert read_beneath(home, home / "sessions/r.jsonl", tail=3) == b"ne\n"


def test_a_command_left_running_that_a_signal_ended_was_stopped_not_failed(
    tmp_path: Path,
) -> None:
    """Codex, stopping a command the model left running, may reap it first on a busy
    machine and report 128 + the signal: that one "ran", as with its usual -1; a command
    that was not left running, ended so, "failed"."""
    from bar.agents.rollout import outcomes

    def output(call: str, text: str) -> dict[str, Any]:
        payload = {"type": "function_call_output", "call_id": call, "output": text}
        return {"type": "response_item", "payload": payload}

    def completed(call: str, code: int) -> dict[str, Any]:
        item = {"type": "CommandExecution", "id": call, "exit_code": code}
        return {"type": "event_msg", "payload": {"type": "item_completed", "item": item}}

    lines = [
        output("left", "Chunk ID: 1\nProcess running with session ID 7\nOutput:\n"),
        output("own", "Chunk ID: 2\nProcess exited with code 143\nOutput:\n"),
        output("poll", "Chunk ID: 3\nProcess running with session ID 8\nOutput:\n"),
        completed("own", 143),
        completed("left", 137),
        completed("poll", 3),
    ]
    home = tmp_path / "home"
    (home / "sessions").mkdir(parents=True)
    rollout = home / "sessions" / "rollout.jsonl"
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = outcomes(home, rollout, ["left", "own", "poll"])
    assert found == {"left": "ran", "own": "failed", "poll": "failed"}


def test_a_tasks_totals_are_read_on_from_where_the_last_look_ended(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bar.session.stored import task_totals

    ledger = tmp_path / "ledger.jsonl"
    task: Any = SimpleNamespace(
        id="t1",
        dir=tmp_path,
        paths=SimpleNamespace(ledger=ledger),
        project=SimpleNamespace(paths=SimpleNamespace(cache=tmp_path / "cache")),
    )

    def step(n: int, **session: Any) -> bytes:
        rec = {"step_id": f"{n:04d}", "session": {"model": "m", "turns": 1, **session}}
        return json.dumps(rec).encode() + b"\n"

    assert task_totals(task) is None
    ledger.write_bytes(step(1, input_tokens=10, cost_usd=0.5) + b'{"step_id": "0002"}\n')
    assert task_totals(task) == {
        "steps": 1, "turns": 1, "tool_calls": 0, "input_tokens": 10, "output_tokens": 0,
        "cache_read_tokens": 0, "cost_usd": 0.5, "models": ["m"],
    }  # fmt: skip
    with ledger.open("ab") as f:
        f.write(step(3, input_tokens=5) + b'{"step_id": "00')  # (a line being written)
    found = task_totals(task)
    assert found is not None and (found["steps"], found["input_tokens"]) == (2, 15)
    assert "cost_usd" not in found  # one step's cost is unknown
    # the ledger rewritten (doctor): read again whole, not added to the old sums
    ledger.write_bytes(step(1, input_tokens=7) + step(2, input_tokens=1))
    found = task_totals(task)
    assert found is not None and (found["steps"], found["input_tokens"]) == (2, 8)


def test_transcripts_past_the_total_cap_are_left_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bar.session.capture as capture

    monkeypatch.setattr(capture, "MAX_TOTAL", 300)
    home = tmp_path / "home"
    for i in range(5):
        write(home / f"projects/k/s{i}.jsonl", [claude_line("user", 1, f"prompt {i}")])
    (summary, _), events = finish(home, "claude", tmp_path)
    assert summary["truncated"] is True
    assert 0 < sum(e["type"] == "message" for e in events) < 5
