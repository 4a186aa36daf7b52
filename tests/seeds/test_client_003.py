"""Reference 003 (aide decide's storage): a client written from that document alone
(``client_003``) works against the files a real bar session made, through the real
``bar`` commands in a real repository: it finds ``.aide/decisions/`` from the worktree,
reads the pending questions, answers them as aide's web server does, and reads the
answer back; bar takes that answer as the person's (a ``decision`` step, ``via: file``)
only when no step could have written it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import client_003
import pytest
from client_003 import DecideStorage, find_root
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, worktree

from bar.errors import ExitCode

SEEDS = Path(__file__).resolve().parent

QUESTIONS = {
    "task": "实现用户认证模块",
    "source": "task-now.md",
    "items": [
        {
            "id": 1,
            "title": "认证方式选择",
            "location": {"file": "task-now.md", "start": 5, "end": 7},
            "options": [
                {"value": "jwt", "label": "JWT Token 认证", "score": 85, "pros": ["无状态"]},
                {"value": "session", "label": "Session 认证", "score": 70},
            ],
            "recommend": "jwt",
        },
        {
            "id": 2,
            "title": "密码加密算法",
            "options": [
                {"value": "bcrypt", "label": "bcrypt"},
                {"value": "argon2", "label": "Argon2"},
            ],
        },
    ],
}
ANSWER = {
    "decisions": [
        {"id": 1, "chosen": "jwt"},
        {"id": 2, "chosen": "bcrypt", "note": "团队更熟悉 bcrypt"},
    ]
}


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert bar(capfd, "init").code == 0
    return new_task(capfd)


def aide_read_only() -> bool:
    """Whether this kernel lets a step see the worktree's ``.aide/`` read-only (a mount
    namespace of its own), so that an answer written during a step can be the person's."""
    box = bar_exe("status", "--json").json()["sandbox"]
    return bool(box["enabled"]) and box["objects"] == "quarantine"


def decisions_of(task_id: str) -> list[dict[str, Any]]:
    return [s for s in ledger(task_id) if s["kind"] == "decision"]


def test_the_agent_asks_inside_its_step_and_the_web_server_answers(
    task: dict[str, Any], tmp_path: Path
) -> None:
    wt = worktree(task)
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(QUESTIONS, ensure_ascii=False))
    agent = (
        f"{BAR_EXE} decide submit @{questions} --wait --timeout 60 > answer.json; echo $?; "
        f"{BAR_EXE} decide result --json > result.json"
    )
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--", "sh", "-c", agent],
        cwd=wt,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    read_only = aide_read_only()
    try:
        # aide's web page, started in the project once the agent asked: it finds
        # .aide/ from where it stands
        deadline = time.monotonic() + 60
        while not (wt / ".aide" / "decisions" / "pending.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
            time.sleep(0.05)
        storage = DecideStorage(find_root(wt))
        asked = storage.load_pending()
        assert asked is not None
        storage.check_pending(asked)
        assert {k: v for k, v in asked.items() if k != "_meta"} == QUESTIONS
        assert not storage.has_result()
        storage.save_result(ANSWER)  # the person chose on the page
        if not read_only:
            # the step could have written it: not the person's; they answer through bar
            said = bar_exe("decide", "result", cwd=wt)
            assert said.code == ExitCode.NOT_DECIDED and "could have written it" in said.err
            done = bar_exe(
                "decide", "answer", "--choose", "1=jwt", "--choose", "2=bcrypt",
                "--note", "2=团队更熟悉 bcrypt", cwd=wt,
            )  # fmt: skip
            assert done.code == 0, done.err
    finally:
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0 and out.strip().endswith(b"0"), err
    assert json.loads((wt / "answer.json").read_text()) == ANSWER
    assert json.loads((wt / "result.json").read_text()) == ANSWER
    # the document's own `aide decide result` reads the same answer
    assert storage.result() == ANSWER["decisions"]
    (sid,) = storage.history()
    record = json.loads((storage.decisions_dir / f"{sid}.json").read_text())
    storage.check_record(record)
    (step,) = decisions_of(task["id"])
    assert step["session_id"] == sid and step["decisions"] == ANSWER["decisions"]
    run = ledger(task["id"])[0]
    assert run["kind"] == "run"
    if read_only:
        assert step.get("via") == "file"
        assert str(wt / ".aide") in run["sandbox"]["read_only"]
    # bar's copies are bookkeeping: the step changed only what the agent wrote
    assert run["diff_stat"]["file_list"] == ["answer.json", "result.json"]
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=wt, capture_output=True, text=True, check=True
    ).stdout
    assert ".aide" not in status


