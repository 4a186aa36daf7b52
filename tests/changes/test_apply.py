"""Apply on real repositories (docs/tasks.md, "Where the work lands"): one commit or a
merge, never a half-changed checkout."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, commit_files, git_commands, ledger, new_task, run_sh, worktree

from conftest import git


def run(capfd: pytest.CaptureFixture[str], script: str) -> None:
    run_sh(capfd, script)


def test_apply_commit_onto_checked_out_main(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd, "add-feature", "-d", "Adds the feature")
    run(capfd, "echo feature > feature.txt; echo changed > README.md")
    main_before = git(inited_clean, "rev-parse", "main").strip()
    res = bar(capfd, "apply")
    assert res.code == 0, res.err
    main_after = git(inited_clean, "rev-parse", "main").strip()
    assert git(inited_clean, "rev-parse", f"{main_after}^").strip() == main_before
    msg = git(inited_clean, "log", "-1", "--format=%B", "main")
    assert msg.startswith("Add feature\n\nAdds the feature")
    assert f"Bar-Task: {t['id']}" in msg and "Bar-Step: 0001" in msg
    assert (inited_clean / "feature.txt").read_text() == "feature\n"
    assert git(inited_clean, "status", "--porcelain") == ""
    changed = git(inited_clean, "diff", "--name-only", main_before, main_after).split()
    assert sorted(changed) == ["README.md", "feature.txt"]
    step = ledger(t["id"])[-1]
    assert step["kind"] == "apply" and step["mode"] == "commit"
    assert step["commit_sha"] == main_after and step["target_branch"] == "main"
    assert step["commit_message"].startswith("Add feature")


def test_apply_to_branch_not_checked_out_moves_only_the_ref(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    git(inited_clean, "branch", "release")
    new_task(capfd)
    run(capfd, "echo r > r.txt")
    head_before = git(inited_clean, "rev-parse", "HEAD").strip()
    res = bar(capfd, "apply", "--target", "release", "-m", "Release change")
    assert res.code == 0, res.err
    assert git(inited_clean, "show", "release:r.txt") == "r\n"
    assert git(inited_clean, "rev-parse", "HEAD").strip() == head_before
    assert not (inited_clean / "r.txt").exists()


def test_apply_merges_once_and_asks_git_nothing_twice(
    inited_clean: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    git(inited_clean, "branch", "release")
    new_task(capfd)
    run(capfd, "echo r > r.txt")
    for n, extra in enumerate((["--dry-run"], [])):
        trace = tmp_path / f"apply-{n}.json"
        monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
        res = bar(capfd, "apply", "--target", "release", "-m", "Release change", *extra)
        monkeypatch.delenv("GIT_TRACE2_EVENT")
        assert res.code == 0, res.err
        ran = git_commands(trace)
        # the merge computed ahead (while hand edits are looked for) is the one used; the
        # target's tip and tree come from one cat-file, the task's state's tree from the
        # stamps, the task's HEAD from its files
        assert ran.count("merge-tree") == 1 and ran.count("cat-file") == 1, ran
        assert "rev-parse" not in ran, ran
        assert "worktree" not in ran, ran  # (no worktree's HEAD names release: no list)
        assert ran.count("commit-tree") == (1 if extra else 2), ran
    assert git(inited_clean, "show", "release:r.txt") == "r\n"


def test_conflicting_apply_changes_nothing(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run(capfd, "echo task > README.md")
    (inited_clean / "README.md").write_text("main\n")
    git(inited_clean, "commit", "-qam", "main edit")
    main_before = git(inited_clean, "rev-parse", "main").strip()
    index_before = (inited_clean / ".git/index").read_bytes()
    res = bar(capfd, "apply")
    assert res.code == 6
    assert "README.md" in res.err and "nothing was changed" in res.err
    assert git(inited_clean, "rev-parse", "main").strip() == main_before
    assert (inited_clean / ".git/index").read_bytes() == index_before
    assert (inited_clean / "README.md").read_text() == "main\n"
    assert ledger(t["id"])[-1]["kind"] == "run"
    dry = bar(capfd, "apply", "--dry-run", "--json")
    assert dry.code == 6 and dry.json()["conflicts"] == ["README.md"]


def test_apply_refuses_dirty_checkout_paths(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    run(capfd, "echo task > README.md; echo new > new.txt")
    (inited_clean / "README.md").write_text("uncommitted dev work\n")
    res = bar(capfd, "apply")
    assert res.code == 5 and "README.md" in res.err
    git(inited_clean, "checkout", "README.md")
    (inited_clean / "new.txt").write_text("untracked in the way\n")
    res = bar(capfd, "apply")
    assert res.code == 5 and "new.txt" in res.err
    (inited_clean / "new.txt").unlink()
    (inited_clean / "unrelated.txt").write_text("dev scratch\n")
    assert bar(capfd, "apply").code == 0
    assert (inited_clean / "unrelated.txt").exists()


def test_apply_merge_mode_keeps_agent_commits(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run(capfd, "echo a > a.txt && git add a.txt && git commit -qm 'agent commit'")
    run(capfd, "echo b > b.txt")
    res = bar(capfd, "apply", "--mode", "merge")
    assert res.code == 0, res.err
    parents = git(inited_clean, "rev-list", "--parents", "-1", "main").split()
    assert len(parents) == 3
    log = git(inited_clean, "log", "--format=%s", "main")
    assert "agent commit" in log and "Uncommitted changes of task" in log
    assert (inited_clean / "a.txt").exists() and (inited_clean / "b.txt").exists()
    assert git(inited_clean, "status", "--porcelain") == ""
    wt = worktree(t)
    assert git(wt, "status", "--porcelain") == ""


def test_apply_dry_run(inited_clean: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    run(capfd, "echo d > d.txt")
    before = git(inited_clean, "rev-parse", "main").strip()
    res = bar(capfd, "apply", "--dry-run")
    assert res.code == 0 and "d.txt" in res.out and "dry run" in res.out
    assert git(inited_clean, "rev-parse", "main").strip() == before
    assert bar(capfd, "apply").code == 0
    again = bar(capfd, "apply")
    assert again.code == 0 and "Nothing to apply" in again.out


def test_apply_message_is_scrubbed_of_known_secrets(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-value-8d1f27c4a9"
    monkeypatch.setenv("MY_API_TOKEN", secret)
    t = new_task(capfd)
    run(capfd, "echo d > d.txt")
    dry = bar(capfd, "apply", "--dry-run", "--json", "-m", f"use token {secret}")
    assert dry.code == 0 and secret not in dry.out
    res = bar(capfd, "apply", "-m", f"Fix the client (token {secret})")
    assert res.code == 0, res.err
    msg = git(inited_clean, "log", "-1", "--format=%B", "main")
    assert secret not in msg and msg.startswith("Fix the client (token ***)")
    assert secret not in ledger(t["id"])[-1]["commit_message"]


def test_applying_an_earlier_state_leaves_the_worktree_recorded_as_it_is(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run(capfd, "echo 1 > one")
    run(capfd, "echo 2 > two")
    assert bar(capfd, "apply", "--at", "1", "-m", "first half").code == 0
    # the worktree still holds step 2's state, as recorded: nothing is unrecorded
    assert bar(capfd, "status", "--json").json()["unrecorded_changes"] is False
    run(capfd, "true")
    assert [s["kind"] for s in ledger(t["id"])] == ["run", "run", "apply", "run"]
    assert (worktree(t) / "two").exists()


def test_a_task_from_a_feature_branch_lands_on_it_by_default(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    git(inited_clean, "checkout", "-qb", "feature")
    (inited_clean / "f.txt").write_text("feature's own work\n")
    git(inited_clean, "add", "f.txt")
    git(inited_clean, "commit", "-qm", "feature commit")
    feature = git(inited_clean, "rev-parse", "feature").strip()
    git(inited_clean, "checkout", "-q", "main")
    main = git(inited_clean, "rev-parse", "main").strip()
    new_task(capfd, "x", "--base", "feature")
    run(capfd, "echo task > t.txt")
    dry = bar(capfd, "apply", "--dry-run", "--json")
    assert dry.code == 0 and dry.json()["target_branch"] == "feature"
    assert bar(capfd, "task", "sync", "--dry-run", "--json").json()["onto"] == "feature"
    res = bar(capfd, "apply", "-m", "On feature")
    assert res.code == 0 and "to feature as" in res.out, res.err
    assert git(inited_clean, "rev-parse", "feature^").strip() == feature
    assert git(inited_clean, "show", "feature:t.txt") == "task\n"
    assert git(inited_clean, "rev-parse", "main").strip() == main  # feature's commit stays off main
    assert not (inited_clean / "t.txt").exists()
    # a base that is no branch (a commit): git.default_base, as before
    new_task(capfd, "y", "--base", main)
    run(capfd, "echo y > y.txt")
    assert bar(capfd, "apply", "--dry-run", "--json").json()["target_branch"] == "main"


def test_the_trailer_names_the_step_whose_state_lands_never_an_apply(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    git(inited_clean, "branch", "release")
    new_task(capfd)
    run(capfd, "echo one > one.txt")
    run(capfd, "echo two > two.txt")
    assert bar(capfd, "apply", "--at", "1", "-m", "first").code == 0  # step 0003
    assert "Bar-Step: 0001" in git(inited_clean, "log", "-1", "--format=%B", "main")
    assert bar(capfd, "apply", "--target", "release", "-m", "all").code == 0  # step 0004
    assert "Bar-Step: 0002" in git(inited_clean, "log", "-1", "--format=%B", "release")
    run(capfd, "echo three > three.txt")  # step 0005
    assert bar(capfd, "apply", "-m", "rest").code == 0  # step 0006, after two applies
    msg = git(inited_clean, "log", "-1", "--format=%B", "main")
    assert "Bar-Step: 0005" in msg and "Bar-Step: 0004" not in msg
    assert bar(capfd, "show", "5").out.count("three.txt") >= 1  # what the trailer points at
    # a dry run with a hand edit names the step the apply will record it as
    (worktree(new_task(capfd, "t2")) / "hand.txt").write_text("by hand\n")
    dry = bar(capfd, "apply", "--target", "release", "--dry-run", "--json")
    assert "Bar-Step: 0001" in dry.json()["commit_message"]
    assert bar(capfd, "apply", "--target", "release", "-m", "hand").code == 0
    assert "Bar-Step: 0001" in git(inited_clean, "log", "-1", "--format=%B", "release")


@pytest.mark.parametrize("files", [3, 70])  # (few touched paths are named to git, many not)
def test_apply_onto_the_checkout_leaves_its_index_as_git_would(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], files: int
) -> None:
    """After an apply onto the checked-out branch, the checkout is clean to git's plumbing
    too (the written files' stat data is in the index), a file turned into a directory
    and a removed file are right, and what the developer had staged elsewhere stays
    staged, with the untouched entries' stat data as it was."""
    repo = inited_clean
    made = {"keep.txt": "kept\n", "gone.txt": "to remove\n", "spot": "a file, then a dir\n"}
    commit_files(repo, made, "three files")
    new_task(capfd)
    run(
        capfd,
        f"for i in $(seq {files}); do echo $i > f$i.txt; done; rm gone.txt spot; "
        "mkdir spot; echo inside > spot/inside.txt; echo changed > README.md",
    )
    (repo / "staged.txt").write_text("staged by the developer\n")
    git(repo, "add", "staged.txt")
    kept_entry = git(repo, "ls-files", "--debug", "--", "keep.txt")
    assert bar(capfd, "apply").code == 0
    assert git(repo, "diff-files", "--name-only") == ""  # (plumbing: no refresh of its own)
    assert git(repo, "diff-index", "--cached", "--name-only", "HEAD") == "staged.txt\n"
    assert git(repo, "ls-files", "--debug", "--", "keep.txt") == kept_entry
    assert (repo / "spot" / "inside.txt").read_text() == "inside\n"
    assert not (repo / "gone.txt").exists() and (repo / f"f{files}.txt").read_text() == f"{files}\n"
    assert git(repo, "status", "--porcelain") == "A  staged.txt\n"


def test_apply_refuses_while_a_conflict_is_unresolved_anywhere_in_the_checkout(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A conflict git has not seen resolved blocks the apply even where the task
    touches nothing (its commit would be made over it)."""
    repo = inited_clean
    new_task(capfd)
    run(capfd, "echo task > README.md")
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"theirs\n").strip()
    sides = "".join(f"100644 {blob} {stage}\tother.txt\n" for stage in (2, 3))
    git(repo, "update-index", "--index-info", input=sides.encode())
    main_before = git(repo, "rev-parse", "main")
    res = bar(capfd, "apply")
    assert res.code == 5 and "other.txt" in res.err, res.err
    assert git(repo, "rev-parse", "main") == main_before
    git(repo, "update-index", "--force-remove", "other.txt")
    assert bar(capfd, "apply").code == 0
