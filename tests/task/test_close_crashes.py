"""``bar task close`` killed at every crash point of its removal of the worktree
(``bar.task.removal``), then files edited by hand (a new one, and one equal in every
state), then the close again: no byte the worktree held is lost (each is in a recorded
state or in the task's trash), the worktree is never left half deleted, and what is
edited by hand after the kill is recorded or kept. Both speed modes. And a file rewritten
after the close looked, before the worktree left its place, goes to the trash."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import bar_exe, fault_trace, point_at, project_dir, sweep, task_dir, timed

from conftest import MakeRepo, git


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


def _blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def every_byte(root: Path) -> dict[str, bytes]:
    """Each file under ``root`` (nested repositories' ``.git`` too, not the worktree's own
    ``.git`` file nor bar's ``.aide/``) as its bytes, links as their targets."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel == ".git" or rel.startswith(".aide/"):  # (bar's copies for aide's clients)
                continue
            found[rel] = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return found


def recorded_blobs(repo: Path, task_id: str) -> set[str]:
    commits = {task_json(task_id)["base_commit"]}
    for line in (task_dir(task_id) / "ledger.jsonl").read_text().splitlines():
        step = json.loads(line)
        commits.update(c for c in (step.get("snapshot"), step.get("snapshot_before")) if c)
    blobs: set[str] = set()
    for commit in commits:
        listed = git(repo, "ls-tree", "-r", commit)
        blobs.update(line.split()[2] for line in listed.splitlines() if line)
    return blobs


def in_trash(task_id: str) -> dict[str, set[bytes]]:
    held: dict[str, set[bytes]] = {}
    trash = task_dir(task_id) / "trash"
    for entry in sorted(trash.iterdir()) if trash.is_dir() else []:
        for rel, data in every_byte(entry / "files").items():
            held.setdefault(rel, set()).add(data)
    return held


def lost(repo: Path, task_id: str, held: dict[str, bytes]) -> list[str]:
    """What of ``held`` is in no recorded state and not in the trash at its path."""
    blobs, trash = recorded_blobs(repo, task_id), in_trash(task_id)
    return sorted(
        rel
        for rel, data in held.items()
        if _blob(data) not in blobs and data not in trash.get(rel, ())
    )


def task_json(task_id: str) -> dict[str, str]:
    data: dict[str, str] = json.loads((task_dir(task_id) / "task.json").read_text())
    return data


def setup(make_repo: MakeRepo, name: str) -> tuple[Path, str, Path]:
    """A task with a step's nested repository (uncommitted work inside), an ignored file,
    a file only the record holds, and a hand edit no step recorded yet."""
    repo = make_repo(name=name)
    assert bar_exe("init", cwd=repo).code == 0
    made = bar_exe("task", "new", "job", "--json", cwd=repo)
    assert made.code == 0, made.err
    task_id: str = made.json()["id"]
    wt = Path(made.json()["worktree"])
    script = (
        "printf '*.log\\n' > .gitignore && echo same > same.txt && echo one > one.txt && "
        "git init -q -b main vendor && echo lib > vendor/lib.c && git -C vendor add lib.c && "
        "git -C vendor -c user.name=t -c user.email=t@localhost commit -qm vendored"
    )
    ran = bar_exe("run", "--", "sh", "-c", script, cwd=repo)
    assert ran.code == 0, ran.err
    (wt / "vendor" / "wip.c").write_text("uncommitted\n")
    (wt / "debug.log").write_text("ignored\n")
    (wt / "one.txt").write_text("edited by hand, not yet recorded\n")
    return repo, task_id, wt


@pytest.mark.slow  # a SIGKILL sweep (make test-fast leaves it out)
def test_close_killed_at_every_point_then_edited_by_hand_loses_nothing(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speed: str
) -> None:
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "probe-home"))
    probe, probe_id, _wt = setup(make_repo, "probe")
    points = fault_trace(probe, tmp_path, "task", "close", "job", "--force")
    assert any("remove worktree: moved aside" in p for p in points), points
    missed: list[int] = []
    for n in sweep(len(points)):
        monkeypatch.setenv("BAR_HOME", str(tmp_path / f"home{n}"))
        repo, task_id, wt = setup(make_repo, f"r{n}")
        held = every_byte(wt)
        at = point_at(points, n, probe_id, task_id)
        killed = bar_exe("task", "close", "job", "--force", cwd=repo, env={"BAR_FAULT_AT": at})
        said = f"point {n} ({at})"
        if killed.code == 0:
            if not timed(at):  # (the clock did not call for that file this time)
                missed.append(n)
            continue
        assert killed.code == -signal.SIGKILL, f"{said}: {killed.err}"
        # the worktree is whole or gone, never half deleted
        if wt.exists():
            assert (wt / ".git").is_file() and (wt / "same.txt").exists(), said
        # by hand: a new file, and an edit of a file equal in every state; where the
        # worktree is gone, the directory made again with a file in it
        # (a close that finished before the kill: the place is nobody's, no test of bar's)
        interrupted = (task_dir(task_id) / "removing.json").exists()
        hand = (
            {f"by hand {n}.txt": f"new by hand {n}\n".encode()}
            if interrupted or wt.exists()
            else {}
        )
        if wt.exists():
            hand["same.txt"] = f"edited by hand after the kill {n}\n".encode()
        if hand:
            wt.mkdir(parents=True, exist_ok=True)
        for rel, data in hand.items():
            (wt / rel).write_bytes(data)
        held.update(hand)
        if n % 2:
            fixed = bar_exe("doctor", "--repair", cwd=repo)
            assert fixed.code == 0, f"{said}: {fixed.out}{fixed.err}"
        again = bar_exe("task", "close", "job", "--force", cwd=repo)
        assert again.code in (0, 2), f"{said}: {again.err}"
        if again.code == 2:
            assert "already closed" in again.err, f"{said}: {again.err}"
        assert task_json(task_id)["status"] == "closed", said
        assert not wt.exists(), f"{said}: {sorted(os.listdir(wt))}"
        tdir = task_dir(task_id)
        assert not (tdir / "removing.json").exists(), said
        assert not [p for p in os.listdir(tdir) if p.startswith("removing")], said
        assert lost(repo, task_id, held) == [], said
        assert wt.name not in git(repo, "worktree", "list"), said
        doctor = bar_exe("doctor", "--json", cwd=repo)
        # (what a kill before the removal leaves, a temporary file or index, is not its)
        found = [
            f
            for f in doctor.json()["findings"]
            if "temporary file" not in f["message"]
            and (f["severity"] == "error" or "worktree" in f["message"] or "remov" in f["where"])
        ]
        assert doctor.code == 0 and found == [], f"{said}: {doctor.out}"
        reopened = bar_exe("task", "reopen", "job", cwd=repo)
        assert reopened.code == 0, f"{said}: {reopened.err}"
        assert (wt / "vendor" / "wip.c").read_text() == "uncommitted\n", said
        assert git(wt / "vendor", "log", "--format=%s").strip() == "vendored", said
    assert len(missed) <= 2, f"points never reached: {missed} of {points}"


