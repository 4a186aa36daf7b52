"""Running a step's command with its output shown live and captured at the same time.

stdout and stderr are read from two pipes as they come, written to the terminal unchanged,
and streamed through the secret scrubber into two files, so memory does not grow with
output. The artifact is then ``=== STDOUT ===`` + stdout + ``=== STDERR ===`` + stderr.

Signals: a Ctrl-C typed at the terminal reaches the child directly (it is in our process
group), so bar only ignores it and waits for the child to decide. A SIGINT, SIGTERM or
SIGHUP sent to bar alone is forwarded to the child. Either way bar stays alive to record
the step with the child's real exit status.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import BinaryIO, Protocol

from bar.store import create_file

STDOUT_HEADER = b"=== STDOUT ===\n"
STDERR_HEADER = b"=== STDERR ===\n"
_CHUNK = 64 * 1024
_GRACE = 2.0  # seconds to drain pipes held open by the child's own children


class StreamFilter(Protocol):
    def feed(self, chunk: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Identity:
    def feed(self, chunk: bytes) -> bytes:
        return chunk

    def flush(self) -> bytes:
        return b""


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    signal: int | None
    printed: bool


def exit_status(returncode: int) -> tuple[int, int | None]:
    """Map a Popen return code to (exit code, signal): 128+N when killed by signal N."""
    if returncode < 0:
        return 128 - returncode, -returncode
    return returncode, None


@contextmanager
def forwarding_signals(get_pid: Callable[[], int | None]) -> Iterator[None]:
    """While the block runs, keep bar alive and pass signals on to the child."""
    from_terminal = False
    try:
        from_terminal = os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        from_terminal = False

    def handler(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and from_terminal:
            return  # the terminal sent it to the child too
        pid = get_pid()
        if pid is not None:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _write_live(stream: BinaryIO | None, data: bytes) -> BinaryIO | None:
    """Echo to the terminal; a closed reader (``bar run ... | head``) stops the echo only."""
    if stream is None:
        return None
    try:
        stream.write(data)
        stream.flush()
    except (BrokenPipeError, ValueError, OSError):
        return None
    return stream


class _Sink:
    """An artifact being written. A failed write (disk full, quota, file-size limit) stops
    the capture, not the command: the command's output keeps reaching the terminal, and
    bar says what could not be written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: OSError | None = None
        self._fh: BinaryIO | None = open(path, "ab")  # noqa: SIM115

    def write(self, data: bytes) -> None:
        if self._fh is None or not data:
            return
        try:
            self._fh.write(data)
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError as exc:
                self._fail(exc)
            self._fh = None

    def _fail(self, exc: OSError) -> None:
        self.error = exc
        try:
            if self._fh is not None:
                self._fh.close()
        except OSError:
            pass
        self._fh = None
        print(
            f"bar: warning: could not write {self.path}: {exc.strerror or exc}; "
            "the rest of the output is shown but not recorded",
            file=sys.stderr,
        )


def run_piped(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output_path: Path,
    make_filter: Callable[[], StreamFilter] | None = None,
    live: bool = True,
) -> Outcome:
    """Run ``argv`` and capture its output into ``output_path`` (removed if it printed nothing)."""
    new_filter = make_filter or _Identity
    err_path = output_path.with_name(output_path.name + ".stderr.tmp")
    create_file(output_path, STDOUT_HEADER)
    create_file(err_path)
    out_live: BinaryIO | None = sys.stdout.buffer if live else None
    err_live: BinaryIO | None = sys.stderr.buffer if live else None
    printed = False
    proc: subprocess.Popen[bytes] | None = None
    try:
        out_file, err_file = _Sink(output_path), _Sink(err_path)
        with forwarding_signals(lambda: proc.pid if proc else None):
            try:
                proc = subprocess.Popen(
                    list(argv),
                    cwd=cwd,
                    env=dict(env),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            except FileNotFoundError:
                msg = f"bar: command not found: {argv[0]}\n".encode()
                err_live = _write_live(err_live, msg)
                err_file.write(msg)
                printed = True
                code, sig = 127, None
            except (PermissionError, OSError) as exc:
                msg = f"bar: cannot execute {argv[0]}: {exc.strerror or exc}\n".encode()
                err_live = _write_live(err_live, msg)
                err_file.write(msg)
                printed = True
                code, sig = 126, None
            else:
                assert proc.stdout is not None and proc.stderr is not None
                filters = {proc.stdout.fileno(): new_filter(), proc.stderr.fileno(): new_filter()}
                files = {proc.stdout.fileno(): out_file, proc.stderr.fileno(): err_file}
                is_out = proc.stdout.fileno()
                sel = selectors.DefaultSelector()
                sel.register(proc.stdout, selectors.EVENT_READ)
                sel.register(proc.stderr, selectors.EVENT_READ)
                open_streams = 2
                exited_at: float | None = None
                while open_streams:
                    events = sel.select(timeout=0.25)
                    if not events and proc.poll() is not None:
                        # The child is gone but something it started still holds the
                        # pipes (a server sent to the background): stop waiting soon.
                        now = time.monotonic()
                        exited_at = exited_at or now
                        if now - exited_at > _GRACE:
                            for key in list(sel.get_map().values()):
                                sel.unregister(key.fileobj)
                                files[key.fd].write(filters[key.fd].flush())
                            break
                    for key, _ in events:
                        fd = key.fd
                        try:
                            data = os.read(fd, _CHUNK)
                        except InterruptedError:
                            continue
                        if not data:
                            sel.unregister(key.fileobj)
                            files[fd].write(filters[fd].flush())
                            open_streams -= 1
                            continue
                        printed = True
                        if fd == is_out:
                            out_live = _write_live(out_live, data)
                        else:
                            err_live = _write_live(err_live, data)
                        files[fd].write(filters[fd].feed(data))
                sel.close()
                proc.stdout.close()
                proc.stderr.close()
                while True:
                    try:
                        returncode = proc.wait()
                        break
                    except InterruptedError:
                        continue
                code, sig = exit_status(returncode)
        out_file.close()
        err_file.close()
        if printed and out_file.error is None:
            _assemble(output_path, err_path)
        elif not printed:
            output_path.unlink(missing_ok=True)
    finally:
        err_path.unlink(missing_ok=True)
    return Outcome(code, sig, printed)


def _assemble(output_path: Path, err_path: Path) -> None:
    """Append ``=== STDERR ===`` and the captured stderr to the artifact."""
    try:
        with open(output_path, "r+b") as out_file:
            out_file.seek(0, os.SEEK_END)
            size = out_file.tell()
            if size > len(STDOUT_HEADER):
                out_file.seek(size - 1)
                if out_file.read(1) != b"\n":
                    out_file.write(b"\n")
            out_file.seek(0, os.SEEK_END)
            out_file.write(STDERR_HEADER)
            with open(err_path, "rb") as err_file:
                while chunk := err_file.read(1024 * 1024):
                    out_file.write(chunk)
            out_file.flush()
            os.fsync(out_file.fileno())
    except OSError as exc:
        print(
            f"bar: warning: could not finish {output_path}: {exc.strerror or exc}",
            file=sys.stderr,
        )
