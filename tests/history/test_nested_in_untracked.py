"""A nested repository made by a step in a directory the tree does not hold (an empty
one, made earlier by hand) is recorded by that very step, as its gitlink, in both speed
modes; and git's quirk behind the miss: a repository named beside a path inside it adds
nothing at all (``side_index.outside_nested``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, run_sh, worktree

from bar.history import side_index
from conftest import git

COMMIT = "git -c user.name=a -c user.email=a@localhost commit -qm vendored"


@pytest.mark.parametrize("where", ["deep/er", "top"])
def test_a_repository_made_in_an_untracked_directory_is_the_steps(
    inited_clean: Path, capfd: pytest.CaptureFixture[str], speed: str, where: str
) -> None:
    t = new_task(capfd)
    wt = worktree(t)
    (wt / where / "sub").mkdir(parents=True)  # by hand: empty directories, never recorded
    assert bar(capfd, "run", "--", "true").code == 0
    run_sh(capfd, f"cd {where} && git init -q && echo 'int a;' > lib.c && git add -A && {COMMIT}")
    head = git(wt / where, "rev-parse", "HEAD").strip()
    last = ledger(t["id"])[-1]
    assert last["diff_stat"]["file_list"] == [where]
    listed = git(wt, "ls-tree", "-r", last["snapshot"], "--", where).split()
    assert listed[:3] == ["160000", "commit", head]
    # a second commit inside it moves the gitlink, recorded by the step that made it
    run_sh(capfd, f"cd {where} && echo 'int b;' >> lib.c && git add -A && {COMMIT}")
    moved = git(wt / where, "rev-parse", "HEAD").strip()
    last = ledger(t["id"])[-1]
    assert git(wt, "ls-tree", "-r", last["snapshot"], "--", where).split()[2] == moved
    assert bar(capfd, "verify").code == 0


def test_paths_inside_a_nested_repository_are_named_by_it(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    inner = wt / "z" / "w"
    inner.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(inner)], check=True)
    (inner / "lib.c").write_text("x\n")
    (wt / "z" / "plain.txt").write_text("y\n")
    scope = ["z/w/.git/HEAD", "z/w/lib.c", "z/w", "z/plain.txt", "top.txt"]
    assert side_index.outside_nested(wt, scope) == ["top.txt", "z/plain.txt", "z/w"]


@pytest.mark.parametrize(
    "how",
    [
        "mv vendor other && mkdir vendor && echo plain > vendor/plain.txt",  # moved away
        "mv vendor t && mv docs vendor && mv t docs",  # swapped with a plain directory
        "rm -rf vendor/.git",  # its .git taken out: the files stay
    ],
)
def test_a_directory_that_is_no_repository_any_more_is_recorded_by_its_files(
    inited_clean: Path,
    capfd: pytest.CaptureFixture[str],
    speed: str,
    how: str,
    tmp_path: Path,
) -> None:
    """A nested repository the record holds as a gitlink, whose directory then holds no
    repository (moved away, swapped with a plain directory, its ``.git`` taken out):
    ``git add -A`` kept the gitlink and took none of the files in the directory, where
    the record (a fresh index holding HEAD, then ``git add -A``) holds those files."""
    from helpers import plain_git_tree, recorded_tree

    t = new_task(capfd)
    wt = worktree(t)
    (wt / "docs").mkdir()
    (wt / "docs" / "guide.md").write_text("guide\n")
    run_sh(
        capfd,
        f"mkdir vendor && cd vendor && git init -q && echo 'int a;' > lib.c && git add -A && {COMMIT}",
    )
    listed = git(wt, "ls-tree", ledger(t["id"])[-1]["snapshot"], "--", "vendor").split()
    assert listed[:2] == ["160000", "commit"]
    run_sh(capfd, how)
    assert recorded_tree(inited_clean, t) == plain_git_tree(wt, tmp_path)
    assert bar(capfd, "verify").code == 0
