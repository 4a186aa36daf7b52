"""Claude Code's conversation is the chain from its latest leaf back through
``parentUuid``, and a turn is cut short by Claude Code's own rule
(``bar.session.claude_chain``): on transcripts in the shape Claude Code writes
(tests/data/claude_transcripts), on lines made for one rule each, and through ``bar run
--agent claude`` of the released Claude Code against the mock model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from claude_runs import rewinding, run_script, stop_hook_once, stopped
from helpers import DATA, bar, ledger, new_task, task_dir
from mock_models import Answer, MockServer, Stall
from real_agents import AgentSetup, agent_binary
from test_session_faces import shape

from bar import api
from bar.redact import Scrubber
from bar.session import claude_chain
from bar.session.capture import Capture
from bar.ui import conversation

TRANSCRIPTS = DATA / "claude_transcripts"
START = "2026-11-25T10:00:00.000Z"


def capture(tmp_path: Path, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What bar keeps of the transcript ``name`` (in tests/data, or written in
    ``tmp_path``) as a step's session."""
    home = tmp_path / "home"
    (home / "projects" / "-work-shop").mkdir(parents=True)
    shutil.copy(TRANSCRIPTS / name, home / "projects" / "-work-shop" / "s1.jsonl")
    out = tmp_path / "session.jsonl"
    found = Capture(home, "claude", START).finish(Scrubber(), out, [])
    assert found is not None
    return found[0], [json.loads(line) for line in out.read_text().splitlines()]


def said(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["role"], e["text"]) for e in events if e["type"] == "message"]


# --- the transcripts --------------------------------------------------------------------


def test_a_rewound_reply_is_neither_shown_nor_counted_in_the_conversation(
    tmp_path: Path,
) -> None:
    """The reply to "use 0.2" was given up (the person went back to "Which rate?" and
    asked again): its 5,000 input tokens are the abandoned branch's, not the session's."""
    summary, events = capture(tmp_path, "rewound.jsonl")
    assert said(events) == [
        ("user", "add a discount rate to cart.py"),
        ("assistant", "Which rate?"),
        ("user", "use 0.15 instead"),
        ("assistant", "Set the rate to 0.15."),
    ]
    usage = [e["input_tokens"] for e in events if e["type"] == "usage"]
    assert usage == [100, 200]
    assert (summary["turns"], summary["input_tokens"], summary["output_tokens"]) == (2, 300, 30)
    assert summary["abandoned"] == {
        "turns": 1,
        "input_tokens": 5000,
        "output_tokens": 50,
        "cache_read_tokens": 0,
    }
    assert "interrupts" not in summary


def test_a_budget_counts_the_abandoned_answers_too(tmp_path: Path) -> None:
    """A rewind does not give back what was spent: while the step runs, every answer
    written counts against ``--max-tokens``."""
    home = tmp_path / "home"
    (home / "projects" / "k").mkdir(parents=True)
    shutil.copy(TRANSCRIPTS / "rewound.jsonl", home / "projects" / "k" / "s1.jsonl")
    totals = Capture(home, "claude", START).poll()
    assert (totals.answers, totals.input_tokens, totals.output_tokens) == (3, 5300, 80)


def test_a_turn_that_ends_in_an_attachment_was_interrupted(tmp_path: Path) -> None:
    """The Stop hook sent the model back to work (a meta prompt, then the hook's
    ``attachment``) and nothing answered: Claude Code calls that ``interrupted_turn``."""
    summary, events = capture(tmp_path, "ends_in_attachment.jsonl")
    assert [e["type"] for e in events] == ["message", "message", "usage", "interrupt"]
    assert events[-1]["at"] == "2026-11-25T10:00:02.000Z"  # (after the last event kept)
    assert summary["interrupts"] == 1


def test_claude_codes_own_filler_is_not_the_models_answer(tmp_path: Path) -> None:
    """Resuming a cut turn, Claude Code writes "Continue from where you left off." (meta)
    and answers it itself in the model's place (the ``<synthetic>`` model); an API error
    is written so too, and is shown."""
    at = "2026-11-25T10:00:0{}.000Z".format
    synthetic = {"id": "x1", "model": "<synthetic>", "usage": {"input_tokens": 0}}
    records = [
        line("user", "u1", None, "go on", timestamp=at(1)),
        line("user", "m1", "u1", "Continue from where you left off.", isMeta=True, timestamp=at(2)),
        line(
            "assistant",
            "x1",
            "m1",
            text("No response requested."),
            message=synthetic,
            timestamp=at(3),
        ),
        line(
            "assistant",
            "e1",
            "x1",
            text("API Error: 529 overloaded"),
            message=synthetic,
            isApiErrorMessage=True,
            timestamp=at(4),
        ),
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary, events = capture(tmp_path, str(tmp_path / "t.jsonl"))
    assert said(events) == [("user", "go on"), ("assistant", "API Error: 529 overloaded")]
    # (no answer of the model's; by Claude Code's rule the filler ended the turn)
    assert summary["turns"] == 0 and "interrupts" not in summary


# --- the chain, rule by rule ------------------------------------------------------------


def line(
    kind: str, uid: str, parent: str | None, content: Any = "", **extra: Any
) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": "s1"}
    if kind in ("user", "assistant"):
        rec["message"] = {"role": kind, "content": content, **extra.pop("message", {})}
    rec.update(extra)
    return rec


def text(words: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": words}]


def use(call: str, name: str = "Bash") -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call, "name": name, "input": {}}]


