"""Paging like git: on a terminal, log, show, diff and blame go through BAR_PAGER, PAGER
or less; never into a pipe or a file; --no-pager, -P and `cat` turn it off; a pager that
cannot start leaves the output as it was; colour goes through to it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import bar, bar_exe, run_sh
from ptys import on_terminal

# a pager that marks each line it shows, so the test can tell paged text from plain
MARKING = f"{sys.executable} -c \"import sys; [print('P|' + l, end='') for l in sys.stdin]\""


@pytest.fixture
def stepped(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    assert bar(capfd, "task", "new", "t1").code == 0
    run_sh(capfd, "printf 'one\\ntwo\\n' > notes.txt")
    run_sh(capfd, "echo three >> notes.txt")
    return repo


def paged_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("P|")]


@pytest.mark.parametrize(
    "args", [("log",), ("log", "-p"), ("show", "2"), ("diff",), ("blame", "notes.txt")]
)
def test_reading_commands_go_through_the_pager_on_a_terminal(
    stepped: Path, args: tuple[str, ...]
) -> None:
    shown = on_terminal(*args, cwd=stepped, env={"BAR_PAGER": MARKING})
    assert shown.code == 0, shown.text
    plain = bar_exe(*args, cwd=stepped)
    # every line the command prints reaches the terminal through the pager, in order
    assert [line[2:] for line in paged_lines(shown.text)] == plain.out.splitlines()
    assert plain.out and "P|" not in plain.out  # a pipe is never paged


def test_the_pager_is_chosen_like_git(stepped: Path) -> None:
    # BAR_PAGER wins over PAGER; PAGER is used without it; `cat` and "" mean no pager
    both = on_terminal("log", cwd=stepped, env={"BAR_PAGER": MARKING, "PAGER": "false"})
    assert paged_lines(both.text)
    only_pager = on_terminal("log", cwd=stepped, env={"PAGER": MARKING})
    assert paged_lines(only_pager.text)
    for off in ("cat", ""):
        plain = on_terminal("log", cwd=stepped, env={"BAR_PAGER": off, "PAGER": MARKING})
        assert plain.code == 0 and "0002" in plain.text and not paged_lines(plain.text)


@pytest.mark.parametrize("flag", ["--no-pager", "-P"])
def test_no_pager_prints_straight(stepped: Path, flag: str) -> None:
    shown = on_terminal(flag, "log", cwd=stepped, env={"BAR_PAGER": MARKING})
    assert shown.code == 0 and "0002" in shown.text and not paged_lines(shown.text)


def test_less_gets_frx_unless_less_is_set(stepped: Path) -> None:
    says = f"{sys.executable} -c \"import os, sys; sys.stdin.read(); print('LESS=' + os.environ['LESS'])\""
    assert "LESS=FRX" in on_terminal("log", cwd=stepped, env={"BAR_PAGER": says}).text
    mine = on_terminal("log", cwd=stepped, env={"BAR_PAGER": says, "LESS": "-S"})
    assert "LESS=-S" in mine.text


def test_a_pager_that_cannot_start_leaves_plain_output(stepped: Path) -> None:
    shown = on_terminal("log", cwd=stepped, env={"BAR_PAGER": "/nonexistent/pager -R"})
    assert shown.code == 0
    assert "0001" in shown.text and "0002" in shown.text


def test_a_pager_that_quits_early_is_not_an_error(
    stepped: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    for i in range(30):
        run_sh(capfd, f"echo {i} >> many.txt")
    shown = on_terminal("log", "-p", cwd=stepped, env={"BAR_PAGER": "head -n 1"})
    assert shown.code == 0, shown.text
    assert "Traceback" not in shown.text and "bar:" not in shown.text
    assert len(shown.text.strip().splitlines()) == 1


def test_colour_reaches_the_pager_and_json_is_not_paged(
    stepped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR")
    shown = on_terminal("log", cwd=stepped, env={"BAR_PAGER": MARKING})
    assert "\x1b[32mexit 0\x1b[0m" in "".join(paged_lines(shown.text))
    shown = on_terminal("diff", cwd=stepped, env={"BAR_PAGER": MARKING})
    assert "\x1b[" in "".join(paged_lines(shown.text))  # git's colours too
    as_json = on_terminal("log", "--json", cwd=stepped, env={"BAR_PAGER": MARKING})
    assert as_json.code == 0 and not paged_lines(as_json.text) and '"step_id"' in as_json.text
