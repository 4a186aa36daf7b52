"""What the developer sees of a task on workers, through the real commands, a real
Temporal dev server and a real ``bar worker``: the board (in progress, or claimed by the
worker), a base the worker moved as it started the task (said and recorded, and never
moved back), and what runs now on the overview of ``bar ui`` (nothing for an idle task,
and a server that does not answer said once, not in every row)."""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from helpers import ROOT, Gate
from two_machines import Machine
from ui_session import CHROMIUM, base_of, chromium, serving

from bar.workers.devserver import DevServer
from workers import Cluster, cluster, wait_for

SHOTS = ROOT / "build" / "ui-screenshots"


@pytest.fixture
def one(
    tmp_path: Path,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cluster]:
    """A developer machine and one worker machine, whose worker is not started yet."""
    with cluster(tmp_path, temporal_server, monkeypatch, workers=("w1",)) as made:
        yield made


def events(machine: Machine) -> list[dict[str, object]]:
    path = machine.project_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_worker_whose_main_is_behind_keeps_the_base_and_the_board_says_in_progress(
    one: Cluster,
) -> None:
    dev = one.dev
    one.start_worker("w1")
    # the developer's main has a commit the worker's clone has not seen
    (dev.repo / "mine.txt").write_text("made here\n")
    dev.git("add", "mine.txt")
    dev.git("commit", "-q", "-m", "not pushed yet")
    head = dev.ref("HEAD")
    dev.ok("task", "new", "fix", "--on", one.queue)
    sent = dev.task("fix")
    assert sent["base_commit"] == head
    assert sent["board"] == {"status": "in_progress", "owner": "", "worktree": ""}
    ran = dev.ok("run", "--on", one.queue, "--task", "fix", "--", "sh", "-c", "ls; echo x > x.txt")
    assert "mine.txt" in ran.out  # the step ran on the base the developer made it on
    assert "does not start from where it was planned" not in ran.err
    shown = dev.task("fix")
    assert shown["base_commit"] == head and "base_moved" not in shown
    assert shown["board"]["status"] == "in_progress" and shown["steps"] == 1
    assert shown["state"] == "on-workers" and shown["worktree_missing"] is False
    text = dev.ok("task", "show", "fix").out
    assert f"board       in_progress, on the workers of queue {one.queue}" in text
    assert "none here: on the worker that runs its next step" in text
    assert dev.ok("doctor").code == 0
    # it runs on workers: no worktree is made here behind their back
    refused = dev.bar("task", "start", "fix")
    assert refused.code == 1 and "runs on workers" in refused.err
    # brought back: pending here, then started with its worktree at the last state
    dev.ok("task", "adopt", "fix")
    back = dev.task("fix")
    assert back["board"]["status"] == "in_progress" and back["board"]["worktree"] == "fix"
    assert (Path(back["worktree"]) / "x.txt").read_text() == "x\n"


def test_a_base_the_worker_moves_as_it_starts_a_task_is_told_and_recorded(
    one: Cluster,
) -> None:
    dev, w1 = one.dev, one.machines["w1"]
    planned_on = dev.ref("HEAD")
    dev.ok("task", "new", "planned", "--plan", "--on", one.queue, "-d", "list the files")
    assert dev.task("planned")["board"] == {"status": "pending", "owner": "", "worktree": ""}
    # main went on, and the worker's clone has it: the task starts from it there
    (w1.repo / "newer.txt").write_text("newer\n")
    w1.git("add", "newer.txt")
    w1.git("commit", "-q", "-m", "main went on")
    w1.git("push", "-q", "origin", "main")
    moved_to = w1.ref("HEAD")
    one.start_worker("w1", "--claim", "--", "sh", "-c", "ls > files.txt")

    said: list[str] = []

    def back() -> bool:
        said.append(dev.ok("fetch").out)
        return dev.task("planned")["steps"] == 1

    wait_for(back, 90, "the claimed task's step")
    assert any("does not start from where it was planned" in s for s in said), said
    assert "+newer.txt" in dev.ok("diff", "--task", "planned").out
    shown = dev.task("planned")
    assert shown["board"] == {"status": "in_progress", "owner": "w1", "worktree": ""}
    assert shown["base_commit"] == moved_to
    moved = shown["base_moved"]
    assert (moved["from"], moved["to"], moved["by"]) == (planned_on, moved_to, "w1")
    # where the developer looks
    short_from, short_to = planned_on[:10], moved_to[:10]
    text = dev.ok("task", "show", "planned").out
    assert f"planned on {short_from}; main had moved on to {short_to} when w1 started it" in text
    assert "claimed by w1" in text
    assert f"planned on {short_from}" in dev.ok("status", "--task", "planned").out
    first = dev.ok("log", "--task", "planned").out.splitlines()[0]
    assert first.startswith("base  main, planned on") and "w1" in first
    # recorded: an event here (learned as the record came back) and on the worker
    for machine in (dev, w1):
        (event,) = [e for e in events(machine) if e["event"] == "task.base_moved"]
        assert event["changed"] == {"base_commit": {"from": planned_on, "to": moved_to}}
    # and the task's page in bar ui
    with ui(dev) as served:
        page = served.get(f"/p/{dev.project_dir.name}/t/{shown['id']}")
        assert "base moved as it started" in page and short_from in page


