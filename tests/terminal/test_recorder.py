"""A pty step's recording handed to a fork of bar once the step has printed much
(``bar.terminal.recorder``): the same text, recording and limit as bar's own process
makes, the same error when it cannot write, and a kill of bar loses no more than it did.
Real pseudo-terminals, real children, a real fork."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import bar, ledger, new_task, pty_step, task_dir
from test_pty_terminal import FakeScrubber, python, run

from bar.errors import BarError
from bar.terminal import pty
from bar.terminal.cast import CastWriter, read_cast, replay_cast

# a child that prints what a recording must take apart: lines, a progress bar redrawn,
# colours, characters split between two writes, and a secret split between two writes
_BUSY = python(
    """
    import sys, time
    out = sys.stdout.buffer
    for i in range(400):
        out.write(b"line %d \\x1b[32mgreen\\x1b[0m caf\\xc3" % i)
        out.flush()
        out.write(b"\\xa9 \\xe2\\x82\\xac\\n" + b"x" * (i % 97) + b"\\n")
        if i % 50 == 0:
            out.write(b"token: hun"); out.flush(); time.sleep(0.01)
            out.write(b"ter2\\r\\n")
        if i % 100 == 0:
            for p in range(0, 101, 20):
                out.write(b"\\rprogress %d%%" % p)
            out.write(b"\\n")
    out.flush()
    """
)


def _scrubbers() -> FakeScrubber:
    return FakeScrubber()


@pytest.mark.parametrize("handover", [1, 5000, 20_000])
def test_a_recording_handed_to_a_fork_is_the_one_made_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handover: int
) -> None:
    for name in ("kept", "handed"):
        (tmp_path / name).mkdir()
    kept = run(tmp_path / "kept", _BUSY, scrub=_scrubbers)
    assert not kept.result.cut
    monkeypatch.setattr(pty, "HANDOVER", handover)
    forks = _counted(monkeypatch)
    handed = run(tmp_path / "handed", _BUSY, scrub=_scrubbers)
    assert forks == [1] and handed.result == kept.result
    assert handed.output == kept.output  # the text, byte for byte
    assert "hunter2" not in handed.output and "token: ***" in handed.output
    assert b"hunter2" not in handed.cast_path.read_bytes()
    assert read_cast(handed.cast_path).output == read_cast(kept.cast_path).output
    replayed = io.BytesIO()
    replay_cast(handed.cast_path, replayed, instant=True)
    assert replayed.getvalue() == handed.shown.replace(b"hunter2", b"***")
    times = [json.loads(line)[0] for line in handed.cast_path.read_text().splitlines()[1:]]
    assert times == sorted(times) and times[-1] < 60


def test_a_recorder_killed_on_its_own_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork that records, killed by someone (the OOM killer, a hand): bar says what
    happened to it, not that a write failed."""
    monkeypatch.setattr(pty, "HANDOVER", 1)
    done = tmp_path / "done"
    child = python(
        f"""
        import os, time
        while not os.path.exists({str(done)!r}):
            print("tick", flush=True); time.sleep(0.05)
        """
    )
    killed: list[int] = []

    def kill_the_recorder() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for pid in _children(os.getpid()):
                if _comm(pid) == "bar recorder":
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.02)
        done.touch()

    killer = threading.Thread(target=kill_the_recorder)
    killer.start()
    try:
        with pytest.raises(BarError) as raised:
            run(tmp_path, child)
    finally:
        done.touch()
        killer.join()
    assert killed
    assert f"(bar recorder, pid {killed[0]}) was killed by SIGKILL" in str(raised.value)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the recording is handed to a fork (``pty.handed``, counted)."""
    forks: list[int] = []
    real = pty.handed

    def counting(*args: Any) -> Any:
        forks.append(1)
        return real(*args)

    monkeypatch.setattr(pty, "handed", counting)
    return forks


def test_output_past_its_limit_is_cut_where_a_fork_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pty, "HANDOVER", 1)
    forks = _counted(monkeypatch)
    # (a first line alone, kept whole by bar's process, then the rest: cut by the fork)
    child = python(
        f"""
        import time
        print('first', flush=True)
        while b'first' not in open({str(tmp_path / "0001.output")!r}, 'rb').read():
            time.sleep(0.01)
        for i in range(3000): print(f'line {{i}}\\x01\\x01')
        """
    )
    done = run(tmp_path, child, limit=1000)
    assert forks == [1] and done.result.cut and done.result.exit_code == 0
    assert b"line 2999" in done.shown
    assert "first" in done.output
    assert "line 2999" not in done.output and done.output.count("line ") < 200
    assert "the rest of this output was shown, not kept" in done.output


@pytest.mark.parametrize("handover", [1, 1 << 40])
def test_a_fast_printer_is_kept_up_to_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handover: int
) -> None:
    """The bytes kept reach the limit, in bar's process and in a fork: the events held
    for their frame are not counted at six bytes a character (a limit of 1.5 MB kept
    ~0.3 MB of a fast printer's lines)."""
    monkeypatch.setattr(pty, "HANDOVER", handover)
    limit = 1_500_000
    done = run(tmp_path, ["sh", "-c", "yes 0123456789abcdef | head -n 200000"], limit=limit)
    kept = len(done.output.encode()) + done.cast_path.stat().st_size
    assert done.result.cut and "0123456789abcdef\n" * 1000 in done.output
    assert limit * 0.9 < kept < limit + 2 * 65536


@pytest.mark.parametrize("handover", [1, 1 << 40])
def test_a_recording_that_cannot_be_written_fails_as_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handover: int
) -> None:
    """A full disk met by the fork is raised by bar as bar's own process raises it."""
    monkeypatch.setattr(pty, "HANDOVER", handover)
    calls = [0]
    output = CastWriter.output

    def full_disk(self: CastWriter, data: bytes, read_at: float | None = None) -> None:
        calls[0] += 1
        if calls[0] > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        output(self, data, read_at)

    monkeypatch.setattr(CastWriter, "output", full_disk)
    child = python("import sys, time\nfor i in range(50): print(i, flush=True); time.sleep(0.01)")
    with pytest.raises(OSError) as raised:
        run(tmp_path, child)
    assert raised.value.errno == errno.ENOSPC


