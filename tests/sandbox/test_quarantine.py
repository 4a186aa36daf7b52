"""A step adds objects and moves its own branch; it changes nothing that exists
(docs/sandbox.md, "The object store and the refs: a quarantine"). Each test runs the attack
for real, inside ``bar run``, and ends with the repository whole: ``git fsck`` clean (the
fixture ``repo`` checks that after every test).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    DATA,
    all_gone,
    bar,
    descendants,
    ledger,
    new_task,
    project_dir,
    set_config,
    task_dir,
    worktree,
)

from bar.sandbox import UNAVAILABLE_ENV, landlock, namespace

QUARANTINED = (
    landlock.abi_version() >= 1
    and not os.environ.get(UNAVAILABLE_ENV)
    and namespace.available("/tmp") is None
)
pytestmark = pytest.mark.skipif(not QUARANTINED, reason="no Landlock or no user namespaces")

ATTACK = DATA / "attack_objects.py"


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})  # the kernel, not the policy, is under test
    return repo


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _task_id() -> str:
    tid: str = json.loads((project_dir() / "state.json").read_text())["active_task_id"]
    return tid


def _run(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, dict[str, Any]]:
    res = bar(capfd, "run", "--no-pty", "--", *argv)
    return res.code, res.out + res.err, ledger(_task_id())[-1]


def _guarded(step: dict[str, Any]) -> list[str]:
    return [e["matched"] for e in step["policy_events"] if e["rule"] == "bar:guard"]


def _objects(repo: Path) -> dict[str, bytes]:
    """Every file of the real object store, by path."""
    store = repo / ".git" / "objects"
    return {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def test_a_step_can_change_no_existing_object_by_any_path(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Delete, truncate, rewrite, chmod, plant a commit graph or alternates: through the
    path the step sees as the store, through the read-only view of the real one, and
    through ``git gc``/``git prune``; nothing of the store changes."""
    t = new_task(capfd)
    assert _run(capfd, "sh", "-c", "echo one > one.txt")[0] == 0
    before = _objects(inited)
    code, said, step = _run(capfd, sys.executable, str(ATTACK), "store")
    assert code == 0, said
    assert "changed: none" in said, said
    assert step["sandbox"]["objects"] == "quarantine"
    after = _objects(inited)
    assert {k: v for k, v in after.items() if k in before} == before
    assert not (inited / ".git" / "objects" / "info" / "commit-graph").exists()
    assert _git(inited, "cat-file", "-p", f"{t['branch']}:README.md")