def test_an_answer_written_while_no_step_runs_is_taken_when_read(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "decide", "submit", json.dumps(QUESTIONS, ensure_ascii=False)).code == 0
    where = bar(capfd, "decide", "path").out.strip()
    assert where == str(wt / ".aide" / "decisions")
    storage = DecideStorage(find_root(wt))
    assert storage.decisions_dir == Path(where)
    with pytest.raises(client_003.DecideError, match="尚无决策结果"):
        storage.result()
    storage.save_result(ANSWER)
    assert bar(capfd, "decide", "result", "--json").json() == ANSWER
    (step,) = decisions_of(task["id"])
    assert step["via"] == "file" and step["decisions"] == ANSWER["decisions"]
    assert storage.result() == ANSWER["decisions"]
    # read again: recorded once
    assert bar(capfd, "decide", "result", "--json").json() == ANSWER
    assert len(decisions_of(task["id"])) == 1
    # the next question, and its pending.json, as the document keeps it (§5.1)
    assert bar(capfd, "decide", "submit", json.dumps(QUESTIONS, ensure_ascii=False)).code == 0
    assert storage.has_pending() and not storage.has_result()
    with pytest.raises(client_003.DecideError, match="尚无决策结果"):
        storage.result()
    assert len(storage.history()) == 1


def test_an_answer_a_step_could_have_written_is_never_the_persons(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "decide", "submit", json.dumps(QUESTIONS, ensure_ascii=False)).code == 0
    storage = DecideStorage(find_root(wt))
    forged = (
        f"import sys; sys.path.insert(0, {str(SEEDS)!r}); from pathlib import Path; "
        "from client_003 import DecideStorage; "
        f"DecideStorage(Path.cwd()).save_result({ANSWER!r})"
    )
    if aide_read_only():
        # a confined step sees .aide/ read-only: it cannot write the answer at all
        ran = bar_exe("run", "--no-pty", "--", sys.executable, "-c", forged, cwd=wt)
        assert ran.code != 0 and "Read-only file system" in ran.err
        assert not storage.has_result()
    # unconfined, it can: bar does not take what it wrote as the person's
    ran = bar_exe("run", "--no-pty", "--no-sandbox", "--", sys.executable, "-c", forged, cwd=wt)
    assert ran.code == 0, ran.err
    assert storage.has_result()  # (aide's own client would believe it)
    said = bar(capfd, "decide", "result")
    assert said.code == ExitCode.NOT_DECIDED and "could have written it" in said.err
    assert decisions_of(task["id"]) == []
    doctor = bar(capfd, "doctor", "--json").json()
    (finding,) = [f for f in doctor["findings"] if "could have written it" in f["message"]]
    assert finding["severity"] == "warning" and not finding["repairable"]
    assert bar(capfd, "doctor", "--repair").code == 0 and decisions_of(task["id"]) == []
    # the person answers through bar, and bar's record replaces the file
    res = bar(capfd, "decide", "answer", "--choose", "1=session", "--choose", "2=argon2")
    assert res.code == 0, res.err
    assert storage.result() == [{"id": 1, "chosen": "session"}, {"id": 2, "chosen": "argon2"}]
    (step,) = decisions_of(task["id"])
    assert "via" not in step


def test_an_answer_no_command_read_is_found_by_doctor_and_recorded_by_its_repair(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    wt = worktree(task)
    assert bar(capfd, "decide", "submit", json.dumps(QUESTIONS, ensure_ascii=False)).code == 0
    DecideStorage(find_root(wt)).save_result(ANSWER)
    report = bar(capfd, "doctor", "--json").json()
    (finding,) = [f for f in report["findings"] if "no decision step" in f["message"]]
    assert finding["repairable"] and finding["where"].endswith(".json")
    assert decisions_of(task["id"]) == []
    assert bar(capfd, "doctor", "--repair").code == 0
    (step,) = decisions_of(task["id"])
    assert step["via"] == "file" and step["decisions"] == ANSWER["decisions"]
    assert not [
        f for f in bar(capfd, "doctor", "--json").json()["findings"] if "decision" in f["message"]
    ]
