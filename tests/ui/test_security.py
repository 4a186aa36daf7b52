"""``bar ui`` lets in only the browser that opened the URL it printed, changes nothing
without the page's CSRF token, and serves no file but a step's artifacts. Plain HTTP
against a real ``bar ui`` child process over a real recorded session."""

from __future__ import annotations

import http.client
import signal
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from helpers import BAR_EXE
from ui_session import Session, base_of, serving, session

from bar.ui.security import SECURITY_HEADERS


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    s = session(tmp_path_factory.mktemp("ui-security"))
    with serving(s) as (_, url):
        yield s, url


def request(
    url: str,
    method: str = "GET",
    *,
    cookie: str | None = None,
    headers: dict[str, str] | None = None,
    body: str | None = None,
    raw_path: str | None = None,
) -> tuple[int, dict[str, str], str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    path = raw_path or (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sent = {"Host": f"{parts.hostname}:{parts.port}", **(headers or {})}
    if cookie:
        sent["Cookie"] = cookie
    if body is not None:
        sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
    conn.request(method, path, body=body, headers=sent)
    res = conn.getresponse()
    text = res.read().decode("utf-8", "replace")
    conn.close()
    return res.status, {k.lower(): v for k, v in res.getheaders()}, text


def login(url: str) -> str:
    status, headers, _ = request(url)
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return cookie.split(";", 1)[0]


def csrf_of(page: str) -> str:
    return page.split('name="bar-csrf" content="', 1)[1].split('"', 1)[0]


def test_without_the_token_nothing_is_served(served: tuple[Session, str]) -> None:
    s, url = served
    base = base_of(url)
    for path in ("/", s.task_url("", ""), s.task_url("", "/s/0001"), "/static/ui.js"):
        status, headers, text = request(base + path)
        assert status == 403, path
        assert s.task_id not in text and "<html" not in text
        assert "access-control-allow-origin" not in headers
    assert request(base + "/?token=not-the-token")[0] == 403
    cookie = login(url)
    status, headers, text = request(base + "/", cookie=cookie)
    assert status == 200 and "add-discounts" in text
    assert "access-control-allow-origin" not in headers
    assert dict(SECURITY_HEADERS)[b"x-frame-options"].decode() == headers["x-frame-options"]
    wrong = cookie.split("=")[0] + "=forged"
    assert request(base + "/", cookie=wrong)[0] == 403


def test_a_foreign_host_is_refused_even_with_the_cookie(served: tuple[Session, str]) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own name."""
    _, url = served
    cookie = login(url)
    port = urlsplit(url).port
    status, _, text = request(
        base_of(url) + "/", cookie=cookie, headers={"Host": f"evil.example:{port}"}
    )
    assert status == 403 and "add-discounts" not in text
    assert (
        request(base_of(url) + "/", cookie=cookie, headers={"Host": f"localhost:{port}"})[0] == 200
    )


def test_a_post_needs_the_csrf_token_and_our_origin(served: tuple[Session, str]) -> None:
    s, url = served
    base = base_of(url)
    cookie = login(url)
    page = request(s.task_url(base, "/actions"), cookie=cookie)[2]
    csrf = csrf_of(page)
    before = s.ledger()
    target = s.task_url(base, "/undo")
    form = f"expect=x&last={before[-1]['step_id']}"
    assert request(target, "POST", cookie=cookie, body=form)[0] == 403
    assert request(target, "POST", cookie=cookie, body=form + "&csrf=wrong")[0] == 403
    foreign = {"Origin": "http://evil.example"}
    status, _, _ = request(
        target, "POST", cookie=cookie, body=f"{form}&csrf={csrf}", headers=foreign
    )
    assert status == 403
    assert request(target, "POST", body=f"{form}&csrf={csrf}")[0] == 403  # no cookie
    assert s.ledger() == before  # nothing was done
    # the preview itself changes nothing either, and a GET never acts
    status, _, text = request(
        s.task_url(base, "/undo/preview"),
        "POST",
        cookie=cookie,
        body=f"csrf={csrf}",
        headers={"Origin": base},
    )
    assert status == 200 and "Undo: preview" in text
    assert request(target, cookie=cookie)[0] == 405
    assert s.ledger() == before


def test_only_a_steps_artifacts_are_served(served: tuple[Session, str]) -> None:
    s, url = served
    base = base_of(url)
    cookie = login(url)
    prefix = s.task_url("", "/artifacts/")
    assert request(base + prefix + "0001.output", cookie=cookie)[0] == 200
    (s.task_dir / "artifacts" / "0099.output").symlink_to("/etc/passwd")
    (s.task_dir / "artifacts" / "0098.output").symlink_to(s.task_dir / "task.json")
    for attempt in (
        "../task.json",
        "%2e%2e/task.json",
        "%2e%2e%2ftask.json",
        "..%2f..%2f..%2fconfig.yaml",
        "/etc/passwd",
        "%2fetc%2fpasswd",
        "0099.output",
        "0098.output",
        "task.json",
        "0001.output/..",
        "0001.output%00.txt",
    ):
        status, _, text = request(base + prefix, cookie=cookie, raw_path=prefix + attempt)
        assert status in (400, 404), attempt
        assert "root:" not in text and '"repo_root"' not in text, attempt
    assert (
        request(
            base + "/static/../../../etc/passwd",
            cookie=cookie,
            raw_path="/static/%2e%2e/%2e%2e/security.py",
        )[0]
        == 404
    )
    assert request(base + s.task_url("", "/s/0001/file/7"), cookie=cookie)[0] == 404
    assert request(base + "/p/..%2f..%2f/t/" + s.task_id, cookie=cookie)[0] == 404


def test_sigterm_and_ctrl_c_stop_it_cleanly(served: tuple[Session, str]) -> None:
    s, _ = served
    for sig, said in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")):
        with serving(s) as (proc, url):
            cookie = login(url)
            assert request(base_of(url) + "/", cookie=cookie)[0] == 200
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=20)
            assert proc.returncode == 0, err
            assert out.strip() == f"bar ui: stopped ({said})"


def test_a_taken_port_is_one_clear_error(served: tuple[Session, str]) -> None:
    s, url = served
    port = str(urlsplit(url).port)
    proc = subprocess.run(
        [BAR_EXE, "ui", "--no-open", "--port", port],
        cwd=s.repo,
        env=s.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"bar: bar ui cannot listen on 127.0.0.1:{port}")
    assert "hint: pick another port" in proc.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_that_is_no_port_is_a_usage_error(port: str) -> None:
    proc = subprocess.run(
        [BAR_EXE, "ui", "--no-open", "--port", port], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2, proc.stderr
    assert "is not a port number" in proc.stderr and "internal error" not in proc.stderr
