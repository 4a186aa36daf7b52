"""pre_run and post_run hooks around a step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import bar, ledger, new_task, set_config, worktree


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    return repo


# --- policy in bar run --------------------------------------------------------------


def test_pre_and_post_run_hooks(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    set_config(
        hooks={
            "pre_run": ['echo "pre $BAR_STEP_ID $BAR_CMD" >> ../hooks.log'],
            "post_run": ["cat > ../post.json; echo post $BAR_EXIT_CODE >> ../hooks.log"],
        }
    )
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "sh", "-c", "exit 4").code == 4
    log = (worktree(t).parent / "hooks.log").read_text()
    assert 'pre 0001 ["sh", "-c", "exit 4"]' in log and "post 4" in log
    facts = json.loads((worktree(t).parent / "post.json").read_text())
    assert facts["exit_code"] == 4 and facts["task_id"] == t["id"]
    (step,) = ledger(t["id"])
    assert [(h["phase"], h["exit_code"]) for h in step["hooks"]] == [
        ("pre_run", 0),
        ("post_run", 0),
    ]


def test_failing_pre_run_hook_stops_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(hooks={"pre_run": ["echo lint failed >&2; exit 3"]})
    t = new_task(capfd)
    res = bar(capfd, "run", "--", "touch", "should-not-exist")
    assert res.code == 10
    assert "pre_run hook" in res.err and "did not run" in res.err
    assert not (worktree(t) / "should-not-exist").exists()


def test_failing_post_run_hook_keeps_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(hooks={"post_run": ["exit 9"], "timeout": 5})
    t = new_task(capfd)
    res = bar(capfd, "run", "--", "touch", "made")
    assert res.code == 0 and "post_run hook" in res.err
    (step,) = ledger(t["id"])
    assert step["hooks"][0]["exit_code"] == 9
    assert step["diff_stat"]["file_list"] == ["made"]


# --- secrets ------------------------------------------------------------------------
