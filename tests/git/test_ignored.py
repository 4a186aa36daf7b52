"""bar.git.ignored.drop_newly_ignored: a side index loses exactly the files git now ignores
that HEAD does not hold, whether it holds none, a few or many files HEAD does not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bar import git as bar_git
from bar.git.ignored import against_head, drop_newly_ignored
from conftest import MakeRepo, git


def drop(repo: Path, index: Path) -> None:
    """``drop_newly_ignored`` as a full look calls it: told what the index holds that HEAD
    does not (``against_head``)."""
    head = bar_git.head(repo)
    found = against_head(repo, index, head) if head is not None else None
    drop_newly_ignored(repo, index, head, None if found is None else found.get("A", []))


def held(repo: Path, index: Path) -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"],
        cwd=repo,
        env={**os.environ, "GIT_INDEX_FILE": str(index)},
        capture_output=True,
        check=True,
    ).stdout
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


def by_plain_git(repo: Path, index: Path) -> set[str]:
    """What should stay: HEAD's files, and the others no rule ignores."""
    head = set(git(repo, "ls-tree", "-r", "-z", "--name-only", "HEAD").split("\0")) - {""}
    out = subprocess.run(
        ["git", "ls-files", "-z", "-c", "-i", "--exclude-standard"],
        cwd=repo,
        env={**os.environ, "GIT_INDEX_FILE": str(index)},
        capture_output=True,
        check=True,
    ).stdout
    ignored = {os.fsdecode(p) for p in out.split(b"\0") if p}
    return held(repo, index) - (ignored - head)


@pytest.mark.parametrize("extra", [0, 3, 150])
def test_only_files_head_lacks_and_rules_ignore_are_dropped(
    make_repo: MakeRepo, tmp_path: Path, extra: int
) -> None:
    repo = make_repo()
    (repo / "kept.log").write_text("tracked, then ignored: HEAD holds it\n")
    (repo / "build").mkdir()
    (repo / "build" / "tracked.txt").write_text("in HEAD\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "head")
    index = tmp_path / "side-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=repo, env=env, check=True)
    names = ["new.log", "build/made.txt", "caf\udce9.log", "plain.txt", "a b.txt"]
    names += [f"many/{i}.{'log' if i % 2 else 'txt'}" for i in range(extra)]
    for name in names:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    subprocess.run(["git", "add", "-f", "--", *names], cwd=repo, env=env, check=True)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    expected = by_plain_git(repo, index)
    drop(repo, index)
    assert held(repo, index) == expected
    assert {"kept.log", "build/tracked.txt", "plain.txt", "a b.txt"} <= expected
    assert not {"new.log", "build/made.txt", "caf\udce9.log"} & expected


def test_an_index_holding_only_heads_files_is_left_alone(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    repo = make_repo()
    (repo / "x.log").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "head")
    (repo / ".gitignore").write_text("*.log\n")
    index = tmp_path / "side-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=repo, env=env, check=True)
    before = index.read_bytes()
    drop(repo, index)
    assert index.read_bytes() == before and "x.log" in held(repo, index)