@contextmanager
def ui(machine: Machine) -> Iterator[Any]:
    """``bar ui`` of ``machine``: ``get`` gets a page of it (a path) as text; ``url``, its
    address with the launch's key (for a browser)."""

    def fetch(url: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read().decode()

    with serving(SimpleNamespace(repo=machine.repo, env=machine.env())) as (_, url):  # type: ignore[arg-type]
        status, headers, _ = fetch(url)
        assert status == 303
        cookie = headers["set-cookie"].split(";", 1)[0]

        def get(path: str) -> str:
            status, _, text = fetch(base_of(url) + path, cookie)
            assert status == 200, text
            return text

        yield SimpleNamespace(get=get, url=url)


def running_now(page: str, task: str) -> str:
    """The "running now" cell of ``task``'s row on the overview."""
    row = re.search(rf'<tr class="[^"]*"[^>]*><td><a href="[^"]*">{task}</a>.*?</tr>', page)
    assert row is not None, page
    head = re.findall(r"<th>(.*?)</th>", page)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0))
    return cells[head.index("running now")]


def test_the_overview_shows_what_runs_on_workers_and_a_silent_server_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = DevServer(tmp_path / "own.db").start()  # (stopped in the middle of the test)
    try:
        (tmp_path / "c").mkdir()
        with (
            cluster(tmp_path / "c", server, monkeypatch, workers=("w1",)) as c,
            ui(c.dev) as served,
        ):
            get = served.get
            dev = c.dev
            c.start_worker("w1")
            for name in ("idle-a", "idle-b", "busy"):
                dev.ok("task", "new", name, "--on", c.queue)
            dev.ok("run", "--on", c.queue, "--task", "idle-a", "--", "true")
            gate = Gate(tmp_path / "go")
            run = dev.popen("run", "--on", c.queue, "--task", "busy", "--", "sh", "-c", gate.script)
            c.running_on()

            def busy_shown() -> str | None:
                page = get("/")
                return page if "on w1" in running_now(page, "busy") else None

            page = wait_for(busy_shown, 30, "the running step on the overview")
            assert gate.script in running_now(page, "busy")
            for idle in ("idle-a", "idle-b"):  # nothing runs: nothing shown, no error
                assert running_now(page, idle) == "-"
            assert "workers-problem" not in page
            gate.open()
            run.communicate(timeout=60)
            # no worker serves the queue now: the page asks none, and is not held up
            c.stop_worker("w1")
            began = time.monotonic()
            page = get("/")
            assert time.monotonic() - began < 10
            assert [running_now(page, n) for n in ("idle-a", "idle-b", "busy")] == ["-"] * 3
            status = dev.ok("status", "--task", "idle-a").out
            assert f"no worker of queue {c.queue} answers" in status
            # the server is gone: said once, above the table, with what to do
            server.stop()
            page = get("/")
            assert page.count("workers-problem") == 1
            assert f"no Temporal server answers at {server.address}" in page
            assert f"bar worker dev-server --port {server.port}" in page
            for name in ("idle-a", "idle-b", "busy"):
                cell = running_now(page, name)
                assert "answers" not in cell and ">?<" in cell
            if CHROMIUM.exists():  # as a person sees it
                seen_in_browser(served.url, server.address)
            said = dev.ok("status", "--task", "busy").out
            assert (
                f"hint: start one on this machine, in another terminal: bar worker dev-server --port {server.port}"
                in said
            )
    finally:
        server.stop()


def seen_in_browser(url: str, address: str) -> None:
    """The overview in chromium: the silent server said once, above the table, and a
    ``?`` in each row of a task on workers."""
    from playwright.sync_api import expect

    with chromium() as browser:
        tab = browser.new_page(viewport={"width": 1280, "height": 800})
        tab.goto(url)
        problem = tab.locator(".workers-problem")
        expect(problem).to_have_count(1)
        expect(problem).to_be_visible()
        expect(problem).to_contain_text(f"no Temporal server answers at {address}")
        rows = tab.locator("table.tasks tr.state-on-workers")
        expect(rows).to_have_count(3)
        for i in range(3):
            expect(rows.nth(i).locator("td").nth(3)).to_have_text("?")  # (running now)
        SHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SHOTS / "overview-workers-server-gone.png"))