def test_a_file_rewritten_after_the_close_looked_goes_to_the_trash(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speed: str
) -> None:
    """An editor's save that lands after the close recorded the worktree and before the
    worktree left its place: the close compares every byte before it deletes."""
    from bar.base import faults
    from bar.cli.main import main

    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo, task_id, wt = setup(make_repo, "race")
    saved = b"saved by an editor at the last moment\n"
    passed = faults.point

    def save_then_pass(label: str) -> None:
        if label == "remove worktree: journal written":
            (wt / "one.txt").write_bytes(saved)
            (wt / "same.txt").write_bytes(saved)
        passed(label)

    monkeypatch.setattr(faults, "point", save_then_pass)
    monkeypatch.chdir(repo)
    assert main(["task", "close", "job", "--force"]) == 0
    assert not wt.exists()
    trash = in_trash(task_id)
    assert trash["one.txt"] == {saved} and trash["same.txt"] == {saved}
    assert lost(repo, task_id, {"one.txt": saved, "same.txt": saved}) == []


def test_worktree_remove_killed_midway_is_finished_by_the_next(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speed: str
) -> None:
    """The planned task's worktree removal killed once its worktree moved aside: commands
    say what happened and how to finish it; ``bar worktree remove`` finishes it, and the
    next start brings back the nested repository and the ignored file."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo, task_id, wt = setup(make_repo, "wr")
    assert bar_exe("run", "--", "true", cwd=repo).code == 0  # the hand edit recorded
    killed = bar_exe(
        "worktree", "remove", "job", cwd=repo, env={"BAR_FAULT_AT": "remove worktree: compared"}
    )
    assert killed.code == -signal.SIGKILL
    assert not wt.exists()
    ran = bar_exe("run", "--", "true", cwd=repo)
    assert ran.code != 0 and "was being removed when bar stopped" in ran.err
    assert "bar worktree remove" in ran.err
    again = bar_exe("worktree", "remove", "job", cwd=repo)
    assert again.code == 0, again.err
    assert "finishing the removal" in again.err
    assert task_json(task_id)["board"]["status"] == "pending"  # type: ignore[index]
    started = bar_exe("task", "start", "job", cwd=repo)
    assert started.code == 0, started.err
    assert (wt / "vendor" / "wip.c").read_text() == "uncommitted\n"
    assert (wt / "debug.log").read_text() == "ignored\n"
    assert (project_dir() / "workspaces" / task_id) == wt


@pytest.mark.parametrize("meanwhile", ["git worktree prune", "its git directory removed"])
def test_a_close_killed_midway_survives_what_git_does_meanwhile(
    make_repo: MakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: str
) -> None:
    """Between the kill and the close run again, git prunes the worktrees whose path is
    gone (any command of another task may): the one being removed is locked and stays.
    If its git directory is gone anyway, nothing can be compared and everything goes to
    the trash: still nothing lost."""
    monkeypatch.setenv("BAR_HOME", str(tmp_path / "home"))
    repo, task_id, wt = setup(make_repo, "pr")
    held = every_byte(wt)
    killed = bar_exe(
        "task", "close", "job", "--force", cwd=repo,
        env={"BAR_FAULT_AT": "remove worktree: moved aside"},
    )  # fmt: skip
    assert killed.code == -signal.SIGKILL and not wt.exists()
    git(repo, "worktree", "prune")
    admin = repo / ".git" / "worktrees"
    if meanwhile == "its git directory removed":
        for entry in admin.iterdir():
            subprocess.run(["rm", "-rf", str(entry)], check=True)
    else:
        assert any(admin.iterdir())  # (locked: kept)
    again = bar_exe("task", "close", "job", "--force", cwd=repo)
    assert again.code == 0, again.err
    assert task_json(task_id)["status"] == "closed"
    assert lost(repo, task_id, held) == []
    assert not [p for p in os.listdir(task_dir(task_id)) if p.startswith("removing")]
    if meanwhile == "git worktree prune":
        assert "same.txt" not in in_trash(task_id)  # (compared: what the record holds went)
