"""What bar run says when a step does not go as planned: the cause named, the remedy
that fits it (chmod +x is not --no-sandbox), a block said as a block, counts in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bar, new_task, worktree


@pytest.mark.parametrize("sandbox", [(), ("--no-sandbox",)])
def test_a_script_without_its_execute_bit_is_said_to_be_one(
    inited: Path, capfd: pytest.CaptureFixture[str], sandbox: tuple[str, ...]
) -> None:
    t = new_task(capfd)
    script = worktree(t) / "hello.py"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o644)
    res = bar(capfd, "run", "--no-pty", *sandbox, "--", "./hello.py")
    assert res.code == 126
    assert "bar: ./hello.py is not executable (chmod +x, or run it with its interpreter)\n" in (
        res.err
    )
    assert "sandbox.allow_write" not in res.err and "--no-sandbox" not in res.err
    # the remedy it gives is the one that works
    script.chmod(0o755)
    res = bar(capfd, "run", "--no-pty", *sandbox, "--", "./hello.py")
    assert res.code == 0 and res.out == "hello\n"


def test_a_directory_is_not_a_program(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    (worktree(t) / "tools").mkdir()
    res = bar(capfd, "run", "--no-pty", "--", "./tools")
    assert res.code == 126
    assert "bar: ./tools is a directory, not a program\n" in res.err
    assert "sandbox.allow_write" not in res.err


def test_a_command_that_exits_126_itself_gets_no_such_hint(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    res = bar(capfd, "run", "--no-pty", "--", "sh", "-c", "exit 126")
    assert res.code == 126 and "not executable" not in res.err


def test_a_policy_block_reads_as_a_block(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    res = bar(capfd, "run", "--", "rm", "-rf", "/")
    assert res.code == 126
    first = res.err.splitlines()[0]
    assert first.startswith("bar: blocked by rule rm-recursive-root-or-home: ")
    assert "warning" not in res.err


def test_counts_are_said_in_words(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    (worktree(t) / "one.txt").write_text("1\n")
    res = bar(capfd, "run", "--", "true")
    assert "recorded step 0001 (manual): 1 file changed outside bar" in res.err
    (worktree(t) / "two.txt").write_text("2\n")
    (worktree(t) / "three.txt").write_text("3\n")
    res = bar(capfd, "run", "--", "true")
    assert "(manual): 2 files changed outside bar" in res.err
