"""One way to run a program.

``run()`` runs a child with an argument list (never a shell), captures its output, and
raises ``CommandError`` on a non-zero exit unless ``check=False``. ``clean_env()`` gives
children the environment minus every ``GIT_*`` variable not on an allow-list: git sets
some for hooks (``GIT_DIR``, ``GIT_INDEX_FILE``) and an enclosing ``git -c`` passes its
settings down (``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_COUNT``); any of them would make
bar's git calls act on another repository, index or configuration.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bar.base.record import record
from bar.errors import CommandError

# How a step's command is started: a starter calls the launch it is given, maybe in a
# confined thread (bar.sandbox), and returns the process it started. The launch passes
# what it is given (``Prepare``: to run in the child before exec, or None) to ``Popen``
# as ``preexec_fn``, after its own (``bar.sandbox.holder`` makes the holder there).
Prepare = Callable[[], None] | None
Launch = Callable[[Prepare], "subprocess.Popen[bytes]"]
Starter = Callable[[Launch], "subprocess.Popen[bytes]"]


def start_directly(launch: Launch) -> subprocess.Popen[bytes]:
    return launch(None)


# What a developer sets on purpose for every git they run: identity and dates, which
# configuration files git reads, how it reaches remotes, and tracing. Nothing that
# names a repository, an index or a configuration value.
GIT_ENV_ALLOWED = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_TERMINAL_PROMPT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_NO_VERIFY",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_ALLOW_PROTOCOL",
        "GIT_EDITOR",
        "GIT_PAGER",
        "GIT_TRACE",
        "GIT_TRACE2",
        "GIT_TRACE2_EVENT",
        "GIT_TRACE2_PERF",
        "GIT_TRACE_PERFORMANCE",
    }
)


@record(frozen=True)
class Result:
    cmd: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "surrogateescape")


# what ``clean_env`` made last, and of which environment: [the environment's own
# mapping of bytes, as it was then; the cleaned one]. Every git bar runs asks for it, and
# to decode the whole environment each time cost more than the comparison of its bytes
_CLEANED: list[dict[Any, Any]] = []


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """bar's environment without the ``GIT_*`` variables that could redirect git, plus
    ``extra``."""
    data = getattr(os.environ, "_data", None)  # (what ``os.environ`` holds, undecoded)
    if _CLEANED and isinstance(data, dict) and _CLEANED[0] == data:
        env = dict(_CLEANED[1])
    else:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in GIT_ENV_ALLOWED
        }
        if isinstance(data, dict):
            _CLEANED[:] = [dict(data), dict(env)]
    if extra:
        env.update(extra)
    return env


def exit_status(returncode: int, stopped_by: int | None = None) -> tuple[int, int | None]:
    """A ``Popen`` return code as (exit code, signal): 128+N when killed by signal N.

    ``stopped_by``: the signal that reached the child to end it (SIGTERM, SIGHUP passed
    on by bar; SIGINT from the person's Ctrl-C). A child that catches it and exits
    (agents shut down cleanly, most with 0) was still stopped, not done: the signal is
    recorded, and a 0 it chose becomes 128+N, never a success."""
    if returncode < 0:
        return 128 - returncode, -returncode
    if stopped_by is not None:
        return (returncode or 128 + stopped_by), stopped_by
    return returncode, None


def run(
    *cmd: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
    error: type[CommandError] = CommandError,
) -> Result:
    """Run ``cmd`` to completion and capture its output.

    ``env`` is added on top of the cleaned current environment, never replacing it.
    """
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=clean_env(env),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        if check:
            raise error(cmd, 127, b"", str(exc).encode()) from exc
        return Result(tuple(cmd), 127, b"", str(exc).encode())
    result = Result(tuple(cmd), proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise error(cmd, proc.returncode, proc.stdout, proc.stderr)
    return result


PIECE = 1 << 20  # bytes ``pieces`` reads at a time, at most


def pieces(
    *cmd: str,
    env: Mapping[str, str] | None = None,
    error: type[CommandError] = CommandError,
) -> Iterator[bytes]:
    """``run``, its output read a piece (at most ``PIECE`` bytes) at a time as it comes,
    for an output too large to hold whole: ``run`` holds it twice at its end (the pieces
    read, then joined), 280 MB for the listing of a million-file tree. Raises as
    ``run(check=True)`` does, once the output has ended; a caller that stops early
    leaves the child killed. What the child says on stderr goes to a file, not a pipe:
    a child that warns of each path (what a step can make git do) would fill a pipe
    nobody reads until its output ends, and both would wait for ever. (A memory file:
    ``tempfile`` alone takes 15 ms to load, more than the rest of an apply's reading.)"""
    said = os.memfd_create("stderr", os.MFD_CLOEXEC)
    try:
        try:
            proc = subprocess.Popen(
                list(cmd),
                env=clean_env(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=said,
            )
        except FileNotFoundError as exc:
            raise error(cmd, 127, b"", str(exc).encode()) from exc
        assert proc.stdout is not None
        ended = False
        try:
            while piece := os.read(proc.stdout.fileno(), PIECE):
                yield piece
            ended = True
        finally:
            if not ended:  # (the caller stopped reading, or failed)
                proc.kill()
            proc.stdout.close()
            proc.wait()
        if proc.returncode != 0:
            raise error(cmd, proc.returncode, b"", os.pread(said, 1 << 16, 0))
    finally:
        os.close(said)


class Started:
    """A child started by ``start``, running while the caller does something else;
    ``result()`` waits for it and reads what it printed (for small outputs: it is read
    only then, so what it prints must fit in the pipes meanwhile)."""

    __slots__ = ("_check", "_error", "_proc", "_result", "cmd")

    def __init__(
        self,
        cmd: tuple[str, ...],
        proc: subprocess.Popen[bytes] | None,
        check: bool,
        error: type[CommandError],
    ) -> None:
        self.cmd, self._proc, self._check, self._error = cmd, proc, check, error
        self._result: Result | None = None if proc is not None else Result(cmd, 127, b"", b"")

    @classmethod
    def finished(cls, result: Result) -> Started:
        """One whose child ran elsewhere (a watcher's, say): ``result()`` is ``result``."""
        done = cls(result.cmd, None, False, CommandError)
        done._result = result
        return done

    def result(self) -> Result:
        if self._result is None:
            assert self._proc is not None
            stdout, stderr = self._proc.communicate()  # (its stdin is closed already)
            self._result = Result(self.cmd, self._proc.returncode, stdout, stderr)
        if self._check and self._result.returncode != 0:
            res = self._result
            raise self._error(self.cmd, res.returncode, res.stdout, res.stderr)
        return self._result


PIPE_HOLDS = 4096  # bytes a pipe always takes without blocking the writer (PIPE_BUF)


def start(
    *cmd: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
    error: type[CommandError] = CommandError,
) -> Started:
    """``run`` begun now and finished by ``Started.result()``: the caller's own work (or
    other children) meanwhile. A program that cannot be started is found by ``result``.
    ``input``: a few bytes for its stdin (at most a pipe's guaranteed buffer, so that
    writing them never waits for the child)."""
    if input is not None and len(input) > PIPE_HOLDS:
        raise ValueError(f"start() takes at most {PIPE_HOLDS} bytes of input")
    try:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=clean_env(env),
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError:
        return Started(tuple(cmd), None, check, error)
    if proc.stdin is not None:
        with proc.stdin:
            try:
                proc.stdin.write(input or b"")
            except BrokenPipeError:
                pass  # it exited without reading: its result says why
        proc.stdin = None  # (written and closed: ``communicate`` has none to send)
    return Started(tuple(cmd), proc, check, error)


def work_nowhere(folder: str) -> None:
    """Make the working directory one that no longer exists (made in ``folder`` and
    removed): a path a daemon builds from an empty or relative value then fails (ENOENT)
    rather than writing wherever it happens to stand (``/`` for the resident)."""
    import tempfile

    try:
        place = tempfile.mkdtemp(prefix=".cwd-", dir=folder)
        os.chdir(place)
        os.rmdir(place)
    except OSError:
        pass
