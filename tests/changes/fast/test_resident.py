"""The resident (``bar.changes.fast.resident``): ``bar run`` served by a fork of a warm process.

Every test drives the installed ``bar`` against a real resident process. The main one is
an oracle: each command line, run by a fork of the resident, must print, exit and be
recorded exactly as the same command line run by ``bar`` itself. The others check that a
fork is used only where it may be (a caller it could not have been, a confined one, a
changed bar), that signals reach the command as they would, and the resident's lifecycle.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BAR_EXE,
    bar_home,
    host_pids,
    init_clean,
    ledger,
    new_task,
    project_dir,
    seen_alive_after,
    worktree,
)

from bar.changes.fast import resident
from bar.changes.fast.resident_daemon import SPARES, Resident
from conftest import MakeRepo

_STEP = re.compile(r"step \d{4}")
_TIMED = re.compile(rb"in \d+(?:\.\d+)? s\b")  # (how long a look took)


@pytest.fixture(autouse=True)
def own_resident(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's bar home has a resident of its own, the one it starts and looks at (not
    the one the other tests share: ``conftest.shared_resident``)."""
    monkeypatch.delenv("BAR_RESIDENT_SOCKET", raising=False)


def _home() -> str:
    return str(bar_home())


def _run(
    wt: Path,
    *args: str,
    cwd: Path | None = None,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [BAR_EXE, "run", *args],
        cwd=cwd or wt,
        input=input,
        capture_output=True,
        env={**os.environ, **(env or {})},
        preexec_fn=preexec,
        timeout=120,
    )


def _started(capfd: pytest.CaptureFixture[str], repo: Path) -> tuple[dict[str, Any], Path]:
    """A task whose first step (run by bar itself) started a resident, now loaded, its
    spares forked (a test that counts the resident's children starts from them)."""
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    assert _run(wt, "--", "true").returncode == 0
    assert resident.ready(_home())
    _wait(lambda: len(_forks()) == SPARES)
    return task, wt


