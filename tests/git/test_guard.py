"""What a step may not change (docs/internals/git.md, "What a step may not change"): the
worktree's .git file, the task's snapshot ref, bar's config, the policy file, and the
repository's shared config, hooks and attributes. Each test is an attack a command run in a
task can make without a sandbox (so the steps here run with --no-sandbox;
tests/sandbox/test_sandbox.py has the same attacks failing under it); bar must notice, put
things back and say so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, ledger, new_task, project_dir, task_dir, worktree

from conftest import git


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    monkeypatch.chdir(worktree(t))
    return t


def sh(capfd: pytest.CaptureFixture[str], script: str) -> str:
    res = bar(capfd, "run", "--no-sandbox", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    return res.err


def guard_events(t: dict) -> list[str]:
    return [e["matched"] for e in ledger(t["id"])[-1]["policy_events"] if e["rule"] == "bar:guard"]


def test_a_git_file_pointed_at_the_developers_repository_is_put_back(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    main_head = git(repo, "rev-parse", "main").strip()
    wt = worktree(task)
    sh(capfd, "echo agent > a.txt && git add a.txt && git commit -qm agent")
    err = sh(capfd, f"printf 'gitdir: {repo}/.git\\n' > .git")
    assert "guard" in err and guard_events(task)
    assert (wt / ".git").read_text().startswith("gitdir: ") and str(repo / ".git") + "\n" != (
        wt / ".git"
    ).read_text().removeprefix("gitdir: ")
    res = bar(capfd, "rollback", "--hard", "--to", "base")
    assert res.code == 0, res.err
    assert git(repo, "rev-parse", "main").strip() == main_head  # the developer's branch
    assert git(wt, "rev-parse", "HEAD").strip() == task["base_commit"]


def test_a_git_file_changed_between_steps_is_put_back_before_any_git_operation(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    main_head = git(repo, "rev-parse", "main").strip()
    wt = worktree(task)
    sh(capfd, "echo agent > a.txt && git add a.txt && git commit -qm agent")
    (wt / ".git").write_text(f"gitdir: {repo}/.git\n")  # outside any step
    res = bar(capfd, "rollback", "--hard", "--to", "base")
    assert res.code == 0, res.err
    assert ".git file" in res.err
    assert git(repo, "rev-parse", "main").strip() == main_head
    assert git(wt, "rev-parse", "HEAD").strip() == task["base_commit"]


def test_a_removed_git_file_never_makes_a_snapshot_of_an_enclosing_repository(
    tmp_path: Path, repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    git(tmp_path, "init", "-q")  # a repository above bar's home, as one at $HOME would be
    sh(capfd, "rm .git && echo x > new.txt")
    step = ledger(task["id"])[-1]
    assert step["diff_stat"]["file_list"] == ["new.txt"]
    assert (worktree(task) / ".git").is_file()
    assert git(tmp_path, "ls-files") == ""


def test_a_moved_snapshot_ref_is_never_chained_onto(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    sh(capfd, "echo one > one.txt")
    # (from a script file: the policy blocks the line itself, and this tests what is
    # behind the policy)
    sh(
        capfd,
        "echo c > c.txt && git add c.txt && git commit -qm c && printf '%s\\n' "
        "'git update-ref refs/bar/tasks/$BAR_TASK_ID HEAD' > \"$TMPDIR/m.sh\" && "
        'sh "$TMPDIR/m.sh"',
    )
    sh(capfd, "echo two > two.txt")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "--quiet", "--prune=now")
    for step in ledger(task["id"]):
        assert git(repo, "cat-file", "-t", step["snapshot"]).strip() == "commit"
    res = bar(capfd, "doctor")
    assert res.code == 0, res.out + res.err
    assert bar(capfd, "rollback", "--to", "1").code == 0


def test_a_step_that_switches_the_policy_off_is_undone(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    config = project_dir() / "config.yaml"
    before = config.read_bytes()
    err = sh(
        capfd,
        "sed -i 's/enabled: true/enabled: false/' $BAR_HOME/projects/$BAR_PROJECT/config.yaml",
    )
    assert "guard" in err and guard_events(task)
    assert config.read_bytes() == before
    assert config.stat().st_mode & 0o777 == 0o600  # bar's file stays private
    assert list((task_dir(task["id"]) / "tampered").iterdir())  # the step's version is kept
    res = bar(capfd, "run", "--", "rm", "-rf", "/")  # confined: a seatbelt, should it run
    assert res.code == 126  # still blocked


def test_a_step_that_loosens_the_policy_file_is_undone(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    policy = repo / ".bar" / "policy.yaml"
    before = policy.read_bytes()
    sh(capfd, f"echo 'rules: []' > {policy}")
    assert policy.read_bytes() == before and guard_events(task)


def test_planted_filters_and_hooks_are_removed_but_ordinary_config_is_kept(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    hook = repo / ".git" / "hooks" / "post-checkout"
    sh(
        capfd,
        "git config filter.x.smudge 'touch /tmp/planted; cat' && "
        "git config user.name Agent && "
        f"printf '#!/bin/sh\\ntouch /tmp/planted\\n' > {hook} && chmod +x {hook} && "
        f"echo '* filter=x' > {repo}/.git/info/attributes",
    )
    events = guard_events(task)
    assert len(events) == 3, events
    found = subprocess.run(
        ["git", "config", "--get-regexp", "^filter"], cwd=repo, capture_output=True
    )
    assert found.stdout == b""
    assert git(repo, "config", "user.name").strip() == "Agent"  # ordinary work stays
    assert not hook.exists() and not (repo / ".git" / "info" / "attributes").exists()


def test_a_worktree_config_filter_and_an_object_alternate_are_taken_out(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    """The worktree's admin directory and the object store are writable even in a
    confined step; bar's own git commands read both."""
    git(repo, "config", "extensions.worktreeConfig", "true")  # the developer's choice
    common = repo / ".git"
    sh(
        capfd,
        "git config --worktree filter.y.clean 'touch /tmp/planted; cat' && "
        f"echo /nonexistent/objects > {common}/objects/info/alternates",
    )
    events = guard_events(task)
    assert len(events) == 2, events
    admin = Path(git(worktree(task), "rev-parse", "--absolute-git-dir").strip())
    assert not (admin / "config.worktree").exists()
    assert not (common / "objects" / "info" / "alternates").exists()


