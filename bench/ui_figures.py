"""Figure 13: the pages of ``bar ui``, served by a real ``bar ui`` child over HTTP.

- 13-timeline: the first timeline page of a 10,000-step task ÷ the same page of a
  100-step task: both pages show a hundred rows, and pages read theirs from the end of
  the ledger, so this stays flat. 13-timeline-10: the same ÷ a 10-step task (context: the
  ninety rows more are most of the difference). Each long ledger is a real step, synthetic
  ones written in the ledger's format (as figure 6 does) and a real step again.
- 13-first-byte: how long the browser waits for the first byte of each page (the page's
  head is sent before its rows are read).
- 13-step: the page of a step that changed 5,000 files (its file list with each file's
  stats; the per-file diffs are fetched later, one by one, and are not timed) ÷ `git diff
  --numstat` of the same two trees (context: what listing those files costs git alone).
  Making that step takes most of the figure's time, so ``--quick --only 13`` leaves it
  out; plain ``--quick`` leaves the whole figure out (its set-up takes over ten seconds).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import edits
from figures import Params, Row, _sh_step, _synthesize, ratio_row
from harness import BenchError, Fixture, interleave, log

HERE = Path(__file__).resolve().parent
LONG = 10_000
FILES = 5_000


class _Page:
    """One logged-in client of a ``bar ui`` child."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        status, headers, _ = self._get(f"/?{parts.query}")
        if status != 303 or "set-cookie" not in headers:
            raise BenchError(f"bar ui did not take its token (HTTP {status})")
        self.cookie = headers["set-cookie"].split(";", 1)[0]

    def _get(self, path: str, cookie: str = "") -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        sent = {"Host": f"{self.host}:{self.port}", **({"Cookie": cookie} if cookie else {})}
        conn.request("GET", path, headers=sent)
        res = conn.getresponse()
        body = res.read()
        conn.close()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, body

    def first_byte(self, path: str) -> float:
        """Seconds to the first byte of the page's body (the rest is read, not timed)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        start = time.perf_counter()
        conn.request(
            "GET", path, headers={"Host": f"{self.host}:{self.port}", "Cookie": self.cookie}
        )
        res = conn.getresponse()
        first = res.read1(1)
        took = time.perf_counter() - start
        rest = res.read()
        conn.close()
        if res.status != 200 or not first:
            raise BenchError(f"bar ui answered {path} with HTTP {res.status}: {rest[:300]!r}")
        return took

    def timed(self, path: str) -> float:
        start = time.perf_counter()
        status, _, body = self._get(path, self.cookie)
        took = time.perf_counter() - start
        if status != 200:
            raise BenchError(f"bar ui answered {path} with HTTP {status}: {body[:300]!r}")
        return took


def fig13(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    big, wt_big = f.new_task(repo, "long-ledger")
    page_full, wt_full = f.new_task(repo, "one-page")
    small, wt_small = f.new_task(repo, "short-ledger")
    pool = edits.make_pool(wt_big, f.dir / "pool.txt")
    log(f"  appending {LONG - 2:,} synthetic steps")
    for task, wt, n in ((big, wt_big, LONG), (page_full, wt_full, 100), (small, wt_small, 10)):
        _sh_step(f, wt, task, edits.step_script(pool, 1))
        _synthesize(f.task_dir(task) / "ledger.jsonl", n - 2)
        _sh_step(f, wt, task, edits.step_script(pool, 2))
    many, wt_many = f.new_task(repo, "many-files")
    step: dict[str, object] = {}
    if not p.quick:
        f.run(
            [
                f.tools.bar,
                "run",
                "--task",
                many,
                "--no-pty",
                "--",
                f.tools.python,
                HERE / "edits.py",
                "many",
                f.dir / "pool.txt",
                str(FILES),
                "ui",
            ],
            wt_many,
        )
        step = json.loads((f.task_dir(many) / "ledger.jsonl").read_bytes().splitlines()[-1])
        changed = step["diff_stat"]["files"]  # type: ignore[index]
        if changed < FILES:
            raise BenchError(f"the big step changed {changed} files, not {FILES}")
    project = f.task_dir(big).parent.parent.name

    ui = subprocess.Popen(
        [str(f.tools.bar), "ui", "--no-open", "--port", "0"],
        cwd=repo,
        env=f.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert ui.stdout is not None
        line = ui.stdout.readline()
        if not line.startswith("bar ui: http"):
            raise BenchError(f"bar ui did not start: {line!r}")
        client = _Page(line.split(": ", 1)[1].strip())
        page = f"/p/{project}/t/{{}}"
        contenders = {
            "timeline 10,000": lambda: client.timed(page.format(big)),
            "timeline 100": lambda: client.timed(page.format(page_full)),
            "timeline 10": lambda: client.timed(page.format(small)),
            "first byte 10,000": lambda: client.first_byte(page.format(big)),
            "first byte 10": lambda: client.first_byte(page.format(small)),
        }
        if step:
            numstat = [
                "git",
                "diff",
                "--numstat",
                str(step["snapshot_before"]),
                str(step["snapshot"]),
            ]
            contenders["step page"] = lambda: client.timed(
                page.format(many) + f"/s/{step['step_id']}"
            )
            contenders["git diff --numstat"] = lambda: f.t(numstat, wt_many)
        s = interleave(
            contenders,
            p.repeat,
            max(1, p.warmup),  # the first request of each page warms the server's imports
        )
    finally:
        ui.terminate()
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            ui.kill()
            ui.wait()
    rows = [
        ratio_row(
            "13-timeline",
            f"`bar ui` timeline, first page: {LONG:,}-step task ÷ "
            "100-step task (a hundred rows each)",
            s,
            "timeline 10,000",
            "timeline 100",
            1.5,
        ),
        ratio_row(
            "13-timeline-10",
            f"`bar ui` timeline, first page: {LONG:,}-step task ÷ 10-step task",
            s,
            "timeline 10,000",
            "timeline 10",
            None,
            note="context: 100 rows against 10",
        ),
        ratio_row(
            "13-first-byte",
            f"`bar ui` timeline, first page, its first byte: {LONG:,}-step task ÷ 10-step task",
            s,
            "first byte 10,000",
            "first byte 10",
            2.0,
        ),
    ]
    if not step:
        return rows
    return [
        *rows,
        ratio_row(
            "13-step",
            f"`bar ui` page of a step changing {FILES:,} files (its file list) "
            "÷ `git diff --numstat` of the same trees",
            s,
            "step page",
            "git diff --numstat",
            None,
            note="context: the file list, not the diffs",
        ),
    ]
