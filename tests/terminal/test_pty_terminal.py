"""Interactive runs: real pseudo-terminals, real child processes, real signals.

"bar's terminal" is a pty pair the test owns: the runner gets the slave as stdin and
stdout, and the test plays the user at the master (reading what is shown, typing
keys). The text cleaner and the cast format on their own are tested in
``test_terminal_text`` and ``test_terminal_cast``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ptys import CATCHING_PROMPT

import bar.terminal.pty as pty_module
from bar.terminal.cast import full_cast, read_cast, replay_cast, text_of_cast
from bar.terminal.pty import PtyResult, run_in_pty

WAIT = 60.0  # generous: CI machines can be slow and loaded
ALARM = "import signal; signal.alarm(60)"  # a child waiting for keys never waits forever


# --------------------------------------------------------------------------- helpers


@dataclasses.dataclass
class Run:
    result: PtyResult
    output: str  # the text output file
    cast_path: Path
    shown: bytes  # what bar wrote to its stdout

    @property
    def body(self) -> str:
        assert self.output.startswith("=== STDOUT ===\n")
        assert self.output.endswith("=== STDERR ===\n")
        return self.output[len("=== STDOUT ===\n") : -len("=== STDERR ===\n")]


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def run(
    tmp_path: Path,
    argv: list[str],
    *,
    stdin: int | None = None,
    stdout: int | None = None,
    env: dict[str, str] | None = None,
    scrub: Callable[[], FakeScrubber] | None = None,
    limit: int | None = None,
) -> Run:
    shown_path = tmp_path / "shown"
    shown_fd = os.open(shown_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        result = run_in_pty(
            argv,
            cwd=tmp_path,
            env=env,
            cast_path=tmp_path / "0001.cast",
            output_path=tmp_path / "0001.output",
            scrub=scrub,
            stdin=null if stdin is None else stdin,
            stdout=shown_fd if stdout is None else stdout,
            limit=limit,
        )
    finally:
        os.close(shown_fd)
        os.close(null)
    return Run(
        result,
        (tmp_path / "0001.output").read_text(),
        tmp_path / "0001.cast",
        shown_path.read_bytes(),
    )


class Terminal:
    """A pty pair standing in for the developer's terminal."""

    def __init__(self, cols: int = 120, rows: int = 40) -> None:
        self.master, self.slave = os.openpty()
        self.resize(cols, rows)
        self._seen = bytearray()
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def resize(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                data = b""
            with self._lock:
                if not data:
                    self._lock.notify_all()
                    return
                self._seen += data
                self._lock.notify_all()

    def wait_for(self, text: bytes) -> None:
        deadline = time.monotonic() + WAIT
        with self._lock:
            while text not in self._seen:
                left = deadline - time.monotonic()
                assert left > 0, f"{text!r} never shown; got {bytes(self._seen)!r}"
                self._lock.wait(left)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    @property
    def seen(self) -> bytes:
        with self._lock:
            return bytes(self._seen)

    def close(self) -> None:
        os.close(self.slave)
        os.close(self.master)
        self._reader.join(WAIT)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    yield term
    term.close()


def in_background(action: Callable[[], None]) -> threading.Thread:
    # The runner stays in the main thread (it installs signal handlers); the "user"
    # acts from here.
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


class FakeScrubber:
    """Replaces one secret, holding back a possible partial match between chunks."""

    SECRET = b"hunter2"

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        data = (self._held + data).replace(self.SECRET, b"***")
        keep = 0
        for n in range(len(self.SECRET) - 1, 0, -1):
            if data.endswith(self.SECRET[:n]):
                keep = n
                break
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return held


# --------------------------------------------------------------------------- the child's terminal


def test_child_sees_a_terminal_it_controls(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        python(
            """
            import os, sys
            print(sys.stdout.isatty(), sys.stdin.isatty())
            os.close(os.open("/dev/tty", os.O_RDWR))  # fails without a controlling tty
            print("session leader", os.getsid(0) == os.getpid())
            """
        ),
    )
    assert done.result == PtyResult(0, None, True, 80, 24)
    assert done.body == "True True\nsession leader True\n"


def test_cwd_and_env_reach_the_child(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "FOO": "bar baz"}
    done = run(
        tmp_path,
        python("import os; print(os.getcwd()); print(os.environ['FOO'])"),
        env=env,
    )
    assert done.body == f"{os.path.realpath(tmp_path)}\nbar baz\n"


def test_size_from_columns_and_lines_when_stdin_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "101")
    monkeypatch.setenv("LINES", "33")
    done = run(tmp_path, python("import os; print(*os.get_terminal_size())"))
    assert done.body == "101 33\n"
    assert (done.result.width, done.result.height) == (101, 33)
    header = read_cast(done.cast_path).header
    assert (header.width, header.height) == (101, 33)


