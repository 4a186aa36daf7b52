"""The raw bytes a look records where git converts (``bar.git.exact``) are the bytes git
hashed: each file read once, and kept only while its stat is the one git noted when it
added it (a save in place racing the look is hashed again next time, never recorded as
the raw bytes of another blob)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from bar.git import exact, racy
from conftest import MakeRepo, git


def _blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _index(repo: Path) -> Path:
    return Path(git(repo, "rev-parse", "--absolute-git-dir").strip()) / "index"


def test_a_file_git_added_as_it_is_gives_its_raw_bytes(make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "one\n"})
    git(repo, "config", "core.autocrlf", "true")  # (git's checkout would write CRLF)
    (repo / "a.txt").write_bytes(b"two\n")
    git(repo, "add", "a.txt")
    found, moved = exact.raw_differences(repo, _index(repo), ["a.txt"])
    assert found == {"a.txt": _blob(b"two\n")} and moved == set()
    assert git(repo, "cat-file", "blob", found["a.txt"]) == "two\n"


def test_a_save_after_git_added_the_file_is_no_raw_bytes_and_a_suspect(
    make_repo: MakeRepo,
) -> None:
    repo = make_repo({"a.txt": "one\n"})
    git(repo, "config", "core.autocrlf", "true")
    (repo / "a.txt").write_bytes(b"two\n")
    git(repo, "add", "a.txt")
    with open(repo / "a.txt", "r+b") as f:  # (same size, in place, after git read it)
        f.write(b"six\n")
    st = os.stat(repo / "a.txt")
    os.utime(repo / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))  # (a later tick)
    found, moved = exact.raw_differences(repo, _index(repo), ["a.txt"])
    assert found == {} and moved == {"a.txt"}
    assert racy.suspects(_index(repo)) == ["a.txt"]
    # the entries of the snapshot: the state before's raw bytes stand where its tree
    # entry is the one of before, none where it is new
    before = {"a.txt": ("100644", _blob(b"one\n"))}
    modes = {"a.txt": "100644"}
    assert exact.next_entries(repo, _index(repo), modes, before, ["a.txt"]) == before
    assert exact.next_entries(repo, _index(repo), modes, before, ["a.txt"], ["a.txt"]) == {}
