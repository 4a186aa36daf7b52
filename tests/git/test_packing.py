"""The loose objects a task's steps leave are packed between steps (``bar.git.packing``):
once they pass git's ``gc.auto``, after a step, with every object kept (unreachable ones
too), the task's history intact, a repository's big pack left alone, and nothing done where
the developer turned git's own packing off."""

from __future__ import annotations

import hashlib
import os
import subprocess
import zlib
from pathlib import Path

import pytest
from helpers import bar, ledger, new_task, worktree

from bar.git import packing
from conftest import git


def plant_loose(repo: Path, count: int, tag: str = "", *, fan_out: str = "") -> list[str]:
    """Write ``count`` loose blobs into ``repo``'s object store as git would; their ids.
    With ``fan_out``, only blobs whose ids start with it (others are made and dropped)."""
    store = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    ids: list[str] = []
    i = 0
    while len(ids) < count:
        body = f"object {tag}{i}\n".encode()
        i += 1
        raw = b"blob %d\0" % len(body) + body
        oid = hashlib.sha1(raw).hexdigest()
        if not oid.startswith(fan_out):
            continue
        folder = store / "objects" / oid[:2]
        folder.mkdir(exist_ok=True)
        (folder / oid[2:]).write_bytes(zlib.compress(raw))
        ids.append(oid)
    return ids


# git estimates the loose objects from ``objects/17`` alone (times 256): this many there
# pass gc.auto's default of 6,700, for a few files written instead of thousands
PAST_GC_AUTO = 30


def plant_due(repo: Path, tag: str = "") -> list[str]:
    """Loose objects enough for git's estimate, and bar's, to find packing due."""
    return plant_loose(repo, PAST_GC_AUTO, tag, fan_out="17")


def plant_due_with_a_corrupt_one(repo: Path) -> Path:
    """``plant_due``, one of them corrupt: ``pack-objects`` cannot read it, so nothing is
    packed or deleted. Its path (for the test to remove: the fixture's fsck follows)."""
    bad_id = plant_due(repo)[0]
    bad = repo / ".git" / "objects" / bad_id[:2] / bad_id[2:]
    os.chmod(bad, 0o644)
    bad.write_bytes(b"not zlib")
    return bad


def loose_count(repo: Path) -> int:
    return int(git(repo, "count-objects").split()[0])


def all_present(repo: Path, ids: list[str]) -> bool:
    out = git(repo, "cat-file", "--batch-check", input="".join(i + "\n" for i in ids).encode())
    return "missing" not in out and len(out.splitlines()) == len(ids)


def packs(repo: Path) -> set[str]:
    return {p.name for p in (repo / ".git" / "objects" / "pack").glob("*.pack")}


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    assert bar(capfd, "init").code == 0
    t = new_task(capfd)
    monkeypatch.chdir(worktree(t))
    return t


def step(capfd: pytest.CaptureFixture[str], script: str) -> None:
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err


