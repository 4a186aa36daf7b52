"""bar.store.files: a file replaced without fsync (the stamps) is exchanged with the old
one, so that a reader always finds the old file or the new one, whole."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from bar.store import files


def _replaced_while_read(path: Path) -> tuple[set[bytes], list[str]]:
    """Write ``path`` 300 times (no fsync) while a thread reads it; what the reader
    found, and what went wrong for it."""
    path.parent.mkdir()
    path.write_bytes(b"0" * 100)
    contents = [str(n).encode() * 100 for n in range(300)]
    seen: set[bytes] = set()
    problems: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.add(path.read_bytes())
            except OSError as exc:
                problems.append(repr(exc))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for data in contents:
            files.write_bytes_atomic(path, data, durable=False)
    finally:
        done.set()
        reader.join()
    assert path.read_bytes() == contents[-1]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # (no temp file left)
    assert seen <= {b"0" * 100, *contents}
    return seen, problems


def test_a_file_written_without_fsync_is_never_missing_nor_torn(tmp_path: Path) -> None:
    _, problems = _replaced_while_read(tmp_path / "task" / "index.stamps")
    assert problems == []


def test_without_an_exchange_it_is_renamed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "_exchange", [None])
    _, problems = _replaced_while_read(tmp_path / "task" / "index.stamps")
    assert problems == []


def test_a_new_file_is_made(tmp_path: Path) -> None:
    path = tmp_path / "new"
    files.write_bytes_atomic(path, b"first", durable=False)
    assert path.read_bytes() == b"first"
    assert os.stat(path).st_mode & 0o777 == files.FILE_MODE


_AS_OWNER = """
import os, shutil, sys
from bar.store.files import remove_tree  # (before the rights are dropped: Python's files)
uid = int(sys.argv[2])
if os.getuid() != uid:
    os.setgid(uid)
    os.setuid(uid)
top = sys.argv[1]
if sys.argv[3] == "make":
    os.makedirs(os.path.join(top, "locked", "deeper"))
    open(os.path.join(top, "locked", "deeper", "f"), "w").close()
    os.makedirs(os.path.join(top, "kept-entries"))
    open(os.path.join(top, "kept-entries", "g"), "w").close()
    os.symlink("/etc", os.path.join(top, "locked", "link"))
    os.chmod(os.path.join(top, "locked", "deeper"), 0)
    os.chmod(os.path.join(top, "locked"), 0)
    os.chmod(os.path.join(top, "kept-entries"), 0o500)
else:
    remove_tree(top)
"""


def test_a_tree_a_step_made_unreadable_is_removed_by_an_owner_without_roots_rights() -> None:
    """``chmod 000`` on a directory of a step's /tmp, ``chmod 500`` on another: bar, as
    the user it runs as, still removes them (and follows no link there)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    uid = 65534 if os.getuid() == 0 else os.getuid()  # (root reads anything: test as nobody)
    top = Path(tempfile.mkdtemp(prefix="bar-remove-tree-"))  # (a place nobody can reach)
    try:
        if os.getuid() == 0:
            os.chown(top, uid, uid)
        for action in ("make", "remove"):
            done = subprocess.run(
                [sys.executable, "-c", _AS_OWNER, str(top), str(uid), action],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
        assert not top.exists()
        assert os.path.isdir("/etc")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_removing_a_tree_follows_no_link_out_of_it(tmp_path: Path) -> None:
    from bar.store.files import remove_tree

    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "kept.txt").write_text("kept\n")
    (outside / "inner").chmod(0o500)
    outside.chmod(0o500)
    top = tmp_path / "top"
    (top / "a").mkdir(parents=True)
    (top / "a" / "link").symlink_to(outside)
    (top / "a").chmod(0)
    (top / "link").symlink_to(outside / "inner")
    remove_tree(top)
    assert not top.exists()
    assert outside.stat().st_mode & 0o777 == 0o500
    assert (outside / "inner").stat().st_mode & 0o777 == 0o500
    assert (outside / "inner" / "kept.txt").read_text() == "kept\n"
    outside.chmod(0o700)


def test_a_tree_nested_deeper_than_any_recursion_is_removed(tmp_path: Path) -> None:
    """A step's /tmp holding a directory 3,000 deep (Python's rmtree stops at its
    recursion limit: bar task close and delete failed on it)."""
    from bar.store.files import remove_tree

    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.mkfifo("fifo", dir_fd=fd)
    os.chmod(fd, 0)
    os.close(fd)
    remove_tree(top)
    assert not top.exists()
    remove_tree(top)  # (gone: nothing to do)
