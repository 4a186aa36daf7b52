"""A step's page links the step before and the step after, and the timeline's duration
column says how long each step took (its start has a column of its own). Plain HTTP
against a real ``bar ui`` child process over a real recorded session, with a flow, a task
of one step and a task whose ledger lost a line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from test_security import login, request
from ui_session import Session, base_of, serving, session

from bar.ui.pages import duration
from bar.ui.views import moment


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""
    children: list[Element] = field(default_factory=list)

    def find(self, tag: str, **attrs: str) -> list[Element]:
        found = []
        for child in self.children:
            if child.tag == tag and all(
                value in child.attrs.get(name.rstrip("_"), "").split()
                for name, value in attrs.items()
            ):
                found.append(child)
            found += child.find(tag, **attrs)
        return found


class Tree(HTMLParser):
    """The page as elements, enough to read its tables and links."""

    VOID = frozenset({"meta", "link", "br", "img", "input", "hr"})

    def __init__(self, page: str) -> None:
        super().__init__()
        self.root = Element("root", {})
        self.open = [self.root]
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.open[-1].children.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, 0, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.open[1:]:
            element.text += data


@dataclass
class Served:
    s: Session
    base: str
    cookie: str
    solo: str  # a task of one step
    gappy: str  # a task of three steps whose second line is unreadable

    def page(self, task_id: str, rest: str = "") -> Element:
        url = f"{self.base}/p/{self.s.project}/t/{task_id}{rest}"
        status, _, text = request(url, cookie=self.cookie)
        assert status == 200, (url, text)
        return Tree(text).root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = session(tmp_path_factory.mktemp("ui-step-pages"))
    s.bar("flow", "start", "write the discount rules")
    s.bar("run", "--no-pty", "--", "sh", "-c", "sleep 1.2; echo '# rules' > RULES.md")
    s.bar("flow", "issue", "no test for the maximum yet")
    solo = json.loads(s.bar("task", "new", "solo", "--json").stdout)["id"]
    s.bar("run", "--no-pty", "--", "true")
    gappy = json.loads(s.bar("task", "new", "gappy", "--json").stdout)["id"]
    for i in range(3):
        s.bar("run", "--no-pty", "--", "sh", "-c", f"echo {i} > n.txt")
    ledger = s.task_dir.parent / gappy / "ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text(lines[0] + '{"step_id": "0002", "kind": "ru\n' + lines[2])
    with serving(s) as (_, url):
        yield Served(s, base_of(url), login(url), solo, gappy)


def step_links(root: Element) -> dict[str, tuple[str, str, str]]:
    """The step page's links to its neighbours: rel -> (text, href, aria-keyshortcuts)."""
    navs = root.find("nav", class_="step-nav")
    assert len(navs) <= 1
    links = navs[0].find("a") if navs else []
    return {
        a.attrs["rel"]: (a.text, a.attrs["href"], a.attrs.get("aria-keyshortcuts", ""))
        for a in links
    }


def test_each_step_links_the_one_before_and_after(served: Served) -> None:
    s = served.s
    ids = [r["step_id"] for r in s.ledger()]
    assert len(ids) >= 6
    first = step_links(served.page(s.task_id, f"/s/{ids[0]}"))
    assert set(first) == {"next"}
    assert first["next"] == ("step 0002 →", s.task_url("", "/s/0002"), "n")
    middle = step_links(served.page(s.task_id, "/s/0003"))
    assert middle == {
        "prev": ("← step 0002", s.task_url("", "/s/0002"), "p"),
        "next": ("step 0004 →", s.task_url("", "/s/0004"), "n"),
    }
    last = step_links(served.page(s.task_id, f"/s/{ids[-1]}"))
    assert set(last) == {"prev"} and last["prev"][0] == f"← step {ids[-2]}"

    # following the links walks the whole task, forth and back
    walked, where = [], f"/s/{ids[0]}"
    while True:
        root = served.page(s.task_id, where)
        walked.append(root.find("h1")[0].text.split()[1])
        links = step_links(root)
        if "next" not in links:
            break
        where = links["next"][1].removeprefix(s.task_url(""))
    assert walked == ids
    back = []
    while True:
        root = served.page(s.task_id, where)
        back.append(root.find("h1")[0].text.split()[1])
        links = step_links(root)
        if "prev" not in links:
            break
        where = links["prev"][1].removeprefix(s.task_url(""))
    assert back == ids[::-1]


