"""A step's page shows the agent's conversation beside its checkpoints, and the task's
page its token totals (docs/sessions.md). Plain HTTP against a real ``bar ui`` child over real
agent steps: ``bar run --agent claude`` of a stand-in that writes Claude Code's
transcript and calls bar's hooks (``session_writer.py``), so what the page shows is
checked against what bar kept (the ledger's ``session``, ``NNNN.session.jsonl``)."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SUPPORT
from test_security import login, request
from test_step_pages import Element, Tree
from ui_session import Session, base_of, sealed_env, serving

from bar.ui import conversation
from bar.ui.pages import cost_text, tokens_text

WRITER = SUPPORT / "session_writer.py"
MODEL = "claude-sonnet-4-5"
LONG = "".join(f"line {i} of a long answer\n" for i in range(400))  # > TEXT_SHOWN
BULK = 2600  # prompts and replies: more items than a page lists
LONG_CHAT, CHAT = "0002", "0003"  # the agent steps of the module's task


def agent_step(s: Session, name: str, script: list[dict[str, Any]]) -> dict[str, Any]:
    """``bar run --agent claude`` of the stand-in playing ``script``: its ledger line."""
    path = s.root / f"{name}.json"
    path.write_text(json.dumps(script))
    s.bar("run", "--no-pty", "--agent", "claude", "--", sys.executable, str(WRITER), str(path))
    return s.ledger()[-1]


def agent_session(root: Path, *scripts: list[dict[str, Any]]) -> Session:
    """A repository, a task with a plain step (0001) and an agent step playing each script
    (0002...), with a price for the model so the sessions have a cost."""
    repo = root / "shop"
    repo.mkdir(parents=True)
    s = Session(root, repo, sealed_env(root), "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    task = json.loads(s.bar("task", "new", "with-agent", "--json").stdout)
    s.task_id = task["id"]
    s.project = Path(task["worktree"]).parent.parent.name
    config = root / "home" / "projects" / s.project / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data.setdefault("agents", {})["prices"] = {MODEL: {"input": 3, "output": 15, "cache_read": 0.3}}
    config.write_text(yaml.safe_dump(data))
    s.bar("run", "--no-pty", "--", "sh", "-c", "echo plain > plain.txt")
    for n, script in enumerate(scripts):
        agent_step(s, f"script-{n}", script)
    return s


SCRIPT: list[dict[str, Any]] = [
    {"prompt": "Add a discount to the cart"},
    {"say": "I will write the discount module first."},
    {"write": "discount.py", "text": "RATE = 0.1\n"},
    {"tool": "Read", "input": {"file_path": "missing.py"}, "result": "no such file", "ok": False},
    {"tool": "Bash", "input": {"command": "pytest -q", "timeout": 60}, "result": "3 passed"},
    {"subagent": "Explore", "turns": [{"prompt": "find the tests"}, {"say": "tests/ has 3"}]},
    {"say": LONG},
    {"interrupt": True},
    {"prompt": "also round it"},
    {"write": "cart.py", "text": "def total(items):\n    return round(sum(items), 2)\n"},
    {"say": "Done: RATE is 0.1 and totals are rounded."},
]


@dataclass
class Served:
    s: Session
    base: str
    cookie: str

    def get(self, rest: str) -> tuple[int, dict[str, str], str]:
        return request(self.s.task_url(self.base, rest), cookie=self.cookie)

    def page(self, rest: str = "") -> tuple[str, Element]:
        status, _, text = self.get(rest)
        assert status == 200, (rest, text)
        return text, Tree(text).root

    def events(self, step: str) -> list[dict[str, Any]]:
        path = self.s.task_dir / "artifacts" / f"{step}.session.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def step(self, step: str) -> dict[str, Any]:
        return next(r for r in self.s.ledger() if r["step_id"] == step)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # (the long one first: a step's session takes in a subagent's file of the step
    # before it as a subagent with no event, when that file changed in the last 2 s)
    bulk = [{"prompt": "start"}, {"bulk": BULK}, {"say": "the end"}]
    s = agent_session(tmp_path_factory.mktemp("ui-conversation"), bulk, SCRIPT)
    with serving(s) as (_, url):
        yield Served(s, base_of(url), login(url))


def items(root: Element) -> list[Element]:
    lists = root.find("ol", class_="events")
    assert len(lists) == 1
    return [li for li in lists[0].children if li.tag == "li"]


def classes(e: Element) -> list[str]:
    return e.attrs.get("class", "").split()


def test_the_conversation_is_listed_in_order_with_its_summary(served: Served) -> None:
    rec = served.step(CHAT)
    assert rec["session"]["model"] == MODEL and rec["artifacts"]["session"]
    _, root = served.page(f"/s/{CHAT}")
    assert root.find("h2", id="conversation")
    facts = {
        tr.find("th")[0].text: tr.find("td")[0].text
        for tr in root.find("table", class_="session-facts")[0].find("tr")
    }
    summary = rec["session"]
    assert facts["agent"] == "claude 2.1.0"
    assert facts["model"] == MODEL
    assert facts["session"] == summary["session_id"]
    assert facts["turns"] == (
        f"{summary['turns']} turns, {summary['tool_calls']} tool calls, 1 subagent, 1 interrupt"
    )
    assert summary["tool_calls"] == 5  # two writes, Read, Bash, and the subagent's Task
    assert facts["tokens"] == (
        f"{summary['input_tokens']:,} in · {summary['output_tokens']:,} out · "
        f"{summary['cache_read_tokens']:,} cached"
    )
    assert facts["cost"] == f"${summary['cost_usd']:.4f}"

    listed = items(root)
    said = [(li.find("span", class_="who")[0].text, li) for li in listed]
    kinds = [who for who, _ in said]
    assert kinds == [
        "prompt",
        "reply",
        "tool",  # Write discount.py, with its result
        "tool",  # Read: failed
        "tool",  # Bash
        "tool",  # Task: the subagent's call
        "subagent",
        "prompt",
        "reply",
        "reply",  # the long one
        "interrupted",
        "prompt",
        "tool",
        "reply",
    ]
    texts = [li.text for _, li in said]
    assert "Add a discount to the cart" in texts[0]
    assert "Done: RATE is 0.1" in texts[-1]
    # the stored events, in the same order: every one but the token counts and the results
    # (shown with their calls) has its item, which names its index
    events = served.events(CHAT)
    shown = [i for i, e in enumerate(events) if e["type"] not in ("usage", "tool_result")]
    assert [int(li.attrs["data-n"]) for li in listed] == shown


def test_a_tool_call_says_what_it_did_and_how_it_ended(served: Served) -> None:
    _, root = served.page(f"/s/{CHAT}")
    calls = [li for li in items(root) if "tool_call" in classes(li)]
    write, read, bash, task, again = calls
    assert write.find("a", class_="tool")[0].text == "Write"
    assert write.find("code", class_="input")[0].text == "discount.py"  # below the worktree
    assert write.find("div", class_="result")[0].find("b")[0].text == "ok"
    assert read.find("b", class_="tool")[0].text == "Read"  # no checkpoint: no link
    assert read.find("code", class_="input")[0].text == "missing.py"
    failed = read.find("div", class_="result")[0]
    assert "bad" in classes(failed) and failed.find("b")[0].text == "failed"
    assert "no such file" in failed.text
    assert bash.find("code", class_="input")[0].text == "pytest -q"
    assert "3 passed" in bash.text
    # the call's whole input is one link away (the page shows its command)
    more = bash.find("a", class_="more")[0].attrs["href"]
    status, headers, text = request(served.base + more, cookie=served.cookie)
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert json.loads(text) == {"command": "pytest -q", "timeout": 60}
    assert task.find("b", class_="tool")[0].text == "Task"
    assert again.find("code", class_="input")[0].text == "cart.py"


def test_a_subagent_is_marked_and_its_events_carry_its_kind(served: Served) -> None:
    _, root = served.page(f"/s/{CHAT}")
    listed = items(root)
    start = next(li for li in listed if "subagent" in classes(li))
    assert "Explore" in start.find("b")[0].text
    task_call = next(
        li for li in listed if [b.text for b in li.find("b", class_="tool")] == ["Task"]
    )
    assert start.find("a")[0].attrs["href"] == "#call-" + task_call.attrs["id"][5:]
    inner = [li for li in listed if "sub" in classes(li)]
    assert [li.find("span", class_="who")[0].text for li in inner] == [
        "subagent",
        "prompt",
        "reply",
    ]
    assert all(li.find("span", class_="agent")[0].text == "Explore" for li in inner)
    assert "tests/ has 3" in inner[-1].text


def test_a_call_links_its_checkpoint_and_the_checkpoint_its_call(served: Served) -> None:
    s = served.s
    rec = served.step(CHAT)
    assert rec["checkpoints"] == 2
    _, root = served.page(f"/s/{CHAT}")
    linked = [
        li for li in items(root) if "tool_call" in classes(li) and li.find("a", class_="tool")
    ]
    assert len(linked) == 2
    side = root.find("aside", class_="session-checkpoints")[0]
    for n, (li, path) in enumerate(zip(linked, ("discount.py", "cart.py"), strict=True), 1):
        name = f"{CHAT}.{n}"
        href = li.find("a", class_="tool")[0].attrs["href"]
        assert href == s.task_url("", f"/s/{name}")
        assert li.find("a", class_="checkpoint")[0].text == f"→ {name}"
        # the link opens the checkpoint's page: its diff, of the file the call wrote
        _, cp_page = served.page(f"/s/{name}")
        assert cp_page.find("h1")[0].text.startswith(f"Checkpoint {name}")
        files = cp_page.find("details", class_="file")
        assert [f.attrs["data-path"] for f in files] == [path]
        src = files[0].find("div", class_="diff")[0].attrs["data-src"]
        status, _, diff = request(served.base + src, cookie=served.cookie)
        assert status == 200
        assert ("+RATE = 0.1" if n == 1 else "+    return round(sum(items), 2)") in diff
        # and back: the checkpoint beside the list, and the checkpoint's page, name the call
        item = side.find("li", id=f"cp-{name}")[0]
        back = item.find("a", class_="to-call")[0].attrs["href"]
        assert back == "#" + li.attrs["id"]
        call_row = [
            tr for tr in cp_page.find("tr") if tr.find("th") and tr.find("th")[0].text == "call"
        ]
        assert call_row[0].find("a")[0].attrs["href"] == s.task_url(
            "", f"/s/{CHAT}#" + li.attrs["id"]
        )


def test_a_long_text_is_cut_with_a_link_to_the_whole(served: Served) -> None:
    page, root = served.page(f"/s/{CHAT}")
    assert LONG[:200] in page and LONG not in page
    long = next(li for li in items(root) if any("data-cut" in d.attrs for d in li.find("div")))
    cut = long.find("div", class_="text")[0]
    assert len(cut.text) == conversation.TEXT_SHOWN + 1 and cut.text.endswith("…")
    link = long.find("a", class_="more")[0]
    assert link.text == f"the whole ({len(LONG):,} characters)"
    status, headers, whole = request(served.base + link.attrs["href"], cookie=served.cookie)
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert whole == LONG


def test_the_timeline_says_each_sessions_tokens_and_the_tasks_totals(served: Served) -> None:
    _, root = served.page()
    ledger = {r["step_id"]: r for r in served.s.ledger()}
    sessions = [r["session"] for r in ledger.values() if "session" in r]
    assert len(sessions) == 2
    totals = root.find("p", class_="session-totals")[0].text
    whole = {
        k: sum(s[k] for s in sessions)
        for k in ("turns", "tool_calls", "input_tokens", "output_tokens", "cache_read_tokens")
    }
    cost = round(sum(s["cost_usd"] for s in sessions), 6)
    assert totals == (
        f"agents: 2 agent steps · {whole['turns']} turns · {whole['tool_calls']} tool calls"
        f" · {whole['input_tokens']:,} in · {whole['output_tokens']:,} out"
        f" · {whole['cache_read_tokens']:,} cached · ${cost:.4f} · {MODEL}"
    )
    for row in root.find("tr", class_="step"):
        step = row.attrs["id"].removeprefix("step-")
        said = row.find("li", class_="session")
        if "session" not in ledger[step]:
            assert said == []
            continue
        s = ledger[step]["session"]
        assert said[0].text == (
            f"conversation: {MODEL} · {s['turns']} turns · {tokens_text(s)} · {cost_text(s)}"
        )
        assert said[0].find("a")[0].attrs["href"] == served.s.task_url(
            "", f"/s/{step}#conversation"
        )


def test_a_long_conversation_is_listed_up_to_a_limit_and_served_fast(served: Served) -> None:
    events = served.events(LONG_CHAT)
    shown = [e for e in events if e["type"] == "message"]
    assert len(shown) == 2 * BULK + 2 > conversation.EVENTS_SHOWN
    begun = time.monotonic()
    page, root = served.page(f"/s/{LONG_CHAT}")
    took = time.monotonic() - begun
    listed = items(root)
    assert len(listed) == conversation.EVENTS_SHOWN
    assert "answer 0" in listed[2].text
    left = len(shown) - conversation.EVENTS_SHOWN
    assert f"{left} more events not listed" in page
    assert len(page) < 3 << 20 and took < 10, (len(page), took)
    # the session's file, which the page links, holds them all
    link = root.find("table", class_="session-facts")[0].find("a")[0].attrs["href"]
    status, _, text = request(served.base + link, cookie=served.cookie)
    assert status == 200 and [json.loads(line) for line in text.splitlines()] == events


def test_only_a_steps_events_are_served_and_a_plain_step_has_no_conversation(
    served: Served,
) -> None:
    page, root = served.page("/s/0001")
    assert root.find("h2", id="conversation") == [] and "session-facts" not in page
    for rest in (
        "/s/0001/session/0",  # a step without a session
        f"/s/{CHAT}/session/100000",
        f"/s/{CHAT}/session/-1",
        f"/s/{CHAT}/session/1e3",
        f"/s/{CHAT}.1/session/0",  # a checkpoint: its step has the conversation
        f"/artifacts/{CHAT}.session.jsonl.bak",
        "/artifacts/..%2Fledger.jsonl",
    ):
        status, _, text = served.get(rest)
        assert status == 404, (rest, text)
        assert text.startswith("bar: ")


PWN = "<img src=x onerror=window.__pwned=1>"
SCRIPT_TAG = "<script>window.__pwned=2</script>"
HOSTILE: list[dict[str, Any]] = [
    {"prompt": f"{PWN} {SCRIPT_TAG}"},
    {"say": f"{SCRIPT_TAG} {PWN}" * 200},  # cut in the middle of a tag
    {
        "tool": PWN,
        "id": f'x"><img src=x onerror=window.__pwned=3>{SCRIPT_TAG}',
        "input": {"command": f"echo '{PWN}'", "x": SCRIPT_TAG},
        "result": SCRIPT_TAG,
        "ok": False,
    },
    {"subagent": PWN, "turns": [{"say": SCRIPT_TAG}]},
    {"write": "ok.txt", "text": PWN, "id": f"toolu_{PWN}"},
]


def test_what_the_agent_said_is_escaped(tmp_path_factory: pytest.TempPathFactory) -> None:
    s = agent_session(tmp_path_factory.mktemp("ui-conversation-hostile"), HOSTILE)
    with serving(s) as (_, url):
        cookie, base = login(url), base_of(url)
        status, _, page = request(s.task_url(base, "/s/0002"), cookie=cookie)
        assert status == 200
        body = page.split("<main>", 1)[1]
        assert "<img" not in body and "<script" not in body
        assert "&lt;img src=x onerror=window.__pwned=1&gt;" in body
        # a hostile call id stays inside its attribute
        assert re.search(r'id="call-x&quot;&gt;&lt;img', body)
        status, _, page = request(s.task_url(base), cookie=cookie)
        assert status == 200 and "<img" not in page.split("<main>", 1)[1]


def test_the_summary_when_no_price_is_known() -> None:
    summary = {"input_tokens": 1234567, "output_tokens": 89, "cache_write_tokens": 5}
    assert tokens_text(summary) == "1,234,567 in · 89 out · 5 written to the cache"
    assert cost_text(summary) is None
    assert cost_text({"cost_usd": 0.0123456}) == "$0.0123"
    assert tokens_text({"input_tokens": True, "output_tokens": "7"}) == "0 in · 0 out"
