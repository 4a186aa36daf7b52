"""What the kernel says about a worktree during a step and between two checkpoints
(``bar.base.inotify``), and snapshots taken from it (``bar.changes.fast.rescan.scan`` with ``changed``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import needs_fanotify

from bar.base.inotify import ANY_CHANGE, TreeWatch, Watch


@pytest.fixture(
    params=[
        "inotify",
        pytest.param("fanotify", marks=needs_fanotify),
        pytest.param("both", marks=needs_fanotify),
    ]
)
def given(request: pytest.FixtureRequest) -> dict[str, Any]:
    """What a ``TreeWatch`` is given to watch with: inotify watches alone; fanotify marks
    alone (no inotify watch at all); or one inotify watch, then marks for the rest."""
    if request.param == "inotify":
        return {}
    return {"limit": 0 if request.param == "fanotify" else 1, "marks": 100_000}


def _tree(root: Path) -> list[str]:
    (root / "src" / "deep").mkdir(parents=True)
    for rel in ("top.txt", "src/a.py", "src/deep/b.py"):
        (root / rel).write_text("x\n")
    return ["", "src", "src/deep"]


def test_edits_in_place_are_reported_once(tmp_path: Path, given: dict[str, Any]) -> None:
    watch = TreeWatch(str(tmp_path), _tree(tmp_path), **given)
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


def test_entries_made_removed_and_moved_are_reported(tmp_path: Path, given: dict[str, Any]) -> None:
    watch = TreeWatch(str(tmp_path), _tree(tmp_path), **given)
    try:
        (tmp_path / "made.txt").write_text("new\n")
        (tmp_path / "src/a.py").unlink()
        os.rename(tmp_path / "src/deep", tmp_path / "renamed")  # a directory, whole
        (tmp_path / "scratch").write_text("gone soon\n")
        (tmp_path / "scratch").unlink()
        assert watch.drain() == {"made.txt", "src/a.py", "src/deep", "renamed", "scratch"}
    finally:
        watch.close()


def test_new_directories_are_watched_with_what_they_hold(
    tmp_path: Path, given: dict[str, Any]
) -> None:
    watch = TreeWatch(str(tmp_path), _tree(tmp_path), **given)
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
        (tmp_path / "later").mkdir()
        assert watch.drain(last=True) == {"later"}
        (tmp_path / "later" / "x").write_text("unwatched\n")  # the last drain added no watch
        assert watch.drain() == set()
    finally:
        watch.close()


def test_a_directory_that_cannot_be_watched_means_not_known(
    tmp_path: Path, given: dict[str, Any]
) -> None:
    dirs = _tree(tmp_path)
    watch = TreeWatch(str(tmp_path), [*dirs, "no-such-dir"], **given)
    assert watch.drain() == set()  # a stamped directory that is gone is no loss
    watch.close()
    (tmp_path / "locked").mkdir(mode=0o000)
    unreadable = TreeWatch(str(tmp_path), [*dirs, "locked"], **given)
    try:
        if os.geteuid() == 0:
            assert unreadable.drain() == set()  # root watches anything
        else:
            assert unreadable.drain() is None
    finally:
        unreadable.close()
        (tmp_path / "locked").chmod(0o755)


@pytest.mark.parametrize(
    "marks", [False, pytest.param(True, marks=needs_fanotify)], ids=["inotify", "fanotify"]
)
@pytest.mark.parametrize("watcher", [True, False], ids=["watcher", "step-watch"])
def test_a_step_recorded_from_the_watch_equals_plain_git(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    watcher: bool,
    marks: bool,
) -> None:
    """Every kind of change a command can make, recorded with no stat pass (the step's
    watch, or the task's watcher, says what moved), gives the tree ``git add -A`` gives
    on a fresh index. With ``marks``, bar may hold one inotify watch: fanotify marks
    watch the other directories."""
    from bar.changes.fast import rescan

    if marks:
        monkeypatch.setenv("BAR_WATCHES", "1")
    if not watcher:
        monkeypatch.setenv("BAR_WATCHER_IDLE", "0")
    from helpers import bar, ledger, new_task, worktree

    from conftest import git

    assert bar(capfd, "init").code == 0
    task = new_task(capfd)
    wt = worktree(task)
    (wt / "keep" / "deep").mkdir(parents=True)
    for rel in ("keep/a.txt", "keep/deep/b.txt", "gone.txt", "edit.txt", "moveme/c.txt"):
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_text(rel + "\n")
    (wt / ".gitignore").write_text("*.o\n")
    bar(
        capfd, "run", "--task", "t1", "--", "true"
    )  # records them as a hand edit; stamps every directory
    script = (
        "import os, shutil\n"
        "open('edit.txt', 'a').write('more\\n')\n"
        "os.unlink('gone.txt')\n"
        "os.rename('moveme', 'moved')\n"
        "os.makedirs('new/inner'); open('new/inner/n.txt', 'w').write('n\\n')\n"
        "open('x.o', 'w').write('ignored\\n')\n"
        "open('tmp.swp', 'w').write('scratch'); os.unlink('tmp.swp')\n"
        "os.chmod('keep/a.txt', 0o755)\n"
        "os.symlink('keep/a.txt', 'link')\n"
        "shutil.rmtree('keep/deep')\n"
    )
    calls = [0]
    real = rescan._changed_dirs

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    if watcher:  # one step hands its watch to the watcher; the next makes it sure
        for _ in range(2):
            bar(capfd, "run", "--task", "t1", "--", "true")
    monkeypatch.setattr(rescan, "_changed_dirs", counted)
    bar(capfd, "run", "--task", "t1", "--", "true")
    scans = [calls[0]]
    res = bar(capfd, "run", "--task", "t1", "--cwd", str(wt), "--", sys.executable, "-c", script)
    scans.append(calls[0] - scans[0])
    assert res.code == 0, res.err
    assert "warning" not in res.err
    step = ledger(task["id"])[-1]
    oracle_index = tmp_path / "oracle-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(oracle_index)}
    subprocess.run(["git", "-C", str(wt), "add", "-A"], env=env, check=True)
    expected = subprocess.run(
        ["git", "-C", str(wt), "write-tree"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert git(wt, "rev-parse", step["snapshot"] + "^{tree}").strip() == expected
    # each step statted once (its look for hand edits), or none: the watcher knew
    assert scans == ([0, 0] if watcher else [1, 1])
    if watcher:
        import json

        said = json.loads(bar(capfd, "status", "--task", "t1", "--json").out)["watch"]
        assert said["mode"] == "watching" and (said["marks"] > 0) is marks, said
        shown = bar(capfd, "status", "--task", "t1").out
        assert (f"{said['marks']:,} by fanotify" in shown) is marks, shown


def test_quiet_until_anything_happens_and_then_for_good(tmp_path: Path) -> None:
    """``quiet`` reads nothing: once an entry changed, it says so to every process that
    shares the watch, for as long as it lives; an entry removed or moved away counts."""
    for change in ("write", "remove", "move away", "touch"):
        folder = tmp_path / change.replace(" ", "-")
        folder.mkdir()
        (folder / "m.py").write_text("x = 1\n")
        watch = Watch([str(folder)], ANY_CHANGE)
        assert watch.quiet() and watch.quiet()
        if change == "write":
            (folder / "m.py").write_text("x = 2\n")
        elif change == "remove":
            (folder / "m.py").unlink()
        elif change == "move away":
            (folder / "m.py").rename(tmp_path / f"{folder.name}.py")
        else:
            os.utime(folder / "m.py", ns=(1, 1))
        assert not watch.quiet() and not watch.quiet()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (reports by its exit code)
            os._exit(0 if not watch.quiet() else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        watch.close()
    assert not Watch([str(tmp_path / "missing")], ANY_CHANGE).quiet()  # (cannot say)


_SHUFFLES = [
    "swap",
    "to_link_inside",
    "to_link_outside",
    "back",
    "move_in",
    "move_out",
    "rmdir",
    "mkdir",
]


def _real_dirs(root: Path) -> list[str]:
    """Every directory under ``root`` reached without following a link, relative."""
    found = [""]
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        found += [os.path.relpath(os.path.join(dirpath, d), root) for d in dirnames]
    return found


@pytest.mark.parametrize("seed", range(12))
def test_no_directory_goes_unwatched_while_the_watch_is_sure(
    tmp_path: Path, seed: int, given: dict[str, Any]
) -> None:
    """Directories swapped with each other, for links (to a directory inside or outside
    the tree) and back, moved in, out and away: after each shuffle a file is written in
    every directory of the tree, and the watch names every one of them, or says it does
    not know (never a name it did not see while sure)."""
    import random

    rng = random.Random(seed)
    root = tmp_path / "wt"
    outside = tmp_path / "outside"
    outside.mkdir()
    for rel in ("a/x", "b/y", "c"):
        (root / rel).mkdir(parents=True)
    watch = TreeWatch(str(root), _real_dirs(root), **given)
    parked: list[Path] = []
    try:
        for n in range(10):
            dirs = [d for d in _real_dirs(root) if d]
            kind = rng.choice(_SHUFFLES)
            one = root / rng.choice(dirs) if dirs else None
            two = root / rng.choice(dirs) if dirs else None
            if (
                kind == "swap"
                and one
                and two
                and one != two
                and not (str(one).startswith(str(two) + "/") or str(two).startswith(str(one) + "/"))
            ):
                tmp = root / f"swap-{n}"
                os.rename(one, tmp)
                os.rename(two, one)
                os.rename(tmp, two)
            elif kind in ("to_link_inside", "to_link_outside") and one:
                aside = root / f"aside-{n}"
                os.rename(one, aside)
                target = aside if kind == "to_link_inside" else outside
                os.symlink(target, one)
                parked.append(one)
            elif kind == "back" and parked:
                link = parked.pop()
                if link.is_symlink():
                    target = Path(os.readlink(link))
                    link.unlink()
                    if target != outside and target.is_dir():
                        os.rename(target, link)
            elif kind == "move_in":
                made = outside / f"in-{n}" / "deeper"
                made.mkdir(parents=True)
                os.rename(made.parent, root / f"in-{n}")
            elif kind == "move_out" and one:
                os.rename(one, outside / f"out-{n}")
                # written to after it left: nothing in the tree changed
                (outside / f"out-{n}" / "late.txt").write_text("x\n")
            elif kind == "rmdir" and one and not any(one.iterdir()):
                one.rmdir()
            elif kind == "mkdir" and one:
                (one / f"new-{n}").mkdir()
            if watch.drain() is None:
                return  # it said it does not know: the caller stats everything
            expected = set()
            for rel in _real_dirs(root):
                name = f"{rel}/probe-{n}" if rel else f"probe-{n}"
                (root / name).write_text("p\n")
                expected.add(name)
            seen = watch.drain()
            if seen is None:
                return
            assert expected <= seen, (kind, sorted(expected - seen))
            # nothing outside the tree is reported under a name inside it
            assert not any(p.endswith("late.txt") for p in seen), seen
    finally:
        watch.close()


def test_a_directory_replaced_by_a_link_before_it_is_watched_is_not_followed(
    tmp_path: Path, given: dict[str, Any]
) -> None:
    """A directory made and at once replaced by a link to another watched directory (before
    the watch got to it): the link is not followed, so the other directory keeps its
    name, and what is written in it later is reported under that name."""
    root = tmp_path / "wt"
    (root / "e").mkdir(parents=True)
    watch = TreeWatch(str(root), ["", "e"], **given)
    try:
        (root / "d").mkdir()
        (root / "d").rmdir()
        os.symlink("e", root / "d")
        assert watch.drain() is not None
        (root / "d").unlink()
        (root / "d").mkdir()
        assert watch.drain() is not None
        (root / "e" / "later.txt").write_text("x\n")
        seen = watch.drain()
        assert seen is None or "e/later.txt" in seen, seen
        outside = tmp_path / "outside"
        outside.mkdir()
        (root / "f").mkdir()
        (root / "f").rmdir()
        os.symlink(outside, root / "f")
        assert watch.drain() is not None
        (outside / "far.txt").write_text("x\n")  # not in the worktree at all
        seen = watch.drain()
        assert seen is None or not any(p.startswith("f/") for p in seen), seen
    finally:
        watch.close()


@pytest.mark.parametrize(
    ("limit", "marks"),
    [(2, 0), pytest.param(1, 1, marks=needs_fanotify), pytest.param(0, 2, marks=needs_fanotify)],
)
def test_a_watch_with_too_few_watches_is_partial_and_names_what_it_watches(
    tmp_path: Path, limit: int, marks: int
) -> None:
    """Given fewer watches and marks than directories, it watches as many as it may,
    reports what changes in those, and names them: the caller stats the others
    (``rescan.scan``)."""
    dirs = _tree(tmp_path)
    watch = TreeWatch(str(tmp_path), dirs, limit=limit, marks=marks)
    try:
        assert watch.partial and sorted(watch.watched) == ["", "src"]
        assert watch.marked == marks
        (tmp_path / "src" / "deep" / "b.py").write_text("unseen\n")
        (tmp_path / "src" / "new").mkdir()  # appears in a watched one: no watch left
        (tmp_path / "top.txt").write_text("seen\n")
        seen = watch.look()
        assert seen is not None
        assert seen.paths == {"top.txt", "src/new"}
        assert seen.watched == frozenset({"", "src"})
        assert watch.sure  # (partial, not unsure: what it watches, it reports)
    finally:
        watch.close()
    whole = TreeWatch(str(tmp_path), dirs, limit=limit, marks=10)
    try:
        assert not whole.partial
        seen = whole.look()
        assert seen is not None and seen.watched is None  # (every directory)
    finally:
        whole.close()


@needs_fanotify
def test_marks_handed_to_another_process_report_under_their_names(tmp_path: Path) -> None:
    """A watch of inotify watches and fanotify marks given up (``hand_over``), its
    description sent as text, is adopted by another process: what changes in every
    directory, those that appear after included, is reported there under its name."""
    import json

    dirs = _tree(tmp_path)
    watch = TreeWatch(str(tmp_path), dirs, limit=1, marks=10)
    assert watch.marked == 2 and not watch.partial
    handed = watch.hand_over()
    assert handed is not None and handed.marks_fd >= 0 and len(handed.marks) == 2
    described = json.dumps(
        {
            "fd": handed.fd,
            "dirs": handed.dirs,
            "marks_fd": handed.marks_fd,
            "marks": handed.marks,
            "mounts": handed.mounts,
        }
    )
    (tmp_path / "src" / "deep" / "b.py").write_text("before the other took it\n")
    child = (
        "import json, os, sys, time\n"
        "from bar.base.inotify import Handed, TreeWatch\n"
        "d = json.loads(sys.argv[2])\n"
        "h = Handed(d['fd'], {int(k): v for k, v in d['dirs'].items()}, d['marks_fd'],"
        " d['marks'], False, [tuple(m) for m in d['mounts']])\n"
        "w = TreeWatch.adopt(sys.argv[1], h, limit=1, marks=10)\n"
        "first = w.drain()\n"
        "os.mkdir(os.path.join(sys.argv[1], 'src', 'made'))\n"
        "w.drain()\n"
        "for rel in ('top.txt', 'src/a.py', 'src/made/n.txt'):\n"
        "    open(os.path.join(sys.argv[1], rel), 'a').write('x')\n"
        "print(json.dumps([sorted(first), sorted(w.drain()), w.marked]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path), described],
        pass_fds=(handed.fd, handed.marks_fd),
        capture_output=True,
        text=True,
        check=True,
    )
    os.close(handed.fd)
    os.close(handed.marks_fd)
    first, later, marked = json.loads(done.stdout)
    assert first == ["src/deep/b.py"]  # (queued before the hand-over: not lost)
    assert later == ["src/a.py", "src/made/n.txt", "top.txt"]
    assert marked == 3


def test_a_directory_whose_mode_changed_is_named(tmp_path: Path, given: dict[str, Any]) -> None:
    """A directory made unreadable and readable again is named, to be listed again (what
    was made in it meanwhile could not be seen): inotify tells its parent's watch,
    fanotify tells the directory's own mark. The root has no parent to be listed in: the
    watch then says it does not know."""
    dirs = _tree(tmp_path)
    watch = TreeWatch(str(tmp_path), dirs, **given)
    try:
        (tmp_path / "src" / "deep").chmod(0o300)
        (tmp_path / "src" / "deep").chmod(0o755)
        seen = watch.drain()
        assert seen is not None and "src/deep" in seen, seen
        tmp_path.chmod(0o700)
        assert watch.drain() is None
        assert watch.drain() == set()  # (then it knows again)
    finally:
        tmp_path.chmod(0o755)
        watch.close()


def _mount_tmpfs(where: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a file system takes root")
    done = subprocess.run(["mount", "-t", "tmpfs", "bar-test", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode(errors='replace').strip()}")


def test_a_mount_over_a_watched_directory_makes_the_watch_unsure(
    tmp_path: Path, given: dict[str, Any]
) -> None:
    """What is written in a file system mounted on a watched directory reaches no watch,
    and neither the mount nor the unmount makes an event: the watch sees the mount table
    change, and is never sure again. A mount elsewhere changes nothing."""
    dirs = _tree(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    outside.mkdir()
    watch = TreeWatch(str(tmp_path), dirs, **given)
    try:
        _mount_tmpfs(outside)
        try:
            assert watch.drain() == set() and watch.sure  # (not over the worktree)
        finally:
            subprocess.run(["umount", str(outside)], check=True)
        _mount_tmpfs(tmp_path / "src")
        try:
            (tmp_path / "src" / "on-the-mount.txt").write_text("x\n")
            assert watch.drain() is None and not watch.sure
        finally:
            subprocess.run(["umount", str(tmp_path / "src")], check=True)
    finally:
        watch.close()


def test_a_mount_between_hand_over_and_adoption_is_not_missed(tmp_path: Path) -> None:
    """The mount points a watch noted go with it to the process that adopts it, which
    compares them with the table it finds: a mount in between makes it unsure."""
    dirs = _tree(tmp_path)
    watch = TreeWatch(str(tmp_path), dirs)
    handed = watch.hand_over()
    assert handed is not None and handed.mounts
    _mount_tmpfs(tmp_path / "src")
    try:
        adopted = TreeWatch.adopt(str(tmp_path), handed)
        assert adopted.drain() is None and not adopted.sure
        adopted.close()
    finally:
        subprocess.run(["umount", str(tmp_path / "src")], check=True)
    again = TreeWatch(str(tmp_path), dirs)
    handed = again.hand_over()
    assert handed is not None
    kept = TreeWatch.adopt(str(tmp_path), handed)  # (nothing mounted meanwhile)
    try:
        assert kept.drain() == set() and kept.sure
    finally:
        kept.close()
