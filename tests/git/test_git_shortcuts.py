"""Where bar answers without starting git, or asks one git for two answers, its answer
equals plain git's: a checkout's git directory, and the settings files a diff touches."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar import git as bargit
from bar.changes.merge import Counted
from conftest import MakeRepo, git


def _plain_admin(where: Path) -> str:
    return git(where, "rev-parse", "--absolute-git-dir").strip()


def test_a_checkouts_git_directory_is_the_one_git_names(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    main = make_repo()
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    relative = tmp_path / "relative"
    git(main, "worktree", "add", "-q", "-b", "rel", str(relative))
    # a linked worktree whose .git file names its directory relatively (git >= 2.48 can)
    admin = Path(_plain_admin(relative))
    (relative / ".git").write_text(f"gitdir: {os.path.relpath(admin, relative)}\n")
    (tmp_path / "via-link").symlink_to(main)
    (tmp_path / "linked-link").symlink_to(linked)
    for where in (main, linked, relative, tmp_path / "via-link", tmp_path / "linked-link"):
        assert str(bargit.admin_dir(where)) == _plain_admin(where), where


def test_a_git_file_that_names_nothing_is_left_to_git(make_repo: MakeRepo, tmp_path: Path) -> None:
    main = make_repo()
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "side", str(linked))
    real = _plain_admin(linked)
    sub = linked / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: /nowhere/at/all\n")  # not a repository: git looks up
    proc = subprocess.run(
        ["git", "-C", str(sub), "rev-parse", "--absolute-git-dir"], capture_output=True, text=True
    )
    try:
        answer: str | None = str(bargit.admin_dir(sub))
    except bargit.GitError:
        answer = None
    assert answer == (proc.stdout.strip() if proc.returncode == 0 else None)
    assert str(bargit.admin_dir(linked)) == real


_NAMES = ["a.txt", "b.txt", "c/d.txt", "c/e.txt", ".bar/policy.yaml", ".bar/config.yaml"]
_BODY = st.sampled_from(["", "one\n", "one\ntwo\n", "x" * 200 + "\n", "one\ntwo\nthree\n"])
_TREE = st.dictionaries(st.sampled_from(_NAMES), _BODY, max_size=len(_NAMES))


def _commit(repo: Path, files: dict[str, str]) -> str:
    for name in _NAMES:
        path = repo / name
        if name in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[name])
        elif path.exists():
            path.unlink()
    git(repo, "add", "-A")
    return git(repo, "write-tree").strip()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=_TREE, after=_TREE, asked=st.lists(st.sampled_from([*_NAMES, "zz"]), unique=True))
def test_the_settings_a_diff_touches_equal_plain_gits_name_only(
    make_repo: MakeRepo, before: dict[str, str], after: dict[str, str], asked: list[str]
) -> None:
    repo = make_repo()
    a, b = _commit(repo, before), _commit(repo, after)
    # as an apply counts its merge (``apply_merge.Counted``): one numstat diff, begun
    asked_diff = bargit.start(repo, "diff", *bargit.DIFF_FLAGS, "--numstat", "-z", a, b, "--")
    stat, touched = Counted(asked_diff, asked).value()
    plain = git(repo, "diff", "--no-renames", "--name-only", "-z", a, b).split("\0")
    assert touched == [p for p in asked if p in plain]
    assert stat == bargit.numstat(repo, a, b)
