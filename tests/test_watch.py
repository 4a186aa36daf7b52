"""What the kernel says about a worktree between two checkpoints (``bar.watch``)."""

from __future__ import annotations

import os
from pathlib import Path

from bar.watch import TreeWatch


def _tree(root: Path) -> list[str]:
    (root / "src" / "deep").mkdir(parents=True)
    for rel in ("top.txt", "src/a.py", "src/deep/b.py"):
        (root / rel).write_text("x\n")
    return ["", "src", "src/deep"]


def test_edits_in_place_are_reported_once(tmp_path: Path) -> None:
    watch = TreeWatch(str(tmp_path), _tree(tmp_path))
    try:
        assert watch.drain() == set()
        (tmp_path / "src/deep/b.py").write_text("changed\n")
        (tmp_path / "top.txt").chmod(0o755)
        with open(tmp_path / "src/a.py", "a") as fh:
            fh.write("more\n")
        assert watch.drain() == {"src/deep/b.py", "top.txt", "src/a.py"}
        assert watch.drain() == set()  # what was drained is not said again
    finally:
        watch.close()


def test_new_directories_are_watched_with_what_they_hold(tmp_path: Path) -> None:
    watch = TreeWatch(str(tmp_path), _tree(tmp_path))
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "f.txt").write_text("1\n")
    try:
        (tmp_path / "new").mkdir()
        os.rename(outside, tmp_path / "moved")  # a tree moved in whole
        watch.drain()  # the new directories are watched from here on
        (tmp_path / "new" / "g.txt").write_text("made\n")
        watch.drain()
        (tmp_path / "new" / "g.txt").write_text("edited\n")
        (tmp_path / "moved" / "inner" / "f.txt").write_text("2\n")
        assert watch.drain() == {"new/g.txt", "moved/inner/f.txt"}
    finally:
        watch.close()


def test_a_directory_that_cannot_be_watched_means_not_known(tmp_path: Path) -> None:
    dirs = _tree(tmp_path)
    watch = TreeWatch(str(tmp_path), [*dirs, "no-such-dir"])
    assert watch.drain() == set()  # a stamped directory that is gone is no loss
    watch.close()
    (tmp_path / "locked").mkdir(mode=0o000)
    unreadable = TreeWatch(str(tmp_path), [*dirs, "locked"])
    try:
        if os.geteuid() == 0:
            assert unreadable.drain() == set()  # root watches anything
        else:
            assert unreadable.drain() is None
    finally:
        unreadable.close()
        (tmp_path / "locked").chmod(0o755)
