"""bar decide: the seed's formats kept byte for byte and read back by a client that only
knows the seed, ``bar decide JSON`` as the seed's short form, bad input refused with one
sentence naming the item and the field and nothing written, answers in a real terminal,
and the agent waiting inside a step."""

from __future__ import annotations

import copy
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, bar, bar_exe, ledger, new_task, task_dir, worktree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bar import api
from bar.aide import decide
from bar.api import orders
from bar.errors import ExitCode

# seed 004 §2.1's example, as the agent sends it
SEED = {
    "task": "实现用户认证模块",
    "source": "task-now.md",
    "items": [
        {
            "id": 1,
            "title": "认证方式选择",
            "location": {"file": "task-now.md", "start": 5, "end": 7},
            "context": "任务描述中未明确指定认证方式，需要确认",
            "options": [
                {
                    "value": "jwt",
                    "label": "JWT Token 认证",
                    "score": 85,
                    "pros": ["无状态", "易于扩展", "跨域友好"],
                    "cons": ["Token 无法主动失效", "需要处理刷新"],
                },
                {
                    "value": "session",
                    "label": "Session 认证",
                    "score": 70,
                    "pros": ["实现简单", "可主动失效"],
                    "cons": ["需要存储", "扩展性差"],
                },
            ],
            "recommend": "jwt",
        },
        {
            "id": 2,
            "title": "密码加密算法",
            "context": "选择密码存储的加密算法",
            "options": [
                {
                    "value": "bcrypt",
                    "label": "bcrypt",
                    "score": 90,
                    "pros": ["安全性高", "自带盐值"],
                    "cons": ["计算较慢"],
                },
                {
                    "value": "argon2",
                    "label": "Argon2",
                    "score": 95,
                    "pros": ["最新标准", "抗GPU攻击"],
                    "cons": ["库支持较少"],
                },
            ],
            "recommend": "bcrypt",
        },
    ],
}


