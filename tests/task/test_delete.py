"""The end of a task's life: bar task delete and bar task prune, on real repositories.

What a deletion must leave is checked against git itself: no ref, branch or worktree
entry of the task, no directory under BAR_HOME; and nothing of any other task touched."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    bar_exe,
    new_task,
    project_dir,
    run_sh,
    sweep,
    task_dir,
    worktree,
)

from conftest import git


def traces_of(repo: Path, t: dict[str, Any]) -> list[str]:
    """Everything of task ``t`` that git or BAR_HOME still holds."""
    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    found = [r for r in refs if t["id"] in r]
    found += [w for w in git(repo, "worktree", "list", "--porcelain").split() if t["id"] in w]
    found += [str(p) for p in (task_dir(t["id"]), worktree(t)) if p.exists()]
    return found


def closed(
    capfd: pytest.CaptureFixture[str], name: str, script: str | None = None, *, apply: bool = False
) -> dict[str, Any]:
    t = new_task(capfd, name)
    if script:
        run_sh(capfd, script)
    if apply:
        assert bar(capfd, "apply", "-m", f"land {name}").code == 0
    assert bar(capfd, "task", "close", t["id"]).code == 0
    return t


def events() -> list[dict[str, Any]]:
    lines = (project_dir() / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# --- bar task delete -----------------------------------------------------------------


def test_delete_removes_every_trace_of_an_applied_task(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = closed(
        capfd, "done", "echo a > a && git add a && git commit -qm c && echo b > b", apply=True
    )
    git(inited_clean, "update-ref", f"refs/bar/kept/{t['id']}/{'1' * 40}", "HEAD")  # a kept HEAD
    assert traces_of(inited_clean, t)
    main = git(inited_clean, "rev-parse", "main")
    res = bar(capfd, "task", "delete", "done")
    assert res.code == 0, res.err
    assert f"Deleted task done ({t['id']})" in res.out and t["branch"] in res.out
    assert traces_of(inited_clean, t) == []
    assert git(inited_clean, "rev-parse", "main") == main  # the applied work stays where it landed
    assert bar(capfd, "task", "list", "--all", "--json").json() == []
    kinds = [e["event"] for e in events() if e["task"].get("id") == t["id"]]
    assert kinds[-2:] == ["task.delete.before", "task.delete.after"]
    assert bar(capfd, "doctor").code == 0


def test_delete_refuses_an_open_task_and_touches_nothing(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "open")
    before = traces_of(inited_clean, t)
    res = bar(capfd, "task", "delete", "open", "--force")
    assert res.code == 1 and "is open" in res.err and "bar task close" in res.err
    assert traces_of(inited_clean, t) == before and worktree(t).is_dir()


def test_unapplied_work_is_refused_said_and_deleted_only_with_force(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = closed(capfd, "wip", "echo one > one && echo two > two")
    before = traces_of(inited_clean, t)
    dry = bar(capfd, "task", "delete", "wip", "--dry-run")
    assert dry.code == 0 and "Would delete" in dry.out
    assert "its work (2 files +2 -0) is not on main: it was never applied" in dry.out
    assert "2 files +2 -0" in dry.out and "--force" in dry.out
    res = bar(capfd, "task", "delete", "wip")
    assert res.code == 5 and "would lose work" in res.err and "never applied" in res.err
    assert "bar apply --task" in res.err and "--force" in res.err
    assert traces_of(inited_clean, t) == before
    forced = bar(capfd, "task", "delete", "wip", "--force", "--json")
    assert forced.code == 0, forced.err
    data = forced.json()
    assert data["deleted"] is True and data["lost"] and data["task_id"] == t["id"]
    assert traces_of(inited_clean, t) == []
    assert events()[-1]["task"]["forced"] is True


def test_a_task_that_changed_nothing_is_deleted_without_force(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = closed(capfd, "idle", "echo tmp > tmp && rm tmp")
    assert bar(capfd, "task", "delete", t["id"]).code == 0
    assert traces_of(inited_clean, t) == []


def test_work_applied_then_continued_counts_as_unapplied(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "more")
    run_sh(capfd, "echo one > one")
    assert bar(capfd, "apply").code == 0
    run_sh(capfd, "echo two > two")
    assert bar(capfd, "task", "close").code == 0
    res = bar(capfd, "task", "delete", "more")
    assert res.code == 5 and "never applied" in res.err
    assert bar(capfd, "apply", "--task", "more").code == 0  # from the closed task
    assert bar(capfd, "task", "delete", "more").code == 0
    assert traces_of(inited_clean, t) == []


def test_work_whose_apply_was_reset_away_is_not_on_the_branch(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    before = git(inited_clean, "rev-parse", "main").strip()
    t = closed(capfd, "undone", "echo one > one", apply=True)
    applied = git(inited_clean, "rev-parse", "--short=10", "main").strip()
    git(inited_clean, "reset", "-q", "--hard", before)  # someone took it back off main
    res = bar(capfd, "task", "delete", "undone")
    assert res.code == 5 and "would lose work" in res.err, res.err
    assert f"its work (1 file +1 -0) is not on main: it was applied as {applied}" in res.err
    assert "main no longer has" in res.err
    assert traces_of(inited_clean, t)
    kept = bar(capfd, "task", "prune", "--json").json()
    assert [d["name"] for d in kept["skipped"]] == ["undone"] and kept["deleted"] == []
    assert bar(capfd, "apply", "--task", "undone").code == 0  # landed again
    assert bar(capfd, "task", "delete", "undone").code == 0


def test_commits_made_on_the_branch_after_closing_are_not_dropped_silently(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = closed(capfd, "late")
    other = tmp_path / "late-work"
    git(inited_clean, "worktree", "add", "-q", str(other), t["branch"])
    (other / "late.txt").write_text("late\n")
    git(other, "add", "late.txt")
    git(other, "commit", "-qm", "made after closing")
    res = bar(capfd, "task", "delete", "late")
    assert res.code == 1 and "checked out in" in res.err  # first: the checkout holds it
    git(other, "switch", "-q", "--detach")
    res = bar(capfd, "task", "delete", "late")
    assert res.code == 5 and "1 commit no step recorded" in res.err
    git(inited_clean, "branch", "keep-late", t["branch"])  # another branch holds them: safe
    assert bar(capfd, "task", "delete", "late").code == 0
    assert (
        git(inited_clean, "log", "-1", "--format=%s", "keep-late").strip() == "made after closing"
    )


def test_edits_in_a_kept_worktree_after_closing_count_as_lost(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "kept")
    assert bar(capfd, "task", "close", "--keep-worktree").code == 0
    (worktree(t) / "notes.txt").write_text("written after closing\n")
    res = bar(capfd, "task", "delete", "kept")
    assert res.code == 5 and "kept worktree" in res.err
    assert (worktree(t) / "notes.txt").exists()
    (worktree(t) / "notes.txt").unlink()
    assert bar(capfd, "task", "delete", "kept").code == 0
    assert traces_of(inited_clean, t) == []


def test_delete_of_an_unknown_task_exits_3(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "task", "delete", "nope")
    assert res.code == 3 and "no task" in res.err


# --- bar task prune ------------------------------------------------------------------


def test_prune_deletes_what_is_safe_keeps_the_rest_and_never_touches_open_tasks(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    applied = closed(capfd, "applied", "echo a > a", apply=True)
    idle = closed(capfd, "idle")
    wip = closed(capfd, "wip", "echo w > w")
    live = new_task(capfd, "live")
    run_sh(capfd, "echo l > l")
    live_traces = traces_of(inited_clean, live)
    dry = bar(capfd, "task", "prune", "--dry-run", "--json")
    assert dry.code == 0
    plan = dry.json()
    assert plan["dry_run"] is True
    assert {d["name"] for d in plan["deleted"]} == {"applied", "idle"}
    assert [s["name"] for s in plan["skipped"]] == ["wip"]
    assert all(traces_of(inited_clean, t) for t in (applied, idle, wip))
    res = bar(capfd, "task", "prune")
    assert res.code == 0, res.err
    assert "Deleted task applied" in res.out and "Deleted task idle" in res.out
    assert "Kept task wip" in res.out and "never applied" in res.out
    assert traces_of(inited_clean, applied) == traces_of(inited_clean, idle) == []
    assert traces_of(inited_clean, wip) and traces_of(inited_clean, live) == live_traces
    forced = bar(capfd, "task", "prune", "--force", "--json").json()
    assert [d["name"] for d in forced["deleted"]] == ["wip"] and forced["skipped"] == []
    assert traces_of(inited_clean, wip) == [] and traces_of(inited_clean, live) == live_traces
    assert [r["name"] for r in bar(capfd, "task", "list", "--all", "--json").json()] == ["live"]
    assert bar(capfd, "task", "prune").out.startswith("No closed task to delete.")


# --- crashes ---------------------------------------------------------------------------


def _crash_points(repo: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path) -> int:
    t = closed(capfd, "probe", "echo p > p")
    trace = tmp_path / "trace"
    res = bar_exe(
        "task", "delete", t["id"], "--force", cwd=repo, env={"BAR_FAULT_TRACE": str(trace)}
    )
    assert res.code == 0, res.err
    return len(trace.read_text().splitlines())


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
@pytest.mark.parametrize("finisher", ["delete", "prune", "doctor"])
def test_a_delete_stopped_anywhere_is_finished_later(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path, finisher: str
) -> None:
    points = _crash_points(inited_clean, capfd, tmp_path)
    assert points >= 6
    at = sweep(points)
    tasks = [closed(capfd, f"doomed{n}", f"echo {n} > f{n}") for n in at]
    kept = new_task(capfd, "bystander")
    kept_traces = traces_of(inited_clean, kept)
    for n, t in zip(at, tasks, strict=True):
        res = bar_exe(
            "task", "delete", t["id"], "--force", cwd=inited_clean, env={"BAR_FAULT_AT": str(n)}
        )
        assert res.code == -signal.SIGKILL, (n, res.err)
    if finisher == "prune":
        assert bar(capfd, "task", "prune", "--force").code == 0
    elif finisher == "doctor":
        assert bar(capfd, "doctor", "--repair").code == 0
    for n, t in zip(at, tasks, strict=True):
        if finisher == "delete":
            res = bar(capfd, "task", "delete", t["id"], "--force")
            assert res.code in (0, 3), (n, res.err)  # 3: the stop came after the last removal
        if traces_of(inited_clean, t):  # stopped before the deletion began: the task is whole
            assert finisher == "doctor", n
            assert bar(capfd, "task", "show", t["id"]).code == 0
            assert bar(capfd, "task", "delete", t["id"], "--force").code == 0
        assert traces_of(inited_clean, t) == [], n
    assert traces_of(inited_clean, kept) == kept_traces
    assert bar(capfd, "doctor").code == 0
    assert [r["name"] for r in bar(capfd, "task", "list", "--all", "--json").json()] == [
        "bystander"
    ]


def test_delete_removes_every_ref_of_the_task_under_refs_bar(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "synced")
    run_sh(capfd, "echo mine > mine.txt")
    (inited_clean / "up.txt").write_text("up\n")
    git(inited_clean, "add", "up.txt")
    git(inited_clean, "commit", "-qm", "upstream")
    assert bar(capfd, "task", "sync").code == 0  # keeps the old base under refs/bar/bases/
    assert bar(capfd, "rollback", "--to", "1", "--hard").code == 0  # keeps the branch's tip
    head = git(inited_clean, "rev-parse", "HEAD").strip()
    git(inited_clean, "update-ref", f"refs/bar/notes/{t['id']}/x", head)  # a kind bar may add later
    refs = git(inited_clean, "for-each-ref", "--format=%(refname)", "refs/bar/").split()
    kinds = {r.split("/")[2] for r in refs if t["id"] in r}
    assert kinds == {"tasks", "kept", "bases", "notes"}
    bystander = new_task(capfd, "bystander")
    git(inited_clean, "update-ref", f"refs/bar/notes/{bystander['id']}/x", head)
    kept = traces_of(inited_clean, bystander)
    assert bar(capfd, "task", "close", "synced").code == 0
    dry = bar(capfd, "task", "delete", "synced", "--dry-run", "--json")
    removed = " ".join(dry.json()["removed"])
    assert all(r in removed for r in refs if t["id"] in r)
    res = bar(capfd, "task", "delete", "synced", "--force")
    assert res.code == 0, res.err
    assert traces_of(inited_clean, t) == []
    assert traces_of(inited_clean, bystander) == kept
    assert bar(capfd, "doctor").code == 0
