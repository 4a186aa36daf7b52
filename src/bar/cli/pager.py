"""Long output through a pager, as git does it.

Only when stdout is a terminal: the pager named by ``BAR_PAGER``, else ``PAGER``, else
``less`` (``cat`` or an empty value: no pager) is started with its stdin on a pipe and
the terminal as its stdout, and bar's file descriptor 1 is pointed at the pipe while the
command prints, so what child processes print (``git diff``) goes there too. ``LESS``
defaults to ``FRX`` as in git: quit when the text fits one screen, keep colours, leave
the text on the screen. A pager that cannot be started leaves the output as it was.

``--no-pager`` (``-P``) switches it off for one command; ``configure`` is how the command
line says so. While a pager runs, ``active()`` is true: stdout is no longer a terminal,
but colour and line widths are decided as if it were.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator

# what makes a pager command a shell line (git runs those with `sh -c`, others directly)
_SHELL_CHARS = set("|&;<>()$`\\\"'*?[#~=%\n")

_state = {"enabled": True, "active": False}


def configure(*, enabled: bool) -> None:
    """``enabled`` False: never page (``bar --no-pager``). Set for each command line."""
    _state["enabled"] = enabled
    _state["active"] = False


def active() -> bool:
    """Whether stdout goes to a pager now (which shows it on a terminal)."""
    return _state["active"]


def command() -> str | None:
    """The pager to use, or None for none: ``BAR_PAGER``, ``PAGER``, then ``less``."""
    for name in ("BAR_PAGER", "PAGER"):
        value = os.environ.get(name)
        if value is not None:
            value = value.strip()
            return None if value in ("", "cat") else value
    return "less"


def _start(line: str) -> subprocess.Popen[bytes] | None:
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    try:
        direct = not (_SHELL_CHARS & set(line.replace(" ", "")))
        argv = shlex.split(line) if direct else ["sh", "-c", line]
        if not argv:
            return None
        return subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    except (OSError, ValueError):  # not found, not executable, unbalanced quotes
        return None


@contextlib.contextmanager
def paging(wanted: bool = True) -> Iterator[None]:
    """Send what the block prints to stdout through the pager, when stdout is a terminal
    and paging is wanted; else leave stdout alone."""
    line = command() if wanted and _state["enabled"] and not _state["active"] else None
    proc = _start(line) if line and _is_terminal() else None
    if proc is None:
        yield
        return
    assert proc.stdin is not None
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(proc.stdin.fileno(), 1)
    proc.stdin.close()
    _state["active"] = True
    try:
        yield
    finally:
        _state["active"] = False
        _finish(proc, saved)


def _finish(proc: subprocess.Popen[bytes], saved: int) -> None:
    """Close the pipe, give the terminal back to stdout and wait for the reader."""
    try:
        sys.stdout.flush()
        restore = saved
    except (OSError, ValueError):
        # the reader quit early (`q` in less): what is still buffered goes nowhere
        restore = os.open(os.devnull, os.O_WRONLY)
        os.close(saved)
    os.dup2(restore, 1)
    os.close(restore)
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:  # Ctrl-C belongs to the pager while it runs
            continue


def _is_terminal() -> bool:
    try:
        return os.isatty(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # replaced or closed stdout
        return False
