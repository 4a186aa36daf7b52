"""bar run: a command recorded as a step, exactly, on real repositories."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from helpers import bar, bar_exe, ledger, new_task, project_dir, task_dir, worktree

from conftest import git

# --- init ----------------------------------------------------------------------------


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    # Policy is exercised in its own tests; keep the core loop independent of it.
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    return repo


def test_run_records_a_step_exactly(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    res = bar(
        capfd,
        "run",
        "-e",
        "MODE=fast",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; printf 'x\\n' > a.txt; rm README.md; exit 3",
    )
    assert res.code == 3
    assert "out" in res.out and "err" in res.err
    (step,) = ledger(t["id"])
    assert step["step_id"] == "0001" and step["kind"] == "run"
    assert step["cmd"][0] == "sh" and step["cwd"] == "."
    assert step["env"] == {"MODE": "fast"}
    assert step["exit_code"] == 3
    assert step["diff_stat"] == {
        "files": 2,
        "additions": 1,
        "deletions": 1,
        "file_list": ["README.md", "a.txt"],
    }
    assert step["artifacts"] == {"patch": "artifacts/0001.patch", "output": "artifacts/0001.output"}
    assert step["policy_events"] == []
    for key in ("started_at", "ended_at"):
        assert step[key].endswith("Z")
    assert isinstance(step["duration_ms"], int)
    out = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert out == "=== STDOUT ===\nout\n=== STDERR ===\nerr\n"
    assert step["snapshot"] == git(inited, "rev-parse", t["snapshot_ref"]).strip()
    assert step["snapshot_before"] == t["base_commit"]
    assert step["head"] == t["base_commit"]
    mode = stat.S_IMODE((task_dir(t["id"]) / "artifacts/0001.patch").stat().st_mode)
    assert mode == 0o600


def test_run_without_changes_or_output_has_no_artifacts(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    (step,) = ledger(t["id"])
    assert step["artifacts"] == {}
    assert step["snapshot"] == step["snapshot_before"]


def test_exit_codes_not_found_and_signal(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "no-such-program-xyz").code == 127
    assert bar(capfd, "run", "--", "sh", "-c", "kill -TERM $$").code == 128 + 15
    steps = ledger(t["id"])
    assert steps[0]["exit_code"] == 127
    assert steps[1]["exit_code"] == 143 and steps[1]["signal"] == 15


def test_hand_edits_become_a_manual_step(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    (worktree(t) / "by-hand.txt").write_text("typed by a person\n")
    assert bar(capfd, "run", "--", "sh", "-c", "echo agent > agent.txt").code == 0
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["manual", "run"]
    assert steps[0]["diff_stat"]["file_list"] == ["by-hand.txt"]
    assert steps[1]["diff_stat"]["file_list"] == ["agent.txt"]
    assert steps[1]["snapshot_before"] == steps[0]["snapshot"]


def test_run_in_a_subdirectory_and_cwd_validation(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    (worktree(t) / "sub").mkdir()
    assert bar(capfd, "run", "--cwd", "sub", "--", "sh", "-c", "pwd > here.txt").code == 0
    assert (worktree(t) / "sub" / "here.txt").read_text().strip().endswith("/sub")
    res = bar(capfd, "run", "--cwd", "../..", "--", "true")
    assert res.code == 2 and "outside the task worktree" in res.err


def test_agent_staging_and_commits_do_not_disturb_recording(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    script = "echo one > one.txt && git add one.txt && git commit -qm one && echo two > two.txt && git add two.txt"
    assert bar(capfd, "run", "--", "sh", "-c", script).code == 0
    (step,) = ledger(t["id"])
    assert sorted(step["diff_stat"]["file_list"]) == ["one.txt", "two.txt"]
    head = git(wt, "rev-parse", "HEAD").strip()
    assert step["head"] == head != t["base_commit"]
    # the agent's own staging area is untouched: two.txt is still staged, not committed
    assert git(wt, "diff", "--cached", "--name-only").split() == ["two.txt"]


def test_developer_checkout_is_never_touched(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited / "untracked-dev.txt").write_text("mine\n")
    (inited / "README.md").write_text("dev edit\n")
    git(inited, "add", "README.md")

    def fingerprint() -> tuple[str, ...]:
        index = (inited / ".git" / "index").read_bytes()
        files = sorted(
            (str(p.relative_to(inited)), p.read_bytes())
            for p in inited.rglob("*")
            if p.is_file() and ".git" not in p.parts
        )
        heads = git(inited, "for-each-ref", "refs/heads/main", "--format=%(objectname)")
        return (
            git(inited, "rev-parse", "HEAD"),
            heads,
            repr(index),
            repr(files),
            git(inited, "symbolic-ref", "HEAD"),
        )

    before = fingerprint()
    for name in ("one", "two"):
        new_task(capfd, name)
        for i in range(3):
            assert (
                bar(capfd, "run", "--", "sh", "-c", f"echo {i} > f{i}.txt; rm -f README.md").code
                == 0
            )
    assert bar(capfd, "task", "close", "--force").code == 0
    assert fingerprint() == before


def test_two_tasks_run_at_the_same_time(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    a = new_task(capfd, "a")
    b = new_task(capfd, "b")
    results: dict[str, int] = {}

    def go(t: dict[str, str]) -> None:
        res = bar_exe(
            "run",
            "--task",
            t["id"],
            "--",
            "sh",
            "-c",
            f"sleep 0.5; echo {t['name']} > {t['name']}.txt",
            cwd=inited,
        )
        results[t["id"]] = res.code

    threads = [threading.Thread(target=go, args=(t,)) for t in (a, b)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {a["id"]: 0, b["id"]: 0}
    for t in (a, b):
        (step,) = ledger(t["id"])
        assert step["diff_stat"]["file_list"] == [f"{t['name']}.txt"]


def test_second_run_in_a_busy_task_fails_fast_with_no_wait(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    slow = subprocess.Popen(
        [str(Path(os.sys.executable).parent / "bar"), "run", "--", "sleep", "3"], cwd=inited
    )
    try:
        import time

        deadline = time.time() + 30
        while not (task_dir(t["id"]) / "running.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        res = bar(capfd, "run", "--no-wait", "--", "true")
        assert res.code == 7 and "busy" in res.err
        status = bar(capfd, "status", "--json").json()
        assert status["running"]["step_id"] == "0001"
    finally:
        slow.wait(timeout=60)
    assert [s["step_id"] for s in ledger(t["id"])] == ["0001"]


def test_output_is_streamed_and_large(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    code = "import sys\nfor i in range(200000): sys.stdout.write(f'line {i}\\n')"
    assert bar(capfd, "run", "--", os.sys.executable, "-c", code).code == 0
    text = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert text.startswith("=== STDOUT ===\nline 0\n")
    assert text.endswith("line 199999\n=== STDERR ===\n")


def test_output_past_its_limit_is_shown_not_kept(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A command printing without end would fill the bar home's disk: past
    ``run.output_limit`` (each stream) its output is still shown, not kept; the kept
    output says where it stopped, and the step ends as the command does."""
    from helpers import set_config

    set_config(run={"output_limit": "10KB"})
    t = new_task(capfd)
    code = "import sys\nfor i in range(20000): sys.stdout.write(f'line {i}\\n')"
    res = bar(capfd, "run", "--no-pty", "--", os.sys.executable, "-c", code)
    assert res.code == 0 and "line 19999" in res.out
    assert "printed more than 10 KB on one stream: the rest was shown, not kept" in res.err
    text = (task_dir(t["id"]) / "artifacts/0001.output").read_text()
    assert text.startswith("=== STDOUT ===\nline 0\n") and "line 19999" not in text
    assert "[bar: the rest of this output was shown, not kept: past run.output_limit]" in text
    assert len(text) < 10_000 + 200
    assert ledger(t["id"])[-1]["exit_code"] == 0 and ledger(t["id"])[-1]["output_cut"] is True
    shown = bar(capfd, "show", "1").out
    assert "output    cut at run.output_limit: the rest was shown, not kept" in shown
    bar(capfd, "run", "--no-pty", "--", "true")
    assert "output_cut" not in ledger(t["id"])[-1]
    assert "cut at" not in bar(capfd, "show", "2").out


