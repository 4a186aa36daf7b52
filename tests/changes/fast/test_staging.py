"""Hand edits staged ahead by the task's watcher (``bar.changes.fast.staging``).

Between commands the watcher adds the paths a hand edit touched to a copy of the side
index; the next command renames that copy into place instead of running ``git add`` and
``git write-tree`` itself. These tests drive real commands against a real watcher and
check the one thing that matters: the recorded tree is always the one plain git writes
from a fresh index, whether the staging was taken or thrown away (a change after it
began, a commit in a nested repository, another environment, a command holding the
lock), and a copy thrown away never takes the side index's shared part with it.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    bar,
    calls_to,
    ledger,
    plain_git_tree,
    recorded_tree,
    side_index_of,
    task_dir,
    watcher_started,
)

from bar.changes.fast import staging, watcher
from bar.git import exact, patches
from bar.history import side_index, snapshot
from bar.store.lock import FileLock


def _staged(task: dict[str, object], seconds: float = 60.0) -> Path | None:
    """The copy the watcher staged, once it has (None: it did not within ``seconds``; a
    loaded machine's watcher may take many of them)."""
    folder = task_dir(str(task["id"]))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        said = watcher.status(side_index_of(task))
        if said is not None and said.get("staged"):
            copies = [
                p
                for p in folder.iterdir()
                if p.name.startswith(staging.PREFIX)
                and not p.name.endswith((".lock", staging.PATCH))
            ]
            if len(copies) == 1:
                return copies[0]
        time.sleep(0.02)
    return None


def _copies(task: dict[str, object]) -> list[str]:
    return [
        p.name for p in task_dir(str(task["id"])).iterdir() if p.name.startswith(staging.PREFIX)
    ]


@pytest.mark.parametrize("seed", range(3))
def test_a_staged_hand_edit_is_taken_and_recorded_as_plain_git_writes_it(
    repo: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
) -> None:
    """Random hand edits, each staged by the watcher and taken by the next command (which
    adds nothing itself): every recorded tree equals the one
    ``git add -A`` writes from a fresh index, and no copy is left behind."""
    task, wt = watcher_started(capfd, repo)
    rng = random.Random(seed)
    names = ["a.txt", "d/b.txt", "d/e/c.txt", "d/n.txt", "x.log", "top.md", "exe.sh"]
    (wt / ".gitignore").write_text("*.log\n")
    (wt / "d" / "e").mkdir(parents=True)  # (a new directory is left to the command)
    (wt / "d" / "e" / "keep").write_text("k\n")
    assert bar(capfd, "run", "--", "true").code == 0
    staged = taken = 0
    added: list[object] = []  # what the looks for hand edits added themselves
    take, write_whole = snapshot.take, side_index.write_whole
    looking = [False]

    def taking(*args: Any, **kwargs: Any) -> Any:
        looking[0] = bool(kwargs.get("hand_edits"))
        try:
            return take(*args, **kwargs)
        finally:
            looking[0] = False

    def adding(*args: Any, **kwargs: Any) -> Any:
        if looking[0]:
            added.append(args)
        return write_whole(*args, **kwargs)

    patched: list[object] = []  # the patches the command wrote itself
    write_patch = patches.write_patch
    asked: list[object] = []  # the configurations the command read itself (git config)
    ask = exact.ask

    def asking(*args: Any, **kwargs: Any) -> Any:
        if looking[0]:
            asked.append(args)
        return ask(*args, **kwargs)

    monkeypatch.setattr(exact, "ask", asking)

    def patching(*args: Any, **kwargs: Any) -> Any:
        patched.append(args)
        return write_patch(*args, **kwargs)

    monkeypatch.setattr(snapshot, "take", taking)
    monkeypatch.setattr(side_index, "write_whole", adding)
    monkeypatch.setattr(patches, "write_patch", patching)
    # some rounds give the watcher nothing it stages (only an ignored file changed, a new
    # directory, an edit racy with the index): the rounds go on until three were staged
    for n in range(40):
        if n >= 8 and staged >= 3:
            break
        for _ in range(rng.randint(1, 3)):
            rel = rng.choice(names)
            path = wt / rel
            what = rng.choice(["write", "write", "delete", "chmod", "link"])
            if what == "write":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{n} {rng.random()}\n")
            elif what == "delete" and path.exists():
                path.unlink()
            elif what == "chmod" and path.is_file():
                path.chmod(path.stat().st_mode ^ 0o111)
            elif what == "link" and not path.exists() and not path.is_symlink():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.symlink_to("top.md" if rel == "a.txt" else "a.txt")  # (never itself)
        # (an edit may change nothing git sees; a staging thrown away makes the next
        # wait longer, up to ``MAX_QUIET_MS``; the watcher's git may be slow on a busy
        # machine)
        copy = _staged(task, seconds=staging.MAX_QUIET_MS / 1000 + 2.0)
        added.clear()
        patched.clear()
        asked.clear()
        before = len(ledger(str(task["id"])))
        assert bar(capfd, "run", "--", "true").code == 0
        assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
        if copy is not None:
            staged += 1
            # (the command added nothing itself, nor read the configuration)
            taken += not added and not patched and not asked
            for manual in ledger(str(task["id"]))[before:]:
                if manual["kind"] != "manual" or not manual["artifacts"].get("patch"):
                    continue  # (an ignored file alone changed: nothing recorded)
                # its patch, written by the watcher, is the one the command would write
                mine = tmp_path / "patch"
                write_patch(wt, manual["snapshot_before"], manual["snapshot"], mine)
                written = task_dir(str(task["id"])) / manual["artifacts"]["patch"]
                assert written.read_bytes() == mine.read_bytes()
    assert taken == staged >= 3
    assert not _copies(task)


def test_a_change_after_the_staging_began_throws_it_away(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The file changes again once staged: the watcher never answers the staging of
    what it was, however soon it is asked."""
    task, wt = watcher_started(capfd, repo)
    index = side_index_of(task)
    base = ledger(str(task["id"]))[-1]["snapshot"]
    (wt / "one.txt").write_text("1\n")
    assert _staged(task) is not None
    (wt / "one.txt").write_text("2\n")
    sight = watcher.look(index, base, staged=True)
    assert sight is not None and sight.paths == {"one.txt"}
    if sight.staged is not None:  # (staged again, after the second write)
        assert sight.staged["tree"] == plain_git_tree(wt, tmp_path)
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_a_staging_is_answered_only_to_a_command_in_the_same_environment(
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Another ``HOME`` may name other ignore files: git must have run as the command's
    own would."""
    task, wt = watcher_started(capfd, repo)
    index = side_index_of(task)
    base = ledger(str(task["id"]))[-1]["snapshot"]
    (wt / "one.txt").write_text("1\n")
    assert _staged(task) is not None
    monkeypatch.setenv("PWD", "/somewhere/else")  # (a shell's: not git's)
    same = watcher.look(index, base, staged=True)
    assert same is not None and same.staged is not None
    monkeypatch.setenv("HOME", str(tmp_path))
    other = watcher.look(index, base, staged=True)
    assert other is not None and other.paths == {"one.txt"} and other.staged is None
    assert watcher.look(index, base) is not None  # (not asked for: not answered)
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_a_command_asking_while_the_watcher_stages_is_answered_at_once(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """git's add may take seconds (a clean filter's, such as a large-file store's): the
    watcher stages on a thread of its own and goes on answering, so a command that asks
    meanwhile is answered at once, not kept waiting (nor the watcher taken for hung and
    given up); it adds by itself, the record is plain git's, and the staging is thrown
    away once it lands, its copy with it."""
    filtered = tmp_path / "filtered"
    clean = f"sleep 2; touch {filtered}; cat"
    subprocess.run(["git", "-C", str(repo), "config", "filter.slow.clean", clean], check=True)
    task, wt = watcher_started(capfd, repo)
    index = side_index_of(task)
    (wt / ".gitattributes").write_text("slow.txt filter=slow\n")
    (wt / "slow.txt").write_text("one\n")
    assert bar(capfd, "run", "--", "true").code == 0
    base = ledger(str(task["id"]))[-1]["snapshot"]
    filtered.unlink(missing_ok=True)
    (wt / "slow.txt").write_text("two\n")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        said = watcher.status(index)
        assert said is not None
        if said.get("staging"):
            break
        time.sleep(0.01)
    else:
        pytest.fail("the watcher never began to stage the edit")
    sight = watcher.look(index, base, staged=True)
    assert not filtered.exists()  # (answered while the staging's git still filtered)
    assert sight is not None and sight.paths == {"slow.txt"} and sight.staged is None
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    while time.monotonic() < deadline:
        said = watcher.status(index)
        assert said is not None  # (never given up for hung)
        if not said.get("staging"):
            break
        time.sleep(0.05)
    assert not said.get("staged") and not _copies(task)


def test_nothing_is_staged_while_a_command_holds_the_task(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """While a step runs, what it writes is its own to record: the watcher stages only
    between commands."""
    task, wt = watcher_started(capfd, repo)
    folder = task_dir(str(task["id"]))
    with FileLock(folder / "task.lock", "task", what="bar run -- make"):
        assert staging.busy(folder)
        (wt / "during.txt").write_text("d\n")
        assert _staged(task, seconds=0.5) is None
    assert not staging.busy(folder)
    (wt / "after.txt").write_text("a\n")
    assert _staged(task) is not None
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_a_commit_in_a_nested_repository_throws_the_staging_away(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A commit in a nested repository whose git directory lies elsewhere makes no event
    in the worktree: the staging made before it is not answered (the repository's HEAD
    is read at every question), and the commit is recorded."""
    task, wt = watcher_started(capfd, repo)
    nested = wt / "sub"
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={tmp_path / 'sub.git'}", str(nested)], check=True
    )
    (nested / "f").write_text("1\n")
    subprocess.run(["git", "add", "f"], cwd=nested, check=True)
    subprocess.run(["git", "commit", "-qm", "one"], cwd=nested, check=True)
    for _ in range(2):
        assert bar(capfd, "run", "--", "true").code == 0
    (wt / "touch.txt").write_text("t\n")
    assert _staged(task) is not None
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "two"], cwd=nested, check=True)
    sight = watcher.look(side_index_of(task), ledger(str(task["id"]))[-1]["snapshot"], staged=True)
    assert sight is not None and sight.staged is None and "sub" in (sight.paths or ())
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)


def test_a_copy_thrown_away_keeps_the_shared_index_the_side_index_uses(
    repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Staging most files makes git write a new shared part for the copy; git removes
    old shared parts past their expiry when it does, unless told not to. The copy is
    then thrown away (a change after it): the side index's shared part must be there."""
    task, wt = watcher_started(capfd, repo)
    own = task_dir(str(task["id"])) / "git"
    shared = [p for p in own.iterdir() if p.name.startswith("sharedindex.")]
    old = time.time() - 60 * 86400
    for p in shared:
        os.utime(p, (old, old))
    for p in sorted(wt.rglob("*")):
        if p.is_file() and ".git" not in p.parts and ".aide" not in p.parts:
            p.write_text(p.read_text() + "more\n")
    for n in range(10):
        (wt / f"added-{n}.txt").write_text(f"{n}\n")
    assert _staged(task) is not None
    assert all(p.exists() for p in shared)
    (wt / "added-0.txt").write_text("changed again\n")  # the staging is thrown away
    time.sleep(0.1)
    assert all(p.exists() for p in shared)
    assert bar(capfd, "run", "--", "true").code == 0
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    assert subprocess.run(["git", "fsck"], cwd=repo, capture_output=True).returncode == 0


def test_copies_are_removed_when_the_watcher_exits_or_was_killed(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task, wt = watcher_started(capfd, repo)
    (wt / "one.txt").write_text("1\n")
    assert _staged(task) is not None
    leftover = task_dir(str(task["id"])) / f"{staging.PREFIX}1.1"
    leftover.write_bytes(b"a killed watcher's")
    watcher.stop(side_index_of(task))
    deadline = time.monotonic() + 60
    while _copies(task) != [leftover.name] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _copies(task) == [leftover.name]  # its own removed as it exited
    assert bar(capfd, "run", "--", "true").code == 0  # (a step hands over to a new one)
    assert bar(capfd, "run", "--", "true").code == 0
    assert watcher.running(side_index_of(task))
    assert not _copies(task)  # the new watcher removed what the killed one left


def test_a_staging_carries_the_configuration_its_tree_was_written_with(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the command reads of git's configuration to record a hand edit (conversions,
    how to write the commit) comes with the staging it takes, read as the staging's tree
    was written: what the command would have read itself. (The configuration is the
    one the task's last look noted: a change of it since is no staging's, see below.)"""
    task, wt = watcher_started(
        capfd,
        repo,
        lambda _wt: subprocess.run(
            ["git", "config", "core.autocrlf", "input"], cwd=repo, check=True
        ),
    )
    (wt / "a.txt").write_text("one\n")
    assert _staged(task) is not None
    answered = exact.answered
    carried = calls_to(monkeypatch, exact, "answered")
    assert bar(capfd, "run", "--", "true").code == 0
    assert carried == [exact.read(wt)]
    answer = answered(carried[0])
    assert answer is not None and "core.autocrlf input" in answer.result().out
    assert exact.converts(wt, False, answer)
    assert answered(["not", "an answer"]) is None and answered(None) is None


def test_a_conversion_change_since_the_last_look_is_no_stagings(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """git's conversions changed since the task's last look (``core.autocrlf``), and a file
    was edited: the watcher's staging holds only the edited file, while a fresh
    ``git add -A`` stores every file through the new conversions (docs/internals/git.md,
    "Exact bytes where git converts"). The command leaves the staging and hashes every file
    anew; the record is plain git's."""

    def crlf(wt: Path) -> None:
        (wt / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
        (wt / "d" / "e").mkdir(parents=True)
        (wt / "d" / "e" / "deep.txt").write_bytes(b"x\r\n")

    task, wt = watcher_started(capfd, repo, crlf)
    subprocess.run(["git", "config", "core.autocrlf", "input"], cwd=repo, check=True)
    (wt / "a.txt").write_text("one\n")
    assert _staged(task) is not None
    carried = calls_to(monkeypatch, exact, "answered")
    assert bar(capfd, "run", "--", "true").code == 0
    assert carried == []
    assert recorded_tree(repo, task) == plain_git_tree(wt, tmp_path)
    assert (wt / "crlf.txt").read_bytes() == b"one\r\ntwo\r\n"  # (no byte rewritten)
