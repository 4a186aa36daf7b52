"""Hooks run as real shell processes in a real directory."""

from __future__ import annotations

import io
import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from bar.step.user_hooks import HookFacts, HookResult, run_hooks

FACTS = HookFacts(
    project="demo-a3f2",
    task_id="Ab3_x-9Z",
    task_name="fix-login",
    step_id="0007",
    workspace=Path("/somewhere/workspaces/Ab3_x-9Z"),
    cmd=["pytest", "-k", "login and not slow", "ünï"],
    exit_code=3,
)

# A hook that records what it was given: its environment, its stdin and its cwd.
SPY = """\
import json, os, sys
json.dump(
    {"env": dict(os.environ), "stdin": json.load(sys.stdin), "cwd": os.getcwd()},
    open(sys.argv[1], "w"),
)
"""


@pytest.fixture
def spy(tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "spy.py"
    script.write_text(SPY)
    seen = tmp_path / "seen.json"
    return (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(seen))}",
        seen,
    )


def run(phase: str, commands: list[str], cwd: Path, **kwargs: object) -> list[HookResult]:
    stream = kwargs.pop("stream", None) or io.BytesIO()
    return run_hooks(phase, commands, FACTS, cwd=cwd, stream=stream, **kwargs)  # type: ignore[arg-type]


def test_pre_run_hook_sees_facts_in_env_and_stdin(tmp_path: Path, spy: tuple[str, Path]) -> None:
    command, seen_file = spy
    base_env = {"PATH": os.environ["PATH"], "KEEP_ME": "1", "BAR_EXIT_CODE": "99"}
    [result] = run("pre_run", [command], tmp_path, base_env=base_env)
    assert result.ok, result.describe()
    seen = json.loads(seen_file.read_text())
    env = seen["env"]
    assert env["BAR_PROJECT"] == "demo-a3f2"
    assert env["BAR_TASK_ID"] == "Ab3_x-9Z"
    assert env["BAR_TASK_NAME"] == "fix-login"
    assert env["BAR_STEP_ID"] == "0007"
    assert env["BAR_WORKSPACE"] == "/somewhere/workspaces/Ab3_x-9Z"
    assert json.loads(env["BAR_CMD"]) == ["pytest", "-k", "login and not slow", "ünï"]
    assert env["KEEP_ME"] == "1"
    assert "BAR_EXIT_CODE" not in env  # pre_run: no exit code yet, not even an inherited one
    assert seen["stdin"] == {
        "project": "demo-a3f2",
        "task_id": "Ab3_x-9Z",
        "task_name": "fix-login",
        "step_id": "0007",
        "workspace": "/somewhere/workspaces/Ab3_x-9Z",
        "cmd": ["pytest", "-k", "login and not slow", "ünï"],
        "phase": "pre_run",
    }
    assert Path(seen["cwd"]).resolve() == tmp_path.resolve()


def test_post_run_hook_gets_exit_code(tmp_path: Path, spy: tuple[str, Path]) -> None:
    command, seen_file = spy
    [result] = run("post_run", [command], tmp_path)
    assert result.ok
    seen = json.loads(seen_file.read_text())
    assert seen["env"]["BAR_EXIT_CODE"] == "3"
    assert seen["stdin"]["exit_code"] == 3
    assert seen["stdin"]["phase"] == "post_run"


