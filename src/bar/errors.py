"""Errors that carry their own exit code and a hint for what to do next.

One top-level handler (``bar.cli.main``) turns a ``BarError`` into ``bar: <message>`` on
stderr plus the hint, and exits with ``exit_code``. Anything that is not a ``BarError`` is a
bug: it gets ``ExitCode.INTERNAL`` and its traceback goes to a log file.
"""

from __future__ import annotations


class ExitCode:
    """bar's own exit codes. ``bar run`` exits with the child's code instead.

    Plain integers, not an enum: ``import enum`` costs more than the rest of ``bar hook``.
    """

    OK = 0
    ERROR = 1  # generic failure
    USAGE = 2  # bad command line
    NOT_FOUND = 3  # task, step, ref or project does not exist
    NOT_INITIALIZED = 4  # repository not registered with `bar init`
    DIRTY = 5  # unrecorded or uncommitted changes are in the way
    CONFLICT = 6  # apply would conflict
    LOCKED = 7  # another bar process holds the lock
    CORRUPT = 8  # a file bar reads is broken or of an unknown version
    GIT = 9  # git failed in an unexpected way
    HOOK_FAILED = 10  # a pre_run hook stopped the step
    INTERNAL = 70  # a bug in bar (traceback logged)
    POLICY_BLOCKED = 126  # policy blocked the command (same as "cannot execute")
    INTERRUPTED = 130  # Ctrl-C


class BarError(Exception):
    """Base of every error a user can meet. ``str()`` is the one-sentence message."""

    exit_code: int = ExitCode.ERROR
    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class UsageError(BarError):
    exit_code = ExitCode.USAGE


class NotFound(BarError):
    exit_code = ExitCode.NOT_FOUND


class TaskNotFound(NotFound):
    pass


class StepNotFound(NotFound):
    pass


class NotInitialized(BarError):
    exit_code = ExitCode.NOT_INITIALIZED


class NotARepository(BarError):
    exit_code = ExitCode.NOT_INITIALIZED


class DirtyWorktree(BarError):
    exit_code = ExitCode.DIRTY


class Conflict(BarError):
    exit_code = ExitCode.CONFLICT


class Locked(BarError):
    exit_code = ExitCode.LOCKED


class CorruptFile(BarError):
    exit_code = ExitCode.CORRUPT


class UnsupportedVersion(CorruptFile):
    pass


class ConfigError(CorruptFile):
    pass


class PolicyError(CorruptFile):
    pass


class GitError(BarError):
    exit_code = ExitCode.GIT


class HookFailed(BarError):
    exit_code = ExitCode.HOOK_FAILED


class PolicyBlocked(BarError):
    exit_code = ExitCode.POLICY_BLOCKED
