"""Every error a user can meet, each carrying its exit code and a hint for what to do next.

One top-level handler (``bar.cli.main.main``) turns a ``BarError`` into ``bar: <message>`` on
stderr plus the hint, and exits with ``exit_code``. Anything that is not a ``BarError`` is a
bug: it gets ``ExitCode.INTERNAL`` and its traceback goes to a log file. All of bar's
exception classes live here, so the table of exit codes in the README is this file.
"""

from __future__ import annotations

from collections.abc import Sequence


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
    CANNOT_CONFINE = 11  # sandbox.required, and the kernel cannot confine the step
    REFUSED = 12  # bar push: something that must not leave the machine was found
    UNREACHABLE = 13  # workers: no Temporal server there, or bar[workers] not installed
    NO_DECISION = 20  # bar decide: nothing was submitted (no pending decision, none answered)
    NOT_DECIDED = 21  # bar decide: the pending decision is not answered yet (--wait: in time)
    INTERNAL = 70  # a bug in bar (traceback logged)
    CANNOT_EXECUTE = 126  # policy blocked the command, or it could not be executed
    NOT_FOUND_COMMAND = 127  # bar run: the command was not found
    INTERRUPTED = 130  # Ctrl-C
    POLICY_BLOCKED = CANNOT_EXECUTE


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


class AlreadyExists(BarError):
    """The name (of a task) is already taken by something that must stay unique. Not a
    bad command line: the same command works once the other one is closed."""


class StepBusy(BarError):
    """A running step cannot do what was asked now (its agent is mid-call)."""

    exit_code = ExitCode.LOCKED


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


class ApplyConflict(Conflict):
    """Applying would conflict in ``paths``; nothing was changed."""

    def __init__(self, target_branch: str, paths: Sequence[str]) -> None:
        self.target_branch = target_branch
        self.paths = list(paths)
        super().__init__(
            f"applying onto {target_branch} would conflict in: {', '.join(self.paths)}; "
            "nothing was changed",
            hint=f"bring the task up to date with `bar task sync --onto {target_branch}` "
            "(it merges the branch into the task's worktree), then apply again",
        )


class UnresolvedConflicts(Conflict):
    """The state to apply still holds conflict markers a sync left in ``paths``."""

    def __init__(self, target_branch: str, paths: Sequence[str], task: str) -> None:
        self.target_branch = target_branch
        self.paths = list(paths)
        holds = "holds" if len(self.paths) == 1 else "hold"
        super().__init__(
            f"{', '.join(self.paths)} still {holds} the conflict markers `bar task sync` left; "
            f"applying would commit them to {target_branch}, so nothing was changed",
            hint=f'resolve them in the task\'s worktree (cd "$(bar task path {task})"), '
            "record that with any `bar run` (bar run -- true), then apply again",
        )


class NothingToUndo(BarError):
    """``bar undo`` / ``bar redo`` found no step to undo or redo."""


class PushRefused(BarError):
    """``bar push`` found what must not leave the machine (``bar.share.scan``)."""

    exit_code = ExitCode.REFUSED


class Unreachable(BarError):
    """The Temporal server (docs/workers.md) cannot be reached, or its client is not installed."""

    exit_code = ExitCode.UNREACHABLE


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


class AgentSettingsError(ConfigError):
    """An agent's settings file cannot be merged safely (not JSON, odd shape, a symlink)."""


class WriteFailed(BarError):
    """A file of bar's could not be written (disk full, quota, read-only file system)."""

    hint = (
        "free space (or fix permissions) and run the command again; `bar doctor` checks the project"
    )


class SnapshotFailed(WriteFailed):
    """The worktree's state could not be stored in git (a full disk, a quota); the step
    stays pending and is recorded by the next bar command once it can be."""

    hint = (
        "free space, then run your next step or `bar doctor --repair`: the step is recorded "
        "then, nothing is lost"
    )


class CommandError(BarError):
    """A child process bar ran for itself failed; ``str()`` shows the command, its exit
    code and what it said on stderr."""

    def __init__(
        self, cmd: Sequence[str], returncode: int, stdout: bytes = b"", stderr: bytes = b""
    ) -> None:
        self.cmd = tuple(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        said = stderr.decode("utf-8", "replace").strip()
        super().__init__(
            f"command {' '.join(self.cmd)!r} failed with exit code {returncode}"
            + (f": {said}" if said else "")
        )


class GitError(CommandError):
    exit_code = ExitCode.GIT


class GitStateError(BarError):
    """git's state is not what bar needs (a moved ref, a lock file), without a failed
    command to show."""

    exit_code = ExitCode.GIT


class HookFailed(BarError):
    exit_code = ExitCode.HOOK_FAILED
    step: object = None  # the step recorded as stopped by the hook (a ``RunStep``)


class CannotConfine(BarError):
    exit_code = ExitCode.CANNOT_CONFINE


class UnknownAgent(UsageError):
    pass


class HookInputError(BarError):
    """The event on stdin is not one bar can check (bad JSON, a missing field, another
    event).

    Its exit code is 2 on purpose: should it ever escape ``bar hook`` uncaught, the
    top-level handler still exits 2 with the message on stderr, which all three agents
    read as "block this tool call".
    """

    exit_code = ExitCode.USAGE
