"""``bar ui``'s Decisions page and the flow's phases, in a real browser (Debian's chromium,
driven by Playwright) over a real recorded session and a real ``bar ui`` child process:
the agent asks with ``bar decide submit`` (seed 004's example), the person answers in the
page, and the agent reads the answer back exactly as ``bar decide answer`` would give it.
Screenshots go to build/ui-screenshots/."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE, ROOT
from ui_session import (
    CHROMIUM,
    NO_CHROMIUM,
    Session,
    base_of,
    chromium,
    serving,
    session,
    wait_until,
)

SHOTS = ROOT / "build" / "ui-screenshots"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)

sync_api = pytest.importorskip("playwright.sync_api")

# seed 004 (§2.1): the authentication module, jwt or session, bcrypt or argon2
SEED_INPUT: dict[str, Any] = {
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
NOTE = "团队更熟悉 bcrypt"
# the same questions in English (the page's screenshot in docs/ is made from these)
ENGLISH: dict[str, Any] = {
    "task": "Implement the authentication module",
    "source": "task-now.md",
    "items": [
        {
            "id": 1,
            "title": "Authentication method",
            "location": {"file": "task-now.md", "start": 5, "end": 7},
            "context": "The task does not say which authentication to use",
            "options": [
                {
                    "value": "jwt",
                    "label": "JWT tokens",
                    "score": 85,
                    "pros": ["stateless", "scales out", "works across domains"],
                    "cons": ["cannot be revoked", "needs refreshing"],
                },
                {
                    "value": "session",
                    "label": "Server sessions",
                    "score": 70,
                    "pros": ["simple", "can be revoked"],
                    "cons": ["needs storage", "scales poorly"],
                },
            ],
            "recommend": "jwt",
        },
        {
            "id": 2,
            "title": "Password hashing",
            "context": "How passwords are stored",
            "options": [
                {
                    "value": "bcrypt",
                    "label": "bcrypt",
                    "score": 90,
                    "pros": ["proven", "salted"],
                    "cons": ["slow"],
                },
                {
                    "value": "argon2",
                    "label": "Argon2",
                    "score": 95,
                    "pros": ["the newest standard", "resists GPU attacks"],
                    "cons": ["fewer libraries"],
                },
            ],
            "recommend": "bcrypt",
        },
    ],
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = session(tmp_path_factory.mktemp("ui-decide"))
    with serving(s) as (_, url):
        yield s, url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any, served: tuple[Session, str]) -> Iterator[Any]:
    _, url = served
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(url)
    yield tab
    context.close()


def shot(tab: Any, name: str, *, full: bool = False) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full)


def questions(s: Session, data: dict[str, Any], name: str = "questions.json") -> Path:
    path = s.root / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_seed_004_answered_in_the_page_reads_back_as_decide_output(
    page: Any, served: tuple[Session, str]
) -> None:
    s, url = served
    s.bar("decide", "submit", f"@{questions(s, SEED_INPUT)}")
    page.reload()  # the overview says an agent waits, on the task's row
    row = page.locator("table.tasks tr", has_text="add-discounts")
    sync_api.expect(row.locator(".badge.waiting")).to_have_text("2 decisions waiting")
    page.goto(s.task_url(base_of(url)))
    sync_api.expect(page.locator(".task-nav a", has_text="Decisions")).to_contain_text("2")
    page.click(".task-nav >> text=Decisions")

    first = page.locator("#item-1")
    sync_api.expect(first.locator("legend")).to_have_text("1. 认证方式选择")
    sync_api.expect(first.locator(".location")).to_have_text("task-now.md:5-7")
    sync_api.expect(first.locator(".context")).to_contain_text("未明确指定认证方式")
    jwt = first.locator("label.option", has_text="JWT Token 认证")
    sync_api.expect(jwt.locator(".score")).to_have_text("85")
    sync_api.expect(jwt.locator(".pros")).to_contain_text("跨域友好")
    sync_api.expect(jwt.locator(".cons")).to_contain_text("需要处理刷新")
    sync_api.expect(jwt.locator(".badge.rec")).to_have_text("recommended")
    sync_api.expect(page.locator("input[name=chosen-1][value=jwt]")).to_be_checked()
    sync_api.expect(page.locator("input[name=chosen-2][value=bcrypt]")).to_be_checked()

    page.check("input[name=chosen-1][value=session]")  # not the recommendation
    page.fill("input[name=note-2]", NOTE)
    shot(page, "decisions", full=True)
    page.click("button:text('Answer')")
    sync_api.expect(page.locator(".done")).to_contain_text("Answered decision")
    past = page.locator("ul.past li.answered").first
    sync_api.expect(past).to_contain_text("Session 认证")
    sync_api.expect(past).to_contain_text("not the recommendation")
    sync_api.expect(past.locator("q.note")).to_have_text(NOTE)
    sync_api.expect(page.locator(".task-nav .badge.waiting")).to_have_count(0)
    shot(page, "decisions-answered")

    expected = {
        "decisions": [{"id": 1, "chosen": "session"}, {"id": 2, "chosen": "bcrypt", "note": NOTE}]
    }
    out = s.bar("decide", "result", "--json").stdout
    assert out == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"

    last = s.ledger()[-1]
    assert last["kind"] == "decision" and last["decisions"] == expected["decisions"]
    page.goto(s.task_url(base_of(url)))
    row = page.locator(f"#step-{last['step_id']}")
    sync_api.expect(row).to_have_class("step kind-decision ok")
    sync_api.expect(row).to_contain_text("1=session, 2=bcrypt")


def test_an_answer_the_agent_did_not_allow_shows_bars_sentence(
    page: Any, served: tuple[Session, str]
) -> None:
    s, url = served
    unsure = {
        "task": "rounding",
        "source": "TASK.md",
        "items": [
            {
                "id": 4,
                "title": "Round to cents?",
                "options": [
                    {"value": "round", "label": "half up"},
                    {"value": "floor", "label": "down"},
                ],
            }
        ],
    }
    s.bar("decide", "submit", f"@{questions(s, unsure, 'unsure.json')}")
    page.goto(s.task_url(base_of(url), "/decisions"))
    page.fill("input[name=note-4]", "keep it simple")
    page.click("button:text('Answer')")  # no recommendation, so nothing was chosen
    error = page.locator(".error")
    sync_api.expect(error).to_contain_text("bar: item 4 not answered: every item needs a choice")
    sync_api.expect(page.locator("input[name=note-4]")).to_have_value("keep it simple")
    assert s.bar("decide", "result", check=False).returncode == 21  # still waiting
    page.check("input[name=chosen-4][value=floor]")
    page.click("button:text('Answer')")
    sync_api.expect(page.locator(".done")).to_contain_text("Answered decision")
    assert json.loads(s.bar("decide", "result", "--json").stdout) == {
        "decisions": [{"id": 4, "chosen": "floor", "note": "keep it simple"}]
    }


def test_an_agent_waiting_inside_a_running_step_gets_the_pages_answer(
    page: Any, served: tuple[Session, str]
) -> None:
    s, url = served
    asked = questions(s, ENGLISH, "agent.json")
    before = len(s.ledger())
    script = f"'{BAR_EXE}' decide submit @'{asked}' --wait"
    run = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--", "sh", "-c", script],
        cwd=s.repo,
        env=s.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        decisions = s.task_url(base_of(url), "/decisions")

        def asking() -> bool:
            page.goto(decisions)
            return page.locator("form.decide").count() == 1

        assert wait_until(asking), "the agent's questions never showed"
        sync_api.expect(page.locator(".running-step")).to_have_count(0)  # not on this page
        page.check("input[name=chosen-2][value=argon2]")
        page.fill("input[name=note-1]", "stateless is fine")
        shot(page, "decisions-agent")
        page.click("button:text('Answer')")
        done = page.locator(".done")
        sync_api.expect(done).to_contain_text("A step is running")
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err
    chosen = [
        {"id": 1, "chosen": "jwt", "note": "stateless is fine"},
        {"id": 2, "chosen": "argon2"},
    ]
    assert json.loads(out) == {"decisions": chosen}  # what the agent read, from its step
    added = s.ledger()[before:]
    assert [r["kind"] for r in added] == ["run", "decision"]
    assert added[1]["decisions"] == chosen


def test_the_timeline_groups_steps_under_the_flows_phases(
    page: Any, served: tuple[Session, str]
) -> None:
    s, url = served
    s.bar("flow", "start", "design the discount rules")
    s.bar("run", "--no-pty", "--", "sh", "-c", "echo '# rules' > RULES.md")
    s.bar("flow", "next-part", "rules written, implementing")
    s.bar("run", "--no-pty", "--", "sh", "-c", "echo 'MAX = 0.5' >> discount.py")
    s.bar("flow", "issue", "no test for the maximum yet")
    flow = json.loads(s.bar("flow", "status", "--json").stdout)
    ledger = s.ledger()
    page.goto(s.task_url(base_of(url)))
    sync_api.expect(page.locator(".meta .flow-now")).to_have_text(flow["current_phase"])
    sync_api.expect(page.locator("h1 + .meta + .meta")).to_contain_text(
        f"step {flow['current_step']}"
    )
    heads = page.locator("#steps tr.phase-head")
    sync_api.expect(heads.nth(0)).to_have_text("phase impl")
    sync_api.expect(heads.nth(1)).to_have_text("phase flow-design")
    sync_api.expect(heads.nth(2)).to_have_text("before the flow started")
    # newest first: the issue, the impl step, next-part, the design step, start, the rest
    rows = page.locator("#steps tr:not(.phase-head)")
    sync_api.expect(rows.nth(0)).to_have_class("flow-entry")
    sync_api.expect(rows.nth(0).locator(".action")).to_have_text("issue")
    sync_api.expect(rows.nth(0)).to_contain_text("no test for the maximum yet")
    sync_api.expect(rows.nth(1)).to_have_id(f"step-{ledger[-1]['step_id']}")
    sync_api.expect(rows.nth(2).locator(".action")).to_have_text("next-part")
    sync_api.expect(rows.nth(3)).to_have_id(f"step-{ledger[-2]['step_id']}")
    sync_api.expect(rows.nth(4).locator(".action")).to_have_text("start")
    entry = flow["history"][-1]
    sync_api.expect(rows.nth(0)).to_contain_text(entry["git_commit"][:10])
    shot(page, "timeline-phases")
