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


def test_one_git_asked_many_times_answers_as_git_check_ignore_does(make_repo: MakeRepo) -> None:
    """``Asking``: one ``git check-ignore`` for many questions says of each path what a
    ``git check-ignore`` of its own says: rules of every level, a negated rule, a path
    below an ignored directory, odd names, a question longer than a pipe holds, a
    directory deeper than git's verbose answer can say. A question git fails on (a path
    outside the worktree) is answered None, and the next ones still are."""
    from bar.git.ignored import Asking

    repo = make_repo()
    (repo / ".gitignore").write_text("*.log\n!keep.log\n/build/\ncache*\n\\!bang\n")
    (repo / "sub" / "local").mkdir(parents=True)
    (repo / "build").mkdir()  # (a rule that ends in / names directories that are there)
    deep = "/".join(["d"] * 40 + ["cache-deep"])
    (repo / deep).mkdir(parents=True)
    (repo / "sub" / ".gitignore").write_text("local/\n")
    paths = [
        "a.log",
        "keep.log",
        "build",
        "build/deep/x",
        "src",
        "cache-1",
        "!bang",
        "sub/local",
        "sub/local/y",
        "sub/other",
        "new\nline.log",
        "caf\udce9.log",  # (a name that is no UTF-8)
        ":(top)cache-1",  # (a name, not a pathspec: no rule ignores it)
        *(f"many/{i:05}-{'x' * 40}{'.log' if i % 3 else ''}" for i in range(400)),
    ]

    def plain(path: str) -> bool:
        res = subprocess.run(
            ["git", "check-ignore", "--no-index", "-q", "--", f"./{path}"],
            cwd=repo,
            check=False,
        )
        return res.returncode == 0

    expected = {p for p in paths[:13] if plain(p)} | {p for p in paths[13:] if p.endswith(".log")}
    assert {"a.log", "build", "build/deep/x", "cache-1", "!bang", "sub/local"} <= expected
    assert not {"keep.log", "src", "sub/other", ":(top)cache-1"} & expected
    with Asking(repo) as asking:
        assert asking.ignored(paths[:13]) == {p for p in paths[:13] if p in expected}
        assert asking.ignored([]) == set()
        assert asking.ignored(paths) == expected  # (over 4 KB: written while git answers)
        assert asking.ignored(["src", "a.log"]) == {"a.log"}
        assert asking.ignored(["../outside"]) is None
        assert asking.ignored(["src", "a.log"]) == {"a.log"}  # (each of a git of its own)
    with Asking(repo) as asking:  # (git 2.39's verbose answer for one dies: asked again)
        assert asking.ignored(["src", deep, "a.log"]) == {deep, "a.log"}
        assert asking.ignored(["src", "keep.log", "a.log"]) == {"a.log"}