def test_a_step_packs_the_loose_objects_once_they_pass_gc_auto_and_keeps_every_one(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    step(capfd, "echo one > a.txt")
    before = loose_count(repo)
    assert before < 100  # a few steps stay loose: below git's estimate, nothing is done
    step(capfd, "echo two > a.txt")
    assert loose_count(repo) > before
    planted = plant_due(repo)  # unreachable: packed all the same, never dropped
    step(capfd, "echo three > a.txt && echo new > b.txt")
    assert loose_count(repo) == 0
    assert all_present(repo, planted)
    # the history is whole: every step's patch, a rollback to the first and its undo
    assert [s["snapshot"] != s["snapshot_before"] for s in ledger(task["id"])] == [True] * 3
    shown = bar(capfd, "diff", "--from", "1", "--to", "2")
    assert shown.code == 0 and "+two" in shown.out
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert (worktree(task) / "a.txt").read_text() == "one\n"
    assert not (worktree(task) / "b.txt").exists()
    assert bar(capfd, "undo").code == 0
    assert (worktree(task) / "b.txt").read_text() == "new\n"
    # (the fixture's git fsck checks the whole store when the test ends)


def test_nothing_is_packed_where_git_auto_gc_is_off_or_set_higher(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    git(repo, "config", "gc.auto", "0")
    plant_due(repo)
    step(capfd, "echo one > a.txt")
    assert loose_count(repo) >= PAST_GC_AUTO
    git(repo, "config", "gc.auto", "20000")
    step(capfd, "echo two > a.txt")
    assert loose_count(repo) >= PAST_GC_AUTO
    git(repo, "config", "--unset", "gc.auto")
    step(capfd, "echo three > a.txt")
    assert loose_count(repo) == 0


def test_the_loose_objects_get_a_pack_of_their_own_and_the_others_are_left_alone(
    make_repo,
) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo({f"d{i}/f{j}.txt": f"{i} {j}\n" for i in range(40) for j in range(100)})
    git(repo, "repack", "-a", "-d", "-q")
    (big,) = packs(repo)
    store = repo / ".git" / "objects"
    kept: list[str] = []
    for round_ in range(3):
        kept += plant_loose(repo, 300, tag=f"r{round_}-")
        done = packing.pack(repo, store)
        assert done.objects == 300 and done.pack is not None
        assert git(repo, "verify-pack", "-v", str(done.pack)).count(" blob ") == 300
    assert big in packs(repo) and len(packs(repo)) == 4
    assert loose_count(repo) == 0
    assert all_present(repo, kept)
    # no cache git would trust unchecked was written beside the packs
    assert {p.suffix for p in (store / "pack").iterdir()} <= {".pack", ".idx"}


@pytest.mark.breaks_history
def test_a_loose_object_rewritten_before_it_is_packed_is_never_packed_under_its_name(
    make_repo,
) -> None:  # type: ignore[no-untyped-def]
    """What a step running beside the packer could do: rewrite a reviewed loose object
    before ``pack-objects`` reads it. The pack would hold the new content under the old
    name, and the loose copy the step's guard checks would be gone."""
    repo = make_repo()
    store = repo / ".git" / "objects"
    planted = plant_loose(repo, 50)
    victim = store / planted[7][:2] / planted[7][2:]
    os.chmod(victim, 0o644)
    victim.write_bytes(zlib.compress(b"blob 9\0tampered\n"))
    before, loose = packs(repo), loose_count(repo)
    with pytest.raises(packing.Unsound, match="verify-pack"):
        packing.pack(repo, store)
    assert packs(repo) == before  # the pack made was removed
    assert victim.read_bytes() == zlib.compress(b"blob 9\0tampered\n")  # left for the guard
    assert loose_count(repo) == loose


def test_a_task_finding_another_packing_leaves_it_to_them(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    from helpers import project_dir

    plant_due(repo)
    lock = project_dir() / "pack.lock"
    holder = subprocess.Popen(
        [
            "python3",
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT);"
            " fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(lock),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        step(capfd, "echo one > a.txt")
        assert loose_count(repo) >= PAST_GC_AUTO  # not waited for, not done twice
    finally:
        holder.kill()
        holder.wait()
    step(capfd, "echo two > a.txt")
    assert loose_count(repo) == 0


def test_a_failing_git_is_kept_said_and_tried_again_and_the_objects_stay_loose(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    from helpers import project_dir

    bad = plant_due_with_a_corrupt_one(repo)
    res = bar(capfd, "run", "--", "sh", "-c", "echo one > a.txt")
    assert res.code == 0, res.err
    assert "could not pack the repository's loose objects" in res.err
    assert ledger(task["id"])[-1]["exit_code"] == 0
    assert loose_count(repo) >= PAST_GC_AUTO
    assert (project_dir() / "pack.log").read_text().strip()
    bad.unlink()  # put right: the next step says what failed, and packs
    res = bar(capfd, "run", "--", "sh", "-c", "echo two > a.txt")
    assert res.code == 0 and "last time" in res.err, res.err
    assert loose_count(repo) == 0
    assert not (project_dir() / "pack.log").exists()


def test_by_default_the_packing_runs_on_after_the_command_as_gits_own(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    from helpers import project_dir

    from bar.store.lock import FileLock

    git(repo, "config", "gc.autoDetach", "true")  # (git's default; the tests' is off)
    planted = plant_due(repo)
    step(capfd, "echo one > a.txt")
    with FileLock(project_dir() / "pack.lock", "packing", timeout=120):
        pass  # the packer holds the lock until it is done
    assert loose_count(repo) == 0
    assert all_present(repo, planted)
    assert not (project_dir() / "pack.log").exists()
    step(capfd, "echo two > a.txt")
    assert bar(capfd, "rollback", "--to", "1").code == 0


def test_doctor_reports_a_failed_packing_and_repairs_it_by_packing(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    import json

    bad = plant_due_with_a_corrupt_one(repo)
    assert bar(capfd, "run", "--", "sh", "-c", "echo one > a.txt").code == 0
    found = json.loads(bar(capfd, "doctor", "--json").out)
    (finding,) = [f for f in found["findings"] if f["where"].endswith("pack.log")]
    assert finding["severity"] == "warning" and finding["repairable"]
    assert "git fsck" in finding["hint"]
    bad.unlink()  # the developer puts the object store right, then asks bar to pack
    res = bar(capfd, "doctor", "--repair")
    assert res.code == 0, res.err
    assert "packed" in res.out + res.err
    assert loose_count(repo) == 0
    found = json.loads(bar(capfd, "doctor", "--json").out)
    assert not [f for f in found["findings"] if f["where"].endswith("pack.log")]


def test_a_project_directory_bar_cannot_write_is_a_warning_after_the_step(
    repo: Path, task: dict, capfd: pytest.CaptureFixture[str]
) -> None:
    from helpers import project_dir

    plant_due(repo)
    lock = project_dir() / "pack.lock"
    lock.mkdir()  # (the lock cannot be opened: as on a full or read-only disk)
    try:
        res = bar(capfd, "run", "--", "sh", "-c", "echo one > a.txt")
    finally:
        lock.rmdir()
    assert res.code == 0, res.err
    assert "could not pack" in res.err
    assert ledger(task["id"])[-1]["exit_code"] == 0
