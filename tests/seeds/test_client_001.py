"""A client written from reference 001 alone (``client_001.py``, no bar in it) reads the
files a real ``bar run --agent claude`` left, and finds what bar recorded.

One session over three steps, the released Claude Code against the mock model: the first
step writes a file, goes on, and rewinds (the second prompt and its answer are a dead
branch); in the second the developer's Stop hook sends the agent back to work and the
agent is killed while the model thinks, so the transcript ends in an attachment; the
third resumes the session. A secret value of the developer's is in the first prompt, so
bar rewrites the transcript in the agent's home to mask it.

The client finds the session where the reference says it lives (the home bar gives the
agent is its config directory), follows the chain from the latest leaf, and rebuilds the
conversation as Claude Code does on resume; bar's record says the same: the same
conversation without the dead branch, the same tokens (the dead branch's apart), the
same interrupted turn. Claude Code itself, resuming, sends the model what the client
rebuilt. The two agree on the transcripts of tests/data/claude_transcripts too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import client_001 as client
import pytest
from claude_runs import rewinding, run_script, stop_hook_once, stopped
from helpers import DATA, ledger, new_task, task_dir, worktree
from mock_models import Answer, MockServer, Stall, WriteFile
from real_agents import AgentSetup, agent_binary

SESSION = "3c9e1f0a-7b2d-4e5f-8a6b-1d2c3e4f5a6b"
SECRET = "seedSecret-5f1e2d3c4b5a"
KEYS = ("ONE:", "TWO:", "THREE:", "FOUR:", "FIVE:")


def recorded(t: dict[str, Any], step: dict[str, Any]) -> list[tuple[str, str]]:
    """bar's record of a step's conversation, as the client lists one."""
    out: list[tuple[str, str]] = []
    path = task_dir(t["id"]) / step["artifacts"]["session"]
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e["type"] == "message":
            out.append((e["role"], e["text"]))
        elif e["type"] in ("tool_call", "tool_result"):
            out.append((e["type"], e["id"]))
    return out


def prompts_in(said: list[str]) -> list[str]:
    return [text for text in said if text.startswith(KEYS)]


def texts(content: Any) -> list[str]:
    """The texts of a message's content as sent to the model."""
    if isinstance(content, str):
        return [content]
    return [str(b.get("text")) for b in content if isinstance(b, dict) and b.get("type") == "text"]


