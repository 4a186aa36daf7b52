"""A repository moved with `mv`: bar finds the tasks it left at the old path, and
`bar init --adopt` re-attaches them so that every command works on them in the new place."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, bar_exe, bar_home, init_clean, ledger, new_task, run_sh, worktree

from bar.store.layout import project_dir_name
from conftest import MakeRepo, git


def projects() -> list[str]:
    return sorted(p.name for p in (bar_home() / "projects").iterdir())


def tasks_json(capfd: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    res = bar(capfd, "task", "list", "--all", "--json")
    assert res.code == 0, res.err
    return {row["name"]: row for row in res.json()}


@pytest.fixture
def worked(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """A registered repository with an open task, a closed one whose worktree was kept
    and a closed one without it, each with steps."""
    repo = make_repo(name="shop")
    monkeypatch.chdir(repo)
    init_clean(repo, capfd)
    made = {}
    for name in ("kept", "gone", "open"):
        made[name] = new_task(capfd, name)
        run_sh(capfd, f"echo {name} > {name}.txt")
        run_sh(capfd, f"echo more >> {name}.txt")
    assert bar(capfd, "task", "close", "kept", "--keep-worktree").code == 0
    assert bar(capfd, "task", "close", "gone").code == 0
    return {"repo": repo, "tasks": made, "project": projects()[0]}


def move(repo: Path, to: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    subprocess.run(["mv", str(repo), str(to)], check=True)
    monkeypatch.chdir(to)
    return to


def test_a_moved_repository_gets_its_tasks_back(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    old_root = worked["repo"]
    before = {name: ledger(t["id"]) for name, t in worked["tasks"].items()}
    repo = move(old_root, old_root.parent / "shop2", monkeypatch)

    # any command says where the tasks are and what to run
    for cmd in (("task", "list"), ("log",), ("doctor",), ("run", "--", "true")):
        res = bar(capfd, *cmd)
        assert res.code == 4 and "not registered" in res.err, cmd
        assert f"moved from {old_root}" in res.err and "`bar init --adopt`" in res.err, cmd
    # bar init names what it found and registers nothing
    res = bar(capfd, "init")
    assert res.code == 4
    assert f"project {worked['project']} (3 tasks) at {old_root}" in res.err
    assert "bar init registered nothing" in res.err
    assert "hint:" in res.err and "bar init --adopt" in res.err
    assert projects() == [worked["project"]]

    res = bar(capfd, "init", "--adopt")
    assert res.code == 0, res.err
    assert f"Adopted project {worked['project']} (3 tasks)" in res.out
    assert "3 tasks pointed here, 2 worktrees relinked" in res.out
    assert projects() == [project_dir_name(repo)]

    rows = tasks_json(capfd)
    assert {n: r["id"] for n, r in rows.items()} == {n: t["id"] for n, t in worked["tasks"].items()}
    assert {n: r["state"] for n, r in rows.items()} == {
        "kept": "closed",
        "gone": "closed",
        "open": "active",
    }
    assert all(r["repo_root"] == str(repo.resolve()) for r in rows.values())
    for name, t in worked["tasks"].items():
        assert ledger(t["id"]) == before[name]
    log = bar(capfd, "log", "--json")
    assert [s["step_id"] for s in log.json()] == ["0001", "0002"]

    # the worktrees and the repository name each other again, as git sees it
    listed = git(repo, "worktree", "list", "--porcelain")
    assert "prunable" not in listed
    open_wt = Path(rows["open"]["worktree"])
    kept_wt = Path(rows["kept"]["worktree"])
    assert f"worktree {open_wt}\n" in listed and f"worktree {kept_wt}\n" in listed
    assert git(kept_wt, "status", "--porcelain", "--untracked-files=no") == ""
    assert (kept_wt / "kept.txt").read_text() == "kept\nmore\n"

    # the work goes on in the new place, from the checkout and from inside the worktree
    run_sh(capfd, "echo after > after.txt")
    done = bar_exe("run", "--no-pty", "--", "sh", "-c", "echo inside >> after.txt", cwd=open_wt)
    assert done.code == 0, done.err
    assert "bar: warning" not in done.err  # nothing looked tampered with
    assert [s["step_id"] for s in ledger(rows["open"]["id"])] == ["0001", "0002", "0003", "0004"]
    assert (open_wt / "after.txt").read_text() == "after\ninside\n"
    assert bar(capfd, "rollback", "--to", "2").code == 0
    assert not (open_wt / "after.txt").exists()
    doctor = bar(capfd, "doctor")
    assert doctor.code == 0, doctor.out + doctor.err
    events = (bar_home() / "projects" / projects()[0] / "events.jsonl").read_text()
    adopted = [json.loads(x) for x in events.splitlines() if '"project.adopted"' in x]
    assert adopted and adopted[0]["project"]["old_root"] == str(old_root.resolve())


def test_a_copy_is_not_a_move(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Both places hold the repository: the copy is a repository of its own."""
    copy = worked["repo"].parent / "shop-copy"
    shutil.copytree(worked["repo"], copy, symlinks=True)
    monkeypatch.chdir(copy)
    res = bar(capfd, "init")
    assert res.code == 0, res.err
    assert "Registered" in res.out and "adopt" not in res.out
    assert len(projects()) == 2
    res = bar(capfd, "init", "--adopt")
    assert res.code == 3 and "no other project under" in res.err and "nothing to adopt" in res.err