def test_steps_that_touch_nothing_guarded_record_no_guard_event(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    sh(capfd, "echo x > x.txt && git add x.txt && git commit -qm x && git config user.name A")
    assert guard_events(task) == []
    assert not (task_dir(task["id"]) / "tampered").exists()
    assert os.path.isfile(worktree(task) / ".git")


@pytest.mark.breaks_history  # (an object rewritten in place, by the test itself)
def test_objects_changed_in_place_are_found_with_and_without_the_kernels_help(
    make_repo: Any, tmp_path: Path
) -> None:
    import time
    import zlib

    from bar.base.inotify import Watch
    from bar.git import object_guard

    repo = make_repo()
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"reviewed\n").strip()
    store = repo / ".git" / "objects"
    since = time.time_ns() - 50_000_000
    seen = object_guard.watch(store)
    path = store / blob[:2] / blob[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob 5\x00evil\n"))
    for loose, packs in (
        object_guard.changed(store, seen, since),
        object_guard.changed_since(store, since),
    ):
        assert path in loose and packs == []
        assert object_guard.bad_objects(repo, loose, packs) == [str(path)]
    assert Watch([str(tmp_path / "missing")]).changes() is None  # cannot say: look at all


def test_git_packing_its_objects_in_a_step_is_not_taken_for_tampering(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    """An agent's ``git commit`` may start git's own gc (``gc --auto``, once bar's
    snapshots left enough loose objects): it packs the loose objects and deletes them.
    Objects that went away and the pack that now holds them are git's work, not a
    tampered store: nothing is reported."""
    sh(capfd, "for i in $(seq 1 40); do echo $i > f$i.txt; done")  # loose objects
    err = sh(
        capfd,
        "echo y > y.txt && git add y.txt && git commit -qm y && git gc --quiet && "
        "git count-objects -v > counted.txt",
    )
    assert "guard" not in err, err
    assert guard_events(task) == []
    counted = (worktree(task) / "counted.txt").read_text()
    assert "in-pack: 0" not in counted, counted  # (git did pack them)
    assert not (task_dir(task["id"]) / "tampered").exists()


def test_a_loose_object_gone_while_it_is_checked_is_not_reported(
    make_repo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gc git started in the background (``gc.autoDetach``) may still be deleting the
    loose objects it packed when the step's check reads them: one found, then gone
    before it is read, was packed, not tampered with."""
    from bar.git import object_guard

    repo = make_repo()
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"packed meanwhile\n").strip()
    path = repo / ".git" / "objects" / blob[:2] / blob[2:]
    path.unlink()  # (as git's prune-packed does, right after the check found it)
    monkeypatch.setattr(object_guard.os.path, "lexists", lambda p: True)
    assert object_guard.bad_objects(repo, [path], []) == []
