"""``bar ui``'s lists in a real browser (Debian's chromium, driven by Playwright): the
search box, the overview's and the timeline's filters, the board, one row per agent call,
a checkpoint's neighbours by key, the Actions page's pickers, and times that say "3 min
ago" and stay true. Over a project made by the real ``bar`` (``ui_board``) and a real
``bar ui`` child; each page is saved in build/ui-screenshots/ for a person to look at."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from helpers import ROOT
from ui_board import Board, board_session
from ui_session import CHROMIUM, NO_CHROMIUM, base_of, chromium, serving

SHOTS = ROOT / "build" / "ui-screenshots"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Board, str]]:
    b = board_session(tmp_path_factory.mktemp("ui-lists-browser"))
    with serving(b.s) as (_, url):
        yield b, url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: object, served: tuple[Board, str]) -> Iterator[object]:
    _, url = served
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(url)
    yield tab
    context.close()


def shot(tab: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_the_search_box_finds_a_file_and_leads_to_its_step(
    page: object, served: tuple[Board, str]
) -> None:
    b, url = served
    page.goto(b.url(base_of(url), "add-discounts"))
    page.keyboard.press("/")  # the key that reaches the box from anywhere
    box = page.locator("form.find input[name=q]")
    expect(box).to_be_focused()
    box.fill("hi.txt")
    box.press("Enter")
    page.wait_for_url("**/search?q=hi.txt")
    files = page.locator("#found-files li")
    expect(files).to_have_count(1)
    expect(files.first).to_contain_text("hi.txt changed in 1 step")
    expect(page.locator("#found-commands li")).to_contain_text("echo hi > hi.txt")
    shot(page, "search")
    files.first.locator("a", has_text="0002").click()
    page.wait_for_url("**/s/0002")
    expect(page.locator("details.file[data-path='hi.txt']")).to_be_visible()


def test_the_overview_filters_by_owner_and_says_description_and_cost(
    page: object, served: tuple[Board, str]
) -> None:
    b, _ = served
    rows = page.locator("table.tasks tr[data-task]")
    expect(rows).to_have_count(5)
    discounts = page.locator(f"tr[data-task='{b.ids['add-discounts']}']")
    expect(discounts.locator(".description")).to_have_text("Discounts for loyal customers")
    expect(discounts.locator("td.cost")).to_have_text(re.compile(r"^\$\d+\.\d{4}$"))
    shot(page, "overview-lists")
    page.select_option("form.filter select[name=owner]", "alice")
    page.click("form.filter button")
    page.wait_for_url("**/?*owner=alice*")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("docs")
    expect(rows.first.locator("td").nth(2)).to_have_text("@alice")
    page.fill("form.filter input[name=q]", "no such task")
    page.click("form.filter button")
    expect(page.locator("p.empty")).to_contain_text("None of its 5 tasks matches the filter")


def test_the_board_shows_columns_of_cards(page: object, served: tuple[Board, str]) -> None:
    b, url = served
    page.goto(b.url(base_of(url), "add-discounts"))
    page.keyboard.press("b")  # from a task's page to its project's board
    page.wait_for_url("**/board")
    columns = page.locator("section.column")
    expect(columns.locator("h2")).to_have_text(
        ["Pending 1", "Claimed 1", "In progress 2", "Done 1"]
    )
    claimed = page.locator("section[data-column=claimed] li.card")
    expect(claimed).to_contain_text("ui-login")
    expect(claimed.locator(".owner")).to_have_text("@agent-b")
    box = columns.nth(0).bounding_box(), columns.nth(1).bounding_box()
    assert box[0] and box[1] and box[0]["y"] == box[1]["y"] and box[0]["x"] < box[1]["x"]
    shot(page, "board")
    page.select_option("form.group-by select[name=by]", "owner")
    page.click("form.group-by button")
    expect(columns.locator("h2")).to_have_text(["Nobody's 3", "@agent-b 1", "@alice 1"])
    shot(page, "board-by-owner")
    page.locator("li.card a.name", has_text="docs").click()
    expect(page.locator("h1")).to_contain_text("docs")


def test_an_agent_call_is_one_row_and_a_blocked_one_stands_out(
    page: object, served: tuple[Board, str]
) -> None:
    b, url = served
    page.goto(b.url(base_of(url), "add-discounts"))
    calls = page.locator("#step-0002 li.call")
    expect(calls).to_have_count(4)
    expect(page.locator("#step-0002 li.policy")).to_have_count(0)
    expect(calls.nth(1)).to_have_text(
        "0002.2 Bash echo hi > hi.txt · policy allow · ran · 1 file +1 -0"
    )
    blocked = calls.nth(3)
    expect(blocked).to_contain_text("rm -rf / --no-preserve-root")
    expect(blocked).to_have_css("color", "rgb(207, 34, 46)")
    shot(page, "timeline-calls")
    calls.nth(1).locator("a.checkpoint").click()
    page.wait_for_url("**/s/0002.2")
    expect(page.locator("h1")).to_contain_text("Checkpoint 0002.2")


def test_the_keyboard_walks_from_checkpoint_to_checkpoint(
    page: object, served: tuple[Board, str]
) -> None:
    b, url = served
    page.goto(b.url(base_of(url), "add-discounts", "/s/0002.1"))
    expect(page.locator(".step-nav a[rel=prev]")).to_have_count(0)  # the step's first
    expect(page.locator(".step-nav a[rel=next]")).to_have_text("checkpoint 0002.2 →")
    page.keyboard.press("n")
    page.wait_for_url("**/s/0002.2")
    expect(page.locator("h1")).to_contain_text("Checkpoint 0002.2")
    shot(page, "checkpoint-nav")
    page.keyboard.press("n")
    page.wait_for_url("**/s/0002.3")
    expect(page.locator(".step-nav a[rel=next]")).to_have_count(0)  # the step's last
    page.keyboard.press("p")
    page.wait_for_url("**/s/0002.2")
    expect(page.locator(".step-nav a[rel=prev]")).to_have_accessible_name(
        "previous: checkpoint 0002.1"
    )


def test_the_actions_page_picks_a_state_and_a_branch_from_lists(
    page: object, served: tuple[Board, str]
) -> None:
    b, url = served
    before = len(b.s.ledger())
    page.goto(b.url(base_of(url), "add-discounts", "/actions"))
    state = page.locator("#rollback select[name=to]")
    expect(state.locator("option:checked")).to_have_text("the state before the last step (0002)")
    state.select_option("0002.1")  # (after the agent's Write, before its echo)
    page.click("text=Preview rollback")
    expect(page.locator(".preview")).to_contain_text("Rolling back to checkpoint 0002.1")
    expect(page.locator(".preview")).to_contain_text("delete hi.txt")
    assert len(b.s.ledger()) == before
    page.goto(b.url(base_of(url), "add-discounts", "/actions"))
    target = page.locator("#apply select[name=target]")
    expect(target.locator("option:checked")).to_have_text("main (the task's base)")
    expect(target.locator("option")).to_have_count(3)
    target.select_option("release")
    page.locator("#apply select[name=at]").select_option("0001")
    shot(page, "actions-pickers")
    page.click("text=Preview apply")
    preview = page.locator(".preview")
    expect(preview).to_contain_text("Applying task add-discounts to release")
    expect(preview).to_contain_text("discount.py")
    expect(preview).not_to_contain_text("hi.txt")  # (the state of step 0001)


def test_a_time_says_how_long_ago_and_stays_true(page: object, served: tuple[Board, str]) -> None:
    b, url = served
    page.clock.install(time=datetime.now(UTC))
    page.goto(b.url(base_of(url), "add-discounts"))
    started = page.locator("#step-0001 td.started time")
    expect(started).to_have_text(re.compile(r"^(just now|\d+ s ago|\d+ min ago)$"))
    stamp = b.s.ledger()[0]["started_at"]
    expect(started).to_have_attribute("title", stamp[:23].replace("T", " ") + " UTC")
    expect(started).to_have_attribute("datetime", stamp)
    page.clock.fast_forward("02:00:00")  # the page left open two hours: it says so
    expect(started).to_have_text("2 h ago")
    expect(started).to_have_attribute("title", stamp[:23].replace("T", " ") + " UTC")


def test_the_timeline_filter_keeps_the_steps_that_changed_a_file(
    page: object, served: tuple[Board, str]
) -> None:
    b, url = served
    page.goto(b.url(base_of(url), "add-discounts"))
    expect(page.locator("#steps tr.step")).to_have_count(2)
    page.fill("form.filter input[name=file]", "discount.py")
    page.click("form.filter button")
    expect(page.locator("#steps tr.step")).to_have_count(1)
    expect(page.locator("#step-0001")).to_be_visible()
    expect(page.locator("p.filtered")).to_have_text("1 step matches the filter.")
    shot(page, "timeline-filter")
    page.click("form.filter >> text=clear")
    expect(page.locator("#steps tr.step")).to_have_count(2)
