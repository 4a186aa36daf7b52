"""``bar status`` says when the agent's decision waits for an answer, and the command
that answers it; once answered, it says nothing of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bar, new_task

QUESTION = {
    "task": "auth",
    "source": "task.md",
    "items": [
        {
            "id": 1,
            "title": "Tokens?",
            "options": [{"value": "jwt", "label": "JWT"}, {"value": "opaque", "label": "Opaque"}],
        },
        {
            "id": 2,
            "title": "Hash?",
            "options": [
                {"value": "bcrypt", "label": "bcrypt"},
                {"value": "argon2", "label": "Argon2"},
            ],
        },
    ],
}


def test_status_names_the_decision_that_waits(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd, "auth-work")
    new_task(capfd, "other")  # active: the waiting decision is another task's
    assert bar(capfd, "status", "--json").json()["decision"] is None
    asked = bar(capfd, "decide", "submit", json.dumps(QUESTION), "--task", "auth-work", "--json")
    assert asked.code == 0, asked.err
    sid = asked.json()["session_id"]
    said = bar(capfd, "status", "--task", "auth-work")
    assert said.code == 0
    assert f"decide    the agent waits for your answer to decision {sid}: auth (2 questions)" in (
        said.out
    )
    assert "answer with: bar decide answer --task auth-work" in said.out
    data = bar(capfd, "status", "--task", "auth-work", "--json").json()
    assert data["decision"] == {
        "session_id": sid,
        "task": "auth",
        "created_at": data["decision"]["created_at"],
        "items": 2,
    }
    assert "decide " not in bar(capfd, "status").out  # the active task has none
    answer = (
        "decide",
        "answer",
        "--task",
        "auth-work",
        "--choose",
        "1=jwt",
        "--choose",
        "2=bcrypt",
    )
    assert bar(capfd, *answer).code == 0
    assert "decide " not in bar(capfd, "status", "--task", "auth-work").out
    assert bar(capfd, "status", "--task", "auth-work", "--json").json()["decision"] is None
