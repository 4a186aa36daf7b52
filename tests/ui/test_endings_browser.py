"""How a step and an agent's tool call ended, in a real browser (Debian's chromium, driven
by Playwright) over a real ``bar ui`` child: a step stopped by SIGINT reads
``interrupted`` as on the command line (never ``signal 2``), and a failing test run in
the conversation shows its exit code and the last line of its output, where the failures
are counted, rather than the agent's ``Exit code 1`` header. Screenshots in
build/ui-screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_browser import shot
from test_conversation import agent_session
from ui_session import CHROMIUM, NO_CHROMIUM, Session, base_of, chromium, serving

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)

sync_api = pytest.importorskip("playwright.sync_api")

PASSED = "".join(f"tests/test_cli.py::test_{i} PASSED\n" for i in range(1, 41))  # (kept whole)
VERDICT = "2 failed, 117 passed in 0.42s"
TESTS: list[dict[str, Any]] = [
    {"prompt": "Run the tests"},
    {  # as Claude Code's Bash tool tells its model a command failed
        "tool": "Bash",
        "input": {"command": "pytest -q"},
        "result": f"Exit code 1\n{PASSED}{VERDICT}",
        "ok": False,
    },
    {"say": "All tests pass."},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = agent_session(tmp_path_factory.mktemp("ui-endings-browser"), TESTS)  # 0001, 0002
    stopped = s.bar("run", "--no-pty", "--", "sh", "-c", "kill -INT $$", check=False)  # 0003
    assert stopped.returncode == 130, stopped.stderr
    with serving(s) as (_, url):
        yield s, url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def opened(browser: Any, s: Session, url: str, rest: str = "") -> Any:
    """A tab on the task's page (``rest`` below it), logged in with ``url``'s token."""
    tab = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    tab.goto(url)  # trades the token for the cookie
    tab.goto(s.task_url(base_of(url), rest))
    return tab


def test_a_step_stopped_by_sigint_reads_interrupted_as_on_the_command_line(
    browser: object, served: tuple[Session, str]
) -> None:
    s, url = served
    (rec,) = [r for r in s.ledger() if r["step_id"] == "0003"]
    assert (rec["exit_code"], rec["signal"]) == (130, 2)
    logged = s.bar("log").stdout
    assert "0003  run  interrupted" in logged
    tab = opened(browser, s, url)
    try:
        result = tab.locator("#step-0003 td.result")
        sync_api.expect(result).to_have_text("interrupted")
        sync_api.expect(result).to_have_class("result stopped")
        sync_api.expect(result).to_have_css("color", "rgb(154, 103, 0)")  # (--warn)
        sync_api.expect(tab.locator("#step-0003 td.started")).not_to_have_css(
            "color", "rgb(154, 103, 0)"
        )
        sync_api.expect(tab.locator("#step-0001 td.result")).to_have_text("exit 0")
        shot(tab, "endings-timeline")
        tab.locator("#step-0003 a").first.click()
        tab.wait_for_url("**/s/0003")
        row = tab.locator("table.facts tr", has=tab.locator("th:text-is('result')"))
        sync_api.expect(row.locator("td")).to_have_text("interrupted (SIGINT, exit 130)")
        assert "signal 2" not in tab.content()
    finally:
        tab.context.close()


def test_a_failing_test_run_shows_its_exit_code_and_its_verdict(
    browser: object, served: tuple[Session, str]
) -> None:
    s, url = served
    tab = opened(browser, s, url, "/s/0002")
    try:
        call = tab.locator("ol.events li.tool_call")
        result = call.locator("div.result")
        sync_api.expect(result.locator("b")).to_have_text("exit 1")
        sync_api.expect(result).to_have_class("result bad")
        shown = result.locator("div.summary")
        sync_api.expect(shown).to_contain_text("tests/test_cli.py::test_1 PASSED")
        sync_api.expect(shown).to_contain_text(VERDICT)
        assert "Exit code" not in (shown.text_content() or "")
        shot(tab, "endings-conversation")
        # the whole output, in place
        result.locator("a.more").click()
        sync_api.expect(result.locator("a.more")).to_have_count(0)
        assert shown.text_content() == f"{PASSED}{VERDICT}"
    finally:
        tab.context.close()
