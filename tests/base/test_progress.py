"""Progress of long operations: on stderr when it is a terminal, rewritten in place and
cleared at the end; nothing in a pipe, a file, or with --json."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import init_clean, new_task, run_sh
from ptys import on_terminal

CLEAR = "\r\x1b[K"


@pytest.fixture
def three_tasks(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    init_clean(repo, capfd)
    for name in ("fix-login", "add-cart", "docs"):
        new_task(capfd, name)
        run_sh(capfd, f"echo {name} > {name}.txt")
    return repo


def test_doctor_says_which_task_it_checks(three_tasks: Path) -> None:
    shown = on_terminal("doctor", cwd=three_tasks, pipe="stdout")
    assert shown.code == 0, shown.text
    assert "everything checks out" in shown.piped.decode()
    err = shown.screen.decode()
    assert "doctor: checking task 1/3 " in err
    assert any(f"1/3 {name}" in err for name in ("fix-login", "add-cart", "docs"))
    assert err.endswith(CLEAR)  # nothing of it is left on the screen


def test_no_progress_off_a_terminal_or_with_json(three_tasks: Path) -> None:
    piped = on_terminal("doctor", cwd=three_tasks, pipe="stderr")
    assert piped.code == 0 and piped.piped == b""  # stderr not a terminal: nothing
    assert "checking task" not in piped.text
    as_json = on_terminal("doctor", "--json", cwd=three_tasks)
    assert as_json.code == 0 and "checking task" not in as_json.text and CLEAR not in as_json.text


def test_apply_and_close_say_what_they_are_doing(three_tasks: Path) -> None:
    shown = on_terminal("apply", "--task", "docs", cwd=three_tasks, pipe="stdout")
    assert shown.code == 0, shown.text
    err = shown.screen.decode()
    assert "apply: merging the task's work onto main" in err
    assert "apply: writing 1 file into" in err and err.endswith(CLEAR)
    assert "Applied task docs" in shown.piped.decode()
    shown = on_terminal("task", "close", "fix-login", cwd=three_tasks, pipe="stdout")
    assert shown.code == 0, shown.text
    err = shown.screen.decode()
    assert "task close: removing the worktree" in err and err.endswith(CLEAR)
    assert "Closed task fix-login" in shown.piped.decode()
