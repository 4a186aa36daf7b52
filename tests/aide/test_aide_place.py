"""aide's files where aide's clients look (``bar.aide.place``): ``bar decide path``, the
copies in the worktree's ``.aide/`` kept in step with bar's own, never a change of a step
or of a hand edit in either speed mode, and ``bar decide clean`` (reference 003 §5.2)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, task_dir, worktree

from bar.errors import ExitCode
from conftest import git

QUESTION = {
    "task": "t",
    "source": "TASK.md",
    "items": [
        {
            "id": 1,
            "title": "which",
            "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
        }
    ],
}


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert bar(capfd, "init").code == 0
    return new_task(capfd)


def answer_as_the_web_server(wt: Path, choice: str) -> str:
    """What aide's web server does with the person's choice (reference 003 §3.2)."""
    folder = wt / ".aide" / "decisions"
    pending = json.loads((folder / "pending.json").read_text())
    sid = str(pending["_meta"]["session_id"])
    record = {
        "input": pending,
        "output": {"decisions": [{"id": 1, "chosen": choice}]},
        "completed_at": "2025-01-15T10:35:00+08:00",
    }
    (folder / f"{sid}.json.tmp").write_text(json.dumps(record, indent=2))
    os.replace(folder / f"{sid}.json.tmp", folder / f"{sid}.json")
    return sid


def test_decide_path_prints_where_aide_looks_and_the_copies_follow_bars_files(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    res = bar(capfd, "decide", "path")
    assert res.code == 0 and res.out == f"{wt / '.aide' / 'decisions'}\n"
    where = bar(capfd, "decide", "path", "--json").json()
    own = task_dir(task["id"])
    assert where == {
        "decisions": str(wt / ".aide" / "decisions"),
        "flow_status": str(wt / ".aide" / "flow-status.json"),
        "store": str(own / "decisions"),
    }
    assert bar(capfd, "flow", "start", "begin").code == 0
    sid = bar(capfd, "decide", "submit", json.dumps(QUESTION), "--json").json()["session_id"]
    assert bar(capfd, "decide", "answer", "--choose", "1=b").code == 0
    for name in ("pending.json", f"{sid}.json"):
        assert (wt / ".aide/decisions" / name).read_bytes() == (
            own / "decisions" / name
        ).read_bytes()
    assert (wt / ".aide/flow-status.json").read_bytes() == (own / "flow-status.json").read_bytes()
    assert not (wt / ".aide" / "flow-states.json").exists()  # (bar's own, never copied)
    # a worktree made again gets them all back
    for path in (wt / ".aide").rglob("*"):
        if path.is_file():
            path.unlink()
    assert bar(capfd, "decide", "path").code == 0
    assert (wt / ".aide/decisions" / f"{sid}.json").exists()
    assert (wt / ".aide/flow-status.json").exists()
    # no link is followed: a link in place of .aide gets no copy, and is said
    outside = wt.parent / "elsewhere"
    outside.mkdir()
    os.rename(wt / ".aide", wt / ".aide-moved")
    os.symlink(outside, wt / ".aide")
    res = bar(capfd, "decide", "path")
    assert res.code == ExitCode.USAGE and "not a directory of its own" in res.err
    assert bar(capfd, "decide", "submit", json.dumps(QUESTION)).code == 0
    assert list(outside.iterdir()) == []


def test_what_a_step_leaves_at_the_name_of_a_copys_new_file_neither_holds_nor_receives_it(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Where the step may write ``.aide`` (no mount namespace to show it read-only), it
    can leave a FIFO, whose open would wait for a reader, or a hard link to a file of
    the developer's, at the name bar writes a copy's new file under: bar removes what
    stands there and makes its own."""
    wt = worktree(task)
    assert bar(capfd, "decide", "path").code == 0
    outside = tmp_path / "developers-file"
    outside.write_text("theirs\n")
    here = os.getpid()  # (bar runs in this process: the name is ``.<name>.<pid>.tmp``)
    os.mkfifo(wt / ".aide" / "decisions" / f".pending.json.{here}.tmp")
    os.link(outside, wt / ".aide" / f".flow-status.json.{here}.tmp")

    def waited(signum: int, frame: object) -> None:
        raise AssertionError("bar's copy waited on what the step left")

    before = signal.signal(signal.SIGALRM, waited)
    signal.alarm(60)
    try:
        assert bar(capfd, "flow", "start", "begin").code == 0
        assert bar(capfd, "decide", "submit", json.dumps(QUESTION)).code == 0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    own = task_dir(task["id"])
    assert (wt / ".aide/decisions/pending.json").read_bytes() == (
        own / "decisions" / "pending.json"
    ).read_bytes()
    assert (wt / ".aide/flow-status.json").read_bytes() == (own / "flow-status.json").read_bytes()
    assert outside.read_text() == "theirs\n"


