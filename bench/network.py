#!/usr/bin/env python3
"""Figure 21: a step's network through bar's proxy (``sandbox.network: allow-list``).

A web server in the benchmark's process, on a loopback address the step may reach
(``127.0.0.2``, in ``sandbox.allow_hosts``). Two running steps time the same downloads
from inside (``inside.Inside``): one with ``--network open`` (the machine's network, as
before), one with the allow-list (its own network namespace; every connection through
bar's proxy, which runs in ``bar run``).

* 21-throughput: a 100 MB download (20 MB with ``--quick``) through the proxy ÷ direct
  (target: at least half the speed, so ≤ 2×).
* 21-connect: 20 small requests, a connection each, through the proxy ÷ direct; and
  the time the proxy adds to a connection (target: ≤ 5 ms).

    python bench/network.py                         # the figure alone on the small repository
"""

from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figures import Params, Row, ratio_row  # noqa: E402
from harness import Fixture, interleave  # noqa: E402
from inside import Inside  # noqa: E402

NUMBER = 21
LISTED = "127.0.0.2"
CONNECTIONS = 20

# the step's client: curl is what most programs' downloads look like; urllib where the
# machine has no curl
_GET = (
    "import sys, urllib.request\n"
    "for url in sys.argv[1:]:\n"
    "    with urllib.request.urlopen(url) as r:\n"
    "        while r.read(1 << 20):\n"
    "            pass\n"
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(root: Path) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(
        (LISTED, 0), lambda *a: _Quiet(*a, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def fig21(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    task, wt = f.new_task(repo, "network")
    task_open, wt_open = f.new_task(repo, "open")  # (a task runs one step at a time)
    config = f.project_dir() / "config.yaml"
    config.write_text(
        config.read_text().replace(
            "  network: allow-list", f"  network: allow-list\n  allow_hosts: [{LISTED}]", 1
        )
    )
    site = f.dir / "site"
    site.mkdir()
    megabytes = 20 if p.quick else 100
    with open(site / "big", "wb") as out:
        for _ in range(megabytes):
            out.write(b"\x5a" * (1 << 20))
    (site / "small").write_text("small\n")
    server = _serve(site)
    base = f"http://{LISTED}:{server.server_address[1]}"
    get: list[str | Path] = [f.tools.python, "-c", _GET]
    try:
        with (
            Inside(f.tools.bar, task_open, wt_open, f.env, options=("--network", "open")) as direct,
            Inside(f.tools.bar, task, wt, f.env) as proxied,
        ):
            big = [*get, f"{base}/big"]
            many = [*get, *[f"{base}/small"] * CONNECTIONS]
            s = interleave(
                {
                    "download, through the proxy": lambda: proxied.t(big, wt),
                    "download, direct": lambda: direct.t(big, wt_open),
                    "connections, through the proxy": lambda: proxied.t(many, wt),
                    "connections, direct": lambda: direct.t(many, wt_open),
                },
                p.repeat,
                p.warmup,
            )
    finally:
        server.shutdown()
        server.server_close()
    connect = ratio_row(
        "21-connect",
        f"{CONNECTIONS} small requests, a connection each, through bar's proxy ÷ direct "
        "(target: the proxy adds ≤ 5 ms a connection)",
        s,
        "connections, through the proxy",
        "connections, direct",
        1.0,  # (never met: what it is judged by is the time added to a connection)
        extra_ms=True,
    )
    if connect.extra_ms is not None:
        connect.extra_ms /= CONNECTIONS
        connect.extra_ms_target = 5.0
        connect.note = f"the proxy adds {connect.extra_ms:.2f} ms a connection (target ≤ 5 ms)"
    return [
        ratio_row(
            "21-throughput",
            f"a {megabytes} MB download through bar's proxy ÷ direct (target: at least half "
            "the speed)",
            s,
            "download, through the proxy",
            "download, direct",
            2.0,
        ),
        connect,
    ]


FIGURE = ("a step's network through bar's proxy", fig21)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
