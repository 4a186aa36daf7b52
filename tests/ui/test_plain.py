"""``bar ui`` without its browser libraries still shows every page, with diffs and outputs
as plain text, and says once on stderr how to get the rich view. The libraries are hidden
by pointing ``BAR_UI_ASSETS`` (read only by ``bar.ui.assets``) at an empty directory.
Plain HTTP against a real ``bar ui`` child process over a real recorded session; and the
Decisions form's answers, checked by bar as ``bar decide answer`` checks them."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from test_security import csrf_of, login, request
from ui_session import Session, base_of, serving, session


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    root = tmp_path_factory.mktemp("ui-plain")
    s = session(root)
    empty = root / "no-libraries"
    empty.mkdir()
    s.env["BAR_UI_ASSETS"] = str(empty)
    with serving(s) as (_, url):
        yield s, url


def test_pages_show_diffs_and_outputs_as_text(plain: tuple[Session, str]) -> None:
    s, url = plain
    cookie = login(url)
    base = base_of(url)
    status, _, page = request(s.task_url(base, "/s/0001"), cookie=cookie)
    assert status == 200
    assert '<meta name="bar-rich" content="0">' in page
    assert "/static/vendor/" not in page  # no library is asked for
    output = page.split('<pre class="output" data-ansi>', 1)[1].split("</pre>", 1)[0]
    assert "all green\n" in output and "\x1b" not in output and "[32m" not in output
    assert 'data-path="discount.py"' in page
    status, _, diff = request(s.task_url(base, "/s/0002/file/0"), cookie=cookie)
    assert status == 200 and "@@" in diff
    for path in ("", "/compare?from=base&to=2", "/actions", "/decisions"):
        status, _, shown = request(s.task_url(base, path), cookie=cookie)
        assert status == 200, (path, shown)
    status, _, _ = request(base + "/static/vendor/diff2html-ui-slim.min.js", cookie=cookie)
    assert status == 404  # served from the directory given, which has none


def test_a_pty_steps_text_and_its_whole_recording_are_served(
    plain: tuple[Session, str],
) -> None:
    # the step keeps its text in its output file, its recording only what the text
    # lacks; the player gets the recording whole, as asciinema v2
    s, url = plain
    cookie = login(url)
    base = base_of(url)
    status, _, text = request(s.task_url(base, "/artifacts/0004.output"), cookie=cookie)
    assert status == 200 and text == "=== STDOUT ===\none\ntwo\nthree\n=== STDERR ===\n"
    stored = (s.task_dir / "artifacts" / "0004.cast").read_text()
    assert "one" not in stored and json.loads(stored.splitlines()[0])["text_file"]
    status, _, cast = request(s.task_url(base, "/artifacts/0004.cast"), cookie=cookie)
    assert status == 200
    lines = [json.loads(line) for line in cast.splitlines()]
    assert lines[0]["version"] == 2 and "text_file" not in lines[0]
    assert all(isinstance(e[2], str) for e in lines[1:])
    assert "".join(e[2] for e in lines[1:] if e[1] == "o") == "one\r\ntwo\r\nthree\r\n"
    status, _, page = request(s.task_url(base, "/s/0004"), cookie=cookie)
    assert status == 200
    assert "one\ntwo\nthree\n" in page.split('<pre class="output" data-ansi>', 1)[1]


def test_stderr_says_once_how_to_get_the_rich_view(
    plain: tuple[Session, str],
) -> None:
    s, _ = plain
    with serving(s) as (proc, url):
        cookie = login(url)
        for path in ("/s/0001", "/s/0002", ""):
            request(s.task_url(base_of(url), path), cookie=cookie)
        proc.terminate()
        assert proc.stderr is not None
        said = proc.stderr.read()  # stopped: its whole stderr
    assert said.count("make ui-assets") == 1, said
    assert "plain text" in said


def test_an_answer_that_is_not_an_option_is_refused_with_bars_sentence(
    plain: tuple[Session, str],
) -> None:
    s, url = plain
    asked = {
        "task": "discounts",
        "source": "TASK.md",
        "items": [
            {
                "id": 1,
                "title": "Round to cents?",
                "recommend": "round",
                "options": [
                    {"value": "round", "label": "half up"},
                    {"value": "floor", "label": "down"},
                ],
            }
        ],
    }
    s.bar("decide", "submit", json.dumps(asked))
    cookie = login(url)
    where = s.task_url(base_of(url), "/decisions")
    status, _, page = request(where, cookie=cookie)
    assert 'name="chosen-1" value="round" checked' in page
    sid = page.split('name="session" value="', 1)[1].split('"', 1)[0]
    form = {"csrf": csrf_of(page), "session": sid, "chosen-1": "ceil"}
    headers = {"Origin": base_of(url)}
    status, _, page = request(
        where + "/answer", "POST", cookie=cookie, headers=headers, body=urlencode(form)
    )
    assert status == 400
    said = 'bar: item 1: "ceil" is not one of its options (round, floor)'
    assert html.escape(said) in page
    assert s.bar("decide", "result", check=False).returncode == 21  # nothing was answered

    form.update({"chosen-1": "round", "session": "2000-01-01T00-00-00"})
    status, _, page = request(
        where + "/answer", "POST", cookie=cookie, headers=headers, body=urlencode(form)
    )
    assert status == 409
    assert (
        html.escape(f"bar: decision 2000-01-01T00-00-00 is no longer pending: {sid} replaced it")
        in page
    )

    form["session"] = sid
    status, _, page = request(
        where + "/answer", "POST", cookie=cookie, headers=headers, body=urlencode(form)
    )
    assert status == 200 and f"Answered decision {sid}." in page
    assert json.loads(s.bar("decide", "result", "--json").stdout) == {
        "decisions": [{"id": 1, "chosen": "round"}]
    }
