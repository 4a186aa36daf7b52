"""A running step's page in ``bar ui``: its output and checkpoints as they come, then its
record, in a real browser (Debian's chromium, driven by Playwright) against a real
``bar ui`` child and real ``bar run`` steps that wait for files the test makes. Its
event stream is guarded like every route (plain HTTP)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BAR_EXE, ROOT
from test_security import login, request
from ui_session import (
    CHROMIUM,
    NO_CHROMIUM,
    Session,
    base_of,
    chromium,
    sealed_env,
    serving,
    wait_until,
)

SHOTS = ROOT / "build" / "ui-screenshots"
WAIT = 60_000  # ms a page may take to show what the step printed (a loaded machine)
GATE = "while [ ! -e {0} ]; do sleep 0.02; done"

browser_needed = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str, Path]]:
    """A project with a task and no step yet, served: (the session, the URL, the worktree)."""
    root = tmp_path_factory.mktemp("ui-live")
    repo = root / "shop"
    repo.mkdir()
    s = Session(root, repo, sealed_env(root), "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "README.md").write_text("shop\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    (repo / ".git" / "info" / "exclude").write_text("go*\n")  # (the files steps wait for)
    task = json.loads(s.bar("task", "new", "live", "--json").stdout)
    s.task_id = task["id"]
    s.project = Path(task["worktree"]).parent.parent.name
    with serving(s) as (_, url):
        yield s, url, Path(task["worktree"])


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip(NO_CHROMIUM)
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: object, served: tuple[Session, str, Path]) -> Iterator[object]:
    _, url, _ = served
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.goto(url)
    yield tab
    context.close()


def start(s: Session, script: str) -> tuple[subprocess.Popen[bytes], str]:
    """``bar run`` of ``script`` in the background, once its step runs: (it, the step id)."""
    run = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--", "sh", "-c", script],
        cwd=s.repo,
        env=s.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def running() -> str | None:
        now = json.loads(s.bar("status", "--json").stdout).get("running")
        return now["step_id"] if now else None

    step = wait_until(running, 60)
    assert step, "the step never ran"
    return run, step


@browser_needed
def test_a_running_steps_page_shows_its_output_as_it_comes_then_its_record(
    page: object, served: tuple[Session, str, Path]
) -> None:
    from playwright.sync_api import expect

    s, url, wt = served
    script = (
        f"echo first; printf '\\033[32mgreen\\033[0m\\n'; {GATE.format('go1')}; echo middle; "
        f"echo warned >&2; {GATE.format('go2')}; echo last"
    )
    run, step = start(s, script)
    try:
        page.goto(s.task_url(base_of(url)))
        banner = page.locator(".running-step")
        expect(banner).to_contain_text("running", timeout=WAIT)
        banner.get_by_role("link", name=f"step {step}").click()
        page.wait_for_url(f"**/s/{step}")
        expect(page.locator("h1")).to_contain_text(f"Step {step}")
        expect(page.locator(".live-state")).to_contain_text("running")
        output = page.locator("#live-output")
        expect(output).to_contain_text("first", timeout=WAIT)
        green = output.locator("span span", has_text="green")
        expect(green).to_have_css("color", "rgb(0, 187, 0)")  # (the ANSI green, rendered)
        page.evaluate("window.stillTheSamePage = true")
        (wt / "go1").touch()
        expect(output).to_contain_text("middle", timeout=WAIT)  # (as it came: no reload)
        expect(output.locator("span[data-stream=stderr]")).to_contain_text("warned")
        assert page.evaluate("window.stillTheSamePage") is True
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "live-step.png"))
        (wt / "go2").touch()
        expect(page.locator("#live-step")).to_have_count(0, timeout=WAIT)  # (its record now)
        expect(page.locator("pre.output")).to_contain_text("last")
        expect(page.locator("table.facts")).to_contain_text("exit 0")
        assert page.evaluate("window.stillTheSamePage") is None
    finally:
        for gate in ("go1", "go2"):
            (wt / gate).touch()
        assert run.wait(timeout=120) == 0
        for gate in ("go1", "go2"):
            (wt / gate).unlink()


@browser_needed
def test_a_running_steps_page_says_when_its_bar_died(
    page: object, served: tuple[Session, str, Path]
) -> None:
    from playwright.sync_api import expect

    s, url, wt = served
    run, step = start(s, f"echo before the end; {GATE.format('go3')}")
    try:
        page.goto(s.task_url(base_of(url), f"/s/{step}"))
        expect(page.locator("#live-output")).to_contain_text("before the end", timeout=WAIT)
        os.kill(run.pid, signal.SIGKILL)
        note = page.locator(".live-note.lost")
        expect(note).to_contain_text(f"step {step}: its bar run (pid ", timeout=WAIT)
        page.reload()  # (and as the page of a step left so)
        expect(page.locator(".live-state")).to_contain_text("interrupted")
        expect(page.locator(".live-note")).to_contain_text("bar doctor --repair")
    finally:
        run.wait(timeout=120)
        (wt / "go3").touch()
        s.bar("doctor", "--repair", check=False)  # (recorded, for the next test)


def test_a_running_steps_events_are_guarded_like_every_page(
    served: tuple[Session, str, Path],
) -> None:
    s, url, wt = served
    run, step = start(s, f"echo secret-ish; {GATE.format('go4')}")
    try:
        live = base_of(url) + s.task_url("", f"/s/{step}/live")
        status, headers, text = request(live)
        assert status == 403 and "secret-ish" not in text
        assert "access-control-allow-origin" not in headers
        cookie = login(url)
        status, headers, text = request(live, cookie=cookie, headers={"Host": "evil.example"})
        assert status != 200 and "secret-ish" not in text
        status, _, text = request(base_of(url) + s.task_url("", f"/s/{step}"), cookie=cookie)
        assert status == 200 and "secret-ish" in text
        assert "data-ago" in text  # (its start as a person says it: "just now", "3 min ago")
    finally:
        (wt / "go4").touch()
        assert run.wait(timeout=120) == 0


def test_a_long_running_output_is_shown_in_part_and_linked(
    served: tuple[Session, str, Path],
) -> None:
    s, url, wt = served
    script = f"head -c 3000000 /dev/zero | tr '\\0' x; echo; {GATE.format('go5')}"
    run, step = start(s, script)
    try:
        cookie = login(url)
        page = base_of(url) + s.task_url("", f"/s/{step}")

        def long_enough() -> str | None:
            status, _, text = request(page, cookie=cookie)
            return text if status == 200 and "The output is long" in text else None

        text = wait_until(long_enough, 60)
        assert text, "the page never said the output was cut"
        assert f"/artifacts/{step}.output" in text
        assert text.count("x") < 2_200_000  # (the first part, as a recorded page shows)
    finally:
        (wt / "go5").touch()
        assert run.wait(timeout=120) == 0
