"""The review UI's token never reaches a step (docs/sandbox.md, "What bar does on the step's
behalf"): it is in no command line (the browser is opened on a private page that posts it),
the page is hidden from steps, and a request made from inside a running step is refused even
with every secret in hand."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BAR_EXE
from ui_session import CHROMIUM, base_of, chromium, serving, session, wait_until

from bar.sandbox import UNAVAILABLE_ENV, landlock, namespace

OWN_PIDS = (
    landlock.abi_version() >= 1
    and not os.environ.get(UNAVAILABLE_ENV)
    and namespace.pids_available("/") is None
)

# a step that reads the token and the CSRF token it was handed, and posts an apply
_STEP = """
import sys, urllib.request, urllib.error
base, token = sys.argv[1], sys.argv[2]
req = urllib.request.Request(base + "/", headers={"Cookie": f"bar_ui_{base.rsplit(':', 1)[1]}={token}"})
try:
    urllib.request.urlopen(req, timeout=20)
    print("SERVED")
except urllib.error.HTTPError as e:
    print("REFUSED", e.code, e.read().decode())
"""


@pytest.mark.skipif(not OWN_PIDS, reason="no PID namespace for a step here")
def test_a_step_holding_the_token_is_refused(tmp_path: Path) -> None:
    s = session(tmp_path / "s")
    with serving(s) as (_, url):
        base, token = base_of(url), url.split("token=", 1)[1]
        script = tmp_path / "ask.py"
        script.write_text(_STEP)
        outside = subprocess.run(
            [sys.executable, str(script), base, token], capture_output=True, text=True
        )
        assert "SERVED" in outside.stdout, outside  # the same request, from outside a step
        # a step on the open network reaches the UI, which refuses it
        ran = subprocess.run(
            [
                BAR_EXE,
                "run",
                "--no-pty",
                "--network",
                "open",
                "--",
                sys.executable,
                str(script),
                base,
                token,
            ],
            cwd=s.repo,
            env=s.env,
            capture_output=True,
            text=True,
        )
        assert "REFUSED 403" in ran.stdout and "inside a running bar step" in ran.stdout, ran
        # by default its 127.0.0.1 is its own: the UI is not even there
        ran = subprocess.run(
            [BAR_EXE, "run", "--no-pty", "--", sys.executable, str(script), base, token],
            cwd=s.repo,
            env=s.env,
            capture_output=True,
            text=True,
        )
        assert "SERVED" not in ran.stdout and "Connection refused" in ran.stdout + ran.stderr, ran


def test_the_browser_is_opened_without_the_token_in_its_command_line(tmp_path: Path) -> None:
    s = session(tmp_path / "s")
    said = tmp_path / "browser-argv"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {said}\n')
    browser.chmod(0o755)
    env = {**s.env, "BROWSER": f"{browser} %s"}
    proc = subprocess.Popen(
        [BAR_EXE, "ui", "--port", "0"],
        cwd=s.repo,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(": ", 1)[1].strip()
        token = url.split("token=", 1)[1]
        assert wait_until(said.exists)
        opened = said.read_text().strip()
        assert token not in opened and opened.startswith("file://")
        page = Path(opened.removeprefix("file://"))
        assert token in page.read_text()
        assert stat.S_IMODE(page.stat().st_mode) == 0o600
        assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700
        assert page.parent == Path(s.env["BAR_HOME"]) / "ui"
        # a step cannot read it
        ran = subprocess.run(
            [BAR_EXE, "run", "--no-pty", "--", "cat", str(page)],
            cwd=s.repo,
            env=env,
            capture_output=True,
            text=True,
        )
        assert token not in ran.stdout + ran.stderr
        if CHROMIUM.exists():
            _launched_in_a_browser(opened, base_of(url))
            assert wait_until(lambda: not page.exists())  # used once, then gone
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
    assert not page.exists()


def _launched_in_a_browser(opened: str, base: str) -> None:
    pytest.importorskip("playwright.sync_api")
    with chromium() as browser:
        context = browser.new_context()
        tab = context.new_page()
        tab.goto(opened)
        tab.wait_for_url(base + "/", timeout=20_000)
        assert "add-discounts" in tab.content()  # (the overview: the cookie was set)
        context.close()