def test_a_client_of_reference_001_reads_what_bar_produced(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = agent_binary("claude")
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)
    t = new_task(capfd)
    wt = worktree(t)
    script = {
        "ONE:": [WriteFile(str(wt / "notes.txt"), "alpha\n"), Answer("Notes written.")],
        "TWO:": [Answer("An answer given up.")],
        "THREE:": [Answer("Kept answer.")],
        "FOUR:": [Answer("Checked.")],
        "lint it": [Stall()],
        "FIVE:": [Answer("Going on.")],
    }
    with MockServer([], prompts=script) as server:
        setup = AgentSetup("claude", server.url)
        first = rewinding(
            claude,
            SESSION,
            f"ONE: write the notes, the token is {SECRET}",
            "TWO: add more",
            "THREE: add less",
            "Notes written.",
        )
        res = run_script(inited, setup, first)
        assert res.returncode == 0, res.stdout + res.stderr
        stop_hook_once(setup, "lint it too")
        heard = sum(r.main for r in server.model.requests)
        argv = [claude, "-p", "FOUR: check it (seed-client)", "--resume", SESSION]
        argv += ["--permission-mode", "bypassPermissions"]
        stopped(inited, setup, argv, server, heard + 2, agent_word=b"seed-client")
        setup.own_settings({"env": {"MY_OWN": "1"}})
        heard = len(server.model.requests)
        res = setup.run_in_bar(inited, "FIVE: go on", extra=("--resume", SESSION))
        assert res.returncode == 0, res.stdout + res.stderr
        resumed = next(r for r in server.model.requests[heard:] if r.main).body["messages"]
    steps = ledger(t["id"])
    assert [s["session"]["session_id"] for s in steps] == [SESSION] * 3

    # found where the reference says: <config dir>/projects/<project key>/<session>.jsonl
    home = task_dir(t["id"]) / "agents" / "claude"
    path = client.session_path(home, str(wt), SESSION)
    assert path.is_file() and client.find_session(home, SESSION) == path
    assert SECRET not in path.read_text()  # (bar rewrote it: masked, still a transcript)

    view = client.resume(path)
    assert view.session_id == SESSION
    kept = [m for m in view.chain if m["timestamp"] < steps[2]["started_at"]]

    # the conversation: bar's record of the first two steps is the client's chain
    assert client.said(kept) == recorded(t, steps[0]) + recorded(t, steps[1])
    assert ("user", "TWO: add more") not in recorded(t, steps[0])
    dead = client.said(view.dead)
    assert dead == [("user", "TWO: add more"), ("assistant", "An answer given up.")]

    # the tokens: the live answers are the session's, the dead one is abandoned
    counted = client.tokens(kept)
    sessions = [s["session"] for s in steps[:2]]
    assert counted["answers"] == sum(s["turns"] for s in sessions)
    for key in ("input_tokens", "output_tokens", "cache_read_tokens"):
        assert counted[key] == sum(s[key] for s in sessions), key
    gone = client.tokens(view.dead)
    assert sessions[0]["abandoned"]["turns"] == gone["answers"] == 1
    assert sessions[0]["abandoned"]["input_tokens"] == gone["input_tokens"]
    assert "abandoned" not in sessions[1]

    # the second step ended in the Stop hook's attachment: interrupted, for both
    upto_second = [m for m in kept if m["timestamp"] >= steps[1]["started_at"]]
    assert upto_second[-1]["type"] == "attachment"
    assert client.interruption(kept) == "interrupted_turn"
    assert sessions[1]["interrupts"] == 1 and "interrupts" not in sessions[0]

    # and Claude Code resumed the conversation the client rebuilt, dead branch left out
    sent = [text for m in resumed if m.get("role") == "user" for text in texts(m["content"])]
    rebuilt = [text for kind, text in client.said(client.cleaned(kept)) if kind == "user"]
    assert prompts_in(sent) == [*prompts_in(rebuilt), "FIVE: go on"]
    assert client.CONTINUE in sent  # (Claude Code found the second step's turn cut short)
    assert prompts_in(rebuilt) == [
        "ONE: write the notes, the token is ***",
        "THREE: add less",
        "FOUR: check it (seed-client)",
    ]
    assert view.state == "none"  # (the third step answered)
    # what Claude Code put in the model's place to resume it is not the model's answer
    assert recorded(t, steps[2]) == [("user", "FIVE: go on"), ("assistant", "Going on.")]
    assert ("assistant", "No response requested.") in client.said(view.chain)

    # bar's own record is tool-neutral, not Claude Code's: the reference's
    # client finds no transcript in it (docs/sessions.md says so)
    artifact = task_dir(t["id"]) / steps[0]["artifacts"]["session"]
    assert client.load(artifact).messages == {}


@pytest.mark.parametrize("name", ["rewound.jsonl", "ends_in_attachment.jsonl"])
def test_the_client_and_bar_agree_on_transcripts_shaped_as_claude_code_writes_them(
    name: str, tmp_path: Path
) -> None:
    """The rewind and the turn left on an attachment, as fixtures in Claude Code's shape
    (tests/data/claude_transcripts): what the client resumes is what bar records."""
    from bar.redact import Scrubber
    from bar.session.capture import Capture

    source = DATA / "claude_transcripts" / name
    home = tmp_path / "claude"
    path = client.session_path(home, "/work/shop", "s1")  # (the cwd the lines record)
    path.parent.mkdir(parents=True)
    path.write_bytes(source.read_bytes())
    view = client.resume(path)
    out = tmp_path / "session.jsonl"
    found = Capture(home, "claude", "2026-11-25T10:00:00.000Z").finish(Scrubber(), out, [])
    assert found is not None
    summary, events = found[0], [json.loads(x) for x in out.read_text().splitlines()]
    kept = [(e["role"], e["text"]) for e in events if e["type"] == "message"]
    assert kept == client.said(view.chain)
    counted = client.tokens(view.chain)
    assert (summary["turns"], summary["input_tokens"]) == (
        counted["answers"],
        counted["input_tokens"],
    )
    gone = client.tokens(view.dead)
    assert summary.get("abandoned", {}).get("input_tokens", 0) == gone["input_tokens"]
    assert summary.get("interrupts", 0) == (view.state != "none")
    assert view.state == ("interrupted_turn" if name.startswith("ends") else "none")
