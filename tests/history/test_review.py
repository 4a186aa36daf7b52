"""``bar review BRANCH`` (``bar.share.review``): the tasks, steps, sessions and policy
decisions behind a branch, found through the Bar-Task/Bar-Step lines of its commits, a
squash merge's included. Real repositories, real ``bar apply``, real ``git merge
--squash``; the agent is the fake Claude Code (tests/support/fake_agent.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonshape
import pytest
from helpers import BAR_EXE, FAKE_AGENT_PATH, bar, bar_exe, new_task, run_sh, set_config, worktree

CALLS = ("write:notes.txt=alpha", "rm -rf /")  # the agent's tool calls: the policy blocks one


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def feature(inited_clean: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """A branch ``feature`` the tasks are made from, and land on."""
    git(inited_clean, "branch", "feature")
    return inited_clean


def applied_task(capfd: pytest.CaptureFixture[str], script: str = "echo feat > f.txt") -> str:
    """A task made from ``feature`` whose one step runs ``script``, applied onto it."""
    t = new_task(capfd, "t1", "--base", "feature")
    run_sh(capfd, script)
    res = bar(capfd, "apply", "--task", t["id"])
    assert res.code == 0, res.err
    return str(t["id"])


def squash(repo: Path, branch: str, onto: str = "main", edit: str | None = None) -> str:
    """``git merge --squash`` of ``branch`` as a new branch ``squashed`` from ``onto``,
    committed with the message git prepares (the squashed messages, indented); ``edit``:
    a line added to f.txt in the same commit."""
    git(repo, "checkout", "-q", "-b", "squashed", onto)
    git(repo, "merge", "-q", "--squash", branch)
    if edit is not None:
        with open(repo / "f.txt", "a") as f:
            f.write(edit)
        git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "--no-edit")
    git(repo, "checkout", "-q", "main")
    return git(repo, "rev-parse", "squashed")


# what docs/json.md is to say of ``bar review --json`` (its named shapes are the document's)
SHAPE = {
    "branch": "str",
    "tip": "str",
    "base": "str",
    "base_commit": "str",
    "commits": "int",
    "tasks": [
        {
            "task_id": "str",
            "here": "bool",
            "name": "str|null",
            "record": "str|null",
            "origin?": {"*": "any"},
            "landings": [
                {
                    "commit": "str",
                    "subject": "str",
                    "state": "str|null",
                    "applied": "bool",
                    "recorded": "bool",
                    "matches": "bool|null",
                    "differs": ["str"],
                    "changed_since": ["str"],
                }
            ],
            "steps": [
                {
                    "step_id": "str",
                    "kind": "str",
                    "command": "str|null",
                    "exit_code": "int|null",
                    "diff_stat": "$diff_stat",
                    "session": "$session|null",
                    "policy_events": ["$policy_event"],
                    "checkpoints": "int",
                    "commit?": "str",
                }
            ],
        }
    ],
}


def review(capfd: pytest.CaptureFixture[str], *args: str, code: int = 0) -> dict[str, Any]:
    res = bar(capfd, "review", *args, "--json")
    assert res.code == code, res.err
    out: dict[str, Any] = res.json()
    defs = {k: v for k, v in jsonshape.shapes().items() if k.startswith("$")}
    jsonshape.check(out, SHAPE, defs, "bar review --json")
    return out


def test_the_applied_branch_and_its_squash_merge_name_the_task_and_step(
    feature: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = feature
    task_id = applied_task(capfd)
    applied = git(repo, "rev-parse", "feature")

    got = review(capfd, "feature")
    assert (got["branch"], got["base"], got["commits"]) == ("feature", "main", 1)
    (entry,) = got["tasks"]
    assert (entry["task_id"], entry["name"], entry["here"]) == (task_id, "t1", True)
    assert "origin" not in entry  # this machine's own task
    assert entry["landings"] == [
        {
            "commit": applied,
            "subject": "T1",
            "state": "0001",
            "applied": True,
            "recorded": True,
            "matches": True,
            "differs": [],
            "changed_since": [],
        }
    ]
    (step,) = entry["steps"]
    assert (step["step_id"], step["kind"], step["command"], step["exit_code"]) == (
        "0001",
        "run",
        "sh -c 'echo feat > f.txt'",
        0,
    )
    assert step["diff_stat"]["file_list"] == ["f.txt"]

    # squashed onto main, the trailers indented in the message: still found
    sha = squash(repo, "feature")
    assert f"    Bar-Task: {task_id}\n    Bar-Step: 0001" in git(
        repo, "log", "-1", "--format=%B", sha
    )
    (entry,) = review(capfd, "squashed")["tasks"]
    (landing,) = entry["landings"]
    assert (landing["commit"], landing["state"], landing["applied"], landing["matches"]) == (
        sha,
        "0001",
        False,
        True,
    )
    assert [s["step_id"] for s in entry["steps"]] == ["0001"]

    # as the executable prints it
    res = bar_exe("review", "squashed", cwd=repo)
    assert res.code == 0, res.err
    assert f"task t1 ({task_id})" in res.out
    assert "lands step 0001: a copy of its apply" in res.out
    assert "it holds the task's files as that state recorded them" in res.out
    assert "sh -c 'echo feat > f.txt'" in res.out


def test_a_remote_branch_and_a_pull_request_ref_are_reviewed_too(
    feature: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = feature
    applied_task(capfd)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "feature", "feature:refs/pull/12/head")
    git(repo, "fetch", "-q", "origin", "+refs/pull/12/head:refs/pull/12/head")
    git(repo, "fetch", "-q", "origin")
    for ref in ("origin/feature", "refs/pull/12/head"):
        (entry,) = review(capfd, ref)["tasks"]
        assert entry["name"] == "t1" and entry["landings"][0]["applied"]


def test_an_agents_session_and_the_policys_block_are_shown(
    feature: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(policy={"enabled": True})  # (its file is committed: the checkout stays clean)
    t = new_task(capfd, "t1", "--base", "feature")
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.write_text(
        f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT_PATH} --agent claude --transcript "$@"\n'
    )
    program.chmod(0o755)
    agent = [str(program), "--prompt", "notes", "--usage", "100,20,0"]
    ran = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", "claude", "--", *agent, *CALLS],
        cwd=worktree(t),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "DENIED: rm -rf /" in ran.stdout
    assert bar(capfd, "apply", "--task", t["id"]).code == 0

    (entry,) = review(capfd, "feature")["tasks"]
    (step,) = entry["steps"]
    session = step["session"]
    assert (session["agent"], session["model"], session["turns"], session["tool_calls"]) == (
        "claude",
        "claude-opus-4-8",
        3,
        2,
    )
    assert (session["input_tokens"], session["output_tokens"]) == (300, 60)
    blocks = [e for e in step["policy_events"] if e["action"] == "block"]
    assert blocks and all("rm -rf /" in e["matched"] for e in blocks)
    assert step["checkpoints"] == 1

    text = bar(capfd, "review", "feature").out
    assert "claude: claude-opus-4-8 · 3 turns · 2 tool calls · 300 in, 60 out" in text
    assert "policy block" in text and "rm -rf /" in text


def test_a_change_made_on_the_way_is_told(feature: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A fix committed on the branch after the apply changes the task's file at the tip;
    a squash that edits it too no longer holds the state as recorded."""
    repo = feature
    applied_task(capfd)
    git(repo, "checkout", "-q", "feature")
    (repo / "f.txt").write_text("feat\nfixed on the branch\n")
    git(repo, "commit", "-qam", "a fix")
    git(repo, "checkout", "-q", "main")
    got = review(capfd, "feature")
    assert got["commits"] == 2
    (landing,) = got["tasks"][0]["landings"]
    assert (landing["matches"], landing["differs"], landing["changed_since"]) == (
        True,
        [],
        ["f.txt"],
    )
    text = bar(capfd, "review", "feature").out
    assert "changed since on the branch: f.txt" in text

    git(repo, "branch", "-f", "feature", "feature~1")  # without the fix, then squashed
    squash(repo, "feature", edit="and edited in the squash\n")
    (landing,) = review(capfd, "squashed")["tasks"][0]["landings"]
    assert (landing["matches"], landing["differs"]) == (False, ["f.txt"])
    assert "its files differ from the recorded state: f.txt" in bar(capfd, "review", "squashed").out


