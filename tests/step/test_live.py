"""A step followed from a second terminal while it runs (``bar.step.live``): ``bar show``
of the running step, ``bar show --follow``, ``bar log`` and ``bar log --follow``, through
the installed ``bar`` in child processes, over real ``bar run`` steps that print over
time. Each step waits for a file the test makes (``go``), so the tests wait for what they
read (a line, a file), never for a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import jsonshape
import pytest
from helpers import BAR_EXE, SUPPORT, bar, ledger, new_task, task_dir, worktree

from bar.step.live import _before_stderr
from bar.terminal.pipes import STDERR_HEADER, STDOUT_HEADER

WAIT = 90.0  # seconds at most for a line to come (a loaded machine); never slept
GATE = "while [ ! -e go ]; do sleep 0.02; done"  # the step waits for the test's file


class Lines:
    """A child's stream read in a thread, so a test waits for the text it expects."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.data = b""
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            with self._cond:
                self.data += chunk
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    def wait_for(self, wanted: str) -> str:
        """Everything read once ``wanted`` is among it."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: wanted.encode() in self.data or self._closed, timeout=WAIT
            )
            assert ok and wanted.encode() in self.data, f"never saw {wanted!r} in {self.text!r}"
            return self.text

    def wait_until(self, check: Any) -> str:
        """Everything read once ``check(text)`` holds."""
        with self._cond:
            ok = self._cond.wait_for(lambda: check(self.text) or self._closed, timeout=WAIT)
            assert ok and check(self.text), f"never came: {self.text!r}"
            return self.text

    def wait_closed(self) -> str:
        with self._cond:
            assert self._cond.wait_for(lambda: self._closed, timeout=WAIT), self.text
        self._thread.join()
        return self.text


@contextmanager
def child(*args: str, cwd: Path) -> Iterator[tuple[subprocess.Popen[bytes], Lines, Lines]]:
    """``bar ARGS`` in a child: (the process, its stdout, its stderr); killed if left."""
    proc = subprocess.Popen(
        [BAR_EXE, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield proc, Lines(proc.stdout), Lines(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def until(check: Any) -> None:
    """Return once ``check()`` holds (a file grew, a line came): looked at every 20 ms."""
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "it never came"
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def gate_ignored(inited: Path) -> None:
    """The file a step waits for is ignored, so no step records it."""
    (inited / ".git" / "info").mkdir(exist_ok=True)
    (inited / ".git" / "info" / "exclude").write_text("go\n")


def stdout_of(lines: str) -> str:
    """The stdout text of the whole lines of ``--follow --json`` read so far."""
    whole = lines[: lines.rfind("\n") + 1]
    events = [json.loads(line) for line in whole.splitlines() if line.strip()]
    return "".join(e["text"] for e in events if e.get("stream") == "stdout")


def stepping(repo: Path, *run: str) -> subprocess.Popen[bytes]:
    """``bar run ARGS`` in the background (its output is not the test's)."""
    return subprocess.Popen(
        [BAR_EXE, "run", *run],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def shapes() -> tuple[dict[str, Any], dict[str, Any]]:
    found = jsonshape.shapes()
    return found, {name: shape for name, shape in found.items() if name.startswith("$")}


def recorded_output(task_id: str, step_id: str) -> tuple[bytes, bytes]:
    """(stdout, stderr) of a recorded step's output file."""
    data = (task_dir(task_id) / "artifacts" / f"{step_id}.output").read_bytes()
    assert data.startswith(STDOUT_HEADER)
    at = data.rindex(b"\n" + STDERR_HEADER) + 1
    return data[len(STDOUT_HEADER) : at], data[at + len(STDERR_HEADER) :]


def test_a_second_terminal_follows_a_piped_step_as_it_prints(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    script = f"echo first; echo oops >&2; {GATE}; echo second; echo done >&2"
    run = stepping(inited, "--no-pty", "--", "sh", "-c", script)
    try:
        with child("show", "--follow", cwd=inited) as (follower, out, err):
            said = out.wait_for("first\n")
            err.wait_for("oops\n")
            assert ledger(t["id"]) == []  # (seen while the step runs)
            assert said.startswith("step 0001  run  sh -c")
            assert "second\n" not in said

            # the step, as another terminal asks for it meanwhile
            shown = bar(capfd, "show", "1")
            assert shown.code == 0, shown.err
            assert "step 0001  run  running" in shown.out
            assert "not recorded yet" in shown.out
            assert "=== STDOUT ===\nfirst\n=== STDERR ===\noops\n" in shown.out
            assert "bar show 1 --follow" in shown.out
            latest = bar(capfd, "show")  # (the latest step: the one running)
            assert latest.code == 0 and "step 0001  run  running" in latest.out
            logged = bar(capfd, "log")
            assert "0001  run  running" in logged.out
            assert "bar show 1 --follow streams its output" in logged.out
            # the filters hold the running step as they hold a recorded one
            for kept in (["--grep", "oops"], ["--grep", "SH -C", "-i"], ["--kind", "run"]):
                assert "0001  run  running" in bar(capfd, "log", *kept).out, kept
            for left in (["--grep", "nowhere said"], ["--kind", "manual"], ["--agent", "claude"]):
                assert "0001" not in bar(capfd, "log", *left).out, left
                assert bar(capfd, "log", *left, "--json").json() == [], left
            found, defs = shapes()
            as_json = bar(capfd, "show", "1", "--json").json()
            jsonshape.check(as_json, found["bar show --json"], defs)
            assert as_json["state"] == "running"
            assert as_json["output_text"] == "=== STDOUT ===\nfirst\n=== STDERR ===\noops\n"
            entries = bar(capfd, "log", "--json").json()
            jsonshape.check(entries, found["bar log --json"], defs)
            assert entries[-1]["step_id"] == "0001" and entries[-1]["state"] == "running"

            (worktree(t) / "go").touch()
            said = out.wait_for("--- step 0001 recorded: exit 0")
            assert follower.wait(timeout=WAIT) == 0
            assert said.index("first\n") < said.index("second\n")
            assert err.wait_closed().endswith("oops\ndone\n")
    finally:
        (worktree(t) / "go").touch()
        assert run.wait(timeout=WAIT) == 0
    assert ledger(t["id"])[0]["exit_code"] == 0
    assert "running" not in bar(capfd, "log").out


def test_a_pty_step_is_followed_as_its_terminal_shows_it(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    script = f"printf 'first\\n'; {GATE}; printf '\\033[32msecond\\033[0m\\n'"
    with child("show", "1", "--follow", cwd=inited) as (follower, out, _):  # (before it starts)
        run = stepping(inited, "--pty", "--", "sh", "-c", script)
        try:
            out.wait_for("first\n")
            assert ledger(t["id"]) == []
            (worktree(t) / "go").touch()
            said = out.wait_for("recorded: exit 0")
            assert follower.wait(timeout=WAIT) == 0
        finally:
            (worktree(t) / "go").touch()
            assert run.wait(timeout=WAIT) == 0
    assert ledger(t["id"])[0]["pty"] is True
    stdout, _ = recorded_output(t["id"], "0001")
    body = said.split("Ctrl-C stops following\n", 1)[1].split("--- step 0001 recorded")[0]
    assert body.encode() == stdout == b"first\nsecond\n"  # (the text, as recorded)


def test_following_gives_every_byte_the_record_holds_once(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Stdout is held back where bar will add ``=== STDERR ===`` once the command ends, and
    the rest read from the record: a program that prints that very line itself, and lines
    cut in the middle, are followed as recorded."""
    t = new_task(capfd)
    script = (
        "printf 'partial'; printf ' line\\n=== STDERR ===\\nnot stderr\\n=== STD'; "
        f"echo e1 >&2; {GATE}; printf 'ERR ===\\nend without newline'; printf 'e2' >&2"
    )
    with child("show", "1", "--follow", "--json", cwd=inited) as (follower, out, _):
        run = stepping(inited, "--no-pty", "--", "sh", "-c", script)
        try:
            out.wait_for('"text": "e1\\n"')
            seen = stdout_of(out.wait_until(lambda text: "partial line\n" in stdout_of(text)))
            assert seen.startswith("partial line\n")  # (what cannot be stderr's header)
            assert "=== STDERR ===" not in seen
            (worktree(t) / "go").touch()
            out.wait_for('"event": "step"')
            assert follower.wait(timeout=WAIT) == 0
        finally:
            (worktree(t) / "go").touch()
            run.wait(timeout=WAIT)
    events = [json.loads(line) for line in out.text.splitlines()]
    _, defs = shapes()
    for event in events:
        jsonshape.check(event, defs["$follow-event"], defs)
    assert events[0]["event"] == "running" and events[-1]["event"] == "step"
    stdout = "".join(e["text"] for e in events if e.get("stream") == "stdout")
    stderr = "".join(e["text"] for e in events if e.get("stream") == "stderr")
    data = (task_dir(t["id"]) / "artifacts" / "0001.output").read_bytes()
    assert data == (STDOUT_HEADER + stdout.encode() + STDERR_HEADER + stderr.encode())
    assert stdout.endswith("=== STDERR ===\nend without newline\n")  # (bar ends the line)
    assert stderr == "e1\ne2"


def test_a_long_output_is_followed_whole(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each look reads a bounded part (``LOOK``); a long output comes in several, live and
    from the record once the step ended."""
    t = new_task(capfd)
    script = (
        "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo err >&2; "
        f"{GATE}; head -c 12000000 /dev/zero | tr '\\0' y"
    )
    said = tmp_path / "followed"
    with said.open("wb") as sink:
        follower = subprocess.Popen(
            [BAR_EXE, "show", "1", "--follow"], cwd=inited, stdout=sink, stderr=subprocess.PIPE
        )
        run = stepping(inited, "--no-pty", "--", "sh", "-c", script)
        try:
            seen = Lines(follower.stderr)  # type: ignore[arg-type]
            seen.wait_for("err\n")
            until(lambda: said.stat().st_size > 20_000_000)  # (followed while it runs)
            assert follower.poll() is None and ledger(t["id"]) == []
            (worktree(t) / "go").touch()
            assert follower.wait(timeout=WAIT) == 0
        finally:
            (worktree(t) / "go").touch()
            assert run.wait(timeout=WAIT) == 0
    stdout, _ = recorded_output(t["id"], "0001")
    text = said.read_bytes()
    body = text.split(b"Ctrl-C stops following\n", 1)[1].rsplit(b"--- step 0001 recorded", 1)[0]
    assert body == stdout  # (with the newline bar ends stdout with)
    assert len(stdout) == 32_000_002


def test_following_ends_and_says_so_when_bar_is_killed(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    run = stepping(inited, "--no-pty", "--", "sh", "-c", f"echo first; {GATE}")
    try:
        with child("show", "--follow", cwd=inited) as (follower, out, err):
            out.wait_for("first\n")
            os.kill(run.pid, signal.SIGKILL)  # bar run alone: its step dies with it
            assert follower.wait(timeout=WAIT) == 1
            said = err.wait_closed()
            assert "died while the step ran; not recorded yet" in said
            assert "bar doctor --repair" in said
    finally:
        run.wait(timeout=WAIT)
        (worktree(t) / "go").touch()  # (a step left unconfined is let go)
    logged = bar(capfd, "log")
    assert "0001  run  interrupted" in logged.out
    assert "died while the step ran\n      not recorded yet: the next command" in logged.out
    shown = bar(capfd, "show", "1")
    assert "interrupted: its bar run" in shown.out and "first" in shown.out
    as_json = bar(capfd, "show", "1", "--json").json()
    assert as_json["state"] == "interrupted"
    with child("show", "1", "--follow", "--json", cwd=inited) as (again, out, _):
        assert again.wait(timeout=WAIT) == 1  # (at once: nothing will come)
        (lost,) = [json.loads(line) for line in out.wait_closed().splitlines()][-1:]
        assert lost["event"] == "lost" and lost["step"]["state"] == "interrupted"
    assert bar(capfd, "doctor", "--repair").code == 0
    (step,) = ledger(t["id"])
    assert step["interrupted"] is True
    shown = bar(capfd, "show", "1", "--follow")  # recorded now: shown as it is
    assert shown.code == 0 and "interrupted" in shown.out and "first" in shown.out


def agent_program(tmp_path: Path) -> str:
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir(exist_ok=True)
    fake = SUPPORT / "fake_agent.py"
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {fake} --agent claude "$@"\n')
    program.chmod(0o755)
    return str(program)


def test_an_agent_steps_tool_calls_are_listed_as_they_are_checkpointed(
    inited: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t = new_task(capfd)
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0  # (a step before it)
    agent = ("--no-pty", "--agent", "claude", "--", agent_program(tmp_path))
    calls = ("write:a.txt=one", "wait:go", "write:b.txt=two")
    with (
        child("log", "--follow", cwd=inited) as (watching, log, _),
        child("show", "--follow", "--json", cwd=inited) as (following, events, _),
    ):
        log.wait_for("0001  run  exit 0")
        run = stepping(inited, *agent, *calls)
        try:
            said = log.wait_for("0002.1")
            assert "0002  run  running" in said
            assert "0002.2" not in said and len(ledger(t["id"])) == 1
            events.wait_for('"checkpoint": "0002.1"')
            (worktree(t) / "go").touch()
            said = log.wait_for("0002  run  exit 0")
            assert said.index("0002.1") < said.index("0002.2") < said.index("0002  run  exit 0")
            assert following.wait(timeout=WAIT) == 0
        finally:
            (worktree(t) / "go").touch()
            assert run.wait(timeout=WAIT) == 0
        watching.send_signal(signal.SIGINT)  # (the way it ends)
        assert watching.wait(timeout=WAIT) == 0
    lines = [json.loads(line) for line in events.wait_closed().splitlines()]
    _, defs = shapes()
    for line in lines:
        jsonshape.check(line, defs["$follow-event"], defs)
    kinds = [line["event"] for line in lines]
    assert kinds[0] == "running" and kinds[-1] == "step"
    assert [c["checkpoint"]["checkpoint"] for c in lines if c["event"] == "checkpoint"] == [
        "0002.1",
        "0002.2",
    ]
    assert lines[-1]["step"]["checkpoints"] == 2


def test_log_follow_json_gives_each_step_as_it_comes(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    with (
        child("log", "--follow", "--json", cwd=inited) as (watching, out, _),
        child("log", "--follow", "--json", "--grep", "second", cwd=inited) as (chosen, some, _),
    ):
        run = stepping(inited, "--no-pty", "--", "sh", "-c", f"echo hi; {GATE}")
        try:
            out.wait_for('"event": "running"')
            (worktree(t) / "go").touch()
            out.wait_for('"event": "step"')
        finally:
            (worktree(t) / "go").touch()
            assert run.wait(timeout=WAIT) == 0
        assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", "echo second").code == 0
        # (the filter's step, recorded: its running event may already say its exit code,
        # when the follow first sees it as it is being recorded)
        some.wait_for('"event": "step"')
        for proc in (watching, chosen):
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=WAIT) == 0
    lines = [json.loads(line) for line in out.wait_closed().splitlines()]
    _, defs = shapes()
    for line in lines:
        jsonshape.check(line, defs["$follow-event"], defs)
    assert [line["event"] for line in lines][:2] == ["running", "step"]
    assert lines[0]["step"]["state"] == "running" and lines[1]["step"]["exit_code"] == 0
    filtered = [json.loads(line) for line in some.wait_closed().splitlines()]
    assert filtered and {line["step"]["step_id"] for line in filtered} == {"0002"}
    assert filtered[-1]["event"] == "step"


def test_wrong_uses_of_follow_say_what_to_do(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    new_task(capfd)
    no_step = bar(capfd, "show")  # (the latest step: there is none)
    assert no_step.code == 3 and "has no steps yet" in no_step.err
    assert bar(capfd, "run", "--no-pty", "--", "echo", "once").code == 0
    shown = bar(capfd, "show", "1", "--follow")  # recorded: shown as `bar show 1`
    assert shown.code == 0 and "--- output" in shown.out and "once" in shown.out
    far = bar(capfd, "show", "9", "--follow")
    assert far.code == 3 and "no step 0009" in far.err
    for args in (["1.1", "--follow"], ["1", "--follow", "--session"]):
        wrong = bar(capfd, "show", *args)
        assert wrong.code == 2 and "--follow follows a step's output" in wrong.err
    not_running = bar(capfd, "show", "2")
    assert not_running.code == 3 and "no step 0002" in not_running.err
    assert bar(capfd, "task", "close", "t1").code == 0
    for args in (["show", "--follow"], ["show", "2", "--follow"], ["log", "--follow"]):
        closed = bar(capfd, *args, "--task", "t1")
        assert closed.code == 2 and "task t1 is closed: no step runs in it" in closed.err
        assert "bar task reopen t1" in closed.err


def test_a_step_recorded_before_the_follow_began_gives_its_output_from_the_record(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    t = new_task(capfd)
    script = "echo out; echo err >&2; printf '=== STDERR ===\\nstill out\\n'; echo more >&2"
    assert bar(capfd, "run", "--no-pty", "--", "sh", "-c", script).code == 0
    with child("show", "1", "--follow", "--json", cwd=inited) as (follower, out, _):
        assert follower.wait(timeout=WAIT) == 0
        events = [json.loads(line) for line in out.wait_closed().splitlines()]
    assert [e["event"] for e in events][-1] == "step"
    stdout, stderr = recorded_output(t["id"], "0001")
    assert "".join(e["text"] for e in events if e.get("stream") == "stdout").encode() == stdout
    assert "".join(e["text"] for e in events if e.get("stream") == "stderr").encode() == stderr
    assert stderr == b"err\nmore\n"


@pytest.mark.parametrize(
    ("data", "line_start", "safe"),
    [
        (b"abc\n", True, 4),
        (b"=== STDERR ===\nx", True, 0),  # bar's line (or the program's): held
        (b"a\n=== STD", True, 2),  # could become it
        (b"a\n=== STDOUT ===\n", True, 17),  # cannot
        (b"x=== STDERR ===\n", True, 16),  # not at a line's start
        (b"=== STDERR ===\n", False, 15),  # the line began before
        (b"tail\n=== STDERR ===\n", False, 5),
        (b"", True, 0),
    ],
)
def test_stdout_is_given_out_up_to_where_stderr_could_begin(
    data: bytes, line_start: bool, safe: int
) -> None:
    assert _before_stderr(data, line_start) == safe


@pytest.mark.parametrize("as_json", [True, False])
def test_log_follow_shows_once_a_step_recorded_while_it_read_the_steps_so_far(
    inited: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    """A step recorded after ``bar log --follow`` read the newest step and before it read
    the steps so far is shown once: by the watch, which begins after the newest read
    first (read after, the step was in neither)."""
    from bar import api

    t = new_task(capfd)
    assert bar(capfd, "run", "--", "true").code == 0
    read, between = (api.log, "log") if as_json else (api.log_rows, "log_rows")

    def recorded_meanwhile(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(api, between, read)  # (once)
        ran = subprocess.run([BAR_EXE, "run", "--", "true"], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        return read(*args, **kwargs)

    watch = api.watch_steps

    def until_step_2(task: Any, after: int) -> Iterator[Any]:
        assert after == 1
        for event in watch(task, after):
            yield event
            if getattr(getattr(event, "step", None), "number", 0) == 2:
                raise KeyboardInterrupt  # (what ends a follow)

    monkeypatch.setattr(api, between, recorded_meanwhile)
    monkeypatch.setattr(api, "watch_steps", until_step_2)
    res = bar(capfd, "log", "--follow", *(["--json"] if as_json else []))
    assert res.code == 0, res.err
    assert [s["step_id"] for s in ledger(t["id"])] == ["0001", "0002"]
    if as_json:
        shown = [json.loads(line)["step"]["step_id"] for line in res.out.splitlines()]
    else:
        shown = [line.split()[0] for line in res.out.splitlines() if line[:1].isdigit()]
    assert shown == ["0001", "0002"], res.out
