"""bar records whatever became of its standard streams: closed before it started
(``2>&-``, ``>&-``, ``<&-``) or whose reader went away while it ran (``| head -1``). The
command runs, its step is recorded complete, bar exits with the command's code, and no
crash is logged. Each case through the installed executable, run by a real shell, served
by the resident and run by bar itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import BAR_EXE, bar_home, init_clean, ledger, new_task, worktree

CASES = {
    "stderr closed": "{bar} run -- sh -c 'echo x > {f}; echo to-stderr >&2' 2>&-",
    "stdout closed": "{bar} run -- sh -c 'echo x > {f}; echo to-stdout' >&-",
    "stdin closed": "{bar} run -- sh -c 'echo x > {f}; cat' <&-",
    "all closed": "{bar} run -- sh -c 'echo x > {f}; cat; echo out; echo err >&2' <&- >&- 2>&-",
    # the reader takes one line and goes; bar's own messages then meet a broken pipe
    "reader gone": "{bar} run --no-pty -- sh -c 'echo x > {f}; seq 1 300000; echo e >&2' "
    "2>&1 | head -1 >/dev/null; exit ${{PIPESTATUS[0]}}",
    "reader gone, exit 3": "{bar} run -- sh -c 'echo x > {f}; seq 1 300000; exit 3' "
    "| head -1 >/dev/null; exit ${{PIPESTATUS[0]}}",
}


@pytest.fixture(params=["served", "here"])
def served(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "here":
        monkeypatch.setenv("BAR_RESIDENT_IDLE", "0")
    return str(request.param)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_step_is_recorded_whatever_became_of_the_streams(
    repo: Path, capfd: pytest.CaptureFixture[str], served: str, case: str
) -> None:
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    for n in range(2):  # (the first one starts the resident the second may be served by)
        name = f"f{n}.txt"
        script = CASES[case].format(bar=BAR_EXE, f=name)
        proc = subprocess.run(
            ["bash", "-c", script], cwd=wt, capture_output=True, timeout=120, env=dict(os.environ)
        )
        assert proc.returncode == (3 if "exit 3" in case else 0), proc.stderr
        step = ledger(task["id"])[-1]
        assert step["kind"] == "run" and not step.get("interrupted"), step
        assert step["exit_code"] == (3 if "exit 3" in case else 0)
        assert step["diff_stat"]["file_list"] == [name]
    assert not list((bar_home() / "logs").glob("crash-*")), "bar crashed"
    status = subprocess.run([BAR_EXE, "status"], cwd=wt, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr


def test_a_relative_bar_home_is_one_place_wherever_bar_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BAR_HOME`` relative, ``HOME`` empty: bar takes the home from where it was
    started, hands the absolute one to what it starts (the step's command, the resident
    in its own directory), and writes nothing anywhere else, ``/`` included."""
    root_before = set(os.listdir("/"))
    monkeypatch.setenv("BAR_HOME", "../relhome")
    monkeypatch.setenv("HOME", "")
    env = dict(os.environ)

    def run(*args: str, cwd: Path = repo) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BAR_EXE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )

    assert run("init").returncode == 0
    subprocess.run(["git", "add", ".bar"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "bar"], cwd=repo, check=True)
    assert run("task", "new", "t1").returncode == 0
    home = (repo.parent / "relhome").resolve()
    assert (home / "projects").is_dir()
    for n in range(3):  # (the later ones served by the resident, which works elsewhere)
        made = run("run", "--", "sh", "-c", f'echo "$BAR_HOME" > home{n}.txt')
        assert made.returncode == 0, made.stderr
    [wt] = (p for p in (home / "projects").glob("*/workspaces/*") if p.is_dir())
    assert {(wt / f"home{n}.txt").read_text().strip() for n in range(3)} == {str(home)}
    listed = run("log")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.strip().splitlines()) == 3, listed.stdout
    assert set(os.listdir("/")) - root_before == set()
