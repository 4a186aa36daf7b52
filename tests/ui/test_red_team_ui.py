"""Attacks on ``bar ui`` through what an agent controls: a step's command, its output,
the names of the files it writes, its commits' messages, its questions and its flow
summaries are rendered in the developer's browser (the real one, Debian's chromium
driven by Playwright) and must stay inert text; and every URL that names a state, a
step or a file (plain HTTP against a real ``bar ui`` child) must name only this task's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from test_security import csrf_of, login, request
from ui_session import CHROMIUM, NO_CHROMIUM, Session, base_of, chromium, sealed_env, serving

PWN = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "<script>window.__pwned=2</script>"


def hostile_session(root: Path) -> Session:
    repo = root / "shop"
    repo.mkdir(parents=True)
    s = Session(root, repo, sealed_env(root), "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    task = json.loads(s.bar("task", "new", "evil", "--json").stdout)
    s.task_id = task["id"]
    s.project = Path(task["worktree"]).parent.parent.name
    # a command, its output (HTML, and a terminal hyperlink to javascript:), a file name
    s.bar(
        "run",
        "--no-pty",
        "--",
        "sh",
        "-c",
        f"printf '%s\\n' '{PWN}' > '{PWN}.txt'; echo '{SCRIPT}'; "
        "printf '\\033]8;;javascript:window.__pwned=3\\033\\\\click\\033]8;;\\033\\\\\\n'; "
        f"git add -A && git -c user.name=a -c user.email=a@b commit -qm '{SCRIPT} {PWN}'",
    )
    question = {
        "task": PWN,
        "source": SCRIPT,
        "items": [
            {
                "id": 1,
                "title": PWN,
                "context": SCRIPT,
                "location": {"file": PWN, "start": 1, "end": 1},
                "options": [
                    {"value": PWN, "label": SCRIPT, "pros": [PWN], "cons": [SCRIPT]},
                    {"value": "b", "label": PWN},
                ],
            }
        ],
    }
    s.bar("decide", "submit", json.dumps(question))
    s.bar("flow", "start", f"{PWN} {SCRIPT}")
    return s


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = hostile_session(tmp_path_factory.mktemp("ui-red-team"))
    with serving(s) as (_, url):
        yield s, url


@pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)
def test_what_an_agent_wrote_is_inert_text_in_the_browser(served: tuple[Session, str]) -> None:
    pytest.importorskip("playwright.sync_api")
    s, url = served
    base = base_of(url)
    pages = [
        "/",
        s.task_url(base)[len(base) :],
        s.task_url(base, "/s/1")[len(base) :],
        s.task_url(base, "/compare?from=base&to=1")[len(base) :],
        s.task_url(base, "/actions")[len(base) :],
    ]
    with chromium() as browser:
        tab = browser.new_context().new_page()
        dialogs: list[str] = []
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        tab.goto(url)
        for path in pages:
            tab.goto(base + path)
            tab.wait_for_load_state("networkidle")
            for link in tab.locator("a").all():  # follow no link the agent planted
                assert not (link.get_attribute("href") or "").startswith("javascript"), path
            html = tab.content()
            assert tab.evaluate("window.__pwned") is None, path
            assert tab.locator("img[onerror]").count() == 0, path
            assert tab.locator("script:not([src])").count() == 0, path
            if "/s/" in path or "/compare" in path:
                assert "onerror=window.__pwned=1" in html, path  # shown, as text
        assert dialogs == []


def test_a_url_names_only_this_tasks_states_steps_and_files(
    served: tuple[Session, str], tmp_path: Path
) -> None:
    s, url = served
    cookie = login(url)
    base = base_of(url)
    planted = tmp_path / "x"
    for state in (f"--output={planted}", "-p", "..", "HEAD", "main", "1;ls", "base^"):
        status, _, _ = request(
            s.task_url(base, f"/compare?from={quote(state)}&to=1"), cookie=cookie
        )
        assert status in (400, 404), state
        status, _, _ = request(
            s.task_url(base, f"/compare/file?from=base&to={quote(state)}&n=0"), cookie=cookie
        )
        assert status in (400, 404), state
    assert not planted.exists()
    for rest in (
        "/s/..%2F..%2Ftask.json",
        "/s/1/file/-1",
        "/s/1/file/99",
        "/s/0001.99",
        "/artifacts/..%2Ftask.json",
        "/artifacts/0001.patch%00",
        "/s/%2e%2e",
    ):
        status, _, text = request(base, raw_path=s.task_url("", rest), cookie=cookie)
        assert status in (400, 404), (rest, status)
        assert '"worktree"' not in text
    for task in ("..", "..%2F..", s.task_id + "%2F..", "%2e%2e"):
        status, _, _ = request(base, raw_path=f"/p/{s.project}/t/{task}", cookie=cookie)
        assert status == 404, task
    status, _, _ = request(base, raw_path=f"/p/..%2F..%2F/t/{s.task_id}", cookie=cookie)
    assert status == 404
    # an action naming a state git would read as an option changes nothing
    _, _, page = request(s.task_url(base, "/actions"), cookie=cookie)
    token = csrf_of(page)
    for state in (f"--output={planted}", "-q"):
        status, _, _ = request(
            s.task_url(base, "/rollback/preview"),
            "POST",
            cookie=cookie,
            headers={"Origin": base},
            body=f"csrf={token}&to={quote(state)}",
        )
        assert status in (400, 409), state  # refused with bar's sentence
    assert not planted.exists()
    assert [st["kind"] for st in s.ledger()] == ["run"]