@pytest.mark.parametrize("fast", ["1", "0"])
def test_the_copies_are_never_a_change_of_a_step_or_of_a_hand_edit(
    task: dict[str, Any],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fast: str,
) -> None:
    monkeypatch.setenv("BAR_FAST", fast)
    wt = worktree(task)
    assert bar(capfd, "flow", "start", "begin").code == 0
    agent = f"{BAR_EXE} decide submit '{json.dumps(QUESTION)}' >/dev/null; echo work > work.txt"
    assert bar_exe("run", "--no-pty", "--", "sh", "-c", agent, cwd=wt).code == 0
    answer_as_the_web_server(wt, "b")
    res = bar(capfd, "decide", "result", "--json")
    if res.code == ExitCode.NOT_DECIDED:  # (the step ran unconfined: not the person's)
        assert "could have written it" in res.err
        assert bar(capfd, "decide", "answer", "--choose", "1=b").code == 0
    else:
        assert res.code == 0 and res.json()["decisions"][0]["chosen"] == "b"
    assert bar(capfd, "flow", "next-step", "more").code == 0
    # the user removes bar's .gitignore: the copies are still no change
    (wt / ".aide" / ".gitignore").unlink()
    assert bar(capfd, "flow", "next-step", "again").code == 0
    sid = bar(capfd, "decide", "submit", json.dumps(QUESTION), "--json").json()["session_id"]
    assert (wt / ".aide/decisions/pending.json").exists()
    time.sleep(0.2)
    assert bar(capfd, "status", "--json").json()["unrecorded_changes"] is False
    diff = bar(capfd, "diff", "--unrecorded", "--stat")
    assert diff.code == 0 and ".aide" not in diff.out
    assert bar_exe("run", "--no-pty", "--", "true", cwd=wt).code == 0
    steps = ledger(task["id"])
    assert [s["kind"] for s in steps] == ["run", "decision", "run"]  # no hand edit
    assert steps[0]["diff_stat"]["file_list"] == ["work.txt"]
    assert (wt / ".aide" / ".gitignore").exists()  # (written again by the step's start)
    head = git(wt, "rev-parse", "HEAD").strip()
    assert bar(capfd, "rollback", "--to", "base").code == 0
    assert not (wt / "work.txt").exists() and (wt / ".aide/decisions/pending.json").exists()
    assert git(wt, "rev-parse", "HEAD").strip() == head
    recorded = git(wt, "ls-tree", "-r", "--name-only", ledger(task["id"])[-1]["snapshot"])
    assert ".aide" not in recorded
    assert (
        json.loads((wt / ".aide/decisions/pending.json").read_text())["_meta"]["session_id"] == sid
    )


