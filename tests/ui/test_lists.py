"""``bar ui``'s lists and what finds things in them: the overview's owner, description and
cost, the filters, the board, the search, one timeline row per agent call, a checkpoint's
neighbours, the Actions page's pickers and times said as a person says them. Plain HTTP
against a real ``bar ui`` child over a project made by the real ``bar`` (``ui_board``);
what a page says is checked against bar's own records (``--json``, the ledger)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest
from test_security import login, request
from test_step_pages import Element, Tree
from ui_board import Board, board_session
from ui_session import base_of, serving

from bar.model.ledger_file import Ledger
from bar.ui.filters import StepFilter
from bar.ui.pages import ago, cost_text, describe, result, when


@dataclass
class Served:
    b: Board
    base: str
    cookie: str

    def get(self, path: str) -> tuple[int, str]:
        status, _, text = request(self.base + path, cookie=self.cookie)
        return status, text

    def page(self, path: str) -> Element:
        status, text = self.get(path)
        assert status == 200, (path, text)
        return Tree(text).root

    def task(self, name: str, rest: str = "", **query: str) -> Element:
        path = self.b.url("", name, rest) + (f"?{urlencode(query)}" if query else "")
        return self.page(path)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    b = board_session(tmp_path_factory.mktemp("ui-lists"))
    with serving(b.s) as (_, url):
        yield Served(b, base_of(url), login(url))


def rows(root: Element) -> dict[str, Element]:
    """The overview's rows, by task id."""
    return {r.attrs["data-task"]: r for r in root.find("tr") if "data-task" in r.attrs}


def listed(served: Served) -> list[dict[str, object]]:
    tasks: list[dict[str, object]] = json.loads(
        served.b.s.bar("task", "list", "--all", "--json").stdout
    )
    return tasks


def test_the_overview_says_each_tasks_owner_description_and_cost(served: Served) -> None:
    root = served.page("/")
    heads = [th.text for th in root.find("table", class_="tasks")[0].find("th")]
    assert heads[:3] == ["task", "status", "owner"] and "cost" in heads
    shown = rows(root)
    tasks = listed(served)
    assert set(shown) == {t["id"] for t in tasks}
    for t in tasks:
        cells = shown[str(t["id"])].find("td")
        owner = t["board"]["owner"]  # type: ignore[index]
        assert cells[2].text == (f"@{owner}" if owner else "-")
        said = t["metadata"].get("description", "")  # type: ignore[attr-defined]
        found = cells[0].find("div", class_="description")
        assert (found[0].text if found else "") == said
    ledger = served.b.s.ledger()
    agent = next(r for r in ledger if r.get("session"))
    cost = cells_of(shown, served.b.ids["add-discounts"])[heads.index("cost")].text
    assert cost == cost_text({"cost_usd": agent["session"]["cost_usd"]}) and cost.startswith("$")
    assert cells_of(shown, served.b.ids["docs"])[heads.index("cost")].text == "-"  # no agent


def cells_of(shown: dict[str, Element], task_id: str) -> list[Element]:
    return shown[task_id].find("td")


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ({"q": "login"}, {"fix-login", "ui-login"}),
        ({"q": "LOOPS password"}, {"fix-login"}),  # every word, whatever the case
        ({"owner": "alice"}, {"docs"}),
        ({"owner": "-"}, {"add-discounts", "fix-login", "old-thing"}),
        ({"state": "closed"}, {"old-thing"}),
        ({"state": "pending", "owner": "agent-b"}, {"ui-login"}),
        ({"state": "open", "q": "o"}, {"add-discounts", "fix-login", "ui-login", "docs"}),
        ({"state": "no-such-state"}, set()),
    ],
)
def test_the_overview_keeps_the_tasks_the_filter_asks_for(
    served: Served, query: dict[str, str], names: set[str]
) -> None:
    status, text = served.get("/?" + urlencode(query))
    assert status == 200
    root = Tree(text).root
    ids = {v: k for k, v in served.b.ids.items()}
    assert {ids[i] for i in rows(root)} == names
    form = root.find("form", class_="filter")[0]
    assert form.attrs["method"] == "get" and form.attrs["action"] == "/"  # (a link to keep)
    if not names:
        assert "None of its 5 tasks matches the filter." in text