def test_the_base_the_branch_goes_onto_can_be_named(
    feature: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = feature
    applied_task(capfd)
    git(repo, "branch", "release", "feature")
    res = bar(capfd, "review", "feature", "--base", "release")
    assert res.code == 3
    assert "no commit of feature that release lacks (0 of them) names a bar task" in res.err


def test_a_branch_without_a_task_exits_3_with_a_hint(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = inited_clean
    git(repo, "checkout", "-q", "-b", "plain")
    (repo / "x.txt").write_text("x\n")
    git(repo, "add", "x.txt")
    git(repo, "commit", "-qm", "plain work")
    git(repo, "checkout", "-q", "main")
    res = bar(capfd, "review", "plain")
    assert res.code == 3
    assert "no commit of plain that main lacks (1 of them) names a bar task" in res.err
    assert "hint: bar apply ends each commit with Bar-Task and Bar-Step lines" in res.err
    missing = bar(capfd, "review", "no-such-branch")
    assert missing.code == 3 and "is not a commit of this repository" in missing.err
    assert "git fetch origin" in missing.err


def test_a_task_that_is_not_here_is_named_for_bar_fetch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = inited_clean
    git(repo, "checkout", "-q", "-b", "theirs")
    (repo / "x.txt").write_text("x\n")
    git(repo, "add", "x.txt")
    git(repo, "commit", "-qm", "Their work\n\nBar-Task: Zq81xYw0\nBar-Step: 0004")
    git(repo, "checkout", "-q", "main")
    res = bar(capfd, "review", "theirs")
    assert res.code == 3
    assert "task Zq81xYw0 is not here" in res.out and "`bar fetch` brings it" in res.out
    (entry,) = review(capfd, "theirs", code=3)["tasks"]
    assert (entry["task_id"], entry["here"], entry["steps"]) == ("Zq81xYw0", False, [])
    assert entry["landings"][0]["state"] == "0004"
