"""A whole tree's or index's listing is read as git writes it, a piece at a time
(``bar.base.proc.pieces``, ``bar.git.entries``): held whole, a million-file tree's cost a
step's first look 470 MB of bar's memory. Read in pieces of any size, even a byte, what
each reader finds is what the whole listing says."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bar.base import proc
from bar.errors import CommandError
from bar.git import tree_shape
from bar.history import side_index
from conftest import MakeRepo, git

# names a listing must keep whole across a cut: spaces, a tab, a newline, UTF-8
_FILES: dict[str, str | bytes] = {
    "README.md": "hello\n",
    "src/app/main.py": "print(1)\n",
    "src/app/with space.py": "x\n",
    "src/tab\there/a.txt": "a\n",
    "src/new\nline/b.txt": "b\n",
    "docs/ünïcode/c.md": "c\n",
    "docs/.gitattributes": "*.md text\n",
    "tools/run.sh": "#!/bin/sh\n",
    "deep/a/b/c/d/e/f.txt": "f\n",
}


def _repo(make_repo: MakeRepo) -> Path:
    repo = make_repo(_FILES)
    os.chmod(repo / "tools/run.sh", 0o755)
    (repo / "tools/link").symlink_to("run.sh")
    # a nested repository recorded as a gitlink, in a directory of its own
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q", "-b", "main")
    (nested / "x").write_text("x\n")
    git(nested, "add", "x")
    git(nested, "commit", "-q", "-m", "x")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    return repo


def _whole_listing(repo: Path, tree: str) -> tuple[list[str], list[str], bool, dict[str, str]]:
    """The listing read whole by plain git, split by plain Python."""
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-t", "-z", tree],
        capture_output=True,
        check=True,
    ).stdout
    dirs, nested, modes, attributes = [""], [], {}, False
    for entry in out.split(b"\0")[:-1]:
        meta, _, raw = entry.partition(b"\t")
        mode, kind, _ = meta.decode().split(" ")
        path = raw.decode("utf-8", "surrogateescape")
        attributes = attributes or path.rpartition("/")[2] == ".gitattributes"
        if kind == "tree":
            dirs.append(path)
        elif kind == "commit":
            nested.append(path)
        else:
            modes[path] = mode
    return dirs, nested, attributes, modes


@pytest.mark.parametrize("piece", [1, 2, 7, 64, 1 << 20])
def test_a_tree_listed_in_pieces_is_the_tree_listed_whole(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, piece: int
) -> None:
    repo = _repo(make_repo)
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    monkeypatch.setattr(proc, "PIECE", piece)
    listing = tree_shape.list_tree(repo, tree)
    dirs, nested, attributes, modes = _whole_listing(repo, tree)
    assert (listing.dirs, listing.nested, listing.has_attributes) == (dirs, nested, attributes)
    assert listing.modes == modes
    assert "src/new\nline" in listing.dirs and "vendor/lib" in listing.nested
    # told it will be asked for the modes, the walk gathers them: git walks the tree once
    walks = []
    entries = tree_shape._entries
    monkeypatch.setattr(tree_shape, "_entries", lambda *a: walks.append(a) or entries(*a))
    told = tree_shape.list_tree(repo, tree, modes=True)
    assert (told.dirs, told.nested, told.modes) == (dirs, nested, modes) and len(walks) == 1
    assert modes["tools/run.sh"] == "100755" and modes["tools/link"] == "120000"


@pytest.mark.parametrize("piece", [1, 5, 1 << 20])
def test_a_whole_look_reads_the_side_index_in_pieces_as_whole(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, piece: int
) -> None:
    """What a whole look asks the side index (``_listed``: its gitlinks, the files git would
    hash; ``_swallowed``: recorded directories now holding a repository) is the same read
    in pieces of any size as read whole."""
    repo = _repo(make_repo)
    index = tmp_path / "side-index"
    shutil.copy(repo / ".git" / "index", index)
    (repo / "src/app/main.py").write_text("print(2)\n")  # changed
    (repo / "untracked dir").mkdir()
    (repo / "untracked dir/new file.txt").write_text("new\n")  # untracked
    (repo / "docs/ünïcode/new\ttab.md").write_text("n\n")
    git(repo / "deep/a/b", "init", "-q")  # a recorded directory swallowed by a repository
    whole = (
        side_index._listed(repo, index),
        side_index._swallowed(repo, index, index, stamped=False),
    )
    monkeypatch.setattr(proc, "PIECE", piece)
    in_pieces = (
        side_index._listed(repo, index),
        side_index._swallowed(repo, index, index, stamped=False),
    )
    assert in_pieces == whole
    (gitlinks, hashed), swallowed = in_pieces
    assert gitlinks == ["vendor/lib"] and swallowed == ["deep/a/b"]
    assert sorted(hashed) == sorted(
        ["docs/ünïcode/new\ttab.md", "src/app/main.py", "untracked dir/new file.txt"]
    )


def test_a_reader_that_stops_early_leaves_no_program_running() -> None:
    """A caller that stops reading (an exception, a ``break``) has the program killed, not
    left blocked on a full pipe, and reaped."""
    read = proc.pieces("sh", "-c", "echo $$; exec yes")
    first = next(read)
    pid = int(first.split(b"\n", 1)[0])
    read.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_program_that_fails_is_raised_after_what_it_printed() -> None:
    read = proc.pieces("sh", "-c", "printf 'half'; echo 'no such tree' >&2; exit 3")
    got = b""
    with pytest.raises(CommandError) as failed:
        for piece in read:
            got += piece
    assert got == b"half"
    assert failed.value.returncode == 3 and b"no such tree" in failed.value.stderr


def test_a_program_that_says_much_on_stderr_is_read_to_its_end() -> None:
    """A child that warns of every path (a step can make git do so) fills no pipe that
    nobody reads: its output still comes, whole."""
    loud = "head -c 1000000 /dev/zero | tr '\\0' e >&2; printf out"
    assert b"".join(proc.pieces("sh", "-c", loud)) == b"out"
