"""Paths of a worktree opened without following a link (``bar.base.beneath``), and the
raw-bytes writer of a rollback built on it (``bar.git.exact``): a step may swap any
directory of its worktree for a link to the developer's home, even while bar writes.

Each check runs twice: with the kernel's ``openat2`` and with the walk one directory at
a time that bar falls back to (``BAR_NO_OPENAT2``). The race is real: a thread swaps a
directory and a link with ``renameat2(RENAME_EXCHANGE)`` as fast as it can while bar
writes through the path, and the decoy "home" must never change."""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bar.base import beneath
from bar.changes import guarded

DECOY = b"the developer's own file\n"


@pytest.fixture(params=["openat2", "walk"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "walk":
        monkeypatch.setenv(beneath.NO_OPENAT2_ENV, "1")
    yield request.param


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A worktree with ``d/f.txt``, a decoy home with ``f.txt``, and links to it."""
    wt, home = tmp_path / "wt", tmp_path / "decoy-home"
    (wt / "d").mkdir(parents=True)
    (wt / "d" / "f.txt").write_bytes(b"mine\n")
    home.mkdir()
    (home / "f.txt").write_bytes(DECOY)
    (wt / "to-home").symlink_to(home)
    (wt / "file-link").symlink_to(home / "f.txt")
    return {"wt": wt, "home": home}


def test_a_plain_path_opens(mode: str, tree: dict[str, Path]) -> None:
    fd = beneath.open_beneath(tree["wt"], "d/f.txt", os.O_RDWR)
    try:
        assert os.read(fd, 100) == b"mine\n"
    finally:
        os.close(fd)
    fd = beneath.open_beneath(tree["wt"], "d/new.txt", os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    assert (tree["wt"] / "d" / "new.txt").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "rel",
    [
        "to-home/f.txt",
        "file-link",
        "../decoy-home/f.txt",
        "d/../../decoy-home/f.txt",
        "/etc/passwd",
    ],
)
def test_a_link_or_a_way_out_is_refused(mode: str, tree: dict[str, Path], rel: str) -> None:
    with pytest.raises(beneath.LinkOnTheWay):
        beneath.open_beneath(tree["wt"], rel, os.O_WRONLY)
    assert (tree["home"] / "f.txt").read_bytes() == DECOY


def test_unlink_removes_a_link_never_its_target(mode: str, tree: dict[str, Path]) -> None:
    with pytest.raises(beneath.LinkOnTheWay):
        beneath.unlink_beneath(tree["wt"], "to-home/f.txt")
    beneath.unlink_beneath(tree["wt"], "file-link")
    assert not (tree["wt"] / "file-link").is_symlink()
    assert (tree["home"] / "f.txt").read_bytes() == DECOY


def test_a_fifo_in_place_of_a_file_does_not_hang_the_writer(
    mode: str, tree: dict[str, Path], tmp_path: Path
) -> None:
    """A step left a FIFO where bar verified a file: the guard neither waits on it nor
    writes over it (it raced, and stays)."""
    os.unlink(tree["wt"] / "d" / "f.txt")
    os.mkfifo(tree["wt"] / "d" / "f.txt")
    guard = _guard(tree, tmp_path)
    assert not guard.replace("d/f.txt", ("0" * 40,), _new(tmp_path))
    guard.close()
    assert stat.S_ISFIFO(os.lstat(tree["wt"] / "d" / "f.txt").st_mode)


def _git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, check=True
    ).stdout.decode()


_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> int:
    renameat2 = getattr(_libc, "renameat2", None)
    if renameat2 is None:
        return -1
    at_fdcwd = -100
    return int(renameat2(at_fdcwd, bytes(a), at_fdcwd, bytes(b), _RENAME_EXCHANGE))


def _guard(tree: dict[str, Path], tmp_path: Path) -> guarded.Guard:
    return guarded.Guard(tree["wt"], tmp_path / "aside")


def _new(tmp_path: Path, data: bytes = b"bar's version\n") -> Path:
    staged = tmp_path / "staged"
    staged.mkdir(exist_ok=True)
    new = staged / f"new-{len(list(staged.iterdir()))}"
    new.write_bytes(data)
    return new


def _home_unchanged(tree: dict[str, Path]) -> None:
    assert (tree["home"] / "f.txt").read_bytes() == DECOY
    assert sorted(p.name for p in tree["home"].iterdir()) == ["f.txt"]


def test_the_guard_never_acts_beyond_a_link(
    mode: str, tree: dict[str, Path], tmp_path: Path
) -> None:
    """The writer of a rollback and an apply (``bar.changes.guarded``), where a step left
    a link to the home in place of a directory: a path beyond it holds nothing of the
    worktree's, nothing is taken from there, nothing written there (the path is said to
    have raced), no directory made or removed there."""
    wt = tree["wt"]
    guard = _guard(tree, tmp_path)
    assert not guard.lexists("to-home/f.txt")
    assert guard.remove("to-home/f.txt", ("0" * 40,))  # (nothing of the worktree's there)
    assert not guard.place("to-home/f.txt", _new(tmp_path))
    assert not guard.replace("to-home/g.txt", (None,), _new(tmp_path))
    assert [r.path for r in guard.raced] == ["to-home/f.txt", "to-home/g.txt"]
    guard.make_dir("to-home/made/deeper")
    assert not guard.remove_dir("to-home")
    (tree["home"] / "empty").mkdir()
    guard.prune("to-home/empty/x")
    assert not guard.remove_empty("to-home")
    (tree["home"] / "empty").rmdir()
    # a directory whose only entry is a link to a directory: not emptied through it
    (wt / "only-a-link").mkdir()
    (wt / "only-a-link" / "in").symlink_to(tree["home"])
    assert not guard.remove_empty("only-a-link")
    assert (wt / "only-a-link" / "in").is_symlink()
    _home_unchanged(tree)
    assert (wt / "to-home").is_symlink()


def test_a_raced_save_is_never_put_back_beyond_a_link(
    mode: str, tree: dict[str, Path], tmp_path: Path
) -> None:
    """A save bar captured at ``d/f.txt`` (a killed restore's, handed back), where ``d``
    is now a link to the home: kept in the worktree, at its root, never linked into the
    home."""
    wt = tree["wt"]
    guard = _guard(tree, tmp_path)
    captured = guard._capture("d/f.txt")
    assert captured is not None and captured.read_bytes() == b"mine\n"
    os.rmdir(wt / "d")
    (wt / "d").symlink_to(tree["home"])
    guard.hand_back()
    (kept,) = guard.raced
    assert kept.path == "d/f.txt"
    assert kept.kept.parent == wt and kept.kept.read_bytes() == b"mine\n"
    _home_unchanged(tree)


def test_the_guard_writes_while_a_directory_is_swapped_for_a_link(
    mode: str, tree: dict[str, Path], tmp_path: Path
) -> None:
    """The attack on the guard, for real: ``d`` and a link to the home exchanged in a
    loop while the guard replaces ``d/f.txt`` and removes ``d/other.txt`` again and
    again. The home never changes."""
    wt = tree["wt"]
    link = wt / "d-link"
    link.symlink_to(tree["home"])
    if _exchange(wt / "d", link) != 0:
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    _exchange(wt / "d", link)
    stop = threading.Event()
    swaps = [0]

    def swap() -> None:
        while not stop.is_set():
            _exchange(wt / "d", link)
            swaps[0] += 1

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    guard = _guard(tree, tmp_path)
    try:
        for n in range(1000):
            guard.replace("d/f.txt", (None,), _new(tmp_path, b"written %d\n" % n))
            guard.remove("d/other.txt", (None,))
            guard.make_dir("d/sub")
            guard.prune("d/sub/x")
            guard.settle()
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 100
    _home_unchanged(tree)


def test_raced_bytes_kept_beside_are_never_overwritten_nor_named_too_long(
    tree: dict[str, Path], tmp_path: Path
) -> None:
    """Where the path is taken and no trash is given, a raced save is kept beside it:
    a second one beside the first (never over it), and a name too long for the file
    system with a ``.bar-raced-<pid>`` on it is shortened, never refused."""
    wt = tree["wt"]
    guard = _guard(tree, tmp_path)
    for n in range(2):
        saved = tmp_path / f"saved-{n}"
        saved.write_bytes(b"save %d\n" % n)
        guard.keep_raced("d/f.txt", saved)  # (d/f.txt is there: taken)
    kept = sorted(p.name for p in (wt / "d").iterdir() if ".bar-raced-" in p.name)
    assert len(kept) == 2, kept
    assert sorted((wt / "d" / k).read_bytes() for k in kept) == [b"save 0\n", b"save 1\n"]
    long = "n" * 250
    (wt / "d" / long).write_bytes(b"theirs\n")
    saved = tmp_path / "saved-long"
    saved.write_bytes(b"mine\n")
    guard.keep_raced(f"d/{long}", saved)
    assert guard.raced[-1].kept.read_bytes() == b"mine\n"
    assert len(guard.raced[-1].kept.name.encode()) <= 255
    # beyond a link, at the root: a long path's escaped name shortened the same way
    saved = tmp_path / "saved-deep"
    saved.write_bytes(b"deep\n")
    guard.keep_raced("to-home/" + "/".join(["m" * 100] * 3), saved)
    assert guard.raced[-1].kept.parent == wt
    assert guard.raced[-1].kept.read_bytes() == b"deep\n"
    _home_unchanged(tree)


def test_bytes_on_their_way_to_the_trash_when_bar_was_killed_are_handed_back(
    tree: dict[str, Path], tmp_path: Path
) -> None:
    """A save a killed restore had moved to its way to the trash (``to-trash``, between
    its two moves) is handed back like a captured one: put back where the path is free,
    never dropped with the aside directory."""
    wt = tree["wt"]
    guard = _guard(tree, tmp_path)
    on_way = tmp_path / "aside" / "to-trash" / "d"
    on_way.mkdir(parents=True)
    (on_way / "lost.txt").write_bytes(b"on its way\n")
    guard.hand_back()
    guard.close()
    assert (wt / "d" / "lost.txt").read_bytes() == b"on its way\n"
    assert [r.path for r in guard.raced] == ["d/lost.txt"]


def test_a_file_put_in_a_folder_a_step_writes_is_a_new_one_of_bars_own(tmp_path: Path) -> None:
    """What a step leaves at the name of the new file (a FIFO, whose open would wait for
    a reader; a hard link, which would carry the bytes into another file; a link) is
    removed, never written through; the file then holds the bytes, with its mode."""
    folder = tmp_path / "folder"
    folder.mkdir()
    theirs = tmp_path / "theirs"
    theirs.write_bytes(b"theirs\n")
    temporary = f".settings.json.{os.getpid()}.tmp"
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for plant in (
            lambda p: os.mkfifo(p),
            lambda p: os.link(theirs, p),
            lambda p: os.symlink(theirs, p),
        ):
            plant(folder / temporary)
            beneath.replace_at(fd, "settings.json", b"bar's\n", 0o600, sync=True)
            assert (folder / "settings.json").read_bytes() == b"bar's\n"
            assert stat.S_IMODE((folder / "settings.json").stat().st_mode) == 0o600
            assert theirs.read_bytes() == b"theirs\n" and not (folder / temporary).exists()
    finally:
        os.close(fd)