def test_the_board_puts_each_task_in_the_column_bars_board_says(served: Served) -> None:
    root = served.page(f"/p/{served.b.s.project}/board")
    columns = {c.attrs["data-column"]: c for c in root.find("section", class_="column")}
    assert list(columns) == ["pending", "claimed", "in_progress", "completed"]
    ids = {v: k for k, v in served.b.ids.items()}
    for t in listed(served):
        board = t["board"]
        column = "claimed" if board["status"] == "pending" and board["owner"] else board["status"]  # type: ignore[index]
        cards = {c.attrs["data-task"] for c in columns[str(column)].find("li", class_="card")}
        assert t["id"] in cards, (ids[str(t["id"])], column)
    claimed = columns["claimed"].find("li", class_="card")
    assert len(claimed) == 1 and "@agent-b" in claimed[0].text
    assert "Login page on the new API" in claimed[0].text
    assert columns["pending"].find("span", class_="count")[0].text == "1"
    card = next(c for c in root.find("li", class_="card") if "add-discounts" in c.text)
    assert "$" in card.find("span", class_="cost")[0].text  # its agent's cost

    by_owner = served.page(f"/p/{served.b.s.project}/board?by=owner")
    owners = {c.attrs["data-column"]: c for c in by_owner.find("section", class_="column")}
    assert list(owners) == ["nobody", "agent-b", "alice"]
    assert [c.attrs["data-task"] for c in owners["alice"].find("li", class_="card")] == [
        served.b.ids["docs"]
    ]
    kept = served.page(f"/p/{served.b.s.project}/board?q=login")
    assert {c.attrs["data-task"] for c in kept.find("li", class_="card")} == {
        served.b.ids["fix-login"],
        served.b.ids["ui-login"],
    }
    assert served.get("/p/no-such-project/board")[0] == 404


def found(root: Element, group: str) -> list[Element]:
    section = root.find("section", id=f"found-{group}")
    return section[0].find("li", class_="found") if section else []


def test_one_search_reaches_tasks_steps_commands_and_files(served: Served) -> None:
    b = served.b
    login_ = served.page("/search?q=login")
    assert {li.find("a")[0].text for li in found(login_, "tasks")} == {"fix-login", "ui-login"}

    hi = served.page("/search?q=hi.txt")
    files = found(hi, "files")
    assert len(files) == 1 and files[0].find("code")[0].text == "hi.txt"
    assert files[0].find("a")[0].attrs["href"] == b.url("", "add-discounts", "/s/0002")
    commands = found(hi, "commands")  # the agent's call, linked to its checkpoint
    assert [li.find("code")[0].text for li in commands] == ["echo hi > hi.txt"]
    assert commands[0].find("a")[0].attrs["href"] == b.url("", "add-discounts", "/s/0002.2")
    assert "policy allow" in commands[0].text

    blocked = found(served.page("/search?q=blocked"), "commands")
    assert [li.find("code")[0].text for li in blocked] == ["rm -rf / --no-preserve-root"]
    assert blocked[0].find("span", class_="blocked")

    agent = served.page("/search?q=claude")
    assert [li.find("a")[0].text for li in found(agent, "steps")] == ["step 0002"]
    readme = served.page("/search?q=readme&in=files")
    assert [li.find("code")[0].text for li in found(readme, "files")] == ["README"]
    assert not readme.find("section", id="found-tasks")  # (only the group asked for)

    status, text = served.get("/search?q=%3Cscript%3Ealert(1)%3C/script%3E")
    assert status == 200 and "<script>alert" not in text and "&lt;script&gt;" in text
    status, text = served.get("/search?q=hi.txt&project=no-such-project")
    assert status == 200 and "no project &#x27;no-such-project&#x27;" in text
    assert "Give a word or more" in served.get("/search?q=++")[1]


