"""Reference 004 (aide's data formats): a client written from that document alone
(``client_004``) reads what a real bar session made, through the real ``bar`` commands
in a real repository: ``.aide/flow-status.json`` and ``.aide/decisions/`` found from the
worktree, each as the document types it, and the commits the flow's history names, with
§5's messages (``[bar]`` for ``[aide]``, as docs/decide-flow.md says). With ``flow.commits:
branch`` those commits are on the task branch, as the document's flow makes them, and bar's
record, ``bar apply`` and a hard rollback go on as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import client_004
import pytest
from client_004 import FormatError
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, set_config, worktree

from conftest import git


def flow(capfd: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    res = bar(capfd, "flow", *args, "--json")
    assert res.code == 0, res.err
    done: dict[str, Any] = res.json()
    return done


def agents_session(capfd: pytest.CaptureFixture[str], wt: Path) -> None:
    """A flow moved by hand and by an agent inside its step, and a decision."""
    (wt / "design.md").write_text("the model\n")
    flow(capfd, "start", "实现用户认证模块")
    agent = (
        "echo 'class User: pass' > user.py; "
        f"{BAR_EXE} flow next-step '流程图设计完成' >/dev/null; "
        f"{BAR_EXE} flow issue '测试覆盖率较低，后续需要补充' >/dev/null; "
        "git log -1 --format=%s > seen.txt"
    )
    ran = bar_exe("run", "--no-pty", "--", "sh", "-c", agent, cwd=wt)
    assert ran.code == 0, ran.err
    flow(capfd, "next-part", "流程设计完成，开始实现")
    (wt / "user.py").write_text("class User:\n    name = ''\n")
    flow(capfd, "next-step", "完成用户模型定义")
    question = {
        "task": "实现用户认证模块",
        "source": "task-now.md",
        "items": [
            {
                "id": 1,
                "title": "认证方式选择",
                "options": [{"value": "jwt", "label": "JWT"}, {"value": "session", "label": "S"}],
                "recommend": "jwt",
            }
        ],
    }
    assert bar(capfd, "decide", "submit", json.dumps(question, ensure_ascii=False)).code == 0
    assert bar(capfd, "decide", "answer", "--choose", "1=jwt").code == 0
    assert bar(capfd, "decide", "submit", json.dumps(question, ensure_ascii=False)).code == 0


def read_as_the_document_says(wt: Path) -> dict[str, Any]:
    """Everything the client reads, checked; the status."""
    status = client_004.flow_status(wt)
    assert [e["action"] for e in status["history"]] == [
        "start",
        "next-step",
        "issue",
        "next-part",
        "next-step",
    ]
    assert [e["phase"] for e in status["history"]] == ["flow-design"] * 3 + ["impl"] * 2
    assert [e["step"] for e in status["history"]] == [1, 2, 3, 4, 5]
    for entry in status["history"]:
        said = client_004.subject(wt, entry["git_commit"])
        assert said == {
            "tool": "bar",  # docs/decide-flow.md: the seed's message with bar for aide
            "phase": entry["phase"],
            "kind": client_004.expected_kind(entry),
            "summary": entry["summary"],
        }
    asked = client_004.pending(wt)
    assert asked["items"][0]["title"] == "认证方式选择"
    (answered,) = client_004.records(wt)
    assert client_004.record(wt, answered)["output"] == {"decisions": [{"id": 1, "chosen": "jwt"}]}
    return status


def test_the_document_reads_a_flow_and_its_decisions_where_aide_keeps_them(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    wt = worktree(t)
    before = git(wt, "rev-parse", "HEAD").strip()
    agents_session(capfd, wt)
    status = read_as_the_document_says(wt)
    # by default the flow's commits are bar's own: the task branch never moved
    assert git(wt, "rev-parse", "HEAD").strip() == before
    assert not any(client_004.on_branch(wt, e["git_commit"]) for e in status["history"])
    assert (wt / "seen.txt").read_text() == "initial\n"
    # the copy is bar's own file, byte for byte
    own = Path(bar(capfd, "decide", "path", "--json").json()["store"]).parent
    assert (wt / ".aide" / "flow-status.json").read_bytes() == (
        own / "flow-status.json"
    ).read_bytes()
    assert bar(capfd, "flow", "status", "--json").json() == status


def test_with_flow_commits_branch_each_entry_is_a_commit_on_the_task_branch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(flow={"commits": "branch"})
    t = new_task(capfd)
    wt = worktree(t)
    base = git(wt, "rev-parse", "HEAD").strip()
    agents_session(capfd, wt)
    status = read_as_the_document_says(wt)
    commits = [e["git_commit"] for e in status["history"]]
    # on the branch, in order, each on top of the one before (the document's flow)
    assert git(wt, "rev-list", "--first-parent", f"{base}..HEAD").split() == commits[::-1]
    assert all(client_004.on_branch(wt, c) for c in commits)
    # the agent in its step saw its flow's commit at once, on its branch
    assert (
        wt / "seen.txt"
    ).read_text() == "[bar] flow-design issue: 测试覆盖率较低，后续需要补充\n"
    # each commit holds the worktree as it was: `git add -A`, then `git commit`
    assert git(wt, "show", "--format=", "--name-only", commits[0]).split() == ["design.md"]
    assert git(wt, "show", "--format=", "--name-only", commits[1]).split() == ["user.py"]
    assert git(wt, "log", "-1", "--format=%an", commits[0]).strip() == "Test Author"
    # the index is the last commit's, as after `git commit`: nothing staged, nothing new
    assert git(wt, "diff", "--cached", "--name-only").strip() == ""
    assert git(wt, "status", "--porcelain").strip() == ""
    # bar's record is as exact as before: no hand edit invented, nothing unrecorded
    steps = ledger(t["id"])
    assert [s["kind"] for s in steps] == ["manual", "run", "manual", "decision"]
    assert steps[1]["head"] == commits[2]  # (the agent's step moved its branch)
    assert steps[-1]["head"] == commits[-1]
    res = bar(capfd, "status", "--json")
    assert res.code == 0 and res.json()["unrecorded_changes"] is False
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    assert [s["kind"] for s in ledger(t["id"])][-1] == "run"
    # apply as ever: merge brings the flow's commits, commit mode the task's changes
    assert bar(capfd, "apply", "--dry-run").code == 0
    assert bar(capfd, "apply", "--mode", "merge").code == 0, capfd.readouterr()
    landed = git(inited_clean, "log", "--format=%s", "main").splitlines()
    assert (
        "[bar] impl: 完成用户模型定义" in landed and "[bar] flow-design: 实现用户认证模块" in landed
    )
    assert (inited_clean / "user.py").read_text() == "class User:\n    name = ''\n"
    # a hard rollback resets the branch; the flow's commits stay (refs/bar/flow/)
    assert bar(capfd, "rollback", "--to", "base", "--hard").code == 0
    assert git(wt, "rev-parse", "HEAD").strip() == base
    kept = git(wt, "for-each-ref", "--format=%(objectname)", f"refs/bar/flow/{t['id']}/")
    assert set(commits) <= set(kept.split())
    assert client_004.subject(wt, commits[-1])["summary"] == "完成用户模型定义"


def test_a_flow_commit_for_the_branch_is_refused_while_the_worktree_is_elsewhere(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    set_config(flow={"commits": "branch"})
    wt = worktree(new_task(capfd))
    flow(capfd, "start", "begin")
    git(wt, "checkout", "-q", "--detach")
    head = git(wt, "rev-parse", "HEAD").strip()
    status = (wt / ".aide" / "flow-status.json").read_bytes()
    res = bar(capfd, "flow", "next-step", "more")
    assert res.code == 1 and "not on the task branch" in res.err and "git switch" in res.err
    assert (wt / ".aide" / "flow-status.json").read_bytes() == status
    assert git(wt, "rev-parse", "HEAD").strip() == head
    with pytest.raises(FormatError):
        client_004.flow_status(wt / "nowhere")


def test_flow_commits_takes_snapshot_or_branch_only(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "init").code == 0
    set_config(flow={"commits": "sideways"})
    res = bar(capfd, "flow", "status")
    assert res.code != 0 and "flow.commits" in res.err and "snapshot or branch" in res.err
