"""A signal sent to a command's processes while one was being started
(``bar.terminal.missed``): given again to those that missed it, never to those that
caught it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bar.terminal.missed import Sent, members


def _resend_until_ended(sent: Sent, proc: subprocess.Popen[bytes], within: float) -> int | None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        sent.resend()
        if proc.poll() is not None:
            return proc.returncode
        time.sleep(0.01)
    return None


def test_a_process_alive_with_the_default_action_missed_it_and_is_sent_it() -> None:
    """``sleep`` would have ended on SIGINT: alive, it never got it (here: never sent)."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.2)  # (exec'd: the default action, not Python's handler)
        sent = Sent(signal.SIGINT, [proc.pid])
        assert _resend_until_ended(sent, proc, 10) == -signal.SIGINT
        assert sent.resent == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_caught_it_is_not_sent_it_again() -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *_: print('caught', flush=True))\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        sent = Sent(signal.SIGINT, [proc.pid])
        os.kill(proc.pid, signal.SIGINT)
        assert proc.stdout.readline() == b"caught\n"
        deadline = time.monotonic() + 3
        while sent.resend() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sent.resent == [] and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_ctrl_c_as_a_shell_starts_its_next_command_stops_it() -> None:
    """The shell prints, then starts ``sleep``: SIGINT sent to the group as soon as the
    line shows often lands while the shell's child is not yet ``sleep`` (dash drops it
    there); each time, the command is stopped, and by the signal. Who is in the group
    is looked at after the signal went, as bar does (``bar.terminal.pipes``): a look
    before it misses a child the shell forks in between, which gets the signal and
    drops it (seen under load: the command then ran to its end)."""
    for _ in range(20):
        proc = subprocess.Popen(
            ["sh", "-c", "echo started; sleep 60"],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
            os.killpg(proc.pid, signal.SIGINT)
            sent = Sent(signal.SIGINT, members(proc.pid, proc.pid))
            assert _resend_until_ended(sent, proc, 10) == -signal.SIGINT
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_members_are_the_group_below_a_process() -> None:
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 60 & sleep 60 & echo up; wait"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        found = members(proc.pid, proc.pid)
        assert proc.pid in found and len(found) == 3
        assert os.getpid() not in members(os.getpgrp(), proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