def test_the_raw_look_never_drops_a_line_the_filter_keeps(served: Served) -> None:
    """A line passed over unparsed (``raw_may_keep``) is one the filter would not keep:
    checked on every line of a real ledger, for words the columns add (``exit``, ``done``,
    ``rollback to``), words the ledger holds as they are, and quoted ones."""
    s = served.b.s
    s.bar("rollback", "--task", "docs", "--to", "base")
    s.bar("undo", "--task", "docs")
    for name in ("add-discounts", "docs"):
        path = s.root / "home" / "projects" / s.project / "tasks" / served.b.ids[name]
        lines = (path / "ledger.jsonl").read_bytes().splitlines()
        steps = list(reversed(list(Ledger(path / "ledger.jsonl").iter_reverse(warn=False))))
        assert len(steps) == len(lines)
        for text in SOUGHT:
            keep = StepFilter(text=text)
            for line, step in zip(lines, steps, strict=True):
                if keep.keeps(step, describe(step), result(step)[0]):
                    assert keep.raw_may_keep(line), (text, step.step_id)
    kinds = [st.kind for st in Ledger(path / "ledger.jsonl").iter_reverse(warn=False)]
    assert kinds[:2] == ["rollback", "rollback"]  # (the undo is a rollback too)


SOUGHT = (
    "exit 0",
    "done",
    "rollback to base",
    "undo of step",
    "hi.txt",
    "0002",
    "ran",
    "'RATE",
    "discount.py",
    "printf",
    "claude",
    "sh -c",
    "README",
    "echo hi",
)


def test_an_agent_call_is_one_row_with_its_policy_decision_and_checkpoint(
    served: Served,
) -> None:
    b = served.b
    row = served.task("add-discounts").find("tr", id="step-0002")[0]
    assert not row.find("li", class_="policy")  # no "policy allow (no rule)" line of its own
    calls = row.find("li", class_="call")
    rec = next(r for r in b.s.ledger() if r["step_id"] == "0002")
    taken = [
        json.loads(line)
        for line in (b.s.task_dir / "artifacts" / "0002.checkpoints.jsonl").read_text().splitlines()
    ]
    checkpoints = [t for t in taken if "checkpoint" in t]
    judged = {e["tool_use_id"] for e in rec["policy_events"]}
    # one row a call: each checkpoint, and the call the policy blocked (no checkpoint)
    assert len(calls) == len(checkpoints) + 1 == 4
    assert len(judged) == 3  # (the blocked call matched two rules: one row still)
    names = [c.find("a")[0].text if c.find("a") else "-" for c in calls]
    assert names == ["0002.1", "0002.2", "0002.3", "-"]
    write, echo, ls, rm = calls
    assert "Write" in write.text and "policy" not in write.text  # (an edit is not judged)
    assert "echo hi > hi.txt" in echo.text and "policy allow" in echo.text
    assert "ran" in echo.text and "1 file +1 -0" in echo.text
    assert "policy allow" in ls.text and "no changes" in ls.text
    assert "blocked" in rm.attrs["class"] and "Bash" in rm.text and "refused" in rm.text
    rules = [e["rule"] for e in rec["policy_events"] if e["action"] == "block"]
    assert f"policy block: {', '.join(rules)}" in " ".join(rm.text.split())
    page = served.task("add-discounts", "/s/0002")  # the step's page lists them the same
    assert len(page.find("li", class_="call")) == 4
    assert not [r for r in page.find("th") if r.text == "policy"]


def test_a_checkpoint_page_links_the_checkpoints_before_and_after(served: Served) -> None:
    def links(name: str) -> dict[str, str]:
        navs = served.task("add-discounts", f"/s/{name}").find("nav", class_="step-nav")
        return {a.attrs["rel"]: a.text for nav in navs for a in nav.find("a")}

    assert links("0002.1") == {"next": "checkpoint 0002.2 →"}
    assert links("0002.2") == {"prev": "← checkpoint 0002.1", "next": "checkpoint 0002.3 →"}
    assert links("0002.3") == {"prev": "← checkpoint 0002.2"}
    assert links("0002") == {"prev": "← step 0001"}  # (a step's page: the steps)


def options_of(root: Element, name: str) -> list[tuple[str, str, bool]]:
    select = next(s for s in root.find("select") if s.attrs.get("name") == name)
    return [
        (o.attrs.get("value", ""), o.text, "selected" in o.attrs) for o in select.find("option")
    ]