def test_a_steps_commits_reach_the_repository_with_their_reflog(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    base = _git(inited, "rev-parse", t["branch"])
    code, said, step = _run(
        capfd,
        "sh",
        "-c",
        "echo a > a.txt && git add a.txt && "
        "git commit -qm 'add a' && echo b > b.txt && git add b.txt && "
        "git commit -qm 'add b'",
    )
    assert code == 0, said
    head = _git(inited, "rev-parse", t["branch"])
    assert head != base and step["head"] == head
    assert _git(inited, "log", "--format=%s", f"{base}..{head}").splitlines() == ["add b", "add a"]
    assert _git(inited, "reflog", "-1", "--format=%gs", t["branch"]) == "commit: add b"
    assert _guarded(step) == []
    # nothing of the step is left waiting
    quarantine = Path(_git(worktree(t), "rev-parse", "--absolute-git-dir")) / "bar-objects"
    left = [p for p in quarantine.rglob("*") if p.is_file() and len(p.parent.name) == 2]
    assert left == []


def test_objects_that_lie_or_break_links_never_reach_the_store(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A file named by another content's hash, a malformed commit, a tree naming a blob
    that is nowhere, and a branch moved onto such a commit: refused, kept aside, said."""
    t = new_task(capfd)
    base = _git(inited, "rev-parse", t["branch"])
    code, said, step = _run(capfd, sys.executable, str(ATTACK), "forge")
    assert code == 0, said
    forged = json.loads(said[said.index("{") : said.index("}") + 1])
    for name in forged.values():
        kind = subprocess.run(
            ["git", "-C", str(inited), "cat-file", "-t", name], capture_output=True, text=True
        )
        assert kind.returncode != 0, name
    assert _git(inited, "rev-parse", t["branch"]) == base
    guarded = " ".join(_guarded(step))
    assert "fails git's checks" in guarded and "not all in the repository" in guarded
    assert f"{forged['bomb'][:2]}/{forged['bomb'][2:]} the step wrote is no git object" in guarded
    assert list((task_dir(t["id"]) / "tampered").glob("object-*"))


def test_a_step_moves_no_other_ref(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    other = new_task(capfd, "other")
    other_before = _git(inited, "rev-parse", other["branch"])
    t = new_task(capfd, "mine")
    refs = inited / ".git" / "refs" / "heads" / "bar"
    script = (
        f"git commit -q --allow-empty -m mine && git rev-parse HEAD > '{refs}/{Path(other['branch']).name}' "
        f"&& git rev-parse HEAD > '{refs}/planted' && git branch -f bar/also HEAD "
        f"&& (git update-ref -d refs/heads/{other['branch']} || true)"
    )
    code, said, step = _run(capfd, "sh", "-c", script)
    assert code == 0, said
    assert _git(inited, "rev-parse", other["branch"]) == other_before
    assert not (refs / "planted").exists() and not (refs / "also").exists()
    assert _git(inited, "log", "-1", "--format=%s", t["branch"]) == "mine"
    assert any(other["branch"] in g and "read-only" in g for g in _guarded(step)), _guarded(step)


def test_a_packed_fetch_in_a_step_arrives_checked(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``git fetch`` writes a pack into the quarantine; it reaches the store through
    ``git index-pack --strict``, and the branch the step moved onto it with it."""
    source = tmp_path / "source"
    subprocess.run(["git", "init", "-q", str(source)], check=True)
    for n in range(5):
        (source / f"f{n}.txt").write_text(f"{n}\n")
        subprocess.run(["git", "-C", str(source), "add", "."], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(source),
                "-c",
                "user.name=s",
                "-c",
                "user.email=s@x",
                "commit",
                "-qm",
                f"c{n}",
            ],
            check=True,
        )
    tip = _git(source, "rev-parse", "HEAD")
    t = new_task(capfd)
    code, said, step = _run(
        capfd,
        "sh",
        "-c",
        f"git -c fetch.unpackLimit=1 fetch -q '{source}' HEAD && git reset -q --hard FETCH_HEAD",
    )
    assert code == 0, said
    assert _git(inited, "rev-parse", t["branch"]) == tip
    assert list((inited / ".git" / "objects" / "pack").glob("pack-*.idx"))
    assert _guarded(step) == []


def test_a_bar_killed_mid_step_leaves_the_repository_whole_and_the_next_brings_it_in(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    base = _git(inited, "rev-parse", t["branch"])
    started = worktree(t) / "started"
    running = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "bar"),
            "run",
            "--no-pty",
            "--",
            "sh",
            "-c",
            "echo a > a.txt && git add a.txt && git commit -qm 'add a' && touch started "
            "&& sleep 60",
        ],
        cwd=inited,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "BAR_RESIDENT_IDLE": "0"},
    )
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    held = descendants(running.pid)  # its holder and the step
    running.send_signal(signal.SIGKILL)
    running.wait(timeout=30)
    # the branch waits in the quarantine for its objects: no ref names a missing object
    assert _git(inited, "rev-parse", t["branch"]) == base
    refs = subprocess.run(
        ["git", "-C", str(inited), "fsck", "--no-dangling", "--connectivity-only", "--no-reflogs"],
        capture_output=True,
        text=True,
    )
    assert "missing" not in refs.stderr + refs.stdout
    all_gone(held)  # (the holder saw bar go, and stopped the step)
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    steps = ledger(t["id"])
    assert steps[0]["interrupted"] is True
    head = _git(inited, "rev-parse", t["branch"])
    assert _git(inited, "log", "-1", "--format=%s", head) == "add a"
    assert steps[0]["head"] == head


