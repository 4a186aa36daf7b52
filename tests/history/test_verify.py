"""``bar verify``: every byte of a recorded state against the worktree, in both speed modes.

A write through a shared memory map to a page already dirty changes no time and raises no
event: ``bar status`` cannot see it (docs/internals/record.md, "What bar can and cannot
see"), ``bar verify`` does, and ``--record`` puts it in the record so that a rollback and
an undo keep it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import bar, init_clean, ledger, new_task, run_sh, worktree

_MAPPER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED)
for line in sys.stdin:
    at, data = line.split()
    m[int(at) : int(at) + len(data)] = data.encode()
    print("ok", flush=True)
"""


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``)."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)


class _Mapper:
    """A process holding ``path`` mapped MAP_SHARED, writing where it is told."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MAPPER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def write(self, at: int, data: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{at} {data}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _verify(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    res = bar(capfd, "verify", "--json", *args)
    return res.code, json.loads(res.out)


def test_a_write_through_a_shared_map_is_found_and_recorded(
    speed: str, repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    run_sh(capfd, "head -c 8192 /dev/zero | tr '\\0' a > data.bin; echo keep > other.txt")
    data = wt / "data.bin"
    mapper = _Mapper(data)
    try:
        time.sleep(1.1)  # (the page's first write falls in another second than the record)
        mapper.write(0, "first")  # the page's first write: its times move
        time.sleep(1.1)  # (and the record in another second again: not racily clean)
        assert bar(capfd, "run", "--", "true").code == 0
        assert ledger(task["id"])[-2]["kind"] == "manual"  # the first write, seen
        before = os.stat(data)
        mapper.write(100, "second")  # the page is still dirty: nothing moves
        after = os.stat(data)
        if (before.st_mtime_ns, before.st_ctime_ns) != (after.st_mtime_ns, after.st_ctime_ns):
            pytest.skip("the kernel wrote the page back in between: its times moved")
        assert data.read_bytes()[100:106] == b"second"
        steps = len(ledger(task["id"]))

        # what every look trusts (the stat, the watches) says nothing happened
        status = json.loads(bar(capfd, "status", "--json").out)
        assert status["unrecorded_changes"] is False
        assert len(ledger(task["id"])) == steps

        code, said = _verify(capfd)
        assert code == 1
        assert said["matches"] is False
        assert said["differences"] == [
            {"path": "data.bin", "kind": "modified", "detail": "its bytes differ"}
        ]
        text = bar(capfd, "verify")
        assert text.code == 1
        assert "modified  data.bin" in text.out and "bar verify --record" in text.out
        assert len(ledger(task["id"])) == steps  # verify records nothing

        code, said = _verify(capfd, "--record")
        assert code == 0, said
        assert said["recorded_step"] == ledger(task["id"])[-1]["step_id"]
        assert said["after"]["matches"] is True  # type: ignore[index]
        assert ledger(task["id"])[-1]["kind"] == "manual"
        assert _verify(capfd)[0] == 0

        # the record holds the bytes: a rollback and its undo keep them
        assert bar(capfd, "rollback", "--to", "1").code == 0
        assert data.read_bytes() == b"a" * 8192
        assert bar(capfd, "undo").code == 0
        assert data.read_bytes()[:5] == b"first"
        assert data.read_bytes()[100:106] == b"second"
        assert _verify(capfd)[0] == 0
    finally:
        mapper.close()


def test_every_kind_of_difference_is_named(
    speed: str, repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    odd = os.fsencode(wt) + b"/caf\xe9.txt"
    run_sh(
        capfd,
        "mkdir -p deep/er/est d && echo one > deep/er/est/f.txt && echo two > d/x.txt && "
        "echo run > run.sh && ln -s run.sh link && printf 'a\\r\\nb\\r\\n' > crlf.txt && "
        "echo '*.log' > .gitignore && git init -q vendor && "
        "git -C vendor -c user.name=a -c user.email=a@a commit -q --allow-empty -m one && "
        "printf 'caf\\n' > \"$(printf 'caf\\351.txt')\"",
    )
    assert os.path.exists(odd)
    code, said = _verify(capfd)
    assert code == 0, said
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", ledger(task["id"])[-1]["snapshot"]],
        capture_output=True,
        check=True,
    ).stdout
    assert said["files"] == len(listed.splitlines())  # (the nested repository and the link too)

    # made by hand: no step recorded them yet
    (wt / "deep" / "er" / "est" / "f.txt").write_text("ONE\n")
    (wt / "d" / "x.txt").unlink()
    (wt / "d").rmdir()
    os.symlink("/tmp", wt / "d")  # a directory of the state is now a link
    os.chmod(wt / "run.sh", 0o755)
    (wt / "new.txt").write_text("new\n")
    (wt / "ignored.log").write_text("never recorded\n")
    os.unlink(wt / "link")
    (wt / "link").write_text("a file now\n")
    with open(odd, "wb") as f:
        f.write(b"CAF\n")
    who = ["-c", "user.name=a", "-c", "user.email=a@a"]
    subprocess.run(
        ["git", "-C", "vendor", *who, "commit", "-q", "--allow-empty", "-m", "two"], check=True
    )
    code, said = _verify(capfd)
    assert code == 1
    got = {(d["path"], d["kind"]) for d in said["differences"]}  # type: ignore[attr-defined]
    assert got == {
        ("deep/er/est/f.txt", "modified"),
        ("d/x.txt", "missing"),
        ("d", "extra"),
        ("run.sh", "mode"),
        ("new.txt", "extra"),
        ("link", "type"),
        ("caf\udce9.txt", "modified"),
        ("vendor", "modified"),
    }
    assert said["counts"] == {"modified": 3, "mode": 1, "type": 1, "missing": 1, "extra": 2}
    # an earlier state, named as everywhere else
    code, said = _verify(capfd, "--step", "base")
    assert code == 1 and said["state"] == "base"
    # --record: everything a look would see is recorded too; verify then agrees
    code, said = _verify(capfd, "--record")
    assert code == 0, said
    assert bar(capfd, "verify").code == 0
    assert "verified" in bar(capfd, "verify").out


def test_line_endings_git_converts_are_no_difference(
    speed: str, repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess.run(["git", "config", "core.autocrlf", "true"], cwd=repo, check=True)
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    monkeypatch.chdir(wt)
    run_sh(capfd, "printf 'a\\r\\nb\\r\\n' > crlf.txt; printf 'lf\\n' > lf.txt")
    assert _verify(capfd)[0] == 0
    # the switch is turned off: git would now store the CRLF files as they are, so the
    # look says there is something to record; the state's bytes are those git's checkout
    # wrote by the configuration it was recorded with (its raw parent names it), and the
    # worktree holds them exactly
    subprocess.run(["git", "config", "core.autocrlf", "false"], cwd=repo, check=True)
    assert _verify(capfd)[0] == 0
    status = json.loads(bar(capfd, "status", "--json").out)
    assert status["unrecorded_changes"] is True
    assert bar(capfd, "run", "--", "true").code == 0  # (recorded: CRLF blobs now)
    assert _verify(capfd)[0] == 0
    (wt / "crlf.txt").write_bytes(b"a\nb\n")  # (a real change of bytes is one)
    code, said = _verify(capfd)
    assert code == 1
    assert {d["path"] for d in said["differences"]} == {"crlf.txt"}  # type: ignore[attr-defined]


def test_record_refuses_another_state(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    init_clean(repo, capfd)
    task = new_task(capfd)
    monkeypatch.chdir(worktree(task))
    run_sh(capfd, "echo 1 > a.txt")
    res = bar(capfd, "verify", "--record", "--step", "base")
    assert res.code == 2
    assert "--record" in res.err and "hint:" in res.err


@pytest.mark.parametrize("speed", ["fast", "slow"])
def test_a_file_a_step_made_a_special_file_is_recorded_gone(
    speed: str, repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """git records no FIFO (nor socket, nor device): a recorded file a step swapped for one
    is recorded gone, not as it was, so the record and the disk agree (``bar verify``),
    and a rollback puts the FIFO in the trash."""
    if speed == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    init_clean(repo, capfd)
    task = new_task(capfd)
    monkeypatch.chdir(worktree(task))
    run_sh(capfd, "echo a > a && echo b > b")
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", "rm a && mkfifo a")
    assert res.code == 0 and "a: can only add regular files" in res.err
    assert ledger(task["id"])[-1]["diff_stat"]["file_list"] == ["a"]
    assert bar(capfd, "verify").code == 0
    assert bar(capfd, "rollback", "--to", "1").code == 0
    assert (worktree(task) / "a").read_text() == "a\n"
