"""User hooks: shell commands from config.yaml run before (``pre_run``) and after
(``post_run``) each step.

A hook is a command string for ``/bin/sh -c``, run in the task worktree. It learns about
the step twice, to suit both shell one-liners and scripts: as ``BAR_*`` environment
variables and as one JSON object on stdin. It runs in a session of its own, so on
timeout the whole process group (the shell and everything it started) is stopped:
SIGTERM, then SIGKILL after a second.

``BAR_CMD`` is left out when its JSON would be longer than 100 KiB (Linux refuses to
start a program with an environment string over 128 KiB, and an agent's prompt can be
that long); stdin always has the whole command.

Its stdout and stderr go through one pipe, in the order written, to bar's stderr, never
to bar's stdout, which belongs to the wrapped command. Each line is prefixed with
``[pre_run]`` or ``[post_run]`` so hook output cannot be mistaken for the step's. What was
shown is also kept (``HookResult.output``, its first MiB), so that a step a hook stopped
can record why.

The shell exiting ends the hook. Background processes it left behind are not killed;
bar only stops waiting for their output shortly after the shell exits.

Hook failures are results, not exceptions: ``pre_run`` stops at the first failure and
the caller refuses the step with ``HookResult.describe()``; ``post_run`` runs every
hook and the failures are reported and recorded.

``run_hooks(start=...)`` starts each hook's shell through a given function: ``bar run``
passes the step's ``Confinement.start`` for the repository's hooks (``bar.step.step_hooks``),
so the shell and all it starts are confined like the step.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, Final, Literal

from bar.base.proc import Prepare, Starter, clean_env, exit_status
from bar.base.record import record
from bar.errors import CannotConfine
from bar.model.records import HookRecord

Phase = Literal["pre_run", "post_run"]
PHASES: Final = ("pre_run", "post_run")

DEFAULT_TIMEOUT: Final = 60.0
# Between SIGTERM and SIGKILL: time for a hook to clean up after itself.
_KILL_GRACE: Final = 1.0
# How long output is still read after the shell exited, for a background process that
# inherited the pipe and is about to close it.
_DRAIN_GRACE: Final = 0.2
# Wake-up interval while a hook is silent, to notice that it exited.
_POLL: Final = 0.05
_READ_SIZE: Final = 65536
_MAX_ENV_CMD: Final = 100 * 1024
_MAX_KEPT: Final = 1024 * 1024  # of a hook's output, kept for the record


@record(frozen=True)
class HookFacts:
    """What a hook is told about the step it runs around."""

    project: str
    task_id: str
    task_name: str
    step_id: str
    workspace: Path
    cmd: Sequence[str]
    exit_code: int | None = None  # the step's, for post_run

    def to_json(self, phase: Phase) -> dict[str, object]:
        facts: dict[str, object] = {
            "project": self.project,
            "task_id": self.task_id,
            "task_name": self.task_name,
            "step_id": self.step_id,
            "workspace": str(self.workspace),
            "cmd": list(self.cmd),
            "phase": phase,
        }
        if phase == "post_run":
            facts["exit_code"] = self.exit_code
        return facts

    def to_env(self, phase: Phase) -> dict[str, str]:
        env = {
            "BAR_PROJECT": self.project,
            "BAR_TASK_ID": self.task_id,
            "BAR_TASK_NAME": self.task_name,
            "BAR_STEP_ID": self.step_id,
            "BAR_WORKSPACE": str(self.workspace),
        }
        cmd = json.dumps(list(self.cmd))
        if len(cmd) <= _MAX_ENV_CMD:  # else too long to pass in the environment
            env["BAR_CMD"] = cmd
        if phase == "post_run" and self.exit_code is not None:
            env["BAR_EXIT_CODE"] = str(self.exit_code)
        return env


@record(frozen=True)
class HookResult:
    """How one hook ended.

    ``exit_code`` is the shell's exit status; 128+N when a signal N ended it (also after
    a timeout, which ``timed_out`` tells apart), 127 or 126 when it could not be started
    (``error`` says why).
    """

    phase: str
    cmd: str
    exit_code: int
    timed_out: bool
    duration_ms: int
    error: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    signal: int | None = None  # the signal that ended it, if one did
    output: bytes = b""  # what it printed, as shown (prefixed), up to _MAX_KEPT

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    def record(self) -> HookRecord:
        """The entry for the ledger's ``hooks`` list."""
        return HookRecord(self.phase, self.cmd, self.exit_code, self.timed_out)

    def describe(self, scrub: Callable[[str], str] = str) -> str:
        """One sentence for the user; ``scrub`` hides secrets in the hook's command before
        it is cut short (a secret cut in two would no longer be recognised)."""
        what = f"{self.phase} hook {_abbreviate(scrub(self.cmd))!r}"
        if self.error is not None:
            return f"{what} could not start: {self.error}"
        if self.timed_out:
            return f"{what} timed out after {self.timeout:g} s"
        if self.ok:
            return f"{what} succeeded"
        if self.signal is not None:
            return f"{what} was killed by {_signal_name(self.signal)}"
        reason = f"{what} failed with exit code {self.exit_code}"
        if self.exit_code == 127:
            reason += " (command not found)"
        elif self.exit_code == 126:
            reason += " (command not executable)"
        return reason


