"""One way to run a program.

``run()`` runs a child with an argument list (never a shell), captures its output, and
raises ``CommandError`` on a non-zero exit unless ``check=False``. ``clean_env()`` strips
the variables through which an enclosing git hook could redirect our git calls.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bar.errors import BarError, ExitCode

# Variables git sets for hooks or that point git elsewhere; inheriting them would make
# our git calls act on the wrong repository or index.
_GIT_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_CEILING_DIRECTORIES",
)


@dataclass(frozen=True)
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


class CommandError(BarError):
    exit_code = ExitCode.ERROR

    def __init__(self, result: Result) -> None:
        self.result = result
        super().__init__(
            f"command {' '.join(result.cmd)!r} failed with exit code {result.returncode}"
            + (f": {result.err.strip()}" if result.err.strip() else "")
        )

    @property
    def returncode(self) -> int:
        return self.result.returncode


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    if extra:
        env.update(extra)
    return env


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
    full_env = clean_env(env)
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=full_env,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        result = Result(tuple(cmd), 127, b"", str(exc).encode())
        if check:
            raise error(result) from exc
        return result
    result = Result(tuple(cmd), proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise error(result)
    return result


def run_to_file(
    cmd: Sequence[str],
    path: Path,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``cmd`` with its stdout written straight into ``path`` (created 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=clean_env(env),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.PIPE,
            check=False,
        )
    finally:
        os.close(fd)
    if proc.returncode != 0:
        raise CommandError(Result(tuple(cmd), proc.returncode, b"", proc.stderr))