def test_decide_clean_removes_old_records_keeps_the_latest_and_records_what_it_removed(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    own = task_dir(task["id"]) / "decisions"
    sids = []
    for choice in ("a", "b", "a"):
        sids.append(
            bar(capfd, "decide", "submit", json.dumps(QUESTION), "--json").json()["session_id"]
        )
        assert bar(capfd, "decide", "answer", "--choose", f"1={choice}").code == 0
    latest = bar(capfd, "decide", "submit", json.dumps(QUESTION), "--json").json()["session_id"]
    assert len(set(sids)) == 3 and latest not in sids
    dry = bar(capfd, "decide", "clean", "--keep", "1", "--dry-run", "--json").json()
    assert dry == {
        "removed": sids[:2],
        "kept": sids[2:],
        "step": None,
        "queued": False,
        "dry_run": True,
    }
    said = bar(capfd, "decide", "clean", "--keep", "1", "--dry-run")
    assert said.code == 0 and said.out.startswith("Would remove 2 answered decisions: ")
    assert len(list(own.glob("2*.json"))) == 3 and len(ledger(task["id"])) == 3
    # the days: all answered just now, so none is old enough
    assert bar(capfd, "decide", "clean", "--days", "1", "--json").json()["removed"] == []
    assert len(ledger(task["id"])) == 3  # (nothing removed: nothing recorded)
    done = bar(capfd, "decide", "clean", "--keep", "1", "--json").json()
    assert done["removed"] == sids[:2] and done["kept"] == [sids[2]] and not done["dry_run"]
    step = done["step"]
    assert step["kind"] == "decision" and step["cleaned"] == sids[:2] and step["session_id"] == ""
    kept = json.loads((task_dir(task["id"]) / step["artifacts"]["cleaned"]).read_text())
    assert sorted(kept["records"]) == sids[:2]
    assert kept["records"][sids[0]]["output"] == {"decisions": [{"id": 1, "chosen": "a"}]}
    for sid in sids[:2]:
        assert not (own / f"{sid}.json").exists()
        assert not (wt / ".aide/decisions" / f"{sid}.json").exists()
    assert (own / "pending.json").exists() and (wt / ".aide/decisions/pending.json").exists()
    assert [a["session_id"] for a in bar(capfd, "decide", "list", "--json").json()["answered"]] == [
        sids[2]
    ]
    assert bar(capfd, "decide", "show", sids[0]).code == ExitCode.NOT_FOUND
    assert bar(capfd, "show", step["step_id"]).code == 0
    # without --keep: every record but the latest submission's
    assert bar(capfd, "decide", "answer", "--choose", "1=b").code == 0
    done = bar(capfd, "decide", "clean", "--json").json()
    assert done["removed"] == [sids[2]] and done["kept"] == [latest]
    assert bar(capfd, "decide", "result", "--json").json() == {
        "decisions": [{"id": 1, "chosen": "b"}]
    }
    bad = bar(capfd, "decide", "clean", "--keep", "-1")
    assert bad.code == ExitCode.USAGE and "--keep" in bad.err
    assert bar_exe("decide", "clean", "--help").out.count("bar decide clean") >= 2


def test_decide_clean_is_refused_to_a_process_of_the_running_step(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "decide", "submit", json.dumps(QUESTION)).code == 0
    assert bar(capfd, "decide", "answer", "--choose", "1=a").code == 0
    assert bar(capfd, "decide", "submit", json.dumps(QUESTION)).code == 0
    ran = bar_exe("run", "--no-pty", "--", BAR_EXE, "decide", "clean", cwd=wt)
    assert ran.code == ExitCode.USAGE and "for the developer" in ran.err
    assert [a for a in bar(capfd, "decide", "list", "--json").json()["answered"]]


def test_an_answer_written_into_bars_own_directory_becomes_a_decision_step_when_read(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    """A client pointed at the task directory, as aide's web server writes (reference 003
    §3.2): read by ``bar decide result``, and recorded then, once."""
    sid = bar(capfd, "decide", "submit", json.dumps(QUESTION), "--json").json()["session_id"]
    own = task_dir(task["id"]) / "decisions"
    pending = json.loads((own / "pending.json").read_text())
    record = {
        "input": {k: v for k, v in pending.items() if k != "_meta"},
        "output": {"decisions": [{"id": 1, "chosen": "a", "note": "from the page"}]},
        "completed_at": "2025-01-15T10:35:00+08:00",
    }
    (own / f"{sid}.json").write_text(json.dumps(record, indent=2))
    assert bar(capfd, "decide", "result", "--json").json()["decisions"][0]["chosen"] == "a"
    assert bar(capfd, "decide", "list", "--json").json()["pending"] is None
    (step,) = [s for s in ledger(task["id"]) if s["kind"] == "decision"]
    assert step["via"] == "file" and step["session_id"] == sid
    assert step["decisions"] == [{"id": 1, "chosen": "a", "note": "from the page"}]
    assert bar(capfd, "decide", "show", "--json").json()["completed_at"] == record["completed_at"]
    assert len([s for s in ledger(task["id"]) if s["kind"] == "decision"]) == 1
    # one that answers nothing asked is said, not taken
    sid = bar(capfd, "decide", "submit", json.dumps(QUESTION), "--json").json()["session_id"]
    wrong = {**record, "output": {"decisions": [{"id": 1, "chosen": "zzz"}]}}
    (worktree(task) / ".aide/decisions" / f"{sid}.json").write_text(json.dumps(wrong))
    said = bar(capfd, "decide", "result")
    assert said.code == ExitCode.NOT_DECIDED and "not one of its options" in said.err
    assert len([s for s in ledger(task["id"]) if s["kind"] == "decision"]) == 1