@pytest.mark.parametrize("handover", [None, 5000])
def test_a_recording_is_on_disk_when_its_step_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handover: int | None
) -> None:
    """The text and the recording are synced before bar records the step that names them
    (as a pipe step's output is), by bar's process or by the fork that took them over:
    a machine that stops right after finds no step whose output is missing. Each sync
    is noted in a file, which a fork's notes reach too."""
    if handover is not None:
        monkeypatch.setattr(pty, "HANDOVER", handover)
    notes = tmp_path / "synced"
    sync = os.fsync

    def noted(fd: int) -> None:
        sync(fd)
        with notes.open("a") as note:
            note.write(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) + "\n")

    monkeypatch.setattr(os, "fsync", noted)
    (tmp_path / "step").mkdir()
    done = run(tmp_path / "step", _BUSY, scrub=_scrubbers)
    assert done.body.count("green") == 400
    assert sorted(notes.read_text().split()) == ["0001.cast", "0001.output"]


def test_bar_killed_while_a_fork_records_loses_no_more_than_before(
    inited: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL to bar while its fork records: the fork writes what it was sent and ends,
    holding no terminal (the step's child gets its hang-up), and the next command
    records the step interrupted, with what it printed."""
    t = new_task(capfd)
    artifacts = task_dir(t["id"]) / "artifacts"
    lines = (pty.HANDOVER * 2) // 64
    script = (
        f"yes 0123456789012345678901234567890123456789012345678901234567890 | head -n {lines}; "
        "echo printed-before-the-kill.; exec sleep 60"
    )
    bar_proc = pty_step(inited, script, env={**os.environ, "BAR_RESIDENT_IDLE": "0"})
    try:
        deadline = time.monotonic() + 60
        text = artifacts / "0001.output"
        while not (text.exists() and b".\n" in text.read_bytes()[-20:]):
            assert time.monotonic() < deadline, "the step never printed its last line"
            time.sleep(0.05)
        left = _descendants(bar_proc.pid)
        forks = [pid for pid in _children(bar_proc.pid) if _comm(pid).startswith(("bar", "py"))]
        # (the fork that records: the one whose descriptors include the step's files)
        (fork,) = [pid for pid in forks if str(text) in _links(pid)]
        assert _comm(fork) == "bar recorder"
        # its own pipe's end, its answer's, bar's files: no terminal, socket, the policy's
        # listener of the step's programs or another process's pipe
        held = [link for link in _links(fork) if not link.startswith(("/", "pipe:"))]
        assert not held and sum(link.startswith("pipe:") for link in _links(fork)) == 2
        assert not [link for link in _links(fork) if link.startswith("/dev/pt")]
    finally:
        bar_proc.send_signal(signal.SIGKILL)
        bar_proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while any(map(_alive, left)):
        assert time.monotonic() < deadline, "the step's child or bar's fork outlived bar"
        time.sleep(0.05)
    assert bar(capfd, "run", "--no-pty", "--", "true").code == 0
    step = ledger(t["id"])[0]
    assert step["interrupted"] is True
    printed = text.read_bytes()
    assert printed.count(b"0123456789012345678901234567890123456789012345678901234567890") == lines
    assert b"printed-before-the-kill" in printed


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(p) for p in f.read().split()]
    return found


def _descendants(pid: int) -> list[int]:
    found = _children(pid)
    for child in list(found):
        found += _descendants(child)
    return found


def _links(pid: int) -> list[str]:
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return links


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
