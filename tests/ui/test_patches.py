"""``bar.ui.patch_pages`` cuts a patch into files the way git counts them: plain git is the
oracle (``git diff --numstat`` for names and line counts, ``git apply`` for the slices)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bar.ui import patch_pages
from conftest import MakeRepo, git


def test_the_files_of_a_patch_are_gits_own(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo = make_repo(
        {
            "a.txt": "one\ntwo\n",
            "old name.txt": "x\n" * 20,
            "run.sh": "echo\n",
            "gone.txt": "bye\n",
            "pic.bin": b"\x00\x01\x02",
        }
    )
    (repo / "a.txt").write_text("one\n--- not a header\n+++ nor this\n")
    git(repo, "mv", "old name.txt", "new näme.txt")
    os.chmod(repo / "run.sh", 0o755)
    (repo / "gone.txt").unlink()
    (repo / "pic.bin").write_bytes(b"\x00\x09\x08\x07")
    (repo / 'quo"te.txt').write_text("q\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    args = [
        "diff",
        "--no-ext-diff",
        "--no-color",
        "-M",
        "--binary",
        "--full-index",
        "HEAD~",
        "HEAD",
    ]
    data = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout
    index = patch_pages.index(data)
    numstat = git(repo, "-c", "core.quotePath=false", "diff", "-M", "--numstat", "HEAD~", "HEAD")
    expected = {}
    for line in numstat.splitlines():
        added, deleted, name = line.split("\t", 2)
        name = name.split(" => ")[-1].strip("}") if "=>" in name else name
        expected[name.strip('"').replace('\\"', '"')] = (added, deleted)
    got = {
        f.path: (
            str(f.additions) if not f.binary else "-",
            str(f.deletions) if not f.binary else "-",
        )
        for f in index.files
    }
    assert got == expected
    by_path = {f.path: f for f in index.files}
    assert by_path["new näme.txt"].status == "renamed"
    assert by_path["new näme.txt"].old_path == "old name.txt"
    assert by_path["run.sh"].mode_text == "100644 -> 100755"
    assert by_path["gone.txt"].status == "deleted"
    assert by_path['quo"te.txt'].status == "added"
    assert by_path["pic.bin"].binary
    # the slices, applied one by one, make the same commit
    git(repo, "checkout", "-q", "HEAD~")
    for i in range(len(index.files)):
        git(repo, "apply", "--index", input=index.section(i))
    assert git(repo, "write-tree") == git(repo, "rev-parse", "main^{tree}")
