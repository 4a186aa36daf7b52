"""The policy in bar run: blocked commands never run, warnings run, the checkout's policy rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import bar, ledger, new_task, project_dir, worktree

# --- policy in bar run --------------------------------------------------------------


def test_init_enables_the_policy_and_never_overwrites_it(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = yaml.safe_load((project_dir() / "config.yaml").read_text())
    assert config["policy"]["enabled"] is True
    policy = inited / ".bar" / "policy.yaml"
    policy.write_text("version: 1\nrules: []\n")
    assert bar(capfd, "init").code == 0
    assert policy.read_text() == "version: 1\nrules: []\n"


def test_blocked_command_does_not_run_and_is_recorded(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = bar(capfd, "run", "--", "sh", "-c", "touch ran.txt && rm -rf /")
    assert res.code == 126
    assert "blocked" in res.err
    assert not (worktree(t) / "ran.txt").exists()
    (step,) = ledger(t["id"])
    assert step["blocked"] is True and step["exit_code"] == 126
    assert any(e["action"] == "block" for e in step["policy_events"])
    assert set(step["policy_events"][0]) >= {"rule", "action", "matched"}


def test_warned_command_runs_with_a_warning(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    policy = inited / ".bar" / "policy.yaml"
    policy.write_text(
        "version: 1\nrules:\n  - name: careful-touch\n    pattern: '^touch '\n"
        "    action: warn\n    reason: touching files\n"
    )
    t = new_task(capfd)
    res = bar(capfd, "run", "--", "touch", "x")
    assert res.code == 0 and "careful-touch" in res.err
    (step,) = ledger(t["id"])
    assert step["policy_events"][0]["action"] == "warn"
    assert (worktree(t) / "x").exists()


def test_policy_is_read_from_the_checkout_not_the_worktree(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import shutil

    t = new_task(capfd)
    # the agent's copy of the policy (if any) is irrelevant: loosen it in the worktree
    (worktree(t) / ".bar").mkdir(exist_ok=True)
    (worktree(t) / ".bar" / "policy.yaml").write_text("version: 1\nrules: []\n")
    res = bar(capfd, "run", "--", "rm", "-rf", "/")
    assert res.code == 126
    shutil.rmtree(worktree(t) / ".bar")


def test_broken_policy_names_rule_and_file(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    policy = inited / ".bar" / "policy.yaml"
    policy.write_text(
        "version: 1\nrules:\n  - name: bad-one\n    pattern: '(unclosed'\n"
        "    action: block\n    reason: x\n"
    )
    new_task(capfd)
    res = bar(capfd, "run", "--", "true")
    assert res.code == 8 and "bad-one" in res.err and str(policy) in res.err
    res = bar(capfd, "policy", "test")
    assert res.code == 8 and "bad-one" in res.err


def test_policy_check_command(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "policy", "check", "--json", "-c", "echo hi && git push --force origin main")
    assert res.code == 126  # the exit status is the decision
    data = res.json()
    assert data["decision"] == "block" and data["events"]
    res = bar(capfd, "policy", "check", "--json", "--", "git", "push", "--force-with-lease")
    assert res.code == 0 and res.json()["decision"] in ("allow", "log")
    # --exit-code is what old scripts asked for: still accepted, the same status
    assert bar(capfd, "policy", "check", "--exit-code", "-c", "rm -rf ~").code == 126
    assert bar(capfd, "policy", "check", "--exit-code", "-c", "ls").code == 0
    res = bar(capfd, "policy", "test")
    assert res.code == 0 and "examples pass" in res.out


# --- hooks --------------------------------------------------------------------------