def result(call: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call, "content": "ok"}]


def kept(records: list[dict[str, Any]]) -> list[str]:
    on = claude_chain.live(records)
    return [str(r.get("uuid", r["type"])) for r, yes in zip(records, on, strict=True) if yes]


def test_the_latest_leaf_decides_whatever_the_metadata_says() -> None:
    records = [
        line("user", "u1", None, "hi"),
        line("assistant", "a1", "u1", text("A")),
        line("user", "u2", "a1", "dead"),
        line("assistant", "a2", "u2", text("B")),
        {"type": "summary", "summary": "s", "leafUuid": "a2"},
        line("user", "u3", "a1", "again"),
        line("assistant", "a3", "u3", text("C")),
    ]
    assert kept(records) == ["u1", "a1", "summary", "u3", "a3"]


def test_a_compaction_keeps_what_came_before_it_through_its_logical_parent() -> None:
    """The boundary starts a new chain; what was said before it was still said."""
    records = [
        line("user", "u1", None, "long work"),
        line("assistant", "a1", "u1", text("done part one")),
        line(
            "system",
            "b1",
            None,
            subtype="compact_boundary",
            logicalParentUuid="a1",
            compactMetadata={"trigger": "auto", "preTokens": 182000},
        ),
        line("user", "s1", "b1", "summary of part one", isCompactSummary=True),
        line("user", "u2", "s1", "go on"),
        line("assistant", "a2", "u2", text("part two")),
    ]
    assert kept(records) == ["u1", "a1", "b1", "s1", "u2", "a2"]


def test_parallel_tool_calls_and_their_results_stay_on_the_chain() -> None:
    """Two calls in one answer (one ``message.id``), each result hanging off its own
    call's line: the chain from the leaf passes through one, the other is put back."""
    answer = {"id": "msg_1"}
    records = [
        line("user", "u1", None, "look"),
        line("assistant", "c1", "u1", use("t1"), message=answer),
        line("assistant", "c2", "c1", use("t2"), message=answer),
        line("user", "r1", "c1", result("t1")),
        line("user", "r2", "c2", result("t2")),
        line("assistant", "a2", "r2", text("both done")),
    ]
    assert kept(records) == ["u1", "c1", "c2", "r1", "r2", "a2"]


def test_a_progress_line_in_the_chain_passes_to_its_parent() -> None:
    records = [
        line("user", "u1", None, "run it"),
        line("assistant", "a1", "u1", use("t1")),
        {"type": "progress", "uuid": "p1", "parentUuid": "a1"},
        line("user", "r1", "p1", result("t1")),
        line("assistant", "a2", "r1", text("ran")),
    ]
    assert kept(records) == ["u1", "a1", "p1", "r1", "a2"]


def test_a_lone_system_line_is_no_conversation_and_a_cycle_ends_the_walk() -> None:
    records = [
        line("user", "u1", "a1", "hi"),  # (a cycle: u1 <- a1 <- u1)
        line("assistant", "a1", "u1", text("A")),
        line("user", "u2", "a1", "more"),
        line("assistant", "a2", "u2", text("B")),
        line("system", "x1", None, subtype="informational"),
    ]
    assert kept(records) == ["u1", "a1", "u2", "a2"]


def test_each_subagent_chains_apart_and_lines_out_of_any_chain_stay() -> None:
    records = [
        line("user", "u1", None, "main"),
        line("user", "s1", None, "sub", isSidechain=True, agentId="ag1"),
        line("assistant", "s2", "s1", text("sub answer"), isSidechain=True, agentId="ag1"),
        line("assistant", "a1", "u1", text("main answer")),
        {"type": "user", "message": {"role": "user", "content": "a line with no uuid"}},
    ]
    assert kept(records) == ["u1", "s1", "s2", "a1", "user"]


def state(*records: dict[str, Any]) -> str:
    return claude_chain.turn_state(list(records), range(len(records)))


def test_how_a_turn_ended_as_claude_code_tells_it_on_resume() -> None:
    prompt = line("user", "u1", None, "fix it")
    answer = line("assistant", "a1", "u1", text("fixed"))
    call = line("assistant", "c1", "u1", use("t1"))
    done = line("user", "r1", "c1", result("t1"))
    assert state(prompt, answer) == "none"
    assert state(prompt) == "interrupted_prompt"
    assert state(prompt, call, done) == "interrupted_turn"
    assert state(prompt, answer, line("attachment", "t1", "a1")) == "interrupted_turn"
    # system lines and API errors tell nothing; meta and compaction prompts are no request
    assert state(prompt, answer, line("system", "s", "a1")) == "none"
    error = line("assistant", "e1", "u1", text("API Error: 529"), isApiErrorMessage=True)
    assert state(prompt, error) == "interrupted_prompt"
    assert state(prompt, answer, line("user", "m", "a1", "caveat", isMeta=True)) == "none"
    # a call that got no result, thinking left alone, a blank answer: dropped first
    assert state(prompt, call) == "interrupted_prompt"
    thought = line("assistant", "k1", "u1", [{"type": "thinking", "thinking": "hm"}])
    assert state(prompt, thought) == "interrupted_prompt"
    assert state(prompt, line("assistant", "w1", "u1", text("  \n"))) == "interrupted_prompt"
    # the result of a tool that speaks to the person last ends the turn
    brief = line("assistant", "c2", "u1", use("t2", "SendUserMessage"))
    assert state(prompt, brief, line("user", "r2", "c2", result("t2"))) == "none"


