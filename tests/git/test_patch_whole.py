"""Every patch bar writes holds the lines git counted for it (``patches._whole``): no
shape of change is taken for a short patch, a patch that lost a file's lines is, and a
short patch is written again rather than recorded."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bar.git import patches
from bar.history import diffs
from conftest import MakeRepo, git

# lines whose text looks like a patch's own: a removed "-- a/x" is "--- a/x" in the patch
TRICKY = "-- a/x\n++ b/x\n@@ -1 +1 @@\ndiff --git a/y b/y\n+plus\n-minus\n\\ backslash\n"


def _commit(repo: Path) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "change")
    return git(repo, "rev-parse", "HEAD").strip()


def _many_shapes(make_repo: MakeRepo) -> tuple[Path, str, str]:
    repo = make_repo(
        {
            "text.txt": "one\ntwo\nthree\n",
            "gone.py": "discount\n",
            "empty-gone": "",
            "tricky.md": TRICKY,
            "crlf.txt": "a\r\nb\r\n",
            "bin.dat": b"\0\1\2binary\0",
            "mode.sh": "echo hi\n",
            "to-link": "was a file\n",
            "no-newline": "last",
            "dir/inner.txt": "inside\n",
        }
    )
    # changes of type a binary side leaves uncounted: two sections, one of them text
    os.symlink("text.txt", repo / "link-to-bin")
    os.symlink("gone.py", repo / "lïnk to bin")
    (repo / "bin-to-link").write_bytes(b"\0was binary\0")
    before = _commit(repo)
    for name in ("link-to-bin", "lïnk to bin"):
        (repo / name).unlink()
        (repo / name).write_bytes(b"\0now binary\0")
    (repo / "bin-to-link").unlink()
    os.symlink("text.txt", repo / "bin-to-link")
    (repo / "text.txt").write_text("one\n2\nthree\nfour\n")
    (repo / "gone.py").unlink()
    (repo / "empty-gone").unlink()
    (repo / "tricky.md").write_text(TRICKY.replace("-- a/x", "--- changed") + "-- more\n")
    (repo / "crlf.txt").write_bytes(b"a\r\nB\r\n")
    (repo / "bin.dat").write_bytes(b"\0\1\2other\0")
    os.chmod(repo / "mode.sh", 0o755)
    (repo / "to-link").unlink()
    os.symlink("text.txt", repo / "to-link")
    (repo / "no-newline").write_text("last, changed")
    (repo / "dir" / "inner.txt").unlink()
    (repo / "dir").rmdir()
    (repo / "dir").write_text("a file where a directory was\n")
    (repo / "new-empty").write_text("")
    (repo / "new bin").write_bytes(b"\0new")
    (repo / "näme\twith tab").write_text(TRICKY)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(repo), "sub")
    return repo, before, _commit(repo)


def test_no_shape_of_change_is_taken_for_a_short_patch(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, before, after = _many_shapes(make_repo)
    for a, b in ((before, after), (after, before)):
        out = tmp_path / "p.patch"
        stat = patches.write_patch(repo, a, b, out, points=False)
        assert stat.files >= 14
        for split in (False, True):
            head = patches._write(repo, a, b, out, split)
            assert patches._whole(out, head) == ""
        _replays(repo, a, b, out, tmp_path / "index")


def test_split_and_unsplit_diffs_write_the_same_bytes_and_a_large_file_as_binary(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    """A file of millions of short lines (a step writes one in a second) is diffed as
    binary past ``git.LINE_DIFF_LARGEST``, whichever way the patch is written: git's
    line diff holds ~40 bytes a line of each side. The split diff (two gits at once)
    writes the very bytes the unsplit one does, binary patches in their places, for
    every shape of change; each replays."""
    from bar.git import LINE_DIFF_LARGEST

    repo, before, after = _many_shapes(make_repo)
    lines = b"y\n" * ((LINE_DIFF_LARGEST >> 1) + 1)
    (repo / "lines.txt").write_bytes(lines)
    (repo / "zz lines.txt").write_bytes(lines)
    big = _commit(repo)
    (repo / "lines.txt").write_bytes(lines + b"y\n")
    (repo / "zz lines.txt").unlink()
    (repo / "text.txt").write_text("one\n")
    grown = _commit(repo)
    for a, b in ((before, after), (after, before), (after, big), (big, grown), (grown, before)):
        written = []
        for split in (False, True):
            out = tmp_path / f"p{int(split)}.patch"
            head = patches._write(repo, a, b, out, split)
            assert patches._whole(out, head) == ""
            _replays(repo, a, b, out, tmp_path / "index")
            written.append(out.read_bytes())
        assert written[0] == written[1], (a, b)
        if b"lines.txt" in written[0]:
            assert b"\n+y\n" not in written[0] and b"\n-y\n" not in written[0]
            assert written[0].count(b"GIT binary patch") >= 1
    text = diffs.Diff(repo, big, grown).patch()
    assert "GIT binary patch" in text and "\n+y\n" not in text
    assert text.encode("utf-8", "surrogateescape") == patches_written(repo, big, grown, tmp_path)


def patches_written(repo: Path, a: str, b: str, tmp_path: Path) -> bytes:
    out = tmp_path / "written.patch"
    patches._write(repo, a, b, out, False)
    return out.read_bytes()


def _replays(repo: Path, a: str, b: str, patch: Path, index: Path) -> None:
    """``patch`` applied to ``a`` in a scratch index gives ``b``'s tree."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}

    def run(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
        return done.stdout.decode().strip()

    run("read-tree", a)
    run("apply", "--cached", "--binary", str(patch))
    assert run("write-tree") == run("rev-parse", f"{b}^{{tree}}")


def test_a_patch_that_lost_a_files_lines_is_short(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, before, after = _many_shapes(make_repo)
    out = tmp_path / "p.patch"
    head = patches._write(repo, before, after, out, False)
    whole = out.read_bytes()
    # the deletion as once written beside a rollback: its header, no hunk
    lost = b"--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-discount\n"
    assert lost in whole
    out.write_bytes(whole.replace(lost, b""))
    assert "git counted" in patches._whole(out, head)
    # an equal number of lines lost on both sides is short too
    out.write_bytes(whole.replace(b"-two\n+2\n", b""))
    assert patches._whole(out, head) != ""


def test_a_short_patch_is_written_again_and_never_kept(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, before, after = _many_shapes(make_repo)
    out = tmp_path / "p.patch"
    wrote = patches._write
    writes: list[int] = []
    short_for = 1

    def losing(repo: Path, a: str, b: str, path: Path, split: bool) -> bytes:
        head = wrote(repo, a, b, path, split)
        writes.append(1)
        if len(writes) <= short_for:
            data = path.read_bytes()
            path.write_bytes(data.replace(b"-discount\n", b""))
        return head

    monkeypatch.setattr(patches, "_write", losing)
    patches.write_patch(repo, before, after, out, points=False)
    assert len(writes) == 2 and b"-discount\n" in out.read_bytes()
    writes.clear()
    short_for = 2
    with pytest.raises(patches.PatchShort, match="git counted"):
        patches.write_patch(repo, before, after, out, points=False)


def test_a_diff_of_two_states_reads_no_byte_of_the_worktree(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    """Given an index, git takes a blob's bytes from the worktree file the index notes
    with the same stat (and a diff naming a gitlink loads the index): a file a rollback
    was removing was read as empty. Here the worktree file holds other bytes behind a
    stat git trusts; bar's diffs of two states read the objects only."""
    repo = make_repo({"f": "aaaa\n"})
    git(repo, "config", "core.checkStat", "minimal")
    git(repo, "config", "core.trustctime", "false")
    sub = repo / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    git(
        sub, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "1"
    )
    git(repo, "add", "sub")
    a = _commit(repo)
    git(
        sub, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "2"
    )
    git(repo, "rm", "-q", "--cached", "f")
    git(repo, "add", "sub")
    git(repo, "commit", "-q", "-m", "f removed, sub moved")
    b = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "add", "f")  # (the index notes f as the blob a holds, with its stat)
    was = os.stat(repo / "f")
    (repo / "f").write_text("bbbb\n")  # the same size and mtime: git trusts the stat
    os.utime(repo / "f", ns=(was.st_atime_ns, was.st_mtime_ns))
    index = repo / ".git" / "index"
    later = was.st_mtime_ns + 5_000_000_000  # (the index written well after: not racy)
    os.utime(index, ns=(later, later))
    assert "-bbbb" in git(repo, "diff", a, b, "--")  # (git alone: the worktree's bytes)
    out = tmp_path / "p.patch"
    patches.write_patch(repo, a, b, out, points=False)
    assert b"-aaaa\n" in out.read_bytes() and b"bbbb" not in out.read_bytes()
    assert "-aaaa" in diffs.Diff(repo, a, b).patch()
    assert "-aaaa" in diffs.Diff(repo, a, b).text()