# --- reading ------------------------------------------------------------------------


def test_executable_end_to_end(inited: Path) -> None:
    assert bar_exe("--version").out.startswith("bar ")
    assert bar_exe("task", "new", "e2e", cwd=inited).code == 0
    res = bar_exe("run", "--", "sh", "-c", "echo hello; echo data > d.txt", cwd=inited)
    assert res.code == 0 and "hello" in res.out and "step 0001 recorded" in res.err
    res = bar_exe("log", cwd=inited)
    assert "0001" in res.out
    help_text = bar_exe("--help").out
    assert "exit codes" in help_text and "bar run -- claude" in help_text


@pytest.mark.parametrize("pty", [False, True])
def test_a_command_killed_by_a_signal_is_recorded_so(
    pty: bool, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The command (an agent, say) is killed from outside: the step says so, never
    "exit 0"."""
    t = new_task(capfd)
    mode = "--pty" if pty else "--no-pty"
    res = bar_exe(
        "run",
        mode,
        "--",
        "python3",
        "-c",
        "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        cwd=worktree(t),
    )
    assert res.code == 137, res.err
    step = ledger(t["id"])[-1]
    assert (step["exit_code"], step["signal"]) == (137, 9)
    assert not step.get("interrupted")


@pytest.mark.parametrize("pty", [False, True])
def test_a_command_that_exits_cleanly_when_stopped_is_recorded_as_stopped(
    pty: bool, inited: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Agents catch SIGTERM and shut down with exit 0: a step ended from outside (a
    timeout, a CI job cancelled) is recorded as killed by the signal, 128+N."""
    import signal
    import sys
    import time

    from helpers import BAR_EXE

    t = new_task(capfd)
    ready = tmp_path / "ready"
    script = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(60)\n"
    )
    mode = "--pty" if pty else "--no-pty"
    proc = subprocess.Popen(
        [BAR_EXE, "run", mode, "--no-sandbox", "--", sys.executable, "-c", script],
        cwd=worktree(t),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    step = ledger(t["id"])[-1]
    assert (step["exit_code"], step["signal"]) == (143, 15)
