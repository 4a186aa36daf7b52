"""The compiled ``bar`` (``bar.cli.launcher``) sends the resident the same request as the
Python client, byte for byte, in every locale and state of the streams and signals it
serves; hands ``bar hook``'s event to the running step and prints its reply; and runs
bar's Python, with the same arguments and standard input, for everything else."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import BAR_EXE

from bar.agents import AGENTS
from bar.cli import entry, launcher
from bar.step import channel

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with bar's Python script as the install writes it, and the compiled bar
    built beside it."""
    folder = tmp_path_factory.mktemp("bin")
    installed = Path(BAR_EXE)
    if installed.read_bytes().startswith(b"\x7fELF"):  # (make install built one already)
        shutil.copy(installed.with_name(launcher.PYTHON_NAME), folder / "bar")
    else:
        shutil.copy(installed, folder / "bar")
    launcher.build(folder)
    assert (folder / "bar").read_bytes().startswith(b"\x7fELF")
    return folder


class Listener:
    """A socket that answers as a resident's fork would, then keeps the request it got
    and refuses it (``no test``): the caller runs the command itself."""

    def __init__(self, path: Path, answer: bytes = b"no test\n") -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.answer = answer
        self.requests: list[bytes] = []
        self.programs: list[str] = []  # the program of each process that asked
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                pid = struct.unpack(
                    "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                )[0]
                self.programs.append(os.readlink(f"/proc/{pid}/exe"))
                conn.sendall(b"hello\n")
                data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 8)
                for fd in fds:
                    os.close(fd)
                head, _, body = data.partition(b"\n")
                while len(body) < int(head):
                    body += conn.recv(1 << 20)
                self.requests.append(body)
                conn.sendall(self.answer)
                if self.answer.startswith(b"pid"):  # (a caller that takes it says go)
                    conn.settimeout(10)
                    with contextlib.suppress(OSError):
                        conn.recv(3)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    path = folder / "resident.sock"
    found = Listener(path)
    monkeypatch.setenv("BAR_RESIDENT_SOCKET", str(path))
    yield found
    found.close()


def _fields(body: bytes) -> list[bytes]:
    return body.split(b"\0")


NO_LOCALE = {"LANG": None, "LC_ALL": None, "LC_CTYPE": None}
# (name, changes to the environment, a umask, signals ignored, signals blocked, the
# standard descriptors closed)
CASES = [
    ("utf-8 locale", {"LANG": "C.UTF-8"}, 0o022, (), (), ()),
    ("no locale at all: coerced", NO_LOCALE, 0o022, (), (), ()),
    ("LC_ALL=C", {"LC_ALL": "C"}, 0o027, (), (), ()),
    ("LC_ALL=POSIX", {"LC_ALL": "POSIX"}, 0o022, (), (), ()),
    ("LC_CTYPE=C beside LANG", {"LANG": "C.UTF-8", "LC_CTYPE": "C"}, 0o022, (), (), ()),
    ("a locale not installed", {"LANG": "xx_YY.UTF-8", "LC_ALL": None}, 0o022, (), (), ()),
    ("unbuffered", {"PYTHONUNBUFFERED": "1"}, 0o077, (), (), ()),
    ("nohup", {}, 0o022, (signal.SIGHUP, signal.SIGINT), (), ()),
    ("blocked", {}, 0o022, (), (signal.SIGUSR1, signal.SIGTERM), ()),
    ("odd environment", {"X": "a=b\tc", "EMPTY": "", "ü": "ä"}, 0o022, (), (), ()),
    ("stdin and stdout closed", {}, 0o022, (), (), (0, 1)),
    ("stderr closed, no locale", NO_LOCALE, 0o022, (), (), (2,)),
]


