"""Properties that must hold for any sequence of steps (hypothesis, real git, real runs).

1. Replaying every patch of a task in order onto its base reproduces the last snapshot,
   whatever the edits: binary files, renames, modes, symlinks, deletions, empty files,
   files without a trailing newline, names with spaces and non-ASCII characters.
2. Any sequence of runs, hand edits and rollbacks loses no state: after each operation the
   worktree equals the snapshot the ledger says it should be.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    SUPPORT,
    bar,
    files_in_commit,
    files_on_disk,
    ledger,
    new_task,
    project_dir,
    replay_patches,
    worktree,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import git

EDIT_AGENT = str(SUPPORT / "edit_agent.py")

names = st.sampled_from(
    ["a.txt", "b.bin", "dir/c.md", "dir/sub/d", "with space.txt", "naïve-é.txt", "x.sh", "e"]
)
texts = st.sampled_from(["", "one\n", "no newline", "two\nlines\n", "é ü\n", "a\r\nb\r\n"])
op = st.one_of(
    st.builds(lambda p, t: {"op": "write", "path": p, "text": t}, names, texts),
    st.builds(
        lambda p, b: {"op": "binary", "path": p, "bytes": b},
        names,
        st.lists(st.integers(0, 255), min_size=1, max_size=40),
    ),
    st.builds(lambda p: {"op": "delete", "path": p}, names),
    st.builds(lambda p, d: {"op": "rename", "path": p, "dest": d}, names, names),
    st.builds(lambda p, x: {"op": "chmod", "path": p, "exec": x}, names, st.booleans()),
    st.builds(lambda p, t: {"op": "symlink", "path": p, "target": t}, names, names),
)
step_ops = st.lists(op, min_size=1, max_size=6)

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


def _start(
    tmp: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("base\n")
    (repo / "dir").mkdir()
    (repo / "dir" / "c.md").write_text("# base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("BAR_HOME", str(tmp / "home"))
    assert bar(capfd, "init").code == 0
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    return new_task(capfd)


def _run_ops(
    capfd: pytest.CaptureFixture[str], tmp: Path, ops: list[dict[str, Any]], n: int
) -> None:
    ops_file = tmp / f"ops{n}.json"
    ops_file.write_text(json.dumps(ops))
    res = bar(capfd, "run", "--", sys.executable, EDIT_AGENT, str(ops_file))
    assert res.code == 0, res.err


def _check_replay(tmp: Path, task: dict[str, Any]) -> None:
    repo = Path(task["repo_root"])
    last = [s for s in ledger(task["id"]) if s.get("snapshot")][-1]["snapshot"]
    replayed = replay_patches(repo, task["id"], task["base_commit"], tmp / "replay")
    assert replayed == files_in_commit(repo, last)


@SETTINGS
@given(steps=st.lists(step_ops, min_size=1, max_size=4))
def test_replaying_patches_reproduces_the_last_snapshot(
    steps: list[list[dict[str, Any]]],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        task = _start(tmp, capfd, monkeypatch)
        for n, ops in enumerate(steps):
            _run_ops(capfd, tmp, ops, n)
        _check_replay(tmp, task)
        # the worktree is exactly the last snapshot
        last = ledger(task["id"])[-1]["snapshot"]
        assert files_on_disk(worktree(task)) == files_in_commit(Path(task["repo_root"]), last)


action = st.one_of(
    st.tuples(st.just("run"), step_ops),
    st.tuples(st.just("hand"), step_ops),
    st.tuples(st.just("rollback"), st.integers(0, 20)),
)


@SETTINGS
@given(actions=st.lists(action, min_size=1, max_size=6))
def test_runs_and_rollbacks_lose_no_state(
    actions: list[tuple[str, Any]],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        task = _start(tmp, capfd, monkeypatch)
        repo = Path(task["repo_root"])
        wt = worktree(task)
        seen: dict[str, dict[str, bytes]] = {"base": files_in_commit(repo, task["base_commit"])}
        for n, (kind, arg) in enumerate(actions):
            if kind == "run":
                _run_ops(capfd, tmp, arg, n)
            elif kind == "hand":
                import subprocess

                ops_file = tmp / f"hand{n}.json"
                ops_file.write_text(json.dumps(arg))
                subprocess.run([sys.executable, EDIT_AGENT, str(ops_file)], cwd=wt, check=True)
                assert bar(capfd, "run", "--", "true").code == 0  # records the hand edits first
            else:
                steps = ledger(task["id"])
                choices = ["base"] + [s["step_id"] for s in steps]
                target = choices[arg % len(choices)]
                res = bar(capfd, "rollback", "--to", target)
                assert res.code == 0, res.err
                expected = seen[target]
                assert files_on_disk(wt) == expected
            for s in ledger(task["id"]):
                seen.setdefault(s["step_id"], files_in_commit(repo, s["snapshot"]))
            last = ledger(task["id"])[-1]
            assert files_on_disk(wt) == seen[last["step_id"]]
        _check_replay(tmp, task)