# --- the released Claude Code, through bar run ----------------------------------------


SESSION = "6f1d2c3b-4a59-4e68-9d7c-0b1a2f3e4d5c"


def test_a_rewound_branch_of_a_real_session_is_left_out_of_its_record(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Three prompts in one step; the third rewinds to the first answer. What bar shows
    (``bar show --session``, the UI) is the conversation Claude Code would resume, and
    what it counts is its answers; the rewound answer is counted apart, as abandoned."""
    claude = agent_binary("claude")
    t = new_task(capfd)
    prompts = {
        "ONE:": [Answer("Which rate?")],
        "TWO:": [Answer("Set the rate to 0.2.")],
        "THREE:": [Answer("Set the rate to 0.15.")],
    }
    with MockServer([], usage=(100, 5, 0), prompts=prompts) as server:
        setup = AgentSetup("claude", server.url)
        script = rewinding(
            claude, SESSION, "ONE: add a rate", "TWO: use 0.2", "THREE: use 0.15", "Which rate?"
        )
        res = run_script(inited, setup, script)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Set the rate to 0.2." in res.stdout  # (the dropped answer was given)
    (step,) = ledger(t["id"])
    s = step["session"]
    assert (s["session_id"], s["turns"], s["input_tokens"], s["output_tokens"]) == (
        SESSION,
        2,
        200,
        10,
    )
    assert s["abandoned"] == {
        "turns": 1,
        "input_tokens": 100,
        "output_tokens": 5,
        "cache_read_tokens": 0,
    }
    events = [
        json.loads(x)
        for x in (task_dir(t["id"]) / step["artifacts"]["session"]).read_text().splitlines()
    ]
    assert said(events) == [
        ("user", "ONE: add a rate"),
        ("assistant", "Which rate?"),
        ("user", "THREE: use 0.15"),
        ("assistant", "Set the rate to 0.15."),
    ]
    shown = bar(capfd, "show", "1", "--session").out
    assert "THREE: use 0.15" in shown and "TWO" not in shown and "0.2." not in shown
    assert shown.splitlines()[-1].endswith("· 1 abandoned answer (100 in, 5 out)")
    data = bar(capfd, "show", "1", "--session", "--json").json()
    shape("bar show --json", data)  # (as docs/json.md documents it, abandoned too)
    assert data["session"]["abandoned"] == s["abandoned"]
    task = api.get_task(api.open_project(), t["id"])
    summary, listed = api.session(task, "1")
    page = conversation.section(task, api.show(task, "1"), summary, listed, [])
    assert "THREE: use 0.15" in page and "TWO: use 0.2" not in page
    assert "abandoned" in page


def test_a_real_turn_left_on_an_attachment_is_recorded_interrupted(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The developer's Stop hook sends Claude Code back to work after its answer, and the
    agent is killed while the model thinks again: its transcript ends in the hook's
    attachment after the answer, with no word of the end. bar records the turn
    interrupted, as Claude Code would find it when resuming the session."""
    claude = agent_binary("claude")
    t = new_task(capfd)
    prompt = "ONE: run the tests (killed-after-hook)"
    prompts = {"ONE:": [Answer("The tests pass.")], "lint it": [Stall()]}
    with MockServer([], prompts=prompts) as server:
        setup = AgentSetup("claude", server.url)
        stop_hook_once(setup, "lint it too")
        argv = [claude, "-p", prompt, "--permission-mode", "bypassPermissions"]
        err = stopped(inited, setup, argv, server, 2, agent_word=b"killed-after-hook")
    (step,) = ledger(t["id"])
    home = task_dir(t["id"]) / "agents" / "claude"
    (transcript,) = home.glob("projects/*/*.jsonl")
    written = [json.loads(x) for x in transcript.read_text().splitlines()]
    chained = [r for r in written if "uuid" in r]
    assert [r["type"] for r in chained[-3:]] == ["assistant", "user", "attachment"], written
    assert chained[-2]["isMeta"] and "lint it too" in chained[-2]["message"]["content"]
    events = [
        json.loads(x)
        for x in (task_dir(t["id"]) / step["artifacts"]["session"]).read_text().splitlines()
    ]
    kinds = [e["type"] for e in events if e["type"] != "usage"]
    assert kinds == ["message", "message", "interrupt"], (kinds, err)
    assert step["session"]["interrupts"] == 1
    shown = bar(capfd, "show", "1", "--session").out
    assert "interrupt  the agent was stopped mid-turn" in shown
