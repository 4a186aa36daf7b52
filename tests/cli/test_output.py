"""What bar prints: log's columns, colour and its switches, JSON that carries what the
text shows, and the one-line reports of run and show."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, bar_exe, ledger, new_task, run_sh, set_config, task_dir
from ptys import on_terminal

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def visible(text: str) -> str:
    return ESCAPE.sub("", text)


def column_starts(line: str, cmd: str) -> tuple[int, ...]:
    """Where a log line's outcome, changes and command begin (its duration ends two
    columns before its command)."""
    text = visible(line)
    outcome = re.search(r"exit|blocked|interrupted|stopped", text)
    stat = re.search(r"no changes|[0-9]+ files? ", text)
    assert outcome and stat, text
    return outcome.start(), stat.start(), text.index(cmd)


# --- bar log's columns -----------------------------------------------------------------


def mixed_log(capfd: pytest.CaptureFixture[str]) -> None:
    """Steps whose outcomes have every width: exit 0, exit 143, blocked, interrupted."""
    run_sh(capfd, "echo a > a.txt")
    assert bar(capfd, "run", "--", "sh", "-c", "exit 143").code == 143
    assert bar(capfd, "run", "--", "rm", "-rf", "/").code == 126
    long = "echo " + "x" * 150
    run_sh(capfd, long)


def test_log_columns_line_up_in_colour_and_without(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    t = new_task(capfd)
    mixed_log(capfd)
    # an interrupted step: what a crashed bar leaves, as the ledger has it
    path = task_dir(t["id"]) / "ledger.jsonl"
    rec = ledger(t["id"])[0]
    rec.update(step_id="0005", exit_code=None, interrupted=True)
    with path.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")
    plain = bar(capfd, "log").out.splitlines()
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR")
    painted = bar(capfd, "log").out.splitlines()
    assert any("\x1b[" in line for line in painted)
    assert [visible(line) for line in painted] == plain
    cmds = [shlex.join(s["cmd"]) for s in ledger(t["id"])]
    starts = {column_starts(line, cmd) for line, cmd in zip(painted, cmds, strict=True)}
    assert len(starts) == 1, plain  # every column starts at the same place on every line
    assert "interrupted  " in plain[4] and "exit 143  " in plain[1]
    # not a terminal: the command is never cut
    assert plain[3].endswith("echo " + "x" * 150 + "'")


def test_log_fills_the_terminal_and_cuts_only_there(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    mixed_log(capfd)
    for width in (60, 132):
        shown = on_terminal("--no-pager", "log", cwd=inited, columns=width)
        lines = shown.text.splitlines()
        assert shown.code == 0 and len(lines) == 4, shown.text
        assert all(len(visible(line)) <= width for line in lines)
        assert len(visible(lines[3])) == width and lines[3].endswith("...")
        if width > 100:
            assert lines[0].endswith("echo a > a.txt'")  # what fits is not cut
    # through the pager, or into a pipe: whole
    paged = on_terminal("log", cwd=inited, columns=60, env={"BAR_PAGER": "cat -u"})
    assert ("x" * 150) in paged.text
    assert ("x" * 150) in bar_exe("log", cwd=inited).out


def test_log_n_0_prints_nothing(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    res = bar(capfd, "log", "-n", "0")
    assert res.code == 0 and res.out == ""
    run_sh(capfd, "true")
    res = bar(capfd, "log", "-n", "0")
    assert res.code == 0 and res.out == "" and bar(capfd, "log", "-n", "0", "--json").json() == []
    assert "no steps yet" in bar(capfd, "task", "new", "t2").out + bar(capfd, "log").out


# --- colour ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "env", "config", "coloured"),
    [
        (None, {}, True, False),  # not a terminal
        (None, {"FORCE_COLOR": "1"}, True, True),
        (None, {"FORCE_COLOR": "0"}, True, False),
        (None, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False),  # NO_COLOR first
        (None, {"FORCE_COLOR": "1", "NO_COLOR": ""}, True, True),  # empty: not set
        (None, {"FORCE_COLOR": "1"}, False, True),  # the environment over the config
        ("always", {"NO_COLOR": "1"}, False, True),  # the flag over everything
        ("never", {"FORCE_COLOR": "1"}, True, False),
        ("auto", {"FORCE_COLOR": "1"}, True, True),
    ],
)
def test_colour_precedence(
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    env: dict[str, str],
    config: bool,
    coloured: bool,
) -> None:
    new_task(capfd)
    run_sh(capfd, "echo a > a.txt")
    set_config(output={"color": config})
    monkeypatch.delenv("NO_COLOR")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = (["--color", flag] if flag else []) + ["log"]
    res = bar(capfd, *args)
    assert res.code == 0 and ("\x1b[" in res.out) == coloured
    res = bar(capfd, *args[:-1], "diff")
    assert ("\x1b[" in res.out) == coloured


def test_colour_on_a_terminal_follows_the_config_and_no_color(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new_task(capfd)
    run_sh(capfd, "echo a > a.txt")
    monkeypatch.delenv("NO_COLOR")
    assert "\x1b[32mexit 0" in on_terminal("-P", "log", cwd=inited).text
    assert "\x1b[" not in on_terminal("-P", "log", cwd=inited, env={"NO_COLOR": "1"}).text
    set_config(output={"color": False})
    assert "\x1b[" not in on_terminal("-P", "log", cwd=inited).text
    assert "\x1b[" in on_terminal("--color=always", "-P", "log", cwd=inited).text


def test_a_bad_color_value_is_a_usage_error(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    res = bar(capfd, "--color", "sometimes", "log")
    assert res.code == 2 and "sometimes" in res.err


# --- what run, show and log report -----------------------------------------------------


def test_a_blocked_run_says_recorded_once(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    new_task(capfd)
    res = bar(capfd, "run", "--", "rm", "-rf", "/")
    assert res.code == 126
    assert res.err.count("recorded") == 1 and "file(s)" not in res.err


def test_show_names_no_rule_without_none(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    run_sh(capfd, "true")
    # an inner command no rule matched, as bar hook records it
    path = task_dir(t["id"]) / "ledger.jsonl"
    rec = ledger(t["id"])[0]
    rec["policy_events"] = [
        {"rule": None, "action": "allow", "matched": "ls -la", "source": "hook:claude"}
    ]
    path.write_text(json.dumps(rec) + "\n")
    out = bar(capfd, "show", "1").out
    assert "policy    allow (no rule): ls -la [hook:claude]" in out
    assert "None" not in out


def json_of(res: Any) -> Any:
    assert res.code == 0, res.err
    return res.json()


def test_json_names_the_directory_of_the_artifacts_and_log_p_has_patches(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run_sh(capfd, "echo hello > a.txt; echo printed")
    run_sh(capfd, "true")
    steps = json_of(bar(capfd, "log", "-p", "--json"))
    shown = json_of(bar(capfd, "show", "1", "--json"))
    assert steps[0]["patch_text"] == shown["patch_text"] and "+hello" in shown["patch_text"]
    assert steps[1]["patch_text"] is None  # no change, no patch
    assert "patch_text" not in json_of(bar(capfd, "log", "--json"))[0]
    for rec in (steps[0], shown):
        assert rec["task_dir"] == str(task_dir(t["id"]))
        assert rec["artifacts"]["patch"] == "artifacts/0001.patch"  # still relative (docs/json.md)
        patch = Path(rec["task_dir"]) / rec["artifacts"]["patch"]
        assert patch.read_text() == shown["patch_text"]
        assert (Path(rec["task_dir"]) / rec["artifacts"]["output"]).read_text() == (
            shown["output_text"]
        )


def test_run_json_keeps_the_commands_output_on_stderr(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    script = "echo to-stdout; echo to-stderr >&2; echo x > f"
    res = bar_exe("run", "--json", "--", "sh", "-c", script, cwd=inited)
    assert res.code == 0, res.err
    step = json.loads(res.out)  # stdout is the record and nothing else
    assert step["step_id"] == "0001" and step["task_dir"] == str(task_dir(t["id"]))
    assert "to-stdout" in res.err and "to-stderr" in res.err
    output = (task_dir(t["id"]) / step["artifacts"]["output"]).read_text()
    assert output == "=== STDOUT ===\nto-stdout\n=== STDERR ===\nto-stderr\n"
    # on a terminal too
    shown = on_terminal("run", "--json", "--", "sh", "-c", "echo live", cwd=inited, pipe="stdout")
    assert shown.code == 0 and "live" in shown.text
    assert json.loads(shown.piped)["step_id"] == "0002"


def test_a_file_name_a_step_chose_reaches_no_terminal_as_an_escape_sequence(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A step names its files as it likes, escape sequences included (a window title set,
    the screen cleared): ``bar show``'s files line and bar's warnings write their control
    characters as ``\\x1b``, never as they are."""
    new_task(capfd)
    name = "e2\x1b]0;TITLE\x07\x1b[2Jred"
    run_sh(capfd, f"printf y > '{name}'")
    shown = bar(capfd, "show", "1")
    assert "\x1b" not in shown.out and "\x07" not in shown.out
    assert "e2\\x1b]0;TITLE\\x07\\x1b[2Jred" in shown.out
    from bar.base.notices import warn

    warn(f"cannot read {name}")
    said = capfd.readouterr().err
    assert "\x1b" not in said and "cannot read e2\\x1b]0;TITLE\\x07" in said
