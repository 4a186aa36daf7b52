"""A vendor's key prefix is enough to mask a key (docs/internals/redact.md: ``sk-…``): a
short Anthropic key (``sk-ant-api03-`` and a few characters) or OpenAI project key
(``sk-proj-…``) given to a real Claude Code in its prompt, printed by a command it runs and
repeated in its answer is in no file bar writes (its output, its session, its ledger), while
the prefix alone, as code and docs name it, is left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ledger, new_task, task_dir
from mock_models import Answer, MockServer, Shell
from real_agents import AgentSetup, agent_binary
from test_planted import leaks

from bar.redact import MARK, Scrubber

ANTHROPIC = "sk-ant-api03-Zq7Xw2L"  # 20 characters
PROJECT = "sk-proj-Hb4Kc9Tm"


@pytest.mark.parametrize(
    "key",
    [ANTHROPIC, PROJECT, "sk-ant-admin01-x9", "sk-svcacct-a1b2", "sk-admin-Q", "sk-ant-mock"],
)
def test_a_short_key_with_a_vendors_prefix_is_masked(key: str) -> None:
    scrubber = Scrubber()
    assert scrubber.scrub_text(f"key: {key}.") == f"key: {MARK}."
    assert scrubber.scrub_bytes(f'"{key}"'.encode()) == f'"{MARK}"'.encode()


@pytest.mark.parametrize(
    "text",
    [
        "Anthropic keys start with sk-ant-api03- and OpenAI's with sk-proj-.",
        'if key.startswith(("sk-ant-", "sk-proj-", "sk-ant-api03")):',
        "disk-proj-alpha task-admin-panel sk-learn-extras",
    ],
)
def test_the_prefix_alone_is_left_alone(text: str) -> None:
    assert Scrubber().scrub_text(text) == text


def test_short_keys_in_a_real_claude_session_never_reach_bars_files(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_binary("claude")
    t = new_task(capfd)
    script = [Shell(f"echo using {ANTHROPIC} and {PROJECT}"), Answer(f"Used {ANTHROPIC}.")]
    with MockServer(script) as server:
        res = AgentSetup("claude", server.url).run_in_bar(
            inited, f"deploy with {ANTHROPIC} and {PROJECT}"
        )
    assert res.returncode == 0, res.stdout + res.stderr
    (step,) = ledger(t["id"])
    events = (task_dir(t["id"]) / step["artifacts"]["session"]).read_text()
    assert f"deploy with {MARK} and {MARK}" in events  # (the prompt was kept, masked)
    output = (task_dir(t["id"]) / step["artifacts"]["output"]).read_text()
    assert f"Used {MARK}." in output
    # the agent's own home keeps its transcript as the agent wrote it (bar masks the
    # values of secret variables there, not token shapes: docs/sessions.md)
    home = str(task_dir(t["id"]) / "agents")
    found = [f for f in leaks(inited, [ANTHROPIC, PROJECT]) if home not in f]
    assert found == []
