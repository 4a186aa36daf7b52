"""Reading the record: bar log, show, diff and status, and how they treat damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bar, new_task, project_dir, task_dir, worktree
from ptys import on_terminal

# --- init ----------------------------------------------------------------------------


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    # Policy is exercised in its own tests; keep the core loop independent of it.
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text().replace("enabled: true", "enabled: false"))
    return repo


def test_log_show_diff_status(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    for i in range(5):
        assert bar(capfd, "run", "--", "sh", "-c", f"echo {i} >> log.txt; echo step{i}").code == 0
    res = bar(capfd, "log", "-n", "2", "--json")
    assert [s["step_id"] for s in res.json()] == ["0004", "0005"]
    human = bar(capfd, "log").out
    assert human.count("\n") == 5 and "exit 0" in human
    assert "+4" in bar(capfd, "log", "-p").out or "@@" in bar(capfd, "log", "-p").out
    shown = bar(capfd, "show", "3")
    assert shown.code == 0 and "step2" in shown.out and "+2" in shown.out
    js = bar(capfd, "show", "0003", "--json").json()
    assert js["output_text"] == "=== STDOUT ===\nstep2\n=== STDERR ===\n"
    assert bar(capfd, "show", "99").code == 3
    d = bar(capfd, "diff", "--from", "2", "--to", "4", "--json").json()
    assert d["diff_stat"]["additions"] == 2
    assert "+3" in bar(capfd, "diff").out
    assert "log.txt" in bar(capfd, "diff", "--stat").out
    st = bar(capfd, "status", "--json").json()
    assert st["task"]["id"] == t["id"] and st["unrecorded_changes"] is False
    (worktree(t) / "x").write_text("x")
    st = bar(capfd, "status", "--json").json()
    assert st["unrecorded_changes"] is True
    assert "no step recorded" in bar(capfd, "status").out


def test_log_reads_only_the_tail(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    path = task_dir(t["id"]) / "ledger.jsonl"
    line = path.read_text().splitlines()[0]
    # a huge ledger whose early part is garbage: reading the tail must not touch it
    rec = json.loads(line)
    lines = ["not json at all"] * 50_000
    for i in range(2, 30):
        rec["step_id"] = f"{i:04d}"
        lines.append(json.dumps(rec))
    path.write_text(line + "\n" + "\n".join(lines) + "\n")
    res = bar(capfd, "log", "-n", "3", "--json")
    assert res.code == 0
    assert [s["step_id"] for s in res.json()] == ["0027", "0028", "0029"]
    assert "skipping" not in res.err


def test_the_full_log_from_kept_rows_is_the_log_of_the_ledger_as_it_is(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "sh", "-c", "echo a > a").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "exit 3").code == 3
    (worktree(t) / "sub").mkdir()
    assert bar(capfd, "run", "--cwd", "sub", "--", "true").code == 0
    assert bar(capfd, "rollback", "--to", "1").code == 0
    first = bar(capfd, "log").out
    kept = task_dir(t["id"]) / "ledger.log.rows"
    assert kept.exists()
    assert bar(capfd, "log").out == first  # from the kept rows
    assert "exit 3" in first and "(in sub)" in first and "rollback to step 0001" in first
    # a hand edit of the ledger, of the same length: the log shows the ledger's words
    ledger = task_dir(t["id"]) / "ledger.jsonl"
    data = ledger.read_bytes()
    ledger.write_bytes(
        data.replace(b'"exit 3"', b'"exit 4"').replace(b'exit_code":3', b'exit_code":4')
    )
    edited = bar(capfd, "log").out
    assert "exit 4" in edited and "exit 3" not in edited
    kept.unlink()
    assert bar(capfd, "log").out == edited


def test_torn_ledger_line_is_skipped_and_numbering_continues(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    path = task_dir(t["id"]) / "ledger.jsonl"
    with path.open("ab") as fh:
        fh.write(b'{"step_id":"0002","kind":"ru')  # a crash mid-write
    res = bar(capfd, "run", "--", "true")
    assert res.code == 0
    res = bar(capfd, "log", "--json")
    assert [s["step_id"] for s in res.json()] == ["0001", "0002"]
    assert "skipping line 2" in res.err


def test_unknown_versions_are_clear_errors(inited: Path, capfd: pytest.CaptureFixture[str]) -> None:
    t = new_task(capfd)
    path = task_dir(t["id"]) / "task.json"
    rec = json.loads(path.read_text())
    rec["version"] = 7
    path.write_text(json.dumps(rec))
    res = bar(capfd, "task", "show", t["id"])
    assert res.code == 8
    assert f"unsupported task.json version 7 in {path}" in res.err


def test_unknown_config_key_names_key_and_file(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cfg = project_dir() / "config.yaml"
    cfg.write_text(cfg.read_text() + "colour: blue\n")
    res = bar(capfd, "task", "list")
    assert res.code == 8 and "'colour'" in res.err and str(cfg) in res.err
    cfg.write_text(
        cfg.read_text()
        .replace("colour: blue\n", "")
        .replace("verbose: false", "verbose: false\n  loud: true")
    )
    res = bar(capfd, "task", "list")
    assert res.code == 8 and "output.loud" in res.err


def test_a_command_with_line_breaks_is_one_line_of_the_log(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo one\necho\ttwo").code == 0
    lines = bar(capfd, "log").out.splitlines()
    assert len(lines) == 1 and "echo one\\necho\\ttwo" in lines[0]


def test_log_and_show_say_where_a_step_ran_when_not_at_the_root(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step runs in the directory you stand in inside the task's worktree (anywhere else,
    the checkout included: its root), or in ``--cwd DIR`` of the worktree; ``bar log``
    says so after the command, even when it cuts the command at the terminal's edge."""
    t = new_task(capfd)
    wt = worktree(t)
    (inited / "docs").mkdir()  # in the checkout only: where you stand there does not count
    assert bar(capfd, "run", "--", "sh", "-c", "mkdir -p src/pkg docs; pwd > root.txt").code == 0
    monkeypatch.chdir(wt / "src" / "pkg")
    assert bar(capfd, "run", "--", "sh", "-c", "pwd > here.txt").code == 0
    monkeypatch.chdir(inited / "docs")
    assert bar(capfd, "run", "--cwd", "src", "--", "sh", "-c", "pwd > here.txt").code == 0
    assert bar(capfd, "run", "--", "sh", "-c", "pwd > from-docs.txt").code == 0
    assert (wt / "src" / "pkg" / "here.txt").read_text().strip() == str(wt / "src" / "pkg")
    assert (wt / "src" / "here.txt").read_text().strip() == str(wt / "src")
    assert (wt / "from-docs.txt").read_text().strip() == str(wt)  # not docs/

    assert [s["cwd"] for s in bar(capfd, "log", "--json").json()] == [".", "src/pkg", "src", "."]
    lines = bar(capfd, "log").out.splitlines()
    assert len(lines) == 4
    assert "(in " not in lines[0] and "(in " not in lines[3]
    assert lines[1].endswith("sh -c 'pwd > here.txt'  (in src/pkg)")
    assert lines[2].endswith("(in src)")
    assert "  cwd       src/pkg\n" in bar(capfd, "show", "2").out
    assert bar(capfd, "show", "2", "--json").json()["cwd"] == "src/pkg"

    long = "echo " + "x" * 150
    monkeypatch.chdir(wt / "src" / "pkg")
    assert bar(capfd, "run", "--", "sh", "-c", long).code == 0
    shown = on_terminal("--no-pager", "log", "-n", "1", cwd=inited, columns=80)
    line = shown.text.strip()
    assert shown.code == 0 and len(line) <= 80, shown.text
    assert "..." in line and line.endswith("(in src/pkg)")


def test_show_names_the_first_files_of_a_large_step_and_how_many_more(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A step changing hundreds of files is shown on a screen, not as one line of every
    path: the first twenty, the count of the rest, and where to find them all."""
    new_task(capfd)
    assert (
        bar(capfd, "run", "--", "sh", "-c", "for i in $(seq 100 349); do : > f$i; done").code == 0
    )
    (line,) = [x for x in bar(capfd, "show", "1").out.splitlines() if x.startswith("  files")]
    assert line.startswith("  files     f100, f101,") and "f119, and 230 more" in line
    assert "f120" not in line and "`bar show 0001 --json` lists them all" in line
    assert len(bar(capfd, "show", "1", "--json").json()["diff_stat"]["file_list"]) == 250
    assert bar(capfd, "run", "--", "sh", "-c", "echo x > f100 && echo y > f101").code == 0
    assert "  files     f100, f101\n" in bar(capfd, "show", "2").out
