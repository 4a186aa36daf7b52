"""``bar ui`` in a real browser (Debian's chromium, driven by Playwright) over a real
recorded session and a real ``bar ui`` child process. Each page is saved as a screenshot
in build/ui-screenshots/ for a person to look at."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from helpers import BAR_EXE, ROOT, Gate
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


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = session(tmp_path_factory.mktemp("ui-browser"))
    with serving(s) as (_, url):
        yield s, url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: object, served: tuple[Session, str]) -> Iterator[object]:
    _, url = served
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.goto(url)  # trades the token for the cookie, and lands on the overview
    yield tab
    context.close()


def shot(tab: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"))


def test_the_overview_lists_the_task(page: object, served: tuple[Session, str]) -> None:
    s, url = served
    assert page.url == base_of(url) + "/"
    row = page.locator("table.tasks tr", has_text="add-discounts")
    sync_api.expect(row).to_contain_text("active")
    sync_api.expect(row.locator("td").nth(4)).to_have_text(str(len(s.ledger())))
    shot(page, "overview")


def test_the_timeline_shows_every_step_and_the_blocked_one(
    page: object, served: tuple[Session, str]
) -> None:
    s, _ = served
    page.click("text=add-discounts")
    rows = page.locator("#steps tr.step")
    ledger = s.ledger()
    sync_api.expect(rows).to_have_count(len(ledger))
    for rec in ledger:
        row = page.locator(f"#step-{rec['step_id']}")
        result = row.locator("td.result")
        if rec.get("blocked"):
            sync_api.expect(result).to_have_text("blocked")
            sync_api.expect(row).to_have_class("step kind-run blocked")
            sync_api.expect(row.locator(".policy.blocked").first).to_contain_text("block")
        elif rec["kind"] == "run":
            sync_api.expect(result).to_have_text(f"exit {rec['exit_code']}")
    sync_api.expect(page.locator("#step-0005")).to_contain_text("rollback to step 0001")
    shot(page, "timeline")


def test_a_steps_diff_shows_the_changed_lines(page: object, served: tuple[Session, str]) -> None:
    s, url = served
    page.goto(s.task_url(base_of(url), "/s/0002"))
    files = page.locator("details.file")
    sync_api.expect(files).to_have_count(2)
    cart = page.locator("details.file[data-path='cart.py']")
    sync_api.expect(cart.locator(".d2h-ins").first).to_be_visible()
    sync_api.expect(cart).to_contain_text("def cut(x):")
    discount = page.locator("details.file[data-path='discount.py']")
    sync_api.expect(discount.locator("td.d2h-del .d2h-code-line-ctn").first).to_contain_text("0.1")
    sync_api.expect(discount.locator("td.d2h-ins .d2h-code-line-ctn").first).to_contain_text("0.15")
    page.click("button[data-format='side-by-side']")
    sync_api.expect(page.locator(".d2h-file-side-diff").first).to_be_visible()
    shot(page, "step")
    page.click("button[data-format='line-by-line']")
    page.goto(s.task_url(base_of(url), "/s/0001"))
    green = page.locator("pre.output span", has_text="all green")
    sync_api.expect(green).to_have_css("color", "rgb(0, 187, 0)")  # the ANSI green, rendered


def test_the_keyboard_walks_from_step_to_step(page: object, served: tuple[Session, str]) -> None:
    s, url = served
    page.goto(s.task_url(base_of(url), "/s/0001"))
    sync_api.expect(page.locator(".step-nav a[rel=prev]")).to_have_count(0)  # the first step
    following = page.locator(".step-nav a[rel=next]")
    sync_api.expect(following).to_have_text("step 0002 →")
    sync_api.expect(following).to_have_accessible_name("next: step 0002")
    following.focus()
    page.keyboard.press("Enter")  # a link like any other: Tab reaches it, Enter follows it
    page.wait_for_url("**/s/0002")  # (and its load event: the page's script listens)
    sync_api.expect(page.locator("h1")).to_contain_text("Step 0002")
    page.keyboard.press("n")
    page.wait_for_url("**/s/0003")
    sync_api.expect(page.locator("h1")).to_contain_text("Step 0003")
    sync_api.expect(page.locator(".step-nav a[rel=prev]")).to_have_text("← step 0002")
    shot(page, "step-nav")
    page.keyboard.press("p")
    page.wait_for_url("**/s/0002")
    sync_api.expect(page.locator("h1")).to_contain_text("Step 0002")
    last = s.ledger()[-1]["step_id"]
    page.goto(s.task_url(base_of(url), f"/s/{last}"))
    sync_api.expect(page.locator(".step-nav a[rel=next]")).to_have_count(0)
    page.keyboard.press("n")  # nothing after the last step: the page stays
    page.wait_for_timeout(300)
    sync_api.expect(page.locator("h1")).to_contain_text(f"Step {last}")


def test_the_terminal_recording_plays(page: object, served: tuple[Session, str]) -> None:
    s, url = served
    page.goto(s.task_url(base_of(url), "/s/0004"))
    page.wait_for_function("window.barPlayer !== undefined")
    page.evaluate("window.barPlayer.play()")
    page.wait_for_timeout(1500)
    played = page.evaluate("window.barPlayer.getCurrentTime()")
    assert 0.5 < played < 10
    sync_api.expect(page.locator("#cast")).to_contain_text("one")
    shot(page, "cast")


def test_compare_two_states(page: object, served: tuple[Session, str]) -> None:
    s, url = served
    page.goto(s.task_url(base_of(url), "/compare"))
    page.fill("input[name=from]", "base")
    page.fill("input[name=to]", "2")
    page.click("text=Compare >> nth=-1")
    files = page.locator("details.file")
    expected = s.git(
        "diff", "--name-only", s.ledger()[0]["snapshot_before"], s.ledger()[1]["snapshot"]
    ).split()
    sync_api.expect(files).to_have_count(len(expected))
    sync_api.expect(page.locator("details.file[data-path='discount.py']")).to_contain_text("0.15")
    shot(page, "compare")


def test_rollback_and_apply_need_a_preview_and_a_confirmation(
    page: object, served: tuple[Session, str]
) -> None:
    s, url = served
    before = len(s.ledger())
    page.goto(s.task_url(base_of(url), "/actions?to=2"))
    page.click("text=Preview rollback")
    sync_api.expect(page.locator(".preview")).to_contain_text("Rolling back to step 0002")
    sync_api.expect(page.locator(".preview")).to_contain_text("discount.py")
    shot(page, "rollback-preview")
    assert len(s.ledger()) == before  # the preview changed nothing
    page.click("text=Confirm: roll back to step 0002")
    sync_api.expect(page.locator(".done")).to_contain_text("Rolled back to step 0002")
    last = s.ledger()[-1]
    assert last["kind"] == "rollback" and last["target_step"] == "0002"

    page.goto(s.task_url(base_of(url), "/actions"))
    page.fill("input[name=message]", "Add discounts")
    page.click("text=Preview apply")
    sync_api.expect(page.locator(".preview")).to_contain_text("Applying task add-discounts to main")
    sync_api.expect(page.locator(".preview .d2h-wrapper")).to_be_visible()
    shot(page, "apply-preview")
    assert s.git("log", "-1", "--format=%s", "main").strip() == "bar policy"
    page.click("text=Confirm: apply to main")
    sync_api.expect(page.locator(".done")).to_contain_text("Applied task add-discounts to main")
    assert s.ledger()[-1]["kind"] == "apply"
    assert s.git("log", "-1", "--format=%s", "main").strip() == "Add discounts"
    assert "0.15" in (s.repo / "discount.py").read_text()  # the developer's checkout


def test_a_refused_action_shows_bars_message_and_hint(
    page: object, served: tuple[Session, str]
) -> None:
    s, url = served
    page.goto(s.task_url(base_of(url), "/actions?to=77"))  # (a link to a state not there)
    picked = page.locator("#rollback select[name=to] option:checked")
    sync_api.expect(picked).to_have_text("77 (as asked)")
    page.click("text=Preview rollback")
    error = page.locator(".error")
    sync_api.expect(error).to_contain_text("bar: no step 0077 in this task")
    sync_api.expect(error.locator(".hint")).to_contain_text("bar log")


def test_the_live_timeline_shows_a_step_started_after_it_loaded(
    page: object, served: tuple[Session, str]
) -> None:
    s, url = served
    page.goto(s.task_url(base_of(url)))
    count = page.locator("#steps tr.step").count()
    page.wait_for_timeout(700)  # the event stream is open
    # the step runs until the page has shown it running (its gate opened), not for a
    # while sized to outlast the page's first look
    gate = Gate(s.root / "go")
    script = f"echo live > live.txt; {gate.script}"
    run = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--", "sh", "-c", script],
        cwd=s.repo,
        env=s.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        sync_api.expect(page.locator(".running-step")).to_contain_text("running", timeout=60_000)
        sync_api.expect(page.locator(".running-step")).to_contain_text("live.txt")
        gate.open()
        assert wait_until(lambda: run.poll() is not None)
        sync_api.expect(page.locator("#steps tr.step")).to_have_count(count + 1, timeout=60_000)
    finally:
        run.wait(timeout=30)
    newest = page.locator("#steps tr.step").first
    sync_api.expect(newest).to_contain_text("echo live")
    sync_api.expect(newest.locator("td.result")).to_have_text("exit 0")
    sync_api.expect(page.locator(".running-step")).to_have_count(0)