def test_an_empty_project_made_after_the_move_is_replaced(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = move(worked["repo"], worked["repo"].parent / "moved", monkeypatch)
    # as an older bar did: registered afresh, the old tasks unseen
    hidden = {
        ref: git(repo, "rev-parse", ref).strip()
        for ref in git(repo, "for-each-ref", "--format=%(refname)", "refs/bar/tasks/").split()
    }
    for ref in hidden:
        git(repo, "update-ref", "-d", ref)
    assert bar(capfd, "init").code == 0
    assert tasks_json(capfd) == {}
    for ref, sha in hidden.items():
        git(repo, "update-ref", ref, sha)
    res = bar(capfd, "init")
    assert res.code == 0 and "already registered" in res.out
    assert f"Tasks of this repository are also in project {worked['project']}" in res.out
    assert f"bar init --adopt {worked['project']}" in res.out
    res = bar(capfd, "init", "--adopt", worked["project"])
    assert res.code == 0, res.err
    assert "replaced the empty project" in res.out
    assert set(tasks_json(capfd)) == {"kept", "gone", "open"}
    assert bar(capfd, "log", "--json").code == 0


def test_an_adoption_stopped_after_the_rename_is_finished_by_running_it_again(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = move(worked["repo"], worked["repo"].parent / "elsewhere", monkeypatch)
    home = bar_home() / "projects"
    os.rename(home / worked["project"], home / project_dir_name(repo))  # stopped here
    res = bar(capfd, "init", "--adopt")
    assert res.code == 0, res.err
    assert "Finished re-attaching" in res.out and "3 tasks pointed here" in res.out
    assert tasks_json(capfd)["open"]["repo_root"] == str(repo.resolve())
    wt = worktree(worked["tasks"]["open"])
    new_wt = home / project_dir_name(repo) / "workspaces" / wt.name
    assert (
        git(new_wt, "rev-parse", "--abbrev-ref", "HEAD").strip()
        == worked["tasks"]["open"]["branch"]
    )
    assert bar(capfd, "doctor").code == 0
    res = bar(capfd, "init", "--adopt")  # nothing left to do
    assert res.code == 3


def test_two_projects_with_its_tasks_need_a_name_and_are_never_merged(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    first = worked["project"]
    mid = move(worked["repo"], worked["repo"].parent / "mid", monkeypatch)
    hidden = {
        ref: git(mid, "rev-parse", ref).strip()
        for ref in git(mid, "for-each-ref", "--format=%(refname)", "refs/bar/tasks/").split()
    }
    for ref in hidden:
        git(mid, "update-ref", "-d", ref)
    assert bar(capfd, "init").code == 0
    second_task = new_task(capfd, "later")
    for ref, sha in hidden.items():
        git(mid, "update-ref", ref, sha)
    second = project_dir_name(mid)
    repo = move(mid, mid.parent / "last", monkeypatch)

    res = bar(capfd, "init", "--adopt")
    assert res.code == 2
    assert "more than one project holds tasks of this repository" in res.err
    assert first in res.err and second in res.err and "bar init --adopt NAME" in res.err
    assert bar(capfd, "init", "--adopt", "nope").code == 3

    assert bar(capfd, "init", "--adopt", first).code == 0
    assert set(tasks_json(capfd)) == {"kept", "gone", "open"}
    res = bar(capfd, "init", "--adopt", second)
    assert res.code == 1 and "does not merge two projects" in res.err
    assert second in projects()  # left as it was
    assert (bar_home() / "projects" / second / "tasks" / second_task["id"]).is_dir()
    assert project_dir_name(repo) in projects()


def stale_copy(worked: dict[str, Any], capfd: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """`cp -a` of the repository, then more work in the original (new snapshots and an
    agent's commit on the task branch), then the original moved away with `mv`."""
    repo = worked["repo"]
    bak = repo.parent / "shop.bak"
    subprocess.run(["cp", "-a", str(repo), str(bak)], check=True)
    run_sh(capfd, "echo later > later.txt")
    run_sh(capfd, "git add -A && git commit -qm c2")
    return bak, repo.parent / "shop-new"


def test_an_older_copy_never_adopts_and_the_moved_repository_still_can(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    bak, new = stale_copy(worked, capfd)
    opened = worked["tasks"]["open"]
    c2 = git(worktree(opened), "rev-parse", "HEAD").strip()
    before = {name: ledger(t["id"]) for name, t in worked["tasks"].items()}
    assert [s["step_id"] for s in before["open"]] == ["0001", "0002", "0003", "0004"]
    move(worked["repo"], new, monkeypatch)
    home = bar_home() / "projects" / worked["project"]
    recorded = (home / "tasks" / opened["id"] / "task.json").read_text()

    monkeypatch.chdir(bak)
    res = bar(capfd, "init", "--adopt")
    assert res.code == 1
    assert (
        f"{bak} is an older copy of the repository the tasks of project {worked['project']} were recorded in: it has no snapshot"
        in res.err
    )
    assert f"of task open ({opened['id']}); bar adopted nothing" in res.err
    assert (
        f"hint: run `bar init --adopt` in the repository that holds their latest state (the one that was at {worked['repo'].resolve()})"
        in res.err
    )
    assert projects() == [worked["project"]]  # nothing moved, nothing rewritten
    assert (home / "tasks" / opened["id"] / "task.json").read_text() == recorded
    assert bar(capfd, "init", "--adopt", worked["project"]).code == 1  # named: the same
    status = bar(capfd, "status")
    assert status.code == 4 and "not registered" in status.err
    assert f"older copy of the repository of project {worked['project']}" in status.err

    monkeypatch.chdir(new)
    res = bar(capfd, "init", "--adopt")
    assert res.code == 0, res.err
    assert f"Adopted project {worked['project']} (3 tasks)" in res.out
    for name, t in worked["tasks"].items():
        assert ledger(t["id"]) == before[name]
    assert tasks_json(capfd)["open"]["repo_root"] == str(new.resolve())
    assert bar(capfd, "status").code == 0
    assert git(new, "rev-parse", opened["branch"]).strip() == c2
    assert (Path(tasks_json(capfd)["open"]["worktree"]) / "later.txt").read_text() == "later\n"
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert bar(capfd, "doctor").code == 0

    # the copy now sees the tasks at home in the moved repository: nothing to take
    monkeypatch.chdir(bak)
    res = bar(capfd, "init", "--adopt")
    assert res.code == 3 and "no project under" in res.err


def test_a_copy_missing_only_the_agents_last_commit_is_older_too(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The last step changed no file, so its snapshot is one the copy has: the commit the
    task branch moved to tells the copy is older."""
    run_sh(capfd, "git add -A")
    bak = worked["repo"].parent / "shop.bak"
    subprocess.run(["cp", "-a", str(worked["repo"]), str(bak)], check=True)
    run_sh(capfd, "git commit -qm c2")
    steps = ledger(worked["tasks"]["open"]["id"])
    assert steps[-1].get("snapshot", steps[-2]["snapshot"]) == steps[-2]["snapshot"]
    assert steps[-1]["head"] != steps[-2]["head"]
    move(worked["repo"], worked["repo"].parent / "shop-new", monkeypatch)

    monkeypatch.chdir(bak)
    res = bar(capfd, "init", "--adopt")
    assert res.code == 1 and "older copy" in res.err
    assert (
        f"it has no branch commit {steps[-1]['head'][:10]} (step {steps[-1]['step_id']}) of task open"
        in res.err
    )
    monkeypatch.chdir(worked["repo"].parent / "shop-new")
    assert bar(capfd, "init", "--adopt").code == 0


def test_tasks_an_older_copy_adopted_are_taken_back(
    worked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """As an older bar did: the stale copy took the project; the moved repository, which
    holds what the ledgers recorded, takes it back."""
    bak, new = stale_copy(worked, capfd)
    before = {name: ledger(t["id"]) for name, t in worked["tasks"].items()}
    move(worked["repo"], new, monkeypatch)
    home = bar_home() / "projects"
    taken = home / project_dir_name(bak)
    os.rename(home / worked["project"], taken)
    for task_json in taken.glob("tasks/*/task.json"):
        rec = json.loads(task_json.read_text())
        task_json.write_text(json.dumps({**rec, "repo_root": str(bak.resolve())}))
    for wt in (taken / "workspaces").iterdir():
        if not wt.is_dir():
            continue  # (the worktree registry)
        git(bak, "worktree", "repair", str(wt))

    res = bar(capfd, "status")
    assert res.code == 4
    assert f"adopted at {bak.resolve()}, an older copy" in res.err and "takes them back" in res.err
    res = bar(capfd, "init", "--adopt")
    assert res.code == 0, res.err
    assert f"Adopted project {taken.name} (3 tasks) at {bak.resolve()}" in res.out
    assert projects() == [project_dir_name(new)]
    for name, t in worked["tasks"].items():
        assert ledger(t["id"]) == before[name]
    open_wt = Path(tasks_json(capfd)["open"]["worktree"])
    assert f"worktree {open_wt}\n" in git(new, "worktree", "list", "--porcelain")
    done = bar_exe("run", "--no-pty", "--", "sh", "-c", "echo back > back.txt", cwd=open_wt)
    assert done.code == 0, done.err
    assert bar(capfd, "doctor").code == 0
    monkeypatch.chdir(bak)
    assert bar(capfd, "init", "--adopt").code == 3  # the copy cannot take them again
