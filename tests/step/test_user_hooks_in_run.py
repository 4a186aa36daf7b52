"""pre_run and post_run hooks around a step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, project_dir, set_config, worktree

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
    # recorded like a blocked step: nothing ran, the failing hook and its exit code kept
    (step,) = ledger(t["id"])
    assert step["cmd"] == ["touch", "should-not-exist"] and step["exit_code"] == 10
    assert step["stopped_by"] == "pre_run" and "blocked" not in step
    assert [(h["phase"], h["exit_code"]) for h in step["hooks"]] == [("pre_run", 3)]
    assert step["snapshot"] == step["snapshot_before"] and step["diff_stat"]["files"] == 0
    assert "step 0001 recorded" in res.err
    (line,) = bar(capfd, "log").out.splitlines()
    assert " stopped " in line and "touch should-not-exist" in line
    shown = bar(capfd, "show", "1").out
    assert "by a failing pre_run hook" in shown and "-> exit 3" in shown
    # --json: the record on stdout, the exit status still says the hook stopped it
    res = bar(capfd, "run", "--json", "--", "true")
    assert res.code == 10 and res.json()["stopped_by"] == "pre_run"
    assert res.json()["step_id"] == "0002"


def test_what_a_failing_pre_run_hook_printed_is_kept_with_the_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    token = "ghp_" + "k" * 36  # the shape of a GitHub token: scrubbed like any output
    set_config(hooks={"pre_run": ["echo checking", f"echo lint: 2 errors {token} >&2; exit 1"]})
    new_task(capfd)
    res = bar(capfd, "run", "--", "true")
    assert res.code == 10 and "[pre_run] lint: 2 errors" in res.err
    # the hint names the file the hook is in: the developer's own config.yaml
    assert f"hooks.pre_run in {project_dir() / 'config.yaml'}" in res.err
    js = bar(capfd, "show", "1", "--json").json()
    assert js["output_text"] == (
        "=== STDOUT ===\n=== STDERR ===\n[pre_run] checking\n[pre_run] lint: 2 errors ***\n"
    )
    shown = bar(capfd, "show", "1").out
    assert "[pre_run] lint: 2 errors ***" in shown and token not in shown
    # a hook that printed nothing leaves no output artifact
    set_config(hooks={"pre_run": ["exit 1"]})
    assert bar(capfd, "run", "--", "true").code == 10
    assert bar(capfd, "show", "2", "--json").json()["output_text"] is None


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


def test_a_secret_in_a_failing_hooks_command_is_hidden_before_it_is_cut_short(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    token = "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 3
    # cut at 60 characters, the token would keep only its first few, too few to be known
    set_config(hooks={"pre_run": [f"echo {'x' * 44} {token} >/dev/null; exit 3"]})
    new_task(capfd)
    res = bar(capfd, "run", "--", "true")
    assert res.code == 10 and "pre_run hook" in res.err
    assert token[:6] not in res.err and "***" in res.err
