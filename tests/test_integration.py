"""bar run with everything around it: policy, hooks, secrets, agents and terminals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import BAR_EXE, bar, ledger, new_task, project_dir, task_dir, worktree

FAKE_AGENT = str(Path(__file__).parent / "fake_agent.py")


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    return repo


def set_config(**sections: dict[str, object]) -> None:
    path = project_dir() / "config.yaml"
    data = yaml.safe_load(path.read_text())
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    path.write_text(yaml.safe_dump(data))


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
    assert res.code == 0
    data = res.json()
    assert data["decision"] == "block" and data["events"]
    res = bar(capfd, "policy", "check", "--json", "--", "git", "push", "--force-with-lease")
    assert res.json()["decision"] in ("allow", "log")
    assert bar(capfd, "policy", "check", "--exit-code", "-c", "rm -rf ~").code == 126
    res = bar(capfd, "policy", "test")
    assert res.code == 0 and "examples pass" in res.out


# --- hooks --------------------------------------------------------------------------


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


def test_secrets_never_reach_disk(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_env = "s3cr3t-value-from-the-environment"
    monkeypatch.setenv("MY_API_TOKEN", secret_env)
    set_config(run={"record_env": ["MY_API_TOKEN", "HOME"]})
    t = new_task(capfd)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    given = "given-with-e-flag-secret"
    script = (
        f"echo token {token}; echo env $MY_API_TOKEN; echo given $DB_PASSWORD >&2; "
        # split the secret across two writes
        f"printf '{secret_env[:10]}'; sleep 0.2; printf '{secret_env[10:]}\\n'"
    )
    res = bar(capfd, "run", "-e", f"DB_PASSWORD={given}", "--", "sh", "-c", script)
    assert res.code == 0
    assert token in res.out  # shown live to the developer ...
    for path in Path(os.environ["BAR_HOME"]).rglob("*"):
        if path.is_file() and path.suffix not in (".pack", ".idx"):
            data = path.read_bytes()
            for secret in (token, secret_env, given):
                assert secret.encode() not in data, f"{secret} leaked into {path}"
    (step,) = ledger(t["id"])
    assert step["env"]["DB_PASSWORD"] == "***" and step["env"]["MY_API_TOKEN"] == "***"
    assert "HOME" in step["env"]
    out = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert "token ***" in out and "given ***" in out


# --- agents -------------------------------------------------------------------------


def test_agent_inner_commands_go_through_the_policy(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    res = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", "claude", "--",
         sys.executable, FAKE_AGENT, "--agent", "claude",
         "echo benign > ok.txt", "rm -rf / --no-preserve-root; touch destroyed.txt"],
        cwd=inited, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "RAN: echo benign > ok.txt" in res.stdout
    assert "DENIED: rm -rf /" in res.stdout
    assert (wt / "ok.txt").exists() and not (wt / "destroyed.txt").exists()
    (step,) = ledger(t["id"])
    events = step["policy_events"]
    sources = {e.get("source") for e in events}
    assert sources == {"hook:claude"}
    decisions = {e["command"]: e["decision"] for e in events}
    assert decisions["echo benign > ok.txt"] == "allow"
    assert decisions["rm -rf / --no-preserve-root; touch destroyed.txt"] == "block"
    assert all(e.get("session_id") for e in events)
    # the hook settings were installed for the run only and never recorded
    assert not (wt / ".claude").exists()
    assert step["diff_stat"]["file_list"] == ["ok.txt"]
    assert not (task_dir(t["id"]) / "artifacts/0001.policy.jsonl").exists()


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_other_agents_are_wired_too(
    agent: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    res = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", agent, "--",
         sys.executable, FAKE_AGENT, "--agent", agent, "git reset --hard HEAD~3", "ls"],
        cwd=inited, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "DENIED: git reset --hard" in res.stdout and "RAN: ls" in res.stdout
    (step,) = ledger(t["id"])
    assert {e["decision"] for e in step["policy_events"]} == {"block", "allow"}


def test_hook_outside_a_run_answers_and_records_nothing(inited: Path) -> None:
    event = {
        "session_id": "s1", "transcript_path": "/tmp/t", "cwd": str(inited),
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "git push --force origin main"}, "tool_use_id": "tu1",
    }  # fmt: skip
    res = subprocess.run([BAR_EXE, "hook", "claude"], input=json.dumps(event).encode(),
                         capture_output=True, cwd=inited, timeout=60)  # fmt: skip
    assert res.returncode == 2
    assert json.loads(res.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    event["tool_input"] = {"command": "ls -la"}
    res = subprocess.run([BAR_EXE, "hook", "claude"], input=json.dumps(event).encode(),
                         capture_output=True, cwd=inited, timeout=60)  # fmt: skip
    assert res.returncode == 0 and res.stdout == b""
    res = subprocess.run([BAR_EXE, "hook", "claude"], input=b"{not json",
                         capture_output=True, cwd=inited, timeout=60)  # fmt: skip
    assert res.returncode == 2 and b"Traceback" not in res.stderr and res.stderr


def test_agent_setup_prints_settings(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    res = bar(capfd, "agent", "setup", "claude")
    assert res.code == 0 and ".claude/settings.local.json" in res.out
    assert "hook claude" in res.out and "PreToolUse" in res.out


# --- interactive ----------------------------------------------------------------------


def test_pty_step_records_cast_and_clean_text(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    code = "import sys; print(sys.stdout.isatty()); print('\\x1b[31mred\\x1b[0m done')"
    res = subprocess.run([BAR_EXE, "run", "--pty", "--", sys.executable, "-c", code],
                         cwd=inited, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert res.returncode == 0, res.stderr
    (step,) = ledger(t["id"])
    assert step["pty"] is True
    assert step["artifacts"]["cast"] == "artifacts/0001.cast"
    text = (task_dir(t["id"]) / step["artifacts"]["output"]).read_text()
    assert text == "=== STDOUT ===\nTrue\nred done\n=== STDERR ===\n"
    lines = (task_dir(t["id"]) / "artifacts/0001.cast").read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert "\x1b[31m" in "".join(json.loads(x)[2] for x in lines[1:])
    replay = subprocess.run([BAR_EXE, "replay", "1", "--instant"], cwd=inited,
                            capture_output=True, timeout=60)  # fmt: skip
    assert replay.returncode == 0 and b"red" in replay.stdout