def _served(wt: Path, **kw: Any) -> bool:
    """Whether a ``bar run`` here is served by a fork of the resident: the command's
    holder's parent (bar.sandbox.holder) is then not the ``bar`` process this test
    started. (Looked at from here: a step in a PID namespace of its own sees no process
    beyond its init.)"""
    env = {**os.environ, **kw.pop("env", {})}
    mark = f"{os.getpid()}{time.monotonic_ns() % 10**9}"
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--", "sh", "-c", f"sleep 1.{mark}", "served"],
        cwd=wt,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )
    deadline = time.monotonic() + 60
    while (
        not (found := host_pids(b"sleep\0" + f"1.{mark}".encode())) and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    assert found, "the step never started"
    pid, ancestors = found[0], []
    while pid > 1:
        with open(f"/proc/{pid}/stat", "rb") as f:
            pid = int(f.read().rpartition(b")")[2].split()[1])
        ancestors.append(pid)
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    return proc.pid not in ancestors


def _seen(done: subprocess.CompletedProcess[bytes]) -> tuple[int, bytes, bytes]:
    return done.returncode, done.stdout, _STEP.sub("step N", done.stderr.decode()).encode()


_KEPT = (
    "cmd",
    "cwd",
    "env",
    "exit_code",
    "signal",
    "diff_stat",
    "pty",
    "interrupted",
    "policy_events",
    "blocked",
)


def test_a_served_run_is_the_run_bar_makes_itself(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task, wt = _started(capfd, repo)
    (wt / "sub").mkdir()
    weird = os.fsdecode(b"caf\xc3\xa9-\xff")  # not UTF-8 throughout: bytes both ways

    def umask_027() -> None:
        os.umask(0o027)

    def nohup_and_blocked() -> None:  # (what nohup and a shell's `&` leave, and a mask)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])

    show_signals = (
        "import signal; print(signal.getsignal(signal.SIGHUP), "
        "sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
    )

    cases: list[tuple[tuple[str, ...], dict[str, Any]]] = [
        (("--", "sh", "-c", "echo out; echo err >&2; exit 3"), {}),
        (
            ("-e", "FOO=bar", "--", "sh", "-c", 'printf "%s|" "$FOO" "$MINE"; pwd'),
            {"env": {"MINE": "from the caller"}},
        ),
        (("--", "sh", "-c", "pwd; echo made > here.txt"), {"cwd": wt / "sub"}),
        (
            ("--", "sh", "-c", "umask; echo x > masked.txt; stat -c %a masked.txt"),
            {"preexec": umask_027},
        ),
        (("--", "cat"), {"input": b"fed on stdin\n"}),
        (("--", sys.executable, "-c", show_signals), {"preexec": nohup_and_blocked}),
        (("--", "printf", "%s\n", weird), {}),
        (("--", "no-such-command-here"), {}),
        (("--", "sh", "-c", "kill -TERM $$"), {}),
        (("--json", "--", "sh", "-c", "echo in json"), {}),
    ]
    for args, kw in cases:
        # each run begins with no hand edit to record (what the last one made is removed,
        # and that recorded by a step of its own)
        _undo_files(wt)
        assert _run(wt, "--", "true", env={"BAR_RESIDENT_IDLE": "0"}).returncode == 0
        here = _seen(
            _run(
                wt,
                *args,
                env={**kw.get("env", {}), "BAR_RESIDENT_IDLE": "0"},
                **{k: v for k, v in kw.items() if k != "env"},
            )
        )
        mine = ledger(task["id"])[-1]
        _undo_files(wt)
        assert _served(wt), "the resident did not serve"
        there = _seen(_run(wt, *args, **kw))
        theirs = ledger(task["id"])[-1]
        if "--json" in args:  # (times and step ids differ: the record's fields compared)
            said = [json.loads(seen[1]) for seen in (here, there)]
            expected = {k: mine.get(k) for k in _KEPT}
            assert [{k: s.get(k) for k in _KEPT} for s in said] == [expected, expected]
            here, there = here[::2], there[::2]
        assert there == here, args
        assert {k: theirs.get(k) for k in _KEPT} == {k: mine.get(k) for k in _KEPT}, args


def _undo_files(wt: Path) -> None:
    for name in ("sub/here.txt", "masked.txt"):
        (wt / name).unlink(missing_ok=True)


def test_a_signal_to_bar_reaches_the_command_as_it_would(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task, wt = _started(capfd, repo)
    codes = []
    for idle in ("0", "60"):
        if idle == "60":
            assert _served(wt)
        proc = subprocess.Popen(
            [
                BAR_EXE,
                "run",
                "--",
                "sh",
                "-c",
                "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
            ],
            cwd=wt,
            env={**os.environ, "BAR_RESIDENT_IDLE": idle},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        codes.append((proc.returncode, out, ledger(task["id"])[-1]["exit_code"]))
    assert codes[0] == codes[1] == (7, b"got TERM\n", 7)


def test_a_served_bar_killed_with_its_caller_leaves_an_interrupted_step(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    task, wt = _started(capfd, repo)
    script = "cut -d' ' -f4 /proc/$PPID/stat > ../bar.pid; echo partial > work.txt; sleep 60"
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--no-sandbox", "--", "sh", "-c", script], cwd=wt, start_new_session=True
    )
    _wait(lambda: (wt / "work.txt").exists())
    fork = int((wt.parent / "bar.pid").read_text())
    assert fork != proc.pid  # (served)
    seen_alive_after(task["id"], wt / "work.txt")  # (else it is no step's)
    proc.send_signal(signal.SIGKILL)  # (no signal to pass on: the fork sees its caller go)
    proc.wait(timeout=30)
    _wait(lambda: not _cmdline(fork) or _zombie(fork))
    res = _run(wt, "--", "true")
    assert res.returncode == 0 and b"interrupted" in res.stderr, res.stderr
    assert ledger(task["id"])[-2]["interrupted"] is True, ledger(task["id"])[-3:]


def test_a_fork_killed_takes_its_caller_with_it(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _, wt = _started(capfd, repo)
    assert _served(wt)
    # (the command's parent is its holder, bar.sandbox.holder; bar is the holder's)
    kill_bar = "kill -KILL $(cut -d' ' -f4 /proc/$PPID/stat)"
    done = _run(wt, "--no-sandbox", "--", "sh", "-c", kill_bar)
    assert done.returncode == -signal.SIGKILL  # (as a bar killed so would have ended)
    res = _run(wt, "--", "true")
    assert res.returncode == 0 and b"interrupted" in res.stderr, res.stderr


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_a_caller_it_could_not_have_been_is_not_served(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _, wt = _started(capfd, repo)
    assert _served(wt)

    def fewer_files() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))

    def no_new_privs() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS

    assert not _served(wt, preexec_fn=fewer_files)  # other limits
    assert not _served(wt, preexec_fn=no_new_privs)  # a confined process's mark
    assert not _served(wt, env={"PYTHONPATH": "/nowhere"})  # bar's code may load otherwise
    assert not _served(wt, env={"BAR_RESIDENT_IDLE": "0"})
    assert not _served(wt, env={"LC_ALL": "C"})  # (Python's UTF-8 mode: strings decode so)
    assert _served(wt)  # and it still serves the caller it can


def test_a_confined_step_cannot_take_the_spares(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A confined process that opens connections and holds them takes no spare: each is
    refused at once, and the developer's next bar is served as before."""
    _, wt = _started(capfd, repo)
    other = worktree(new_task(capfd, "t2"))  # (the held task's lock is taken by its step)
    _wait(lambda: len(_forks()) == 2)
    holder = (
        "import socket, sys, time\n"
        "held = []\n"
        "for _ in range(40):\n"
        "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); held.append(s)\n"
        "print('holding', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [BAR_EXE, "run", "--", sys.executable, "-c", holder, resident.socket_path()],
        cwd=wt,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"holding\n"
        started = time.monotonic()
        assert _served(other)
        assert time.monotonic() - started < 30  # (not behind 40 held connections)
        # the fork running the holder's bar, and spares: none made per connection
        assert len(_forks()) <= 3
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_caller_is_the_process_that_connected(tmp_path: Path) -> None:
    """A caller that connected and is gone is not served, whatever has its pid now."""
    import socket

    from bar.changes.fast.resident_daemon import _caller_still_there

    path = str(tmp_path / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys; "
            "socket.socket(socket.AF_UNIX).connect(sys.argv[1]); "
            "sys.stdin.read()",
            path,
        ],
        stdin=subprocess.PIPE,
    )
    conn, _ = listener.accept()
    try:
        assert _caller_still_there(conn) is True
        child.communicate(b"", timeout=30)  # (it exits)
        assert _caller_still_there(conn) is False
    finally:
        conn.close()
        listener.close()


def test_a_spare_that_died_is_replaced(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _, wt = _started(capfd, repo)
    _wait(lambda: len(_forks()) == 2)  # (while no command runs)
    spares = _forks()
    for spare in spares:
        # (one that answered the ready check above may end by itself meanwhile)
        with contextlib.suppress(ProcessLookupError):
            os.kill(spare, signal.SIGKILL)
    _wait(lambda: len(_forks() - spares) == 2)
    assert _served(wt)


def test_an_abbreviated_option_is_read_as_argparse_reads_it() -> None:
    assert resident._run_here("--no-p") and resident._run_here("--js")
    assert resident._run_here("--json") and not resident._run_here("--no-wait")
    assert not resident._run_here("--") and not resident._run_here("-e")


def _warm_processes() -> list[int]:
    """The resident of this bar home and all its forks, whoever their parent now is."""
    socket_path = os.fsencode(Path(_home()) / resident.SOCKET)
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and _state(int(proc.name)) not in ("Z", ""):
            cmdline = _cmdline(int(proc.name)).encode(errors="replace").split(b"\0")
            if b"bar.cli.warm" in cmdline and socket_path in cmdline:
                found.append(int(proc.name))
    return found


def _forks() -> set[int]:
    """The resident's children: its spares, and the forks running commands (not one that
    has ended and is not reaped yet: a spare that answered a ping, say)."""
    pid = _resident_pid()
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return set()
    return {int(child) for child in children if _state(int(child)) not in ("Z", "")}


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_the_commands_that_change_a_task_act_alike_served_or_not(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``rollback``, ``undo``, ``redo`` and ``apply`` on two tasks made alike, one by
    bar itself and one served: the same output, records, files and landed tree."""
    _started(capfd, repo)
    ids = {}
    for name in ("here", "there"):
        ids[name] = new_task(capfd, name)["id"]
        subprocess.run(["git", "branch", f"land-{name}", "main"], cwd=repo, check=True)
    steps = [
        ("run", "--", "sh", "-c", "echo one > a.txt"),
        ("run", "--", "sh", "-c", "echo two >> a.txt; echo b > b.txt; rm -f README.md"),
        ("rollback", "--to", "1", "--dry-run"),
        ("rollback", "--to", "1"),
        ("undo",),
        ("redo",),
        ("apply", "--dry-run"),
        ("apply", "--target", "land-{name}", "-m", "landed"),
    ]

    def same(text: bytes, name: str) -> str:
        said = text.decode().replace(ids[name], "ID").replace(name, "NAME")
        return re.sub(r"\b[0-9a-f]{7,40}\b", "SHA", _STEP.sub("step N", said))

    seen: dict[str, list[Any]] = {"here": [], "there": []}
    for name, idle in (("here", "0"), ("there", "60")):
        wt = Path(json.loads(_bar_json("task", "show", ids[name]))["worktree"])
        for argv in steps:
            args = [a.format(name=name) for a in argv]
            if name == "here":  # (the spare that served ``task show`` above is replaced
                # in its own time: counted before it is, it would look forked for this)
                _wait(lambda: len(_forks()) == SPARES)
            before = _forks()
            done = subprocess.run(
                [BAR_EXE, args[0], "--task", ids[name], *args[1:]],
                cwd=repo,
                capture_output=True,
                env={**os.environ, "BAR_RESIDENT_IDLE": idle},
                timeout=120,
            )
            if name == "there":  # (a spare served it: the one forked in its place, or
                # with spares to spare, the fork itself until it is reaped)
                _wait(lambda seen=before: _forks() != seen)
            else:
                assert _forks() == before, args
            files = sorted(p.name for p in wt.iterdir() if p.name != ".git")
            seen[name].append(
                (done.returncode, same(done.stdout, name), same(done.stderr, name), files)
            )
        kept = [
            {k: s.get(k) for k in ("kind", "exit_code", "diff_stat", "cmd", "to")}
            for s in ledger(ids[name])
        ]
        seen[name].append(kept)
    assert seen["there"] == seen["here"]
    trees = {git_tree(repo, f"land-{name}") for name in ("here", "there")}
    assert len(trees) == 1


def _bar_json(*args: str) -> str:
    return subprocess.run(
        [BAR_EXE, *args, "--json"], capture_output=True, check=True, text=True, timeout=60
    ).stdout


def git_tree(repo: Path, ref: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", f"{ref}^{{tree}}"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_only_the_commands_that_need_no_terminal_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for command in resident.SERVED:
        assert resident.may_serve([command])
        assert resident.starts_one([command])
    for command in resident.QUIET:  # (this test's standard input and output are no terminal)
        assert resident.may_serve([command])
        assert not resident.starts_one([command])
    assert not resident.may_serve(["ui"])
    assert not resident.may_serve(["push"])  # (git may ask for a password on the terminal)
    assert not resident.may_serve(["--debug", "run", "--", "true"])
    monkeypatch.setenv("BAR_STEP_ID", "0003")
    assert not resident.may_serve(["run", "--", "true"])
    monkeypatch.delenv("BAR_STEP_ID")
    monkeypatch.setenv("BAR_FAULT_AT", "somewhere")  # (the fork reads it: ``faults.configure``)
    assert resident.may_serve(["run", "--", "true"])


def test_a_served_command_passes_and_stops_at_its_callers_crash_points(
    repo: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The fault injection of the crash tests is read by the fork from its caller's
    environment: a served step passes its crash points (the trace counts them from one),
    and one killed at a point takes its caller with it, as a bar killed there ends."""
    task, wt = _started(capfd, repo)
    trace = tmp_path / "trace"
    assert _served(wt, env={"BAR_FAULT_TRACE": str(trace)})
    lines = trace.read_text().splitlines()
    assert [int(line.split(" ", 1)[0]) for line in lines] == list(range(1, len(lines) + 1))
    points = [line.split(" ", 1)[1] for line in lines]
    at = next(p for p in points if "ledger" in p)
    done = _run(wt, "--", "sh", "-c", "echo late > late.txt", env={"BAR_FAULT_AT": f"{at}@1"})
    assert done.returncode == -signal.SIGKILL, done.stderr
    res = _run(wt, "--", "true")
    assert res.returncode == 0, res.stderr
    assert (wt / "late.txt").read_text() == "late\n"
    assert any(s["cmd"][-1] == "echo late > late.txt" for s in ledger(task["id"])), ledger(
        task["id"]
    )[-3:]


def test_a_command_that_reads_the_record_is_served_only_where_it_would_not_page() -> None:
    """With a terminal as its standard output (a pager, colours) or input, ``bar log``
    and the like run in the caller's process, whose terminal it is."""
    probe = "from bar.changes.fast import resident; print(resident.may_serve(['log']))"
    for on_terminal in (0, 1):
        leader, follower = os.openpty()
        streams: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE}
        streams["stdout" if on_terminal else "stdin"] = follower
        try:
            done = subprocess.run([sys.executable, "-c", probe], **streams, timeout=60)
            said = done.stdout or os.read(leader, 100)
        finally:
            os.close(leader)
            os.close(follower)
        assert said.strip() == b"False", (on_terminal, said)


def test_the_commands_that_read_the_record_act_alike_served_or_not(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``status``, ``log``, ``show``, ``diff``, ``task list``/``show``, ``doctor``,
    ``verify``, run by bar itself and by a fork of the resident from a script (no
    terminal): the same output and exit code, and the fork did serve them."""
    task, wt = _started(capfd, repo)
    assert _run(wt, "--", "sh", "-c", "echo one > a.txt; echo said").returncode == 0
    (wt / "a.txt").write_text("by hand\n")  # (a hand edit for status and the next look)
    commands = [
        ("status",),
        ("status", "--json"),
        ("log",),
        ("log", "--json", "-p"),
        ("show", "2"),
        ("show", "2", "--json"),
        ("diff", "1", "2"),
        ("task", "list"),
        ("task", "show", task["id"], "--json"),
        ("show", "99"),  # (an error: its message and exit code)
        ("doctor",),
        ("verify",),
    ]
    seen: dict[str, list[tuple[int, bytes, bytes]]] = {"here": [], "there": []}
    # the served run above took a spare: the one forked in its place comes when it ended,
    # not during the commands run here, which must start none
    _wait(lambda: len(_forks()) == SPARES)
    for name, idle in (("here", "0"), ("there", "60")):
        for args in commands:
            before = _forks()
            done = subprocess.run(
                [BAR_EXE, *args],
                cwd=wt,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env={**os.environ, "BAR_RESIDENT_IDLE": idle},
                timeout=120,
            )
            if name == "there":
                _wait(lambda seen=before: _forks() != seen)
            else:
                assert _forks() == before, args
            code, out, err = _seen(done)
            seen[name].append((code, _TIMED.sub(b"in N s", out), err))
    for here, there, args in zip(seen["here"], seen["there"], commands, strict=True):
        assert there == here, args


def test_a_command_that_reads_the_record_starts_no_resident(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A ``bar status`` in a bar home with no resident runs here and leaves none behind:
    loading all of bar for a command that may be the only one would cost more than it
    saves."""
    init_clean(repo, capfd)
    new_task(capfd)
    for args in (("status",), ("log",), ("task", "list")):
        done = subprocess.run(
            [BAR_EXE, *args], cwd=repo, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
        assert done.returncode == 0, done
    assert not (Path(_home()) / resident.SOCKET).exists()
    assert resident.status(_home()) is None


@contextmanager
def _resident(tmp_path: Path, module: Path) -> Iterator[Resident]:
    """A resident (not serving) on a socket of its own, that loaded ``module``."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "listener"))
    try:
        warm = Resident(sock.fileno(), str(tmp_path / "listener"), 60, lambda argv: 0)
        warm.loaded = {str(module): module.stat().st_mtime_ns}
        yield warm
    finally:
        sock.detach()
        sock.close()


def test_a_resident_whose_code_changed_serves_no_more(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("x = 1\n")
    with _resident(tmp_path, module) as warm:
        assert warm._still_here()
        module.write_text("x = 2\n")
        os.utime(module, ns=(1, 1))
        assert not warm._still_here()


def test_a_resident_whose_code_is_quiet_stats_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its directories watched since it loaded, a spare need not stat each file
    while nothing happened there; once something did, it compares them as before."""
    from bar.base.inotify import ANY_CHANGE, Watch

    module = tmp_path / "code" / "module.py"
    module.parent.mkdir()
    module.write_text("x = 1\n")
    with _resident(tmp_path, module) as warm:
        warm.code = Watch([str(module.parent)], ANY_CHANGE)
        statted: list[object] = []
        unchanged = warm._unchanged
        monkeypatch.setattr(warm, "_unchanged", lambda files: statted.append(1) or unchanged(files))
        assert warm._still_here() and statted == []
        module.write_text("x = 2\n")
        os.utime(module, ns=(1, 1))
        assert not warm._still_here() and statted == [1]


def test_a_hard_link_made_to_bars_code_after_it_loaded_ends_its_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A confined step is refused while a file of bar's has another name
    (``bar.sandbox.own_code``), and the resident's forks take the answer it found when it
    loaded: a link made after that (perf's cache, an install by links) ends its service,
    as a change of its code does. A link changes no mtime, and inotify tells a directory's
    watch nothing of it: the resident walks bar's files again at each of its checks
    (``_WAKE_S``), and whenever its directories' watch heard anything."""
    from bar.base.inotify import ANY_CHANGE, Watch
    from bar.sandbox import own_code

    code = tmp_path / "code"
    code.mkdir()
    (code / "_quick.so").write_bytes(b"\x7fELF")
    walk = own_code.linked
    monkeypatch.setattr(
        own_code, "linked", lambda roots=None, again=False: walk([code], again=again)
    )
    with _resident(tmp_path, code / "_quick.so") as warm:
        assert own_code.linked() == []  # (what it found when it loaded)
        warm.code = Watch([str(code)], ANY_CHANGE)
        assert warm._still_here() and not warm._links_made()
        os.link(code / "_quick.so", tmp_path / "elf")
        assert warm._links_made()  # (the check every _WAKE_S: the resident exits)
        (tmp_path / "elf").unlink()
        (code / "new.py").write_text("")  # (heard by the watch)
        assert not warm._still_here()  # (the link gone: a count changed again)


def test_it_exits_when_idle_and_when_asked(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, wt = _started(capfd, repo)
    path = Path(_home()) / resident.SOCKET
    assert resident.stop(_home())
    _wait(lambda: not path.exists())
    assert _run(wt, "--", "true", env={"BAR_RESIDENT_IDLE": "1"}).returncode == 0
    assert path.exists()  # (started, listening at once)
    _wait(lambda: not path.exists())  # and gone after a second without a command
    assert _run(wt, "--", "true", env={"BAR_RESIDENT_IDLE": "0"}).returncode == 0
    time.sleep(0.2)
    assert not path.exists()  # none started


def test_a_dead_resident_is_replaced(repo: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _, wt = _started(capfd, repo)
    resident_pid = _resident_pid()
    # the resident and every spare (each is a process of its own group: one it forks
    # between a look at its children and the kill would go on listening on the old
    # socket and serve the next command alone), until none is left; its socket is left,
    # with no one listening
    while warm := _warm_processes():
        for pid in warm:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    _wait(lambda: not _cmdline(resident_pid))
    assert (Path(_home()) / resident.SOCKET).exists()
    assert _run(wt, "--", "true").returncode == 0  # run here; a new resident started
    _wait(lambda: resident.ready(_home()), 60)  # (once it has taken the socket over)
    assert _resident_pid() != resident_pid
    _wait(lambda: _served(wt), 60)  # (a loaded machine may serve the first one at home)


def _resident_pid() -> int:
    socket_path = os.fsencode(Path(_home()) / resident.SOCKET)
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        ours = b"bar.cli.warm" in cmdline and socket_path in cmdline
        if ours and "bar.cli.warm" not in _cmdline(int(stat[1])):
            return int(proc.name)  # (not a fork of it: the resident itself)
    return 0


def _wait(done: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_bar_command_loads_no_more_than_it_needs_to_be_served() -> None:
    """``bin/bar`` loads ``bar.cli.entry`` and ``bar.changes.fast.resident`` alone (and their
    packages, which import nothing; ``_socket`` once it sends; ``gc``, built into the
    interpreter: no file is read), and those no ``__future__`` (0.3 ms of a command that
    takes some 50)."""
    probe = (
        "import sys\nbefore = set(sys.modules)\nfrom bar.cli import entry\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    packages = {"bar", "bar.cli", "bar.changes", "bar.changes.fast"}
    assert set(out) <= packages | {"bar.cli.entry", "bar.changes.fast.resident", "gc"}, out
    source = Path(entry_file()).parent
    for name in packages - {"bar"}:
        init = source.joinpath(*name.split(".")[1:], "__init__.py")
        assert not _imports_when_loaded(init.read_text()), f"{name} loads more when bar starts"
    installed = Path(BAR_EXE)
    if installed.read_bytes()[:4] == b"\x7fELF":  # the compiled bar (bar.cli.launcher)
        installed = installed.with_name("bar-python")
    script = installed.read_text()
    assert "from bar.cli.entry import main" in script and "bar.cli.main" not in script


def _imports_when_loaded(source: str) -> list[str]:
    """The imports a module runs as it is loaded: none inside a function (run when it is
    called) or under ``if TYPE_CHECKING:`` (the speed layer's door: for the type checker)."""
    import ast

    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        found += [
            ast.unparse(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
        ]
    return found


def entry_file() -> str:
    import bar

    return str(bar.__file__)


def test_it_compiles_the_patterns_of_its_projects_policies_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patterns the bar home's projects' policies hold (their caches) are compiled
    before the spares fork, each once; a cache it cannot read, or a pattern that does
    not compile, is passed over."""
    from bar.policy import loader

    def cache(project: str, name: str, data: object) -> None:
        folder = tmp_path / "projects" / project / "cache"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(data) if not isinstance(data, str) else data)

    rules = [{"name": "a", "pattern": r"^rm\s+-rf\b"}, {"name": "b", "pattern": r"curl\s.*\|"}]
    cache("one", "policy-00000001.json", {"data": {"rules": rules}})
    cache("two", "policy-00000002.json", {"data": {"rules": [*rules, {"pattern": "(unclosed"}]}})
    cache("two", "policy-00000003.json", "{torn")
    cache("three", "config.json", {"data": {"rules": [{"pattern": "not a policy"}]}})
    compiled: list[str] = []
    real = re.compile

    def compiling(pattern: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", compiling)
    loader.compile_cached(str(tmp_path))
    wanted = [r"^rm\s+-rf\b", r"curl\s.*\|", "(unclosed"]
    assert sorted(p for p in compiled if p in wanted) == sorted(wanted)  # (glob's own aside)
    assert "not a policy" not in compiled


def test_bar_resident_starts_says_and_stops_the_warm_bar(repo: Path) -> None:
    """``bar resident``: its lifecycle by hand, as the next ``bar run`` would see it."""

    def said(*args: str, **env: str) -> dict[str, Any]:
        proc = subprocess.run(
            [BAR_EXE, "resident", *args, "--json"],
            capture_output=True,
            env={**os.environ, **env},
            timeout=120,
            check=True,
        )
        found: dict[str, Any] = json.loads(proc.stdout)
        return found

    assert said("status")["running"] is False
    started = said("start")
    assert started["running"] and started["socket"] == str(Path(_home()) / resident.SOCKET)
    os.kill(started["pid"], 0)  # (alive)
    assert said("status")["pid"] == started["pid"] and resident.ready(_home())
    assert said("stop") == {"stopped": True}
    deadline = time.monotonic() + 30
    while _alive(started["pid"]):
        assert time.monotonic() < deadline, "the resident did not exit"
        time.sleep(0.05)
    assert said("status")["running"] is False and said("stop") == {"stopped": False}
    off = said("start", BAR_RESIDENT_IDLE="0")
    assert off["running"] is False and off["off"] == "BAR_RESIDENT_IDLE=0"
    assert said("status")["running"] is False


def test_bar_homes_that_name_one_socket_share_one_resident(
    repo: Path,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_repo: MakeRepo,
) -> None:
    """``BAR_RESIDENT_SOCKET``: one resident serves the commands of two bar homes, each
    in its own (a fork takes its caller's environment); a socket in a folder others may
    write is never used (another user could listen there)."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    sock = str(shared / "r.sock")
    monkeypatch.setenv("BAR_RESIDENT_SOCKET", sock)
    assert resident.socket_path() == sock
    init_clean(repo, capfd)
    wt = worktree(new_task(capfd))
    started = subprocess.run(
        [BAR_EXE, "resident", "start", "--json"], capture_output=True, timeout=120, check=True
    )
    pid = json.loads(started.stdout)["pid"]
    assert json.loads(started.stdout)["socket"] == sock
    assert not (bar_home() / resident.SOCKET).exists()
    assert _served(wt)
    other = tmp_path / "other-home"
    monkeypatch.setenv("BAR_HOME", str(other))
    monkeypatch.chdir(make_repo(name="second"))
    init_clean(Path.cwd(), capfd)
    task = new_task(capfd)
    assert _served(worktree(task))
    assert ledger(task["id"])[-1]["kind"] == "run"  # (recorded in the second home)
    assert not (other / resident.SOCKET).exists()
    status = subprocess.run([BAR_EXE, "resident", "status", "--json"], capture_output=True)
    assert json.loads(status.stdout)["pid"] == pid
    for mode in (0o770, 0o702):  # (its group or others may write the folder)
        shared.chmod(mode)
        assert resident.socket_path() == str(other / resident.SOCKET)
        said = subprocess.run([BAR_EXE, "resident", "status"], capture_output=True, text=True)
        assert f"BAR_RESIDENT_SOCKET is not used: others may write its folder {shared}" in (
            said.stderr
        )
    shared.chmod(0o700)
    monkeypatch.setenv("BAR_RESIDENT_SOCKET", "r.sock")  # (not absolute)
    assert resident.socket_path() == str(other / resident.SOCKET)
    assert resident.stop(str(shared)) is False  # (its socket is r.sock, not resident.sock)
    monkeypatch.setenv("BAR_RESIDENT_SOCKET", sock)
    stopped = subprocess.run([BAR_EXE, "resident", "stop", "--json"], capture_output=True)
    assert json.loads(stopped.stdout) == {"stopped": True}


_IMPOSTOR = """
import os, socket, sys
path = sys.argv[1]
listener = socket.socket(socket.AF_UNIX)
os.chdir(os.path.dirname(path))  # (a long path: bound by its name)
listener.bind(os.path.basename(path))
listener.listen(1)
listener.settimeout(60)
conn, _ = listener.accept()
conn.sendall(b"hello\\n")  # (what a resident's fork says first)
conn.settimeout(5)
got = b""
while True:
    try:
        chunk = conn.recv(65536)
    except OSError:
        break
    if not chunk:
        break
    got += chunk
with open(sys.argv[2], "wb") as f:
    f.write(got)
"""


@pytest.mark.skipif("BAR_SANDBOX_UNAVAILABLE" in os.environ, reason="the step is confined")
def test_a_step_listening_at_the_shared_socket_is_handed_nothing(
    repo: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``BAR_RESIDENT_SOCKET`` where a step may write (here its worktree): a confined
    step that listens there while no resident does is sent no command line, environment
    or descriptor; the developer's ``bar`` says so and runs the command itself."""
    init_clean(repo, capfd)
    task = new_task(capfd)
    wt = worktree(task)
    sock, stolen = wt / "r.sock", wt / "stolen.bin"
    step = subprocess.Popen(
        [BAR_EXE, "run", "--task", task["id"], "--", sys.executable, "-c", _IMPOSTOR, sock, stolen],
        cwd=wt,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert time.monotonic() < deadline and step.poll() is None, step.communicate()
            time.sleep(0.05)
        monkeypatch.setenv("BAR_RESIDENT_SOCKET", str(sock))
        assert resident.socket_path() == str(sock)  # (a folder of the user's: taken)
        said = subprocess.run(
            [BAR_EXE, "status"],
            cwd=wt,
            env={**os.environ, "SECRET_OF_THE_DEVELOPER": "s3cr3t-v4lue"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert said.returncode == 0, said.stderr
        assert f"the process listening on {sock} is not a resident of yours" in said.stderr
        assert task["id"] in said.stdout  # (run here instead)
        out, _ = step.communicate(timeout=60)
    finally:
        if step.poll() is None:
            step.kill()
    assert step.returncode == 0, out
    assert stolen.read_bytes() == b""  # (before the fix: the request, the secret in it)


def _alive(pid: int) -> bool:
    with suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False


def test_a_request_is_read_by_its_field_names() -> None:
    """What the ``bar`` command sends (``resident.request``) is the daemon's ``Request``,
    field by field; anything else is no request."""
    from bar.changes.fast.resident_daemon import Request

    probe = (
        "import sys\nfrom bar.changes.fast import resident\n"
        "sys.stdout.buffer.write(resident.request(['run', '--', 'echo', 'a b']))"
    )
    sent = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True).stdout
    body = sent.split(b"\n", 1)[1]
    request = Request.parse(body)
    assert request is not None
    assert request.argv[1:] == ["run", "--", "echo", "a b"]
    assert request.executable == sys.executable and request.magic == resident.MAGIC
    assert request.environ[b"PATH"] == os.environb[b"PATH"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert request.umask == mask
    assert len(request.streams) == 3
    assert Request.parse(b"not a request") is None
    assert Request.parse(body.replace(resident.MAGIC, b"bar-resident/0", 1)) is None


def test_the_warm_process_has_the_secret_shapes_compiled_for_a_step_that_prints() -> None:
    """A fork scrubs what its step prints with regexes the resident compiled once
    (``Resident.load``): none is compiled again for a new scrubber's stream (45 ms of every
    printing step otherwise)."""
    probe = (
        "import re._compiler as c\n"
        "from bar.changes.fast import resident_daemon\n"
        "resident_daemon.make_first_uses()\n"
        "made = []\n"
        "real = c.compile\n"
        "c.compile = lambda *a, **k: made.append(a) or real(*a, **k)\n"
        "from bar.redact import Scrubber\n"
        "from bar.redact.stream import StreamScrubber\n"
        "stream = StreamScrubber(Scrubber(['a-secret-value-123']))\n"
        "out = stream.feed(b'ok a-secret-value-123 ghp_' + b'a' * 36 + b'\\n') + stream.flush()\n"
        "print(out.decode().strip(), len(made))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "***", "***", "0"]


def test_temporals_client_is_loaded_once_a_task_of_the_bar_home_runs_on_workers(
    repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Temporal's client, which ``bar run --on`` needs and a fork would take ~220 ms to
    import, is loaded by the resident of a bar home one of whose tasks runs on workers,
    and by no other (its weight makes every served command slower). A resident that was
    up when a task was first sent exits by itself; the next command starts one that has it."""
    pytest.importorskip("temporalio")

    def loaded(pid: int) -> bool:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return False
        return "temporal_sdk_bridge" in maps

    _task, wt = _started(capfd, repo)
    first = _resident_pid()
    assert first and not loaded(first)
    sent = project_dir() / "workers" / "a-task.json"
    sent.parent.mkdir(parents=True, exist_ok=True)
    sent.write_text("{}")  # (what it holds is not read here: that it is there)
    _wait(lambda: _resident_pid() != first)  # (it looks every few seconds)
    assert _run(wt, "--", "true").returncode == 0
    _wait(lambda: loaded(_resident_pid()))  # (it listens before it has loaded)
