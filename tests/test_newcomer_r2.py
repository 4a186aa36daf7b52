"""A newcomer's first hour with bar decide and bar flow, as the docs tell it: what they
see when they get a step slightly wrong, and the words bar answers with."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, ROOT, bar, ledger, new_task, worktree
from test_decide import answer_on_terminal
from test_server import calls

from bar.errors import ExitCode

QUESTIONS = {
    "task": "Add percentage discounts to the cart",
    "source": "TASK.md",
    "items": [
        {
            "id": 1,
            "title": "Rounding of discounted amounts",
            "location": {"file": "TASK.md", "start": 3, "end": 3},
            "options": [
                {"value": "half-up", "label": "Round half up", "score": 80},
                {"value": "floor", "label": "Always round down", "score": 60},
            ],
            "recommend": "half-up",
        },
    ],
}


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert bar(capfd, "init").code == 0
    return new_task(capfd)


def test_a_file_given_without_its_at_sign_is_named_back_with_the_fix(
    task: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps(QUESTIONS))
    res = bar(capfd, "decide", "submit", str(questions))
    assert res.code == ExitCode.USAGE
    assert f"{questions} is a file name, not JSON text" in res.err
    assert f"hint: to read the file, give @{questions}" in res.err
    missing = bar(capfd, "decide", "submit", f"@{tmp_path / 'nope.json'}")
    assert missing.code == ExitCode.USAGE
    assert (
        missing.err.splitlines()[0]
        == f"bar: cannot read {tmp_path / 'nope.json'}: No such file or directory"
    )
    assert "hint: @FILE names a file of JSON" in missing.err
    # what is neither JSON nor a file is still said to be not JSON
    assert "the input is not JSON" in bar(capfd, "decide", "submit", "questions").err
    assert bar(capfd, "decide", "submit", f"@{questions}").code == 0


def test_show_and_answer_say_where_a_decision_stands(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    nothing = bar(capfd, "decide", "show")
    assert nothing.code == ExitCode.NO_DECISION
    assert "has no decisions yet: nothing was submitted" in nothing.err
    result = bar(capfd, "decide", "result")
    assert result.code == ExitCode.NO_DECISION and "nothing was submitted" in result.err
    sid = bar(capfd, "decide", "submit", json.dumps(QUESTIONS), "--json").json()["session_id"]
    # `bar decide list` lists it as pending: show, by default or by its id, says so
    assert f"{sid}  pending" in bar(capfd, "decide", "list").out
    for args in ((), (sid,)):
        shown = bar(capfd, "decide", "show", *args)
        assert shown.code == ExitCode.NOT_DECIDED, shown.err
        assert shown.err.splitlines() == [
            f"bar: decision {sid} is not answered yet",
            "hint: `bar decide answer` shows its questions and asks for your choices",
        ]
    assert bar(capfd, "decide", "answer", "--choose", "1=floor").code == 0
    assert "* floor: Always round down" in bar(capfd, "decide", "show", sid).out
    again = bar(capfd, "decide", "answer")
    assert again.code == ExitCode.NO_DECISION
    assert again.err.splitlines() == [
        "bar: task t1 has no pending decision",
        f"hint: the last one is answered: `bar decide show {sid}`",
    ]


def test_a_one_line_location_reads_as_one_line(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "decide", "submit", json.dumps(QUESTIONS)).code == 0
    screen, code = answer_on_terminal(worktree(task), ["", ""])
    assert code == 0, screen
    assert "where: TASK.md line 3\r\n" in screen and "lines 3-3" not in screen


def test_a_timed_out_wait_points_to_a_command_that_exists(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "decide", "submit", json.dumps(QUESTIONS), "--wait", "--timeout", "0.2")
    assert res.code == ExitCode.NOT_DECIDED
    assert "hint: `bar decide result` prints the answer once there is one" in res.err
    assert "wait again" not in res.err


def test_a_flow_rollback_names_the_state_the_files_return_to(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "flow", "start", "discounts").code == 0
    (wt / "discount.py").write_text("RATE = 10\n")
    assert bar(capfd, "flow", "next-step", "the model").code == 0
    (wt / "discount.py").write_text("RATE = 15\n")
    assert bar(capfd, "flow", "next-step", "a new rate").code == 0
    res = bar(capfd, "flow", "back-step", "--rollback", "the rate was right")
    assert res.code == 0, res.err
    back = ledger(task["id"])[-1]
    assert back["kind"] == "rollback" and (wt / "discount.py").read_text() == "RATE = 10\n"
    assert (
        f"files restored to state {back['target_step']} (rollback {back['step_id']}; "
        "bar undo takes it back)"
    ) in res.out
    assert "state step" not in res.out
    assert bar(capfd, "undo").code == 0
    assert (wt / "discount.py").read_text() == "RATE = 15\n"


def test_an_mcp_tool_error_reads_as_docs_mcp_md_shows_it(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    (bad,) = calls(worktree(task), ("show", {"step": "zz"}))
    assert bad.is_error
    documented = (ROOT / "docs" / "mcp.md").read_text()
    text = bad.content[0].text
    assert text == (
        "Error executing tool show: bar: 'zz' is not a step id\n"
        "hint: step ids look like 0001 or 1; checkpoints like 1.2"
    )
    assert f"```\n{text}\n```" in documented


def test_after_a_timed_out_wait_the_agent_can_wait_again(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """`submit --wait` gave up; `result --wait` (and the MCP tool's wait_seconds) waits for
    the same decision and prints the answer given meanwhile."""
    assert bar(capfd, "decide", "submit", json.dumps(QUESTIONS)).code == 0
    short = bar(capfd, "decide", "result", "--wait", "--timeout", "0.2")
    assert short.code == ExitCode.NOT_DECIDED and "waiting for an answer" in short.err
    (tool_timeout,) = calls(worktree(task), ("decide_result", {"wait_seconds": 0.2}))
    assert tool_timeout.is_error and "not decided yet" in tool_timeout.content[0].text
    assert bar(capfd, "decide", "result", "--timeout", "1").code == ExitCode.USAGE
    waiter = subprocess.Popen(
        [BAR_EXE, "decide", "result", "--wait", "--timeout", "60", "--json"],
        cwd=worktree(task),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert bar(capfd, "decide", "answer", "--choose", "1=floor").code == 0
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    expected = {"decisions": [{"id": 1, "chosen": "floor"}]}
    assert json.loads(out) == expected
    (tool,) = calls(worktree(task), ("decide_result", {"wait_seconds": 5}))
    assert json.loads(tool.content[0].text) == expected