@pytest.fixture
def task(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert bar(capfd, "init").code == 0
    return new_task(capfd)


def decisions_dir(t: dict[str, Any]) -> Path:
    return task_dir(t["id"]) / "decisions"


# seed 004 §6: ISO 8601 to the second with the offset; file names YYYY-MM-DDTHH-mm-ss
SEED_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d")
SEED_SESSION = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d")


def seed_result(folder: Path) -> dict[str, Any] | str:
    """What the seed's ``aide decide result`` does (seed 003 §3.3), on bar's files: read
    pending.json, take its _meta.session_id, read that record and return its output; or
    the seed's error."""
    pending = folder / "pending.json"
    if not pending.exists():
        return "未找到待定项数据"  # no pending data
    sid = json.loads(pending.read_bytes())["_meta"]["session_id"]
    record = folder / f"{sid}.json"
    if not record.exists():
        return "尚无决策结果"  # no result yet
    output: dict[str, Any] = json.loads(record.read_bytes())["output"]
    return output


def test_the_seed_example_submitted_answered_in_a_terminal_and_read_back(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "decide", "result").code == ExitCode.NO_DECISION
    res = bar(capfd, "decide", "submit", json.dumps(SEED, ensure_ascii=False), "--json")
    assert res.code == 0, res.err
    sid = res.json()["session_id"]
    pending = json.loads((decisions_dir(task) / "pending.json").read_bytes())
    assert pending == {
        **SEED,
        "_meta": {"created_at": pending["_meta"]["created_at"], "session_id": sid},
    }
    assert SEED_SESSION.fullmatch(sid) and SEED_TIME.fullmatch(pending["_meta"]["created_at"])
    submitted = (decisions_dir(task) / "pending.json").read_bytes()
    assert seed_result(decisions_dir(task)) == "尚无决策结果"
    said = bar(capfd, "decide", "result")
    assert said.code == ExitCode.NOT_DECIDED and "not decided yet" in said.err
    # the person: Enter takes the recommendation, then a note; "2" picks argon2
    screen, code = answer_on_terminal(worktree(task), ["", "", "2", "团队更熟悉 argon2"])
    assert code == 0, screen
    assert "JWT Token 认证" in screen and "score 85" in screen and "+ 无状态" in screen
    assert "(recommended)" in screen and "task-now.md lines 5-7" in screen
    record = json.loads((decisions_dir(task) / f"{sid}.json").read_bytes())
    output = {
        "decisions": [
            {"id": 1, "chosen": "jwt"},
            {"id": 2, "chosen": "argon2", "note": "团队更熟悉 argon2"},
        ]
    }
    assert record == {"input": SEED, "output": output, "completed_at": record["completed_at"]}
    assert list(record) == ["input", "output", "completed_at"]
    assert SEED_TIME.fullmatch(record["completed_at"])
    # pending.json stays as it was (seed 003 §2.1, §5.1): a seed-only client reads the answer
    assert (decisions_dir(task) / "pending.json").read_bytes() == submitted
    assert seed_result(decisions_dir(task)) == output
    assert sorted(p.name for p in decisions_dir(task).iterdir()) == [f"{sid}.json", "pending.json"]
    assert bar(capfd, "decide", "result", "--json").json() == output
    assert bar(capfd, "decide", "show", sid, "--json").json() == record
    listed = bar(capfd, "decide", "list", "--json").json()
    assert listed["pending"] is None and [a["session_id"] for a in listed["answered"]] == [sid]
    (step,) = ledger(task["id"])
    assert step["kind"] == "decision" and step["session_id"] == sid
    assert step["decisions"] == output["decisions"]
    assert sid in bar(capfd, "log").out and "1=jwt, 2=argon2" in bar(capfd, "show", "1").out


def answer_on_terminal(cwd: Path, lines: list[str]) -> tuple[str, int]:
    """``bar decide answer`` on a real pty, each line typed when a prompt shows."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [BAR_EXE, "decide", "answer"],
        cwd=cwd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    screen, typed = b"", 0
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                screen += chunk
            prompts = screen.count(b"(Enter: ")
            if typed < len(lines) and prompts > typed:
                os.write(master, lines[typed].encode() + b"\n")
                typed += 1
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=10)
    finally:
        os.close(master)
    return screen.decode(errors="replace"), code


def test_choose_answers_without_a_terminal_and_checks_every_item(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    assert bar(capfd, "decide", "answer", "--choose", "1=jwt").code == ExitCode.NO_DECISION
    assert bar(capfd, "decide", "submit", json.dumps(SEED)).code == 0
    for args, said in (
        (["--choose", "1=jwt"], "item 2 not answered"),
        (["--choose", "1=jwt", "--choose", "3=x"], "there is no item 3"),
        (["--choose", "1=redis", "--choose", "2=bcrypt"], '"redis" is not one of its options'),
        (["--choose", "1=jwt", "--choose", "2=bcrypt", "--note", "5=x"], "--note 5"),
        (["--choose", "one=jwt"], "not ID=VALUE"),
    ):
        res = bar(capfd, "decide", "answer", *args)
        assert res.code == ExitCode.USAGE and said in res.err, (args, res.err)
    assert (decisions_dir(task) / "pending.json").exists() and ledger(task["id"]) == []
    res = bar(
        capfd,
        "decide",
        "answer",
        "--choose",
        "2=bcrypt",
        "--choose",
        "1=session",
        "--note",
        "1=later, maybe",
        "--json",
    )
    assert res.code == 0, res.err
    assert res.json()["record"]["output"]["decisions"] == [
        {"id": 1, "chosen": "session", "note": "later, maybe"},
        {"id": 2, "chosen": "bcrypt"},
    ]


def test_a_new_submit_replaces_the_pending_one_and_says_so(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    first = bar(capfd, "decide", "submit", json.dumps(SEED), "--json").json()["session_id"]
    res = bar(capfd, "decide", "submit", json.dumps(SEED), "--json")
    second = res.json()["session_id"]
    assert second != first and res.json()["replaced"] == first
    assert f"decision {first} was still pending and is replaced by {second}" in res.err


ITEM_1 = 'decision item 1 (id 1, "认证方式选择")'
ITEM_2 = 'decision item 2 (id 2, "密码加密算法")'

# (the change, what the error says, what its hint says)
BAD = [
    (
        lambda d: d["items"][1].pop("options"),
        f"{ITEM_2}: missing field 'options'",
        "'options' is a list of at least 2 options",
    ),
    (
        lambda d: d["items"][0]["options"].pop(),
        f"{ITEM_1}: 'options' has 1 option; it needs at least 2",
        "each with value, label",
    ),
    (
        lambda d: d["items"][1].update(id=1),
        "decision item 2 (id 1, \"密码加密算法\"): 'id' 1 is taken by item 1; ids are unique",
        "a different one for each item",
    ),
    (
        lambda d: d["items"][1].update(id=7, recommend="redis"),
        'decision item 2 (id 7, "密码加密算法"): \'recommend\' is "redis", which is not one of '
        "its options (bcrypt, argon2)",
        "the value of one of the item's options",
    ),
    (
        lambda d: d["items"][0]["options"][1].update(score=101),
        f"{ITEM_1}, option 2 (\"session\"): 'score' is 101; it must be a number from 0 to 100",
        "'score' is a number from 0 to 100",
    ),
    (
        lambda d: d["items"][1].pop("title"),
        "decision item 2 (id 2): missing field 'title'",
        "'title' is the question",
    ),
    (
        lambda d: d["items"][1].update(title="  "),
        "decision item 2 (id 2): 'title' must be a string that is not empty, not a string",
        "'title' is the question",
    ),
    (
        lambda d: d["items"][0].update(id="1"),
        "decision item 1 (\"认证方式选择\"): 'id' must be a whole number, not a string",
        "'id' is a whole number",
    ),
    (
        lambda d: d["items"][0]["options"][0].update(pros="fast"),
        f"{ITEM_1}, option 1 (\"jwt\"): 'pros' must be a list of strings, not a string",
        "'pros' is a list of strings",
    ),
    (
        lambda d: d["items"][1]["options"][0].pop("label"),
        f"{ITEM_2}, option 1 (\"bcrypt\"): missing field 'label'",
        "'label' is a string",
    ),
    (
        lambda d: d.update(task=3),
        "the decision input: 'task' must be a string, not the number 3",
        "'task' is a string",
    ),
    (
        lambda d: d.pop("source"),
        "the decision input: missing field 'source'",
        "'source' is a string",
    ),
    (
        lambda d: d["items"][0]["location"].pop("start"),
        f"{ITEM_1}: missing field 'location.start'",
        "'location' is {",
    ),
    (
        lambda d: d["items"][0]["location"].update(end=2),
        f"{ITEM_1}: 'location.end' is before 'location.start'",
        "lines counted from 1",
    ),
    (
        lambda d: d["items"][0].update(colour="red"),
        f"{ITEM_1}: unknown field 'colour'",
        "the fields it may have: id, title, location, context, options, recommend",
    ),
    (
        lambda d: d["items"].append("more"),
        "decision item 3 must be an object, not a string",
        "'items' is a list of questions",
    ),
]


@pytest.mark.parametrize(("mutate", "said", "hint"), BAD)
def test_bad_input_is_one_sentence_naming_item_and_field_and_writes_nothing(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str], mutate: Any, said: str, hint: str
) -> None:
    data = copy.deepcopy(SEED)
    mutate(data)
    res = bar(capfd, "decide", "submit", json.dumps(data, ensure_ascii=False))
    assert res.code == ExitCode.USAGE, res.err
    first, second = res.err.strip().splitlines()
    assert first == f"bar: {said}"
    assert second.startswith("hint: ") and hint in second
    assert len(first.split(". ")) == 1  # one sentence
    assert not decisions_dir(task).exists()
    # the short form says the same
    short = bar(capfd, "decide", json.dumps(data, ensure_ascii=False))
    assert (short.code, short.err) == (res.code, res.err)


def test_the_short_form_is_submit_as_the_seeds_is(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = json.dumps(SEED, ensure_ascii=False)
    res = bar(capfd, "decide", text, "--json")
    assert res.code == 0, res.err
    sid = res.json()["session_id"]
    stored = json.loads((decisions_dir(task) / "pending.json").read_bytes())
    assert stored.pop("_meta")["session_id"] == sid and stored == SEED
    # - (stdin) and @FILE too, and submit's options; a child process reads its stdin
    piped = bar_exe("decide", "-", "--json", cwd=worktree(task), input=text.encode())
    assert piped.code == 0 and piped.json()["replaced"] == sid, piped.err
    questions = tmp_path / "q.json"
    questions.write_text(text)
    late = bar(capfd, "decide", f"@{questions}", "--wait", "--timeout", "0.2")
    assert late.code == ExitCode.NOT_DECIDED and "not decided yet" in late.err
    # a file name without its @ is named back, as submit does; a mistyped action is one
    bare = bar(capfd, "decide", str(questions))
    assert bare.code == ExitCode.USAGE and f"give @{questions}" in bare.err
    typo = bar(capfd, "decide", "lsit")
    assert typo.code == ExitCode.USAGE and "did you mean `bar decide list`?" in typo.err
    # the actions are as they were
    assert bar(capfd, "decide", "answer", "--choose", "1=jwt", "--choose", "2=bcrypt").code == 0
    assert bar(capfd, "decide", "result", "--json").json()["decisions"][0] == {
        "id": 1,
        "chosen": "jwt",
    }
    helped = bar_exe("decide", "--help")
    assert helped.code == 0
    assert "usage: bar decide JSON|-|@FILE [--wait" in helped.out
    assert "`bar decide JSON`" in helped.out and "aide decide '<json>'" in helped.out
    assert "bar decide @questions.json" in bar_exe("decide", "submit", "--help").out


def test_an_answered_decision_stays_readable_until_the_next_submission(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    first = bar(capfd, "decide", "submit", json.dumps(SEED), "--json").json()["session_id"]
    assert bar(capfd, "decide", "answer", "--choose", "1=jwt", "--choose", "2=bcrypt").code == 0
    again = bar(capfd, "decide", "answer", "--choose", "1=jwt", "--choose", "2=bcrypt")
    assert again.code == ExitCode.NO_DECISION and f"bar decide show {first}" in again.err
    listed = bar(capfd, "decide", "list", "--json").json()
    assert listed["pending"] is None and [a["session_id"] for a in listed["answered"]] == [first]
    # the next submission overwrites pending.json (seed 003 §5.1); nothing was replaced
    res = bar(capfd, "decide", "submit", json.dumps(SEED), "--json")
    second = res.json()["session_id"]
    assert res.json()["replaced"] is None and "replaced" not in res.err
    assert second != first and (decisions_dir(task) / f"{first}.json").exists()
    assert seed_result(decisions_dir(task)) == "尚无决策结果"
    assert bar(capfd, "decide", "result").code == ExitCode.NOT_DECIDED
    assert bar(capfd, "decide", "list", "--json").json()["pending"]["session_id"] == second
    assert bar(capfd, "decide", "show", "--json").json()["output"]["decisions"][1] == {
        "id": 2,
        "chosen": "bcrypt",
    }


def test_a_decision_the_seed_wrote_is_answered_and_an_older_bars_files_are_read(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    folder = decisions_dir(task)
    folder.mkdir(parents=True)
    # pending.json as aide writes it (seed 003 §2.1), by a client that only knows the seed
    meta = {"created_at": "2025-01-15T10:30:00+08:00", "session_id": "2025-01-15T10-30-00"}
    (folder / "pending.json").write_text(json.dumps({**SEED, "_meta": meta}, indent=2))
    listed = bar(capfd, "decide", "list", "--json").json()
    assert listed["pending"] == {
        "session_id": "2025-01-15T10-30-00",
        "task": SEED["task"],
        "created_at": "2025-01-15T10:30:00+08:00",
        "items": 2,
    }
    res = bar(capfd, "decide", "answer", "--choose", "1=session", "--choose", "2=argon2")
    assert res.code == 0, res.err
    assert seed_result(folder) == {
        "decisions": [{"id": 1, "chosen": "session"}, {"id": 2, "chosen": "argon2"}]
    }
    # an older bar removed pending.json once it was answered: the record is the latest
    (folder / "pending.json").unlink()
    assert bar(capfd, "decide", "result", "--json").json() == seed_result_of(folder)
    assert bar(capfd, "decide", "show").code == 0
    assert bar(capfd, "decide", "answer").code == ExitCode.NO_DECISION
    res = bar(capfd, "decide", "submit", json.dumps(SEED), "--json")
    assert res.code == 0 and res.json()["replaced"] is None


def seed_result_of(folder: Path) -> dict[str, Any]:
    (record,) = folder.glob("2025-*.json")
    output: dict[str, Any] = json.loads(record.read_bytes())["output"]
    return output


def test_the_agent_asks_inside_a_step_and_waits_for_the_answer(
    task: dict[str, Any], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(SEED, ensure_ascii=False))
    proc = subprocess.Popen(
        [
            BAR_EXE,
            "run",
            "--no-pty",
            "--",
            "sh",
            "-c",
            f"{BAR_EXE} decide submit @{questions} --wait --timeout 60 > answer.json; echo $?",
        ],
        cwd=worktree(task),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (decisions_dir(task) / "pending.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        res = bar_exe(
            "decide", "answer", "--choose", "1=jwt", "--choose", "2=argon2", cwd=worktree(task)
        )
        assert res.code == 0 and "recorded when the running step ends" in res.out, res.err
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.strip().endswith(b"0"), err
    got = json.loads((worktree(task) / "answer.json").read_text())
    assert got == {"decisions": [{"id": 1, "chosen": "jwt"}, {"id": 2, "chosen": "argon2"}]}
    assert [s["kind"] for s in ledger(task["id"])] == ["run", "decision"]
    # --wait gives up in time, with its own exit code
    assert bar(capfd, "decide", "submit", json.dumps(SEED)).code == 0
    late = bar_exe(
        "decide", "submit", json.dumps(SEED), "--wait", "--timeout", "0.3", cwd=worktree(task)
    )
    assert late.code == ExitCode.NOT_DECIDED and "not decided yet" in late.err


# --- properties ------------------------------------------------------------------------

_text = st.text(min_size=1, max_size=8)
_option = st.fixed_dictionaries(
    {"value": _text, "label": _text},
    optional={
        "score": st.integers(0, 100) | st.floats(0, 100),
        "pros": st.lists(_text, max_size=2),
        "cons": st.lists(_text, max_size=2),
    },
)


@st.composite
def decide_inputs(draw: st.DrawFn) -> dict[str, Any]:
    ids = draw(st.lists(st.integers(-5, 10**6), min_size=1, max_size=4, unique=True))
    items = []
    for ident in ids:
        options = draw(st.lists(_option, min_size=2, max_size=4, unique_by=lambda o: o["value"]))
        item: dict[str, Any] = {
            "id": ident,
            "title": draw(_text.filter(str.strip)),
            "options": options,
        }
        if draw(st.booleans()):
            start = draw(st.integers(1, 50))
            item["location"] = {
                "file": draw(_text),
                "start": start,
                "end": start + draw(st.integers(0, 9)),
            }
        if draw(st.booleans()):
            item["context"] = draw(st.text(max_size=10))
        if draw(st.booleans()):
            item["recommend"] = draw(st.sampled_from([o["value"] for o in options]))
        items.append(item)
    return {
        "task": draw(st.text(max_size=10)),
        "source": draw(st.text(max_size=10)),
        "items": items,
    }


_MUTATIONS = [
    lambda d: d["items"][0]["options"].__setitem__(slice(1, None), []),
    lambda d: d["items"][0].__setitem__("recommend", "\0not an option"),
    lambda d: d["items"][0]["options"][0].__setitem__("score", 100.5),
    lambda d: d["items"][0].__delitem__("title"),
    lambda d: d["items"][0].__setitem__("id", True),
    lambda d: d["items"].append(copy.deepcopy(d["items"][0])),
    lambda d: d["items"][0]["options"][0].__setitem__("label", 7),
    lambda d: d.__delitem__("source"),
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=decide_inputs(), mutation=st.sampled_from(range(len(_MUTATIONS))))
def test_valid_inputs_round_trip_and_mutated_ones_write_nothing(
    task: dict[str, Any], data: dict[str, Any], mutation: int
) -> None:
    the_task = api.get_task(api.open_project())
    bad = copy.deepcopy(data)
    _MUTATIONS[mutation](bad)
    before = (
        sorted(p.name for p in decisions_dir(task).glob("*"))
        if decisions_dir(task).exists()
        else []
    )
    with pytest.raises(decide.BadDecideInput):
        orders.decide_submit(the_task, bad)
    after = (
        sorted(p.name for p in decisions_dir(task).glob("*"))
        if decisions_dir(task).exists()
        else []
    )
    assert after == before
    sid = orders.decide_submit(the_task, data)["session_id"]
    stored = json.loads((decisions_dir(task) / "pending.json").read_bytes())
    assert stored.pop("_meta")["session_id"] == sid and stored == data
    picks = [{"id": i["id"], "chosen": i["options"][-1]["value"]} for i in data["items"]]
    record = orders.decide_answer(the_task, picks)
    assert record["input"] == data and record["output"] == {"decisions": picks}
    assert json.loads((decisions_dir(task) / f"{sid}.json").read_bytes()) == record
    assert decide.result(the_task) == {"decisions": picks}


def test_help_teaches_with_examples(capfd: pytest.CaptureFixture[str]) -> None:
    for args in (
        ["decide", "submit"],
        ["decide", "answer"],
        ["decide", "result"],
        ["decide", "list"],
        ["decide", "show"],
    ):
        res = bar_exe(*args, "--help")
        assert res.code == 0 and "example" in res.out, args
    assert sys.executable
