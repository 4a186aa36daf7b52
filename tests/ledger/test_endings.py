"""How a step ended, in the words every face shows (``bar.model.endings``): from the
ledger line's own fields, a stopped step never reads as a success."""

from __future__ import annotations

from typing import Any

import pytest

from bar.model.records import RunStep


def step(**fields: Any) -> RunStep:
    extra = fields.pop("extra", {})
    return RunStep(
        step_id="0001",
        started_at="2026-11-27T10:00:00.000Z",
        ended_at="2026-11-27T10:00:01.000Z",
        duration_ms=1000,
        cmd=["claude", "-p", "fix it"],
        extra=extra,
        **fields,
    )


@pytest.mark.parametrize(
    ("fields", "text", "tone"),
    [
        ({"exit_code": 0}, "exit 0", "ok"),
        ({"exit_code": 2}, "exit 2", "bad"),
        ({"exit_code": 130, "signal": 2}, "interrupted (SIGINT, exit 130)", "warn"),
        # an agent that caught the signal and chose its own code: still stopped
        ({"exit_code": 1, "signal": 2}, "interrupted (SIGINT, exit 1)", "warn"),
        ({"exit_code": 143, "signal": 15}, "terminated (SIGTERM, exit 143)", "warn"),
        ({"exit_code": 137, "signal": 9}, "killed (SIGKILL, exit 137)", "bad"),
        ({"exit_code": 159, "signal": 31}, "killed (signal 31, exit 159)", "bad"),
        (
            {"exit_code": None, "interrupted": True},
            "interrupted (bar stopped before the command ended)",
            "warn",
        ),
        ({"exit_code": 126, "blocked": True}, "blocked (by policy; nothing ran)", "bad"),
        ({"exit_code": 0, "extra": {"stopped": "budget"}}, "stopped: budget (exit 0)", "warn"),
        (
            {"exit_code": 10, "extra": {"stopped_by": "pre_run"}},
            "stopped (by a failing pre_run hook)",
            "bad",
        ),
    ],
)
def test_each_ending_has_one_word_and_its_detail(
    fields: dict[str, Any], text: str, tone: str
) -> None:
    ending = step(**fields).ending
    assert (ending.text, ending.tone) == (text, tone)
    assert ending.ok is (text == "exit 0")
