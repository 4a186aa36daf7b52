"""An agent's conversation in a real browser (Debian's chromium, driven by Playwright):
beside the checkpoints, a tool call opens its checkpoint's diff, a cut text is shown
whole in place, a checkpoint leads back to its call, and what the agent wrote stays
inert text. Over real agent steps (``test_conversation.agent_session``) and a real
``bar ui`` child; screenshots in build/ui-screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_browser import shot
from test_conversation import HOSTILE, LONG, SCRIPT, agent_session
from ui_session import CHROMIUM, NO_CHROMIUM, Session, chromium, serving

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def opened(browser: object, url: str) -> object:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.goto(url)  # trades the token for the cookie
    return tab


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = agent_session(tmp_path_factory.mktemp("ui-conversation-browser"), SCRIPT)
    with serving(s) as (_, url):
        yield s, url


@pytest.fixture
def page(browser: object, served: tuple[Session, str]) -> Iterator[object]:
    s, url = served
    tab = opened(browser, url)
    tab.goto(s.task_url(url.split("/?", 1)[0], "/s/0002"))
    yield tab
    tab.context.close()


def test_the_conversation_sits_beside_the_checkpoints(page: object) -> None:
    talk = page.locator("section.conversation")
    side = page.locator("aside.session-checkpoints")
    sync_api.expect(talk.locator("ol.events > li").first).to_contain_text("Add a discount")
    sync_api.expect(side.locator("li")).to_have_count(2)
    left, right = talk.bounding_box(), side.bounding_box()
    assert left is not None and right is not None
    assert left["x"] + left["width"] <= right["x"]  # side by side
    assert right["y"] < left["y"] + left["height"]
    shot(page, "conversation")


def test_a_click_on_a_tool_call_opens_its_checkpoints_diff(page: object) -> None:
    call = page.locator("ol.events li.tool_call", has=page.locator("a.tool")).first
    sync_api.expect(call.locator("code.input")).to_have_text("discount.py")
    call.locator("a.tool").click()
    page.wait_for_url("**/s/0002.1")
    sync_api.expect(page.locator("h1")).to_contain_text("Checkpoint 0002.1")
    added = page.locator(
        "details.file[data-path='discount.py'] td.d2h-ins .d2h-code-line-ctn"
    ).first
    sync_api.expect(added).to_contain_text("RATE = 0.1")
    shot(page, "conversation-checkpoint")
    # and its page leads back to the call in the conversation
    page.locator("table.facts tr", has=page.locator("th:text-is('call')")).locator("a").click()
    page.wait_for_url("**/s/0002#call-*")
    target = page.locator("ol.events li.tool_call:target")
    sync_api.expect(target.locator("code.input")).to_have_text("discount.py")
    sync_api.expect(target).to_be_in_viewport()


def test_a_cut_text_is_shown_whole_in_place(page: object) -> None:
    where = page.url
    cut = page.locator("ol.events li", has=page.locator("[data-cut]"))
    sync_api.expect(cut).to_have_count(1)
    long = page.locator(f"ol.events li[data-n='{cut.get_attribute('data-n')}']")
    long.locator("a.more").click()
    sync_api.expect(long.locator("a.more")).to_have_count(0)
    assert long.locator("div.text").text_content() == LONG
    assert page.url == where  # no page was left


def test_a_checkpoint_beside_the_list_leads_to_its_call(page: object) -> None:
    page.locator("aside.session-checkpoints li").nth(1).locator("a.to-call").click()
    target = page.locator("ol.events li:target")
    sync_api.expect(target.locator("code.input")).to_have_text("cart.py")
    sync_api.expect(target).to_be_in_viewport()
    sync_api.expect(target).to_have_css("background-color", "rgb(255, 248, 197)")


def test_what_the_agent_said_stays_inert_in_the_browser(
    browser: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root: Path = tmp_path_factory.mktemp("ui-conversation-browser-hostile")
    s = agent_session(root, HOSTILE)
    with serving(s) as (_, url):
        tab = opened(browser, url)
        try:
            base = url.split("/?", 1)[0]
            for rest in ("", "/s/0002", "/s/0002.1"):
                tab.goto(s.task_url(base, rest))
                tab.wait_for_load_state("load")
                assert tab.evaluate("window.__pwned") is None, rest
            tab.goto(s.task_url(base, "/s/0002"))
            links = tab.locator("a[data-more]")
            left = links.count()
            assert left >= 3  # the long reply, the call's input, its result
            while left:
                links.first.click()
                left -= 1
                sync_api.expect(links).to_have_count(left)
            sync_api.expect(tab.locator("ol.events li.message").first).to_contain_text(
                "<img src=x onerror=window.__pwned=1>"
            )
            tab.wait_for_timeout(300)
            assert tab.evaluate("window.__pwned") is None
            assert tab.locator("main img, main script").count() == 0
            shot(tab, "conversation-hostile")
        finally:
            tab.context.close()
