"""Signals bar passes on to a command run with pipes (``bar.terminal.pipes``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from bar.terminal.missed import ended
from bar.terminal.pipes import forwarding_signals, run_piped


def test_a_signal_before_the_pid_is_known_is_passed_on_once_it_is() -> None:
    """A command can run, and be signalled by a user who saw it start, before ``Popen``
    returns its pid to bar (a loaded machine): the signal waits, and reaches the command
    once bar knows it; later ones go at once."""
    child: list[subprocess.Popen[bytes]] = []
    script = (
        "import signal, sys, time\n"
        "got = []\n"
        "def say(name):\n"
        "    got.append(name)\n"
        "    print(name, flush=True)\n"
        "signal.signal(signal.SIGHUP, lambda *_: say('HUP'))\n"
        "signal.signal(signal.SIGTERM, lambda *_: say('TERM'))\n"
        "print('up', flush=True)\n"
        "while len(got) < 2: time.sleep(0.01)\n"
        "print(' '.join(got), flush=True)\n"
    )
    with forwarding_signals(lambda: child[0].pid if child else None) as forwarding:
        os.kill(os.getpid(), signal.SIGHUP)  # (handled at once: no pid to send it to yet)
        assert forwarding.waiting == [signal.SIGHUP] and forwarding.passed == []
        child.append(subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE))
        assert child[0].stdout is not None
        assert child[0].stdout.readline() == b"up\n"
        forwarding.started()
        assert forwarding.passed == [signal.SIGHUP] and forwarding.waiting == []
        assert child[0].stdout.readline() == b"HUP\n"  # (one at a time: the order is the test's)
        os.kill(os.getpid(), signal.SIGTERM)  # (known now: passed on at once)
        out, _ = child[0].communicate(timeout=60)
        assert forwarding.passed == [signal.SIGHUP, signal.SIGTERM]
    assert out == b"TERM\nHUP TERM\n"


def test_a_signal_after_the_child_ended_stops_nothing_and_is_not_passed() -> None:
    """The child ended (not yet waited for) when the signal came: recorded, it would read
    as stopping a command that had finished on its own."""
    child: list[subprocess.Popen[bytes]] = []
    with forwarding_signals(lambda: child[0].pid if child else None) as forwarding:
        child.append(subprocess.Popen(["true"]))
        forwarding.started()
        while not ended(child[0].pid):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        assert forwarding.passed == []
        assert child[0].wait() == 0


def test_a_signal_given_to_another_thread_reaches_a_child_that_closed_its_pipes(
    tmp_path: Path,
) -> None:
    """The kernel gives a process's signal to any of its threads that takes it (a step has
    the policy's, the network's, the supervisor's). A child that closed its output and
    runs on (a server sent to the background) has bar waiting for its end, not for
    output: a SIGTERM must reach it then too, not once it ends by itself."""
    up, term = tmp_path / "up", tmp_path / "term"
    script = (
        "import os, signal, time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (open({str(term)!r}, 'w'), os._exit(3)))\n"
        "os.close(1); os.close(2)\n"
        f"open({str(up)!r}, 'w').close()\n"
        "time.sleep(20)\n"
    )
    idle = threading.Event()
    other = threading.Thread(target=idle.wait, args=(120,), daemon=True)
    other.start()

    def user() -> None:
        while not up.exists():
            time.sleep(0.01)
        assert other.ident is not None
        signal.pthread_kill(other.ident, signal.SIGTERM)

    threading.Thread(target=user, daemon=True).start()
    try:
        outcome = run_piped(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            env=os.environ,
            output_path=tmp_path / "0001.output",
            live=False,
        )
    finally:
        idle.set()
    assert term.exists()  # (not the 20 s out)
    assert (outcome.exit_code, outcome.signal) == (3, signal.SIGTERM)