def test_a_resize_given_to_another_thread_of_bar_reaches_the_child_at_once(
    tmp_path: Path, terminal: Terminal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel gives a process's signal to any of its threads that takes it (a step has
    the policy's, the network's, the supervisor's): a resize must reach the child then
    too, not at its next output or bar's next poll (made an hour here: nothing else wakes
    bar while the child waits)."""
    monkeypatch.setattr(pty_module, "_POLL", 3600.0)
    child = python(
        """
        import os, time
        print("ready", flush=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and tuple(os.get_terminal_size()) == (120, 40):
            time.sleep(0.02)
        print("resized", *os.get_terminal_size(), flush=True)
        """
    )
    idle = threading.Event()
    other = in_background(lambda: idle.wait(120))

    def user() -> None:
        terminal.wait_for(b"ready")
        terminal.resize(100, 30)
        assert other.ident is not None
        signal.pthread_kill(other.ident, signal.SIGWINCH)

    in_background(user)
    try:
        done = run(tmp_path, child, stdin=terminal.slave, stdout=terminal.slave)
    finally:
        idle.set()
    assert done.body == "ready\nresized 100 30\n"


def test_default_size_without_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    done = run(tmp_path, ["stty", "size"])
    assert done.body == "24 80\n"


def test_window_size_follows_the_terminal(tmp_path: Path, terminal: Terminal) -> None:
    child = python(
        """
        import os, signal, time
        resized = []
        signal.signal(signal.SIGWINCH, lambda *_: resized.append(1))
        print("size", *os.get_terminal_size(), flush=True)
        print("ready", flush=True)
        # the new size, once a SIGWINCH came with it (a SIGWINCH alone may come before it
        # under load: the test waits for what the user sees, not for the first signal)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if resized and tuple(os.get_terminal_size()) != (120, 40):
                break
            time.sleep(0.02)
        print("resized", *os.get_terminal_size(), flush=True)
        """
    )

    def user() -> None:
        terminal.wait_for(b"ready")
        terminal.resize(100, 30)
        os.kill(os.getpid(), signal.SIGWINCH)  # what the kernel does for a real terminal

    in_background(user)
    done = run(tmp_path, child, stdin=terminal.slave, stdout=terminal.slave)
    assert done.body == "size 120 40\nready\nresized 100 30\n"
    assert (done.result.width, done.result.height) == (120, 40)
    cast = read_cast(done.cast_path)
    assert (cast.header.width, cast.header.height) == (120, 40)
    assert [e.data for e in cast.events if e.code == "r"] == ["100x30"]


# --------------------------------------------------------------------------- recording


def test_escapes_reach_the_cast_and_the_screen_but_not_the_text(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        python(
            r"""
            import sys
            sys.stdout.write("\x1b[1;31mred\x1b[0m \x1b]0;a title\x07plain ")
            sys.stdout.write("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\\n")
            sys.stdout.write("\x1b(B\x1b[?25l\x1b=menu\x1b[?25h\n")
            """
        ),
    )
    assert done.body == "red plain link\nmenu\n"
    assert "\x1b" not in done.output
    cast = read_cast(done.cast_path)
    assert "\x1b[1;31mred\x1b[0m" in cast.output
    assert "\x1b]0;a title\x07" in cast.output
    assert done.shown == cast.output.encode()  # shown live, byte for byte


def test_the_whole_cast_is_valid_asciinema_v2(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "TERM": "xterm-256color", "SHELL": "/bin/sh"}
    before = int(time.time())
    done = run(
        tmp_path,
        python(
            """
            import sys, time
            for word in ["one", "two", "three"]:
                print(word, flush=True)
                time.sleep(0.05)
            sys.stdout.buffer.write("caf\\u00e9 \\u20ac\\n".encode())
            """
        ),
        env=env,
    )
    stored = done.cast_path.read_text(encoding="utf-8").splitlines()
    assert json.loads(stored[0])["text_file"] == "0001.output"
    lines = b"".join(full_cast(done.cast_path)).decode().splitlines()
    header = json.loads(lines[0])
    assert set(header) == {"version", "width", "height", "timestamp", "env"}
    assert header["version"] == 2
    assert (header["width"], header["height"]) == (80, 24)
    assert isinstance(header["timestamp"], int) and header["timestamp"] >= before
    assert header["env"] == {"SHELL": "/bin/sh", "TERM": "xterm-256color"}
    times = []
    for line in lines[1:]:
        event = json.loads(line)
        assert isinstance(event, list) and len(event) == 3
        assert isinstance(event[0], float | int) and event[0] >= 0
        assert event[1] == "o" and isinstance(event[2], str)
        times.append(event[0])
    assert times == sorted(times) and len(times) == len(stored) - 1  # one line per event
    assert "".join(json.loads(line)[2] for line in lines[1:]) == (
        "one\r\ntwo\r\nthree\r\ncafé €\r\n"
    )
    assert read_cast(done.cast_path).output == "one\r\ntwo\r\nthree\r\ncafé €\r\n"


def test_the_text_is_stored_once_and_the_cast_holds_what_it_adds(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        python(
            r"""
            import sys
            for n in range(20000):
                print(f"line {n:05d} of plain output")
            print("\x1b[1mbold\x1b[0m end")
            """
        ),
    )
    assert done.cast_path.stat().st_mode & 0o777 == 0o600
    text = tmp_path / "0001.output"
    assert text.stat().st_mode & 0o777 == 0o600
    assert sorted(tmp_path.glob("0001.*")) == [done.cast_path, text]
    printed = 20000 * len("line 00000 of plain output\n") + len("\x1b[1mbold\x1b[0m end\n")
    assert done.body.endswith("line 19999 of plain output\nbold end\n")
    stored = done.cast_path.stat().st_size + text.stat().st_size
    assert stored <= 1.01 * printed  # the text once; the cast: times, escapes, references
    assert "\\u001b[1m" in done.cast_path.read_text()
    # the recording alone gives the same text, as it was derived before
    whole = tmp_path / "whole.cast"
    whole.write_bytes(b"".join(full_cast(done.cast_path)))
    assert b"".join(text_of_cast(whole)).decode() == done.output
    assert whole.stat().st_size > printed


def test_progress_bar_collapses_to_its_final_text(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        python(
            r"""
            import sys, time
            for pct in range(0, 101, 5):
                sys.stdout.write(f"\rdownloading {pct:3d}%")
                sys.stdout.flush()
                time.sleep(0.005)
            sys.stdout.write("\r\x1b[2Kdone\n")
            for pct in range(0, 101, 25):
                sys.stdout.write(f"\x1b[Gbuilding {pct}%\x1b[K")
                sys.stdout.flush()
            print()
            """
        ),
    )
    assert done.body == "done\nbuilding 100%\n"
    assert "downloading  50%" in read_cast(done.cast_path).output


def test_output_without_final_newline_gets_one(tmp_path: Path) -> None:
    done = run(tmp_path, python("import sys; sys.stdout.write('no newline')"))
    assert done.output == "=== STDOUT ===\nno newline\n=== STDERR ===\n"
    assert done.result.printed


@pytest.mark.parametrize("code", ["pass", r"import sys; sys.stdout.write('\x1b[?25l\x1b[0m')"])
def test_nothing_printed(tmp_path: Path, code: str) -> None:
    done = run(tmp_path, python(code))
    assert done.output == "=== STDOUT ===\n=== STDERR ===\n"
    assert done.result.printed == (code != "pass")  # escapes alone print no text


def test_secrets_never_reach_disk(tmp_path: Path) -> None:
    made: list[FakeScrubber] = []

    def factory() -> FakeScrubber:
        made.append(FakeScrubber())
        return made[-1]

    done = run(
        tmp_path,
        python(
            """
            import sys, time
            sys.stdout.write("password: hun"); sys.stdout.flush()
            time.sleep(0.2)
            sys.stdout.write("ter2 ok\\nlast hunter2")
            """
        ),
        scrub=factory,
    )
    assert len(made) == 2  # the recording's, and the text's (scrubbed again once cleaned)
    assert done.body == "password: *** ok\nlast ***\n"
    cast_bytes = done.cast_path.read_bytes()
    assert b"hunter2" not in cast_bytes and b"hunter2" not in done.output.encode()
    assert read_cast(done.cast_path).output == "password: *** ok\r\nlast ***"


def test_recorded_step_replays_to_what_was_shown(tmp_path: Path) -> None:
    done = run(tmp_path, python("print('\\x1b[1mbold\\x1b[0m', 'text')"))
    out = io.BytesIO()
    replay_cast(done.cast_path, out, instant=True)
    assert out.getvalue() == done.shown


# --------------------------------------------------------------------------- exit status


def test_exit_code_passes_through(tmp_path: Path) -> None:
    assert run(tmp_path, python("raise SystemExit(3)")).result.exit_code == 3


def test_program_not_found_is_127(tmp_path: Path) -> None:
    done = run(tmp_path, ["bar-no-such-program-here", "--flag"])
    assert (done.result.exit_code, done.result.signal) == (127, None)
    assert done.body == "bar: bar-no-such-program-here: command not found\n"


def test_program_that_cannot_be_executed_is_126(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    done = run(tmp_path, [str(script)])
    assert (done.result.exit_code, done.result.signal) == (126, None)
    assert "Permission denied" in done.body


def test_killed_child_reports_128_plus_signal(tmp_path: Path) -> None:
    done = run(tmp_path, python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert (done.result.exit_code, done.result.signal) == (137, 9)


# --------------------------------------------------------------------------- input and signals


def test_stdin_is_forwarded_when_not_a_terminal(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"hello\n")
    os.close(write_end)
    try:
        done = run(
            tmp_path,
            python(
                """
                import sys, time
                line = sys.stdin.readline()
                time.sleep(0.2)  # the terminal must stay open after stdin's EOF
                print("got", line.strip(), sys.stdin.isatty())
                """
            ),
            stdin=read_end,
        )
    finally:
        os.close(read_end)
    assert done.result.exit_code == 0
    assert done.body.endswith("got hello True\n")  # after the terminal's echo of it


def test_keys_are_forwarded_in_raw_mode(tmp_path: Path, terminal: Terminal) -> None:
    def user() -> None:
        terminal.wait_for(b"name?")
        terminal.type(b"Ada\r")  # Enter sends CR; the child's tty makes it a newline

    in_background(user)
    done = run(
        tmp_path,
        python(f"{ALARM}; print('hello', input('name? '))"),
        stdin=terminal.slave,
        stdout=terminal.slave,
    )
    assert done.result.exit_code == 0
    assert done.body == "name? Ada\nhello Ada\n"


def test_ctrl_c_reaches_the_child_as_sigint(tmp_path: Path, terminal: Terminal) -> None:
    child = python(
        """
        import signal, time
        hit = []
        signal.signal(signal.SIGINT, lambda *_: hit.append(1))
        print("ready", flush=True)
        deadline = time.monotonic() + 60
        while not hit and time.monotonic() < deadline:
            time.sleep(0.02)
        print("got SIGINT" if hit else "no signal", flush=True)
        """
    )

    def user() -> None:
        terminal.wait_for(b"ready")
        terminal.type(b"\x03")

    in_background(user)
    done = run(tmp_path, child, stdin=terminal.slave, stdout=terminal.slave)
    assert "got SIGINT" in done.body
    terminal.wait_for(b"got SIGINT")  # and it was shown live
    # it caught the signal and exited 0, as an agent does: still stopped, not a success
    assert (done.result.exit_code, done.result.signal) == (130, 2)


def test_a_program_that_goes_on_after_ctrl_c_ends_with_its_own_code(
    tmp_path: Path, terminal: Terminal
) -> None:
    """Ctrl-C at a prompt that catches it (a shell's), then more typed: the program was
    not stopped by it, and ends as it chooses."""
    child = [sys.executable, "-c", f"{ALARM}\n{CATCHING_PROMPT}"]

    def user() -> None:
        terminal.wait_for(b"answer?")
        terminal.type(b"\x03")
        terminal.wait_for(b"caught")
        terminal.type(b"yes\r")

    in_background(user)
    done = run(tmp_path, child, stdin=terminal.slave, stdout=terminal.slave)
    assert "got yes" in done.body
    assert (done.result.exit_code, done.result.signal) == (0, None)


def test_ctrl_c_read_as_a_key_in_raw_mode_is_no_signal(tmp_path: Path, terminal: Terminal) -> None:
    """A full-screen program reads Ctrl-C itself: no signal was sent; bar notes the key
    (the step is judged with the agent's session, bar.step.complete)."""
    child = python(
        f"""
        {ALARM}
        import sys, tty
        tty.setraw(0)
        print("ready", end="\\r\\n", flush=True)
        key = sys.stdin.read(1)
        print("read", repr(key), end="\\r\\n", flush=True)
        """
    )

    def user() -> None:
        terminal.wait_for(b"ready")
        terminal.type(b"\x03")

    in_background(user)
    done = run(tmp_path, child, stdin=terminal.slave, stdout=terminal.slave)
    assert "read '\\x03'" in done.body
    assert (done.result.exit_code, done.result.signal) == (0, None)
    assert done.result.interrupt_key


def test_ctrl_c_kills_a_child_without_a_handler_with_130(
    tmp_path: Path, terminal: Terminal
) -> None:
    child = python(
        """
        import signal, time
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        print("ready", flush=True)
        time.sleep(60)
        print("not interrupted")
        """
    )

    def user() -> None:
        terminal.wait_for(b"ready")
        terminal.type(b"\x03")

    in_background(user)
    done = run(tmp_path, child, stdin=terminal.slave, stdout=terminal.slave)
    assert (done.result.exit_code, done.result.signal) == (130, 2)
    assert "not interrupted" not in done.body


def test_sigint_to_bar_is_handed_to_the_child(tmp_path: Path) -> None:
    # Without a terminal on stdin bar itself gets the SIGINT; the child must get it too.
    child = python(
        """
        import signal, time
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    shown = tmp_path / "live"
    shown.write_bytes(b"")
    out_fd = os.open(shown, os.O_WRONLY | os.O_APPEND)

    def user() -> None:
        deadline = time.monotonic() + WAIT
        while b"ready" not in shown.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    in_background(user)
    try:
        done = run(tmp_path, child, stdout=out_fd)
    finally:
        os.close(out_fd)
    assert (done.result.exit_code, done.result.signal) == (130, 2)


# --------------------------------------------------------------------------- bar's terminal


def test_terminal_settings_are_restored(tmp_path: Path, terminal: Terminal) -> None:
    before = termios.tcgetattr(terminal.slave)
    during: list[list[object]] = []

    def user() -> None:
        terminal.wait_for(b"ready")
        during.append(termios.tcgetattr(terminal.slave))
        terminal.type(b"\r")

    in_background(user)
    done = run(
        tmp_path, python(f"{ALARM}; input('ready')"), stdin=terminal.slave, stdout=terminal.slave
    )
    assert done.result.exit_code == 0
    lflag = during[0][3]
    assert isinstance(lflag, int) and not lflag & (termios.ECHO | termios.ICANON | termios.ISIG)
    assert termios.tcgetattr(terminal.slave) == before


def test_terminal_restored_when_the_child_is_killed(tmp_path: Path, terminal: Terminal) -> None:
    before = termios.tcgetattr(terminal.slave)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGWINCH)}
    done = run(
        tmp_path,
        python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"),
        stdin=terminal.slave,
        stdout=terminal.slave,
    )
    assert (done.result.exit_code, done.result.signal) == (143, 15)
    assert termios.tcgetattr(terminal.slave) == before
    assert {s: signal.getsignal(s) for s in handlers} == handlers


def test_terminal_restored_and_child_stopped_on_an_error(
    tmp_path: Path, terminal: Terminal
) -> None:
    class Exploding:
        def feed(self, data: bytes) -> bytes:
            if b"boom" in data:
                raise RuntimeError("scrubber failed")
            return data

        def flush(self) -> bytes:
            return b""

    before = termios.tcgetattr(terminal.slave)
    child = python(
        """
        import os, time
        print("pid", os.getpid(), flush=True)
        time.sleep(0.2)
        print("boom", flush=True)
        time.sleep(60)
        """
    )
    with pytest.raises(RuntimeError, match="scrubber failed"):
        run_in_pty(
            child,
            cwd=tmp_path,
            env=None,
            cast_path=tmp_path / "0001.cast",
            output_path=tmp_path / "0001.output",
            scrub=Exploding,
            stdin=terminal.slave,
            stdout=terminal.slave,
        )
    assert termios.tcgetattr(terminal.slave) == before
    terminal.wait_for(b"boom")
    match = re.search(rb"pid (\d+)", terminal.seen)
    assert match
    with pytest.raises(ProcessLookupError):  # stopped and reaped, not left running
        os.kill(int(match.group(1)), 0)


RUNNER = """
import json, sys
from pathlib import Path
from bar.base.record import as_dict
from bar.terminal.pty import run_in_pty

base = Path(sys.argv[1])
result = run_in_pty(
    sys.argv[2:], cwd=base.parent, env=None,
    cast_path=base.with_suffix(".cast"), output_path=base.with_suffix(".output"),
)
base.with_suffix(".json").write_text(json.dumps(as_dict(result)))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_bar_terminated_restores_terminal_and_hands_the_signal_on(
    tmp_path: Path, terminal: Terminal, sig: signal.Signals
) -> None:
    before = termios.tcgetattr(terminal.slave)
    base = tmp_path / "0001"
    child = python("import time; print('ready', flush=True); time.sleep(60)")
    with open(tmp_path / "stderr", "wb") as stderr:
        bar = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(base), *child],
            stdin=terminal.slave,
            stdout=terminal.slave,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            terminal.wait_for(b"ready")
            bar.send_signal(sig)
            assert bar.wait(WAIT) == 0, (tmp_path / "stderr").read_text()
        finally:
            if bar.poll() is None:
                bar.kill()
                bar.wait()
    result = json.loads(base.with_suffix(".json").read_text())
    assert (result["exit_code"], result["signal"]) == (128 + sig, int(sig))
    assert termios.tcgetattr(terminal.slave) == before
    text = base.with_suffix(".output").read_bytes()
    assert text == b"=== STDOUT ===\nready\n=== STDERR ===\n"


def test_output_past_its_limit_is_shown_not_kept(tmp_path: Path) -> None:
    """Past ``limit`` bytes a pty step's output is still shown, not kept: the text and
    the recording end with the mark of where it stopped."""
    # (control bytes: each kept as six in the recording's JSON, counted as kept)
    child = python("import sys\nfor i in range(3000): print(f'line {i}\\x01\\x01')")
    done = run(tmp_path, child, limit=1000)
    result = done.result
    assert result.cut and result.exit_code == 0
    assert b"line 2999" in done.shown
    kept = done.output
    assert "line 2999" not in kept and kept.count("line ") < 200
    assert "the rest of this output was shown, not kept" in kept
    recorded = (tmp_path / "0001.cast").stat().st_size + len(kept)
    assert recorded < 1000 + 2 * 65536  # (the limit, and what one read and its events hold)
