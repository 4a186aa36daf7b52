"""Apply never costs the developer work (docs/tasks.md, "Where the work lands"): files git
does not track are never overwritten, a checkout killed mid-update is finished by the next
command, and a branch in the middle of a rebase, merge, cherry-pick, revert or bisect is
left alone."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import (
    BAR_EXE,
    bar,
    bar_exe,
    commit_files,
    files_in_commit,
    files_on_disk,
    ledger,
    new_task,
    project_dir,
    run_sh,
    sweep,
    worktree,
)

from conftest import git


def run(capfd: pytest.CaptureFixture[str], script: str) -> None:
    run_sh(capfd, script)


# --- files git does not track --------------------------------------------------------


def assert_refused_and_untouched(
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    task_id: str,
    blocking: list[str],
    mine: dict[str, str],
) -> None:
    main_before = git(repo, "rev-parse", "main").strip()
    res = bar(capfd, "apply")
    for rel, text in mine.items():
        assert (repo / rel).read_text() == text
    assert res.code == 5, res.out + res.err
    assert all(path in res.err for path in blocking) and "nothing was changed" in res.err
    assert git(repo, "rev-parse", "main").strip() == main_before
    dry = bar(capfd, "apply", "--dry-run", "--json")
    assert dry.code == 5, dry.err  # the dry run fails as the apply does
    assert dry.json()["blocking_paths"] == blocking
    told = bar(capfd, "apply", "--dry-run")
    assert told.code == 5, told.err
    assert "would be refused" in told.out.splitlines()[0]
    said = "would overwrite these files (changed, untracked or ignored there)"
    assert f"{said}: {', '.join(blocking)}" in told.err and said not in told.out
    assert ledger(task_id)[-1]["kind"] == "run"
    assert not list(project_dir().rglob("apply.json"))


def test_apply_refuses_to_overwrite_an_ignored_file_the_task_unignores(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    commit_files(inited_clean, {".gitignore": ".env\n"}, "ignore .env")
    (inited_clean / ".env").write_text("API_KEY=the-real-one\n")
    t = new_task(capfd)
    run(capfd, ": > .gitignore; echo 'API_KEY=changeme' > .env")
    assert_refused_and_untouched(
        inited_clean, capfd, t["id"], [".env"], {".env": "API_KEY=the-real-one\n"}
    )


def test_apply_refuses_a_file_ignored_only_by_an_uncommitted_gitignore(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (inited_clean / ".gitignore").write_text(".env\n")  # the developer's own, never committed
    (inited_clean / ".env").write_text("API_KEY=the-real-one\n")
    t = new_task(capfd)
    run(capfd, "echo 'API_KEY=changeme' > .env")
    assert_refused_and_untouched(
        inited_clean, capfd, t["id"], [".env"], {".env": "API_KEY=the-real-one\n"}
    )
    (inited_clean / ".env").rename(inited_clean / ".env.mine")
    res = bar(capfd, "apply")
    assert res.code == 0, res.err
    assert (inited_clean / ".env").read_text() == "API_KEY=changeme\n"
    assert (inited_clean / ".env.mine").read_text() == "API_KEY=the-real-one\n"


def test_apply_refuses_ignored_files_where_it_makes_or_removes_a_directory(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    commit_files(inited_clean, {".gitignore": "build\n*.db\n", "cache/a.txt": "a\n"}, "cache")
    (inited_clean / "build").write_text("my build output\n")  # ignored file where a dir would go
    (inited_clean / "cache" / "local.db").write_text("my database\n")  # ignored, in a dir to go
    t = new_task(capfd)
    run(capfd, ": > .gitignore; mkdir build; echo o > build/out.txt; rm -r cache; echo f > cache")
    assert_refused_and_untouched(
        inited_clean,
        capfd,
        t["id"],
        ["build", "cache/local.db"],
        {"build": "my build output\n", "cache/local.db": "my database\n"},
    )


def test_apply_still_replaces_a_directory_of_tracked_files(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    commit_files(inited_clean, {"cache/a.txt": "a\n", "cache/sub/b.txt": "b\n"}, "cache")
    new_task(capfd)
    run(capfd, "rm -r cache; echo now-a-file > cache; ln -s cache link")
    res = bar(capfd, "apply")
    assert res.code == 0, res.err
    assert (inited_clean / "cache").read_text() == "now-a-file\n"
    assert os.readlink(inited_clean / "link") == "cache"
    assert git(inited_clean, "status", "--porcelain", "--ignored") == ""


# --- killed while updating the checkout ----------------------------------------------


def killing_git(tmp_path: Path, kill_at: int) -> dict[str, str]:
    """An environment whose ``git`` is real git, except that a ``checkout-index`` given
    its paths on stdin writes only the first ``kill_at`` of them, then kills its process
    group (bar included): bar killed in the middle of writing the checkout's files. (apply
    runs no filter or hook, so git itself is where a test can stop it.)"""
    wrapper = tmp_path / "killing-git" / "git"
    wrapper.parent.mkdir()
    real = shutil.which("git")
    count = tmp_path / "count"
    wrapper.write_text(
        f'#!/bin/sh\ncase " $* " in *" checkout-index "*)\n'
        f'  head -z -n {kill_at} | {real} "$@"; echo {kill_at} > {count}; kill -KILL 0;;\n'
        f'esac\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {"PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}


def setup_killable(repo: Path, n_files: int) -> tuple[dict[str, str], str]:
    """A project whose task changes ``n_files`` files of main (and turns a file into a
    directory and a directory into a file)."""
    files = {f"data/{i:03d}.dat": f"old {i}\n" for i in range(n_files)}
    files |= {"a-flat": "a file\n", "a-swap/f": "in a directory\n"}  # written first
    commit_files(repo, files, "data")
    assert bar_exe("init", cwd=repo).code == 0
    git(repo, "add", ".bar")
    git(repo, "commit", "-qm", "policy")
    res = bar_exe("task", "new", "rewrite", "--json", cwd=repo)
    assert res.code == 0, res.err
    task: dict[str, str] = res.json()
    script = (
        f"for i in $(seq 0 {n_files - 1}); do echo new $i > data/$(printf %03d $i).dat; done; "
        "rm data/000.dat; echo added > data/new.dat; "
        "rm a-flat; mkdir a-flat; echo inner > a-flat/inner; rm -r a-swap; echo now > a-swap"
    )
    assert bar_exe("run", "--", "sh", "-c", script, cwd=repo).code == 0
    return task, git(repo, "rev-parse", "main").strip()


def killed(repo: Path, args: list[str], env: dict[str, str]) -> int:
    """Run bar in a process group of its own, which the test may kill whole."""
    proc = subprocess.Popen(
        [BAR_EXE, *args],
        cwd=repo,
        env={**os.environ, **env},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc.wait(timeout=120)


def assert_before_or_after(repo: Path, task_id: str, main_before: str) -> bool:
    """The checkout is exactly as before the apply or exactly as after it, and the ledger
    agrees. Returns whether the apply landed."""
    head = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert not (repo / ".git" / "index.lock").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert files_on_disk(repo) == files_in_commit(repo, head)
    applied = [s for s in ledger(task_id) if s["kind"] == "apply"]
    if head == main_before:
        assert not applied
        return False
    assert git(repo, "rev-parse", f"{head}^").strip() == main_before
    assert [s["commit_sha"] for s in applied] == [head]
    assert sorted(p.name for p in (repo / "data").iterdir())[:2] == ["001.dat", "002.dat"]
    assert (repo / "data" / "new.dat").read_text() == "added\n"
    return True


def test_killed_while_writing_the_checkout_the_next_command_finishes_the_apply(
    repo: Path, tmp_path: Path
) -> None:
    task, main_before = setup_killable(repo, 40)
    env = killing_git(tmp_path, 20)
    assert killed(repo, ["apply", "-m", "rewrite data"], env) == -signal.SIGKILL
    assert (tmp_path / "count").read_text().strip() == "20"  # killed among the files
    # files are written aside and renamed in: none is half-written, whatever is killed
    for n in range(1, 40):  # (000.dat is deleted by the apply)
        assert (repo / "data" / f"{n:03d}.dat").read_text() in (f"old {n}\n", f"new {n}\n")
    assert git(repo, "rev-parse", "HEAD").strip() == main_before
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert assert_before_or_after(repo, task["id"], main_before)
    assert "finished the interrupted apply" in res.err  # the developer is told


def test_killed_inside_the_branch_update_the_next_command_finishes_the_apply(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's update-ref, killed with bar, leaves refs/heads/main.lock and HEAD.lock (it
    locks both, the branch being HEAD's): recovery removes the locks its own update made
    and moves the branch (found by bench/crash_trials, twice: the branch's lock, then
    HEAD's). Killed by the point's label: how many points come before it depends on
    whether the apply rescans the worktree first, which depends on the clock."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo = make_repo(name="real")
    task, main_before = setup_killable(repo, 3)
    trace = tmp_path / "trace"
    env = {"BAR_FAULT_AT": "before moving refs/heads/main", "BAR_FAULT_TRACE": str(trace)}
    assert killed(repo, ["apply", "-m", "probe"], env) == -signal.SIGKILL
    assert trace.read_text().splitlines()[-1].endswith(" before moving refs/heads/main")
    left = [repo / ".git" / "refs" / "heads" / "main.lock", repo / ".git" / "HEAD.lock"]
    for lock in left:
        lock.touch()  # what update-ref leaves
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert assert_before_or_after(repo, task["id"], main_before) is True
    assert git(repo, "rev-parse", "HEAD").strip() != main_before  # finished: moved
    assert not any(lock.exists() for lock in left)
    assert not (repo / ".git" / "index.lock").exists()


def test_killed_after_the_branch_moved_its_head_lock_is_not_left_behind(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update-ref moves the branch, then lets HEAD.lock go: killed between the two, it
    leaves HEAD.lock behind a branch already moved, on which every later commit in the
    checkout would fail. The next command removes it, and the developer commits."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo = make_repo(name="real")
    task, main_before = setup_killable(repo, 3)
    env = {"BAR_FAULT_AT": "after moving refs/heads/main"}
    assert killed(repo, ["apply", "-m", "probe"], env) == -signal.SIGKILL
    moved = git(repo, "rev-parse", "HEAD").strip()
    assert moved != main_before
    (repo / ".git" / "HEAD.lock").touch()  # what update-ref leaves, killed then
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert assert_before_or_after(repo, task["id"], main_before) is True
    assert not (repo / ".git" / "HEAD.lock").exists()
    assert not (repo / ".git" / "index.lock").exists()
    (repo / "mine.txt").write_text("the developer's own\n")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "-q", "-m", "mine")
    assert git(repo, "rev-parse", "HEAD~1").strip() == moved


def test_recovery_never_overwrites_an_edit_made_after_the_crash(repo: Path, tmp_path: Path) -> None:
    task, main_before = setup_killable(repo, 3)
    env = killing_git(tmp_path, 2)
    assert killed(repo, ["apply", "-m", "rewrite data"], env) == -signal.SIGKILL
    assert (tmp_path / "count").read_text().strip() == "2"
    (repo / "data" / "002.dat").write_text("the developer's edit\n")
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 5, res.err
    assert "data/002.dat" in res.err and "changed there since" in res.err
    assert (repo / "data" / "002.dat").read_text() == "the developer's edit\n"
    (repo / "data" / "002.dat").rename(tmp_path / "saved.dat")
    res = bar_exe("run", "--", "true", cwd=repo)
    assert res.code == 0, res.err
    assert assert_before_or_after(repo, task["id"], main_before)


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_killed_at_every_point_of_a_checkout_update_ends_before_or_after(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = make_repo(name="probe")
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    setup_killable(probe, 3)
    trace = tmp_path / "trace"
    res = bar_exe("apply", "-m", "probe", cwd=probe, env={"BAR_FAULT_TRACE": str(trace)})
    assert res.code == 0, res.err
    points = trace.read_text().splitlines()
    assert any("after writing the checkout's files" in p for p in points), points
    first = next(n for n, p in enumerate(points, start=1) if "after replacing apply.json" in p)
    outcomes = set()
    for n in sweep(len(points), first):  # from the intent on
        point = points[n - 1]
        label = point.split(" ", 1)[1]  # (by name: the look before it may write stamps or not)
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"home{n}"))
        repo = make_repo(name=f"r{n}")
        task, main_before = setup_killable(repo, 3)
        assert killed(repo, ["apply", "-m", "probe"], {"BAR_FAULT_AT": label}) == -signal.SIGKILL
        res = bar_exe("run", "--", "true", cwd=repo)
        assert res.code == 0, f"point {n} ({label}): {res.err}"
        outcomes.add(assert_before_or_after(repo, task["id"], main_before))
        assert bar_exe("doctor", cwd=repo).code == 0, f"point {n} ({label})"
    assert outcomes == {False, True}


# --- a git operation in progress on the target -------------------------------------


def diverge(repo: Path) -> None:
    """main and a branch `side` that both change README.md, so rebasing, merging or
    picking one onto the other stops with a conflict."""
    git(repo, "branch", "side")
    commit_files(repo, {"README.md": "main's line\n"}, "main edit")
    git(repo, "checkout", "-q", "side")
    commit_files(repo, {"README.md": "side's line\n"}, "side edit")
    git(repo, "checkout", "-q", "main")


OPERATIONS = {
    "rebase": (["rebase", "side"], ["rebase", "--abort"], "a rebase"),
    "rebase --apply": (["rebase", "--apply", "side"], ["rebase", "--abort"], "a rebase"),
    "merge": (["merge", "side"], ["merge", "--abort"], "a merge"),
    "cherry-pick": (["cherry-pick", "side"], ["cherry-pick", "--abort"], "a cherry-pick"),
    "revert": (["revert", "HEAD~1"], ["revert", "--abort"], "a revert"),
    "bisect": (["bisect", "start", "HEAD", "HEAD~2"], ["bisect", "reset"], "a bisect"),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_apply_refuses_while_the_target_is_mid_operation(
    operation: str, inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    start, abort, named = OPERATIONS[operation]
    t = new_task(capfd)
    run(capfd, "echo task > task.txt")
    diverge(inited_clean)
    if operation == "revert":  # a revert that conflicts: undo a change made before the last
        commit_files(inited_clean, {"README.md": "main's line again\n"}, "another main edit")
    main_before = git(inited_clean, "rev-parse", "main").strip()
    subprocess.run(["git", *start], cwd=inited_clean, capture_output=True)  # stops mid-way
    res = bar(capfd, "apply")
    assert res.code == 9, res.out + res.err
    assert named in res.err and str(inited_clean) in res.err and "main" in res.err
    assert bar(capfd, "apply", "--dry-run").code == 9
    assert ledger(t["id"])[-1]["kind"] == "run"
    git(inited_clean, *abort)
    assert git(inited_clean, "rev-parse", "main").strip() == main_before
    assert git(inited_clean, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    res = bar(capfd, "apply")
    assert res.code == 0, res.err
    assert ledger(t["id"])[-1]["kind"] == "apply"
    assert (inited_clean / "task.txt").read_text() == "task\n"


def test_apply_refuses_while_the_target_is_rebased_in_another_worktree(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = new_task(capfd)
    run(capfd, "echo task > task.txt")
    diverge(inited_clean)
    git(inited_clean, "checkout", "-q", "side")
    other = tmp_path / "other-checkout"
    git(inited_clean, "worktree", "add", "-q", "--detach", str(other), "side")
    main_before = git(inited_clean, "rev-parse", "main").strip()
    subprocess.run(["git", "rebase", "side", "main"], cwd=other, capture_output=True)
    assert git(other, "status").startswith("interactive rebase in progress") or "rebasing" in git(
        other, "status"
    )
    res = bar(capfd, "apply")
    assert res.code == 9, res.out + res.err
    assert "a rebase" in res.err and str(other) in res.err
    git(other, "rebase", "--abort")
    assert git(inited_clean, "rev-parse", "main").strip() == main_before
    assert ledger(t["id"])[-1]["kind"] == "run"


def test_a_rebase_of_main_a_step_writes_in_its_own_admin_directory_blocks_no_apply(
    inited_clean: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A task's worktree holds its own branch alone, and its admin directory is the
    step's to write: what it says of a rebase of ``main`` is passed over, so one task's
    step cannot stop every apply to ``main``. A task whose worktree really rebases its
    own branch still blocks an apply onto that branch."""
    first = new_task(capfd, "first")
    run(
        capfd,
        'admin=$(git rev-parse --absolute-git-dir) && mkdir -p "$admin/rebase-merge" && '
        'echo refs/heads/main > "$admin/rebase-merge/head-name"',
    )
    assert (
        Path(git(worktree(first), "rev-parse", "--absolute-git-dir").strip()) / "rebase-merge"
    ).is_dir()
    second = new_task(capfd, "second")
    run(capfd, "echo task > task.txt")
    res = bar(capfd, "apply", "--task", second["id"])
    assert res.code == 0, res.out + res.err
    assert (inited_clean / "task.txt").read_text() == "task\n"