def test_the_actions_page_picks_a_recorded_state_and_a_branch(served: Served) -> None:
    root = served.task("add-discounts", "/actions")
    to = options_of(root, "to")
    assert [v for v, _, _ in to] == ["", "0002", "0002.3", "0002.2", "0002.1", "0001", "base"]
    assert to[0][1] == "the state before the last step (0002)" and to[0][2]
    assert "Bash: echo hi > hi.txt" in to[3][1] and to[3][1].startswith("\u2003↳ 0002.2")
    at = options_of(root, "at")
    assert at[0][:2] == ("", "the last recorded state") and len(at) == len(to)
    target = options_of(root, "target")
    assert target[0] == ("main", "main (the task's base)", True)
    assert {v for v, _, _ in target} == {"main", "feature/x", "release"}  # no task branch
    assert not any(s.attrs.get("name") in ("to", "at", "target") for s in root.find("input"))

    def chosen(**query: str) -> tuple[str, str]:
        picked = [
            (v, t)
            for v, t, on in options_of(served.task("add-discounts", "/actions", **query), "to")
            if on
        ]
        assert len(picked) == 1
        return picked[0]

    assert chosen(to="2")[0] == "0002"  # a step's page links ?to=2
    assert chosen(to="2.2")[0] == "0002.2"
    assert chosen(to="77") == ("77", "77 (as asked)")  # bar says, on preview, it is none


@pytest.mark.parametrize(
    ("before", "said"),
    [
        (timedelta(seconds=3), "just now"),
        (timedelta(seconds=42), "42 s ago"),
        (timedelta(minutes=3, seconds=20), "3 min ago"),
        (timedelta(hours=5, minutes=59), "5 h ago"),
        (timedelta(days=1, hours=2), "yesterday"),
        (timedelta(days=12), "12 days ago"),
        (timedelta(days=400), "23 Oct 2025"),
        (timedelta(seconds=-30), "just now"),  # (another clock, a little ahead)
        (timedelta(hours=-2), "27 Nov 2026 10:00 UTC"),
    ],
)
def test_a_time_is_said_as_a_person_says_it(before: timedelta, said: str) -> None:
    now = datetime(2026, 11, 27, 8, 0, 0, tzinfo=UTC)
    assert ago(now - before, now) == said


def test_a_time_element_carries_the_exact_time() -> None:
    now = datetime(2026, 11, 27, 8, 3, 20, tzinfo=UTC)
    html = when("2026-11-27T08:00:00.937Z", now)
    assert html == (
        '<time datetime="2026-11-27T08:00:00.937Z" title="2026-11-27 08:00:00.937 UTC" '
        "data-ago>3 min ago</time>"
    )
    assert when("not a time", now) == "<time>not a time</time>"


def test_every_time_on_the_pages_is_said_so(served: Served) -> None:
    for path in (
        "/",
        f"/p/{served.b.s.project}/board",
        served.b.url("", "add-discounts"),
        served.b.url("", "add-discounts", "/s/0002"),
        served.b.url("", "add-discounts", "/s/0002.2"),
        "/search?q=hi.txt",
    ):
        times = served.page(path).find("time")
        assert times, path
        for t in times:
            assert "data-ago" in t.attrs and t.attrs["title"].endswith(" UTC"), (path, t)
            assert t.text == "just now" or t.text.endswith(" ago"), (path, t.text)


@pytest.mark.parametrize(
    ("query", "steps"),
    [
        ({"q": "echo hi"}, ["0002"]),  # what its agent ran
        ({"file": "discount"}, ["0001"]),
        ({"q": "test_cart.py"}, ["0002"]),
        ({"kind": "run", "result": "ok"}, ["0002", "0001"]),
        ({"result": "failed"}, []),
        ({"kind": "apply"}, []),
        ({"q": "0001"}, ["0001"]),
        ({"q": "nothing-like-it", "page": "7"}, []),
    ],
)
def test_the_timeline_keeps_the_steps_the_filter_asks_for(
    served: Served, query: dict[str, str], steps: list[str]
) -> None:
    status, text = served.get(served.b.url("", "add-discounts") + "?" + urlencode(query))
    assert status == 200
    root = Tree(text).root
    assert [r.attrs["id"].removeprefix("step-") for r in root.find("tr", class_="step")] == steps
    table = root.find("table", class_="timeline")[0]
    assert "data-live" not in table.attrs  # (a new step may not match: no live rows)
    said = f"{len(steps)} step{'s' if len(steps) != 1 else ''} match"
    assert said in text
