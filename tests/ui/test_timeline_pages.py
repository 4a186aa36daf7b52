"""The timeline of a long task in ``bar ui``: each page shows its hundred steps, read from
the end of the ledger, and the page's head is sent before its rows are read."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_security import login, request
from ui_session import Session, base_of, sealed_env, serving

STEPS = 250


@pytest.fixture(scope="module")
def long_task(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Session, str]]:
    root = tmp_path_factory.mktemp("long")
    repo = root / "repo"
    repo.mkdir()
    s = Session(root, repo, sealed_env(root), "", "")
    s.git("init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    s.git("add", "-A")
    s.git("commit", "-qm", "initial")
    s.bar("init")
    task = json.loads(s.bar("task", "new", "long", "--json").stdout)
    s.task_id, s.project = task["id"], Path(task["worktree"]).parent.parent.name
    s.bar("run", "--no-pty", "--", "sh", "-c", "echo b >> a.txt")
    ledger = s.task_dir / "ledger.jsonl"
    first = json.loads(ledger.read_bytes().splitlines()[0])
    with ledger.open("a") as fh:
        for n in range(2, STEPS + 1):  # steps that changed nothing, each its own command
            rec = dict(first, step_id=f"{n:04d}", cmd=["echo", f"step-{n}"], artifacts={})
            rec.update(
                snapshot_before=first["snapshot"],
                diff_stat={"files": 0, "additions": 0, "deletions": 0, "file_list": []},
            )
            fh.write(json.dumps(rec) + "\n")
    with serving(s) as (_, url):
        yield s, url


def shown(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr[^>]*data-step="(\d+)"', page)]


def test_each_page_shows_its_hundred_steps_newest_first(long_task: tuple[Session, str]) -> None:
    s, url = long_task
    cookie = login(url)
    base = s.task_url(base_of(url))
    status, headers, first = request(base, cookie=cookie)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "content-security-policy" in headers  # (as every page: the guard's headers)
    assert shown(first) == list(range(STEPS, STEPS - 100, -1))
    assert f'data-last="{STEPS}"' in first
    assert shown(request(base + "?page=2", cookie=cookie)[2]) == list(range(150, 50, -1))
    last = request(base + "?page=3", cookie=cookie)[2]
    assert shown(last) == list(range(50, 0, -1)) and "data-live" not in last
    assert shown(request(base + "?page=9", cookie=cookie)[2]) == shown(last)


def test_the_head_comes_before_the_rows(long_task: tuple[Session, str]) -> None:
    s, url = long_task
    cookie = login(url)
    parts = urlsplit(s.task_url(base_of(url)))
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    conn.request("GET", parts.path, headers={"Host": parts.netloc, "Cookie": cookie})
    res = conn.getresponse()
    assert res.status == 200 and res.getheader("transfer-encoding") == "chunked"
    head = res.read1().decode()  # (the first chunk)
    assert "<h1>long" in head and head.endswith('<tbody id="steps">')
    assert not shown(head)
    rest = res.read().decode()
    conn.close()
    assert shown(rest)[:2] == [STEPS, STEPS - 1] and rest.endswith("</main></body></html>")


def test_a_task_that_is_not_is_still_a_404_page(long_task: tuple[Session, str]) -> None:
    s, url = long_task
    cookie = login(url)
    status, _, text = request(f"{base_of(url)}/p/{s.project}/t/nosuchid", cookie=cookie)
    assert status == 404 and "Not found" in text