def test_without_namespaces_the_step_writes_the_store_and_says_so(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(namespace.UNAVAILABLE_ENV, "1")
    t = new_task(capfd)
    code, said, step = _run(capfd, "sh", "-c", "git commit -q --allow-empty -m x")
    assert code == 0, said
    assert step["sandbox"]["objects"] == "shared"
    assert "can change the repository's existing objects" in said
    assert _git(inited, "log", "-1", "--format=%s", t["branch"]) == "x"


def test_status_says_whether_new_objects_wait_in_a_quarantine(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new_task(capfd)
    res = bar(capfd, "status", "--json")
    assert json.loads(res.out)["sandbox"]["objects"] == "quarantine"
    monkeypatch.setenv(namespace.UNAVAILABLE_ENV, "1")
    res = bar(capfd, "status")
    assert "steps write the object store itself" in res.out


def test_a_store_that_borrows_objects_by_a_relative_path_is_quarantined_too(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``git clone --shared`` with a relative path: the view of the store is mounted
    elsewhere, so it names the borrowed store by an absolute path."""
    lender = tmp_path / "lender.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(inited), str(lender)], check=True)
    store = inited / ".git" / "objects"
    (store / "info" / "alternates").write_text(os.path.relpath(lender / "objects", store) + "\n")
    t = new_task(capfd)
    code, said, step = _run(capfd, "sh", "-c", "git commit -q --allow-empty -m borrowed")
    assert code == 0 and "does not exist" not in said, said
    assert step["sandbox"]["objects"] == "quarantine"
    assert _git(inited, "log", "-1", "--format=%s", t["branch"]) == "borrowed"


def test_what_the_hook_of_a_step_that_did_not_run_committed_comes_in_before_the_next_command(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The repository's ``pre_run`` hook runs confined as its step would: a commit it
    makes waits in the quarantine, and when it fails the step is recorded as not run.
    The next command that changes the task brings that commit in before it acts
    (``bar.step.transaction``): ``bar task close`` here, which removes the quarantine
    with the worktree."""
    hook = "git commit -q --allow-empty -m 'by the hook' && exit 3"
    (inited / ".bar").mkdir(exist_ok=True)
    (inited / ".bar" / "config.yaml").write_text(
        json.dumps({"version": 1, "hooks": {"pre_run": [hook]}})
    )
    _git(inited, "add", ".bar/config.yaml")
    _git(inited, "commit", "-q", "-m", "the repository's hook")
    t = new_task(capfd)
    base = _git(inited, "rev-parse", t["branch"])
    code, said, step = _run(capfd, "true")
    assert code != 0 and step["stopped_by"] == "pre_run", said
    assert "run confined like the step" in said
    assert _git(inited, "rev-parse", t["branch"]) == base  # (in the quarantine, not here)
    closed = bar(capfd, "task", "close", t["name"])
    assert closed.code == 0, closed.err
    head = _git(inited, "rev-parse", t["branch"])
    assert _git(inited, "log", "-1", "--format=%s", head) == "by the hook"
    assert _git(inited, "rev-parse", f"{head}^") == base
    assert not (task_dir(t["id"]) / "quarantine.json").exists()


def test_a_reflog_message_a_step_wrote_with_a_nul_neither_jams_the_task_nor_reaches_git(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The step's branch moves with its own reflog message, which it wrote in its
    quarantine: one holding a NUL (no command line can carry it) or a newline is made one
    line of text, and the step, the task's next command and its close go through."""
    t = new_task(capfd)
    log = '"$(git rev-parse --git-path logs/refs/heads/$(git symbolic-ref --short HEAD))"'
    planted = f"printf '0 0 x <x> 0 +0000\\tbad\\000msg\\033[31m\\n' >> {log}"
    code, said, step = _run(
        capfd, "sh", "-c", f"git commit -q --allow-empty -m 'by the step' && {planted}"
    )
    assert code == 0, said
    head = _git(inited, "rev-parse", t["branch"])
    assert _git(inited, "log", "-1", "--format=%s", head) == "by the step"
    assert step["head"] == head
    moved = _git(inited, "reflog", "-1", "--format=%gs", t["branch"])
    assert moved == "bad msg [31m"
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    assert bar(capfd, "task", "close", t["name"]).code == 0