def run_hooks(
    phase: Phase,
    commands: Sequence[str],
    facts: HookFacts,
    *,
    cwd: Path,
    base_env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    stream: BinaryIO | None = None,
    start: Starter | None = None,
) -> list[HookResult]:
    """Run the ``phase`` hooks ``commands`` in ``cwd``; never raises for a hook failure.

    ``pre_run`` stops at the first hook that fails, so the last result is the one that
    refused the step; ``post_run`` runs them all. The environment is ``base_env`` as
    given (default: bar's own, cleaned by ``bar.base.proc.clean_env``) plus the ``BAR_*``
    facts. Hook output goes to ``stream`` (default: bar's stderr). ``start``: what each
    hook's process is started through (a confinement's ``start``).
    """
    if phase not in PHASES:
        raise ValueError(f"unknown hook phase {phase!r}")
    if timeout <= 0:
        raise ValueError(f"hook timeout must be positive, not {timeout}")
    out = stream if stream is not None else sys.stderr.buffer
    env = dict(clean_env() if base_env is None else base_env)
    env.pop("BAR_EXIT_CODE", None)  # a pre_run hook must not see a stale one
    env.update(facts.to_env(phase))
    payload = (json.dumps(facts.to_json(phase)) + "\n").encode()

    results: list[HookResult] = []
    for command in commands:
        result = _run_one(
            phase, command, cwd=cwd, env=env, payload=payload, timeout=timeout, out=out, start=start
        )
        results.append(result)
        if phase == "pre_run" and not result.ok:
            break
    return results


def _run_one(
    phase: str,
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    payload: bytes,
    timeout: float,
    out: BinaryIO,
    start: Starter | None = None,
) -> HookResult:
    started = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    def launch(prepare: Prepare = None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            bufsize=0,
            preexec_fn=prepare,
        )

    try:
        proc: subprocess.Popen[bytes] = start(launch) if start is not None else launch(None)
    except (OSError, CannotConfine) as exc:  # (CannotConfine: its namespaces, not made)
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
            if exc.filename is not None:
                reason += f": {exc.filename}"
        else:
            reason = str(exc)
        return HookResult(
            phase=phase,
            cmd=command,
            exit_code=127 if isinstance(exc, FileNotFoundError) else 126,
            timed_out=False,
            duration_ms=elapsed_ms(),
            error=reason,
            timeout=timeout,
        )

    printer = _LinePrefixer(out, f"[{phase}] ".encode())
    timed_out = False
    try:
        timed_out = not _communicate(proc, payload, printer, deadline=started + timeout)
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, started + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            _kill_group(proc)
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C) or an unexpected error
            _kill_group(proc)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        printer.finish()

    code, killed_by = exit_status(proc.returncode)
    return HookResult(
        phase=phase,
        cmd=command,
        exit_code=code,
        timed_out=timed_out,
        duration_ms=elapsed_ms(),
        timeout=timeout,
        signal=killed_by,
        output=bytes(printer.kept),
    )


def _communicate(
    proc: subprocess.Popen[bytes], payload: bytes, printer: _LinePrefixer, *, deadline: float
) -> bool:
    """Feed ``payload`` to the hook's stdin and pass its output on until the output
    ends or the shell has exited; False if ``deadline`` came first.

    Writing is non-blocking: a hook that never reads stdin must not hang bar.
    """
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    os.set_blocking(stdin.fileno(), False)
    pending = memoryview(payload)
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        selector.register(stdin, selectors.EVENT_WRITE)
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return False
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= _DRAIN_GRACE:
                break  # a background process holds the pipe open; stop reading
            for key, _ in selector.select(min(deadline - now, _POLL)):
                if key.fileobj is stdin:
                    try:
                        pending = pending[os.write(stdin.fileno(), pending[:_READ_SIZE]) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # the hook closed stdin or exited: it has had enough
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(stdin)
                        stdin.close()
                else:
                    data = os.read(stdout.fileno(), _READ_SIZE)
                    if data:
                        printer.write(data)
                    else:
                        selector.unregister(stdout)
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the hook's whole process group: SIGTERM, a grace period, then SIGKILL for
    whatever is left (the shell's children too, even once the shell itself is gone)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_KILL_GRACE)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class _LinePrefixer:
    """Writes hook output to ``out`` with ``prefix`` at the start of every line."""

    def __init__(self, out: BinaryIO, prefix: bytes) -> None:
        self._out = out
        self._prefix = prefix
        self._line_start = True
        self._broken = False
        self.kept = bytearray()  # what was written, up to _MAX_KEPT

    def write(self, data: bytes) -> None:
        body, newline = (data[:-1], b"\n") if data.endswith(b"\n") else (data, b"")
        text = body.replace(b"\n", b"\n" + self._prefix) + newline
        if self._line_start:
            text = self._prefix + text
        self._line_start = bool(newline)
        self._emit(text)

    def finish(self) -> None:
        """End an unterminated last line, so what follows starts on a line of its own."""
        if not self._line_start:
            self._emit(b"\n")
            self._line_start = True

    def _emit(self, data: bytes) -> None:
        if len(self.kept) < _MAX_KEPT:
            self.kept += data[: _MAX_KEPT - len(self.kept)]
            if len(self.kept) == _MAX_KEPT:
                self.kept += b"\n" + self._prefix + b"(the rest is not recorded)\n"
        if self._broken:
            return
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError):  # closed terminal or stream: keep running the hook
            self._broken = True


def _abbreviate(cmd: str, limit: int = 60) -> str:
    first = cmd.strip().splitlines()[0] if cmd.strip() else cmd
    if len(first) > limit or first != cmd.strip():
        return first[: limit - 1].rstrip() + "…"
    return first


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