def test_default_env_is_bars_own_without_git_redirects(
    tmp_path: Path, spy: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    command, seen_file = spy
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("FROM_PARENT", "yes")
    [result] = run("pre_run", [command], tmp_path)
    assert result.ok
    env = json.loads(seen_file.read_text())["env"]
    assert env["FROM_PARENT"] == "yes"
    assert "GIT_DIR" not in env


def test_failing_pre_run_hook_stops_the_rest(tmp_path: Path) -> None:
    results = run(
        "pre_run",
        ["touch first", "echo 'lint: 2 errors' >&2; exit 2", "touch third"],
        tmp_path,
    )
    assert [r.exit_code for r in results] == [0, 2]
    assert (tmp_path / "first").exists()
    assert not (tmp_path / "third").exists()
    failed = results[-1]
    assert not failed.ok
    assert failed.describe() == (
        "pre_run hook \"echo 'lint: 2 errors' >&2; exit 2\" failed with exit code 2"
    )
    assert failed.record().to_record() == {
        "phase": "pre_run",
        "cmd": "echo 'lint: 2 errors' >&2; exit 2",
        "exit_code": 2,
    }


def test_post_run_runs_every_hook_and_reports_failures(tmp_path: Path) -> None:
    results = run("post_run", ["exit 1", "touch second", "exit 5"], tmp_path)
    assert [r.exit_code for r in results] == [1, 0, 5]
    assert [r.ok for r in results] == [False, True, False]
    assert (tmp_path / "second").exists()
    assert results[2].describe() == "post_run hook 'exit 5' failed with exit code 5"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    return True


def test_timeout_kills_the_hook_and_its_children(tmp_path: Path) -> None:
    stream = io.BytesIO()
    started = time.monotonic()
    results = run(
        "pre_run",
        ["sleep 30 & echo $! > child.pid; echo started; sleep 30", "touch never"],
        tmp_path,
        timeout=2,  # (time enough, on a loaded machine, to start and say so)
        stream=stream,
    )
    took = time.monotonic() - started
    [result] = results
    assert result.timed_out and not result.ok
    # stopped, not waited for (it would sleep 30 s): the bound is loose for a busy machine
    assert took < 20, f"hook was not stopped promptly ({took:.1f} s)"
    assert (
        result.describe()
        == "pre_run hook 'sleep 30 & echo $! > child.pid; echo started; sleep 30' timed out after 2 s"
    )
    assert result.record().to_record()["timed_out"] is True
    assert result.exit_code >= 128
    assert b"[pre_run] started\n" in stream.getvalue()
    assert not (tmp_path / "never").exists()

    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 60
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the hook's background child survived the timeout"


def test_timeout_kills_a_hook_that_ignores_sigterm(tmp_path: Path) -> None:
    started = time.monotonic()
    [result] = run("post_run", ["trap '' TERM; while :; do sleep 0.1; done"], tmp_path, timeout=0.3)
    assert result.timed_out
    assert time.monotonic() - started < 20  # (it would loop for ever)


def test_hook_output_goes_to_the_stream_prefixed_in_order(tmp_path: Path) -> None:
    stream = io.BytesIO()
    run(
        "pre_run",
        ["echo one; echo two >&2; printf 'no newline'", "echo next"],
        tmp_path,
        stream=stream,
    )
    assert stream.getvalue() == (
        b"[pre_run] one\n[pre_run] two\n[pre_run] no newline\n[pre_run] next\n"
    )


def test_huge_command_reaches_hooks_on_stdin_and_does_not_hang_them(
    tmp_path: Path, spy: tuple[str, Path]
) -> None:
    command, seen_file = spy
    prompt = "word " * 200_000  # an agent prompt of 1 MB: too big for the environment
    facts = HookFacts("p", "t", "n", "0001", tmp_path, ["agent", "-p", prompt])
    started = time.monotonic()
    results = run_hooks(
        "pre_run",
        ["sleep 0.2; exit 0", command],  # the first one never reads its stdin
        facts,
        cwd=tmp_path,
        stream=io.BytesIO(),
        timeout=10,
    )
    assert [r.ok for r in results] == [True, True], [r.describe() for r in results]
    assert time.monotonic() - started < 5
    seen = json.loads(seen_file.read_text())
    assert seen["stdin"]["cmd"] == ["agent", "-p", prompt]
    assert "BAR_CMD" not in seen["env"]
    assert seen["env"]["BAR_STEP_ID"] == "0001"


def test_background_process_holding_output_open_does_not_block(tmp_path: Path) -> None:
    started = time.monotonic()
    [result] = run("post_run", ["sleep 3 & echo $! > bg.pid; exit 0"], tmp_path, timeout=30)
    try:
        assert result.ok
        assert time.monotonic() - started < 2.5
    finally:
        os.kill(int((tmp_path / "bg.pid").read_text()), 15)


def test_command_not_found(tmp_path: Path) -> None:
    stream = io.BytesIO()
    [result] = run("pre_run", ["no-such-command-for-bar-tests --flag"], tmp_path, stream=stream)
    assert result.exit_code == 127
    assert result.error is None
    assert result.describe() == (
        "pre_run hook 'no-such-command-for-bar-tests --flag' failed with exit code 127"
        " (command not found)"
    )
    assert b"no-such-command-for-bar-tests" in stream.getvalue()  # the shell's own message


def test_hook_that_cannot_start(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    results = run("pre_run", ["true", "true"], missing)
    [result] = results
    assert not result.ok
    assert result.exit_code == 127
    assert result.error is not None and str(missing) in result.error
    assert result.describe().startswith("pre_run hook 'true' could not start: ")


def test_killed_by_signal(tmp_path: Path) -> None:
    [result] = run("post_run", ["kill -KILL $$"], tmp_path)
    assert result.exit_code == 137
    assert result.signal == 9
    assert not result.timed_out
    assert result.describe() == "post_run hook 'kill -KILL $$' was killed by SIGKILL"


def test_no_hooks_no_results(tmp_path: Path) -> None:
    assert run("pre_run", [], tmp_path) == []


def test_rejects_unknown_phase_and_bad_timeout(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="phase"):
        run("during_run", ["true"], tmp_path)
    with pytest.raises(ValueError, match="timeout"):
        run("pre_run", ["true"], tmp_path, timeout=0)


def test_describe_shortens_long_and_multiline_commands() -> None:
    long = HookResult("pre_run", "make " + "x" * 200, 1, False, 5)
    assert len(long.describe()) < 120
    multi = HookResult("post_run", "set -e\nmake lint\nmake test", 2, False, 5)
    assert multi.describe() == "post_run hook 'set -e…' failed with exit code 2"
