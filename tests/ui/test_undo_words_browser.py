"""``bar ui`` and the command line say a step the same way: an undo or a redo as what it
undid or redid (the page said ``redo of step 0006 (rollback to step 0006)`` where ``bar
redo`` said ``rollback to step 0003``), a command as it was typed, a duration as a person
says it. Read in Debian's chromium, against ``bar log`` of the same task."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from ui_session import CHROMIUM, NO_CHROMIUM, Session, base_of, chromium, serving, session

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = session(tmp_path_factory.mktemp("ui-undo-words"))  # its step 0005: rollback to 1
    assert "Undid step 0005 (rollback to step 0001)" in s.bar("undo").stdout  # 0006
    assert "Redid step 0005 (rollback to step 0001)" in s.bar("redo").stdout  # 0007
    with serving(s) as (_, url):
        yield s, url


def log_lines(s: Session) -> dict[str, tuple[str, str]]:
    """``bar log``'s duration and words for each step."""
    said = {}
    for line in s.bar("--no-pager", "log").stdout.splitlines():
        found = re.match(r"(\d{4})  .*?  (\d[\d.]* (?:ms|s|min|h)(?: \d+ (?:s|min))?)  (.*)$", line)
        if found:
            said[found[1]] = (found[2], found[3].strip())
    return said


def test_the_page_says_each_step_as_the_log_does(served: tuple[Session, str]) -> None:
    s, url = served
    cli = log_lines(s)
    assert cli["0006"][1] == "undo of step 0005 (rollback to step 0001)"
    assert cli["0007"][1] == "redo of step 0005 (rollback to step 0001)"
    assert cli["0001"][1].startswith("sh -c \"printf 'RATE = 0.1")  # no '"'"' in it
    with chromium() as browser:
        tab = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        tab.goto(url)
        tab.goto(s.task_url(base_of(url)))
        rows = tab.locator("#steps tr.step")
        sync_api.expect(rows).to_have_count(len(s.ledger()))
        for step_id, (took, words) in cli.items():
            row = tab.locator(f"#step-{step_id}")
            sync_api.expect(row.locator("td").nth(2).locator("code").first).to_have_text(words)
            sync_api.expect(row.locator("td.duration")).to_have_text(took)
        tab.goto(s.task_url(base_of(url), "/s/0007"))
        sync_api.expect(tab.locator("body")).to_contain_text(cli["0007"][1])
        sync_api.expect(tab.locator("body")).not_to_contain_text("rollback to step 0005")