def test_a_task_of_one_step_has_no_neighbours_and_a_lost_line_is_passed_over(
    served: Served,
) -> None:
    assert served.page(served.solo, "/s/0001").find("nav", class_="step-nav") == []
    first = step_links(served.page(served.gappy, "/s/0001"))
    assert set(first) == {"next"} and first["next"][0] == "step 0003 →"
    last = step_links(served.page(served.gappy, "/s/0003"))
    assert set(last) == {"prev"} and last["prev"][0] == "← step 0001"


def spoken_ms(text: str) -> float:
    """How many milliseconds a duration cell says ("18 ms", "1.2 s", "2 min 5 s")."""
    total = 0.0
    for number, unit in re.findall(r"([0-9.]+) (ms|s|min|h)\b", text):
        total += float(number) * {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000}[unit]
    assert re.fullmatch(r"([0-9.]+ (ms|s|min|h) ?)+", text), text
    return total


def test_the_timeline_shows_durations_and_starts_in_their_own_columns(served: Served) -> None:
    s = served.s
    root = served.page(s.task_id)
    heads = [th.text for th in root.find("thead")[0].find("th")]
    assert heads[4:6] == ["started", "duration"]
    ledger = {r["step_id"]: r for r in s.ledger()}
    rows = [r for r in root.find("tbody")[0].find("tr") if "phase-head" not in r.attrs["class"]]
    steps = [r for r in rows if "step" in r.attrs["class"].split()]
    assert len(steps) == len(ledger)
    for row in steps:
        rec = ledger[row.attrs["id"].removeprefix("step-")]
        cells = row.find("td")
        assert len(cells) == len(heads)
        started, took = cells[4], cells[5]
        stamp = started.find("time")[0]
        assert stamp.attrs["datetime"] == rec["started_at"]
        # how long ago, as a person says it; the exact time (UTC, to the millisecond) in
        # its title
        assert re.fullmatch(r"just now|\d+ s ago|\d+ min ago", started.text), started.text
        exact = rec["started_at"][:23].replace("T", " ") + " UTC"
        assert stamp.attrs["title"] == exact
        assert ":" not in took.text  # no time of day in the duration column
        # to the nearest unit it shows: a tenth of a second below a minute
        assert abs(rec["duration_ms"] - spoken_ms(took.text)) <= 500, (took.text, rec)
        if rec["duration_ms"] < 59_950:
            assert abs(rec["duration_ms"] - spoken_ms(took.text)) <= 50, (took.text, rec)
    slow = [r for r in steps if ledger[r.attrs["id"][5:]]["duration_ms"] >= 1000]
    assert slow and all(r.find("td")[5].text.endswith(" s") for r in slow)

    flow = json.loads(s.bar("flow", "status", "--json", "--task", s.task_id).stdout)
    entries = [r for r in rows if "flow-entry" in r.attrs["class"].split()]
    assert len(entries) == len(flow["history"]) == 2
    for row, entry in zip(entries, reversed(flow["history"]), strict=True):
        cells = row.find("td")
        assert len(cells) == len(heads)
        said, made = moment(cells[4].find("time")[0].attrs["datetime"]), moment(entry["timestamp"])
        assert said is not None and made is not None and abs(said - made) < timedelta(seconds=1)
        assert cells[5].text == ""  # an entry is a moment: it took no time


@pytest.mark.parametrize(
    ("ms", "said"),
    [
        (0, "0 ms"),
        (99, "99 ms"),
        (100, "0.1 s"),
        (553, "0.6 s"),
        (999, "1.0 s"),
        (1000, "1.0 s"),
        (3_400, "3.4 s"),
        (59_949, "59.9 s"),
        (59_950, "1 min"),  # carried up, never "60.0 s"
        (60_000, "1 min"),
        (72_000, "1 min 12 s"),
        (125_000, "2 min 5 s"),
        (3_599_499, "59 min 59 s"),
        (3_599_500, "1 h"),
        (3_600_000, "1 h"),
        (3_780_000, "1 h 3 min"),
        (7_380_000, "2 h 3 min"),
        (-5, "0 ms"),
    ],
)
def test_durations_are_said_as_a_person_says_them(ms: int, said: str) -> None:
    """One formatter for every face: the page's, the command line's (bar log, bar show)."""
    from bar.cli.render import duration as said_by_the_cli

    assert duration(ms) == said == said_by_the_cli(ms)