@pytest.mark.parametrize(
    ("changes", "mask", "ignored", "blocked", "closed"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_the_request_is_the_python_client_s(
    built: Path,
    listener: Listener,
    tmp_path: Path,
    changes: dict[str, str | None],
    mask: int,
    ignored: tuple[int, ...],
    blocked: tuple[int, ...],
    closed: tuple[int, ...],
) -> None:
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value

    def setup() -> None:
        os.umask(mask)
        for number in ignored:
            signal.signal(number, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        for fd in closed:
            os.close(fd)

    for program in (built / "bar-python", built / "bar"):
        subprocess.run(
            [str(program), "status", "--json", "a b", "ü"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            preexec_fn=setup,
            check=False,
            timeout=60,
        )
    # Python's and the compiled bar's, which ran Python when the resident refused the
    # command, and Python did not ask again
    assert len(listener.requests) == 2
    assert listener.programs[1] == str(built / "bar")
    python, compiled = listener.requests[0], listener.requests[1]
    assert _fields(compiled) == _fields(python)
    assert _fields(compiled)[14:17] == [b"--json", b"a b", "ü".encode()]


def _same_either_way(
    built: Path, args: list[str], event: bytes | None = None
) -> tuple[int, bytes, bytes]:
    """What ``bar ARGS`` did, asserted the same from the compiled bar and from Python."""
    runs = [
        subprocess.run(
            [str(built / program), *args],
            input=event,
            capture_output=True,
            check=False,
            timeout=60,
        )
        for program in ("bar", "bar-python")
    ]
    here, there = ((r.returncode, r.stdout, r.stderr) for r in runs)
    assert here == there, args
    return here


def test_what_it_does_not_serve_runs_in_python_with_the_same_arguments(
    built: Path, tmp_path: Path
) -> None:
    for args in (["--version"], ["help", "run"], ["hook", "claude", "--help"], ["nosuch"]):
        assert _same_either_way(built, args)[0] is not None, args


class Step:
    """A socket answering as a running step's ``bar run`` does (``bar.step.channel``): a
    reply given, or none (the connection closed after the event is read)."""

    def __init__(self, path: Path, reply: bytes | None, *, read: bool = True) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.reply = reply
        self.read = read  # (False: closed at once, the event unread)
        self.got: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while self.read and (chunk := conn.recv(65536)):
                    data += chunk
                self.got.append(data)
                if self.reply is not None:
                    conn.sendall(self.reply)


EVENT = b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}'


@pytest.mark.parametrize("long_path", [False, True], ids=["short path", "a path over 100 bytes"])
def test_a_hook_is_handed_to_the_running_step_and_its_reply_printed(
    built: Path, tmp_path: Path, long_path: bool
) -> None:
    folder = tmp_path / ("d" * 120 if long_path else "s")
    folder.mkdir()
    path = folder / "task.sock"
    reply = channel.encode_reply(channel.Reply(2, b'{"x": 1}\n', b"blocked: rm\n"))
    step = Step(path, reply) if not long_path else None
    if long_path:  # (bound through the folder, as bar run binds a deep task's socket)
        fd = os.open(folder, os.O_RDONLY)
        try:
            step = Step(Path(f"/proc/self/fd/{fd}/task.sock"), reply)
        finally:
            os.close(fd)
    assert step is not None
    done = subprocess.run(
        [str(built / "bar"), "hook", "claude", "--socket", str(path)],
        input=EVENT,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, b'{"x": 1}\n', b"blocked: rm\n")
    assert step.got == [b"bar1 hook claude\n" + EVENT]
    through_env = subprocess.run(
        [str(built / "bar"), "hook", "codex"],
        input=EVENT,
        env={**os.environ, "BAR_SOCKET": str(path)},
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert through_env.returncode == 2
    assert step.got[-1] == b"bar1 hook codex\n" + EVENT


def test_a_step_that_takes_the_event_and_does_not_answer_blocks_the_call_once(
    built: Path, tmp_path: Path
) -> None:
    path = tmp_path / "task.sock"
    step = Step(path, None)
    done = subprocess.run(
        [str(built / "bar"), "hook", "claude", "--socket", str(path)],
        input=EVENT,
        capture_output=True,
        check=False,
        timeout=60,
    )
    python = subprocess.run(
        [str(built / "bar-python"), "hook", "claude", "--socket", str(path)],
        input=EVENT,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == python.returncode == 2
    assert b"did not answer" in done.stderr
    assert (done.stdout, done.stderr) == (python.stdout, python.stderr)
    assert len(step.got) == 2, "the compiled bar sent the event once, as Python did"


def test_no_running_step_the_event_reaches_python_whole(built: Path, tmp_path: Path) -> None:
    """A socket nobody listens at: Python judges the event (bar's default policy here),
    so it must get the event the compiled bar had read."""
    args = ["hook", "claude", "--socket", str(tmp_path / "gone.sock")]
    dangerous = (
        b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "/", '
        b'"tool_input": {"command": "rm -rf ~"}}'
    )
    assert _same_either_way(built, args, dangerous)[0] == 2  # (bar's default policy blocks it)


def test_an_install_that_moved_is_said(built: Path, tmp_path: Path) -> None:
    moved = tmp_path / "bin"
    moved.mkdir()
    shutil.copy(built / "bar-python", moved / "bar")
    text = (moved / "bar").read_bytes().replace(sys.executable.encode(), b"/nonexistent/python", 1)
    (moved / "bar").write_bytes(text)
    try:
        launcher.build(moved)
    except launcher.LauncherError as exc:
        assert "cannot import bar" in str(exc)
    else:
        pytest.fail("a launcher built for a Python that is not there")


def test_its_constants_are_the_python_client_s() -> None:
    """What the compiled bar knows of the protocols it speaks is what bar's Python says:
    a change on one side without the other fails here (a launcher built before such a
    change, from the old ``launcher.c``, runs everything in Python: see the next test)."""
    from bar.changes.fast import resident

    source = launcher.SOURCE.read_text()

    def c_string(name: str) -> str:
        match = re.search(rf'#define {name} "([^"]*)"', source)
        assert match, name
        return match.group(1)

    def c_words(name: str) -> list[str]:
        match = re.search(rf"{name}\[\] = \{{([^}}]*)\}}", source)
        assert match, name
        return re.findall(r'"([^"]*)"', match.group(1))

    assert c_string("MAGIC").encode() == resident.MAGIC
    assert c_string("SOCKET_NAME") == resident.SOCKET
    assert c_string("HOOK_MAGIC").encode() == channel.MAGIC
    assert f"#define IDLE_S {resident.IDLE_S}\n" in source
    assert f"#define TIMEOUT_S {int(resident.TIMEOUT)}\n" in source
    assert f"#define HOOK_TIMEOUT_S {int(channel.TIMEOUT)}\n" in source
    assert c_words("SERVED") == list(resident.SERVED)
    assert c_words("QUIET") == list(resident.QUIET)
    assert c_words("HARMLESS_PYTHON") == sorted(resident._HARMLESS_PYTHON)
    assert c_words("agents") == sorted(AGENTS)
    named = re.search(r"forwarded\[\] = \{([^}]*)\}", source)
    assert named and re.findall(r"SIG\w+", named.group(1)) == list(resident.FORWARDED)
    assert f'"{entry.TRIED}"' in source


def test_a_launcher_older_than_its_source_runs_everything_in_python(
    built: Path, tmp_path: Path, listener: Listener
) -> None:
    """The compiled bar notes which ``launcher.c`` it was built from; once that file
    changes (bar updated in place, ``make install`` not run again) it asks nothing itself."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(built / "bar-python", fresh / "bar")
    source = tmp_path / "launcher.c"
    shutil.copy(launcher.SOURCE, source)
    launcher.build(fresh, source=source)
    subprocess.run(
        [str(fresh / "bar"), "status"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
    )
    assert listener.programs == [str(fresh / "bar")]  # (Python did not ask again)
    source.write_text(source.read_text() + "\n")
    subprocess.run(
        [str(fresh / "bar"), "status"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
    )
    assert listener.programs[1:] == [os.path.realpath(sys.executable)]  # (Python's own)


@pytest.mark.parametrize("read", [True, False], ids=["read, no answer", "closed unread"])
def test_a_step_that_drops_the_event_blocks_the_call(
    built: Path, tmp_path: Path, read: bool
) -> None:
    """A step's socket that closes before it has read the event (the write fails: a
    broken pipe, which must not kill the hook: an agent runs the command when its hook
    dies) or after, without a word: the call is blocked, as Python blocks it."""
    path = tmp_path / "task.sock"
    Step(path, None, read=read)
    event = EVENT * (20000 if not read else 1)  # (more than the socket holds unread)
    runs = [
        subprocess.run(
            [str(built / program), "hook", "claude", "--socket", str(path)],
            input=event,
            capture_output=True,
            check=False,
            timeout=60,
        )
        for program in ("bar", "bar-python")
    ]
    assert runs[0].returncode == runs[1].returncode == 2
    assert (runs[0].stdout, runs[0].stderr) == (runs[1].stdout, runs[1].stderr)


@pytest.mark.parametrize("answer", [b"pid \n", b"pid abc\n", b"pid 0\n", b"pid 1\n"])
def test_a_pid_it_cannot_pass_signals_to_is_not_taken(
    built: Path, tmp_path: Path, answer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork that names no pid, or 0 or 1 (signals to it would reach the caller's own
    group, or every process): the command is run here, by Python, not waited on."""
    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    path = folder / "resident.sock"
    odd = Listener(path, answer=answer)
    monkeypatch.setenv("BAR_RESIDENT_SOCKET", str(path))
    try:
        done = subprocess.run(
            [str(built / "bar"), "status", "--json"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=60,
            cwd=tmp_path,
        )
    finally:
        odd.close()
    assert odd.programs == [str(built / "bar")]  # (asked once; Python did not ask again)
    assert b"ended without saying how" not in done.stderr


def test_it_leaves_a_file_that_is_not_a_socket_where_its_socket_would_be(
    built: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    path = folder / "resident.sock"
    path.write_text("keep me")
    for program in ("bar", "bar-python"):
        subprocess.run(
            [str(built / program), "status"],
            env={**os.environ, "BAR_RESIDENT_SOCKET": str(path)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert path.read_text() == "keep me", program


@pytest.mark.parametrize(
    "variables",
    [{"BAR_SERVE_TRIED": "1"}, {"BAR_FAST": "off      "}, {"BAR_FAST": "off\u00a0"}],
    ids=["asked already", "off, and spaces", "off, and a no-break space"],
)
def test_what_python_would_not_ask_it_does_not_ask(
    built: Path, listener: Listener, tmp_path: Path, variables: dict[str, str]
) -> None:
    for program in ("bar", "bar-python"):
        subprocess.run(
            [str(built / program), "status"],
            env={**os.environ, **variables},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=60,
            cwd=tmp_path,
        )
    assert listener.requests == []
