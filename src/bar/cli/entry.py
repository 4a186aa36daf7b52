"""The ``bar`` command (``bin/bar``): served by the resident where it may be, else run here
(``bar.cli.main``), and a resident started for next time (``bar.cli.warm``). Only this
module and ``bar.changes.fast.resident``, small and with no ``__future__`` import, are
loaded before the command is sent."""

import gc
import os
import sys

from bar.changes.fast import resident

# what a resident runs: bar's command line, loaded once
WARM = "bar.cli.warm"


# the pid of the process whose death ends this one (a ``bar worker``, for its steps)
PARENT = "BAR_DIE_WITH"
# set by the compiled ``bar`` (``bar.cli.launcher``) that asked the resident already and
# runs this for what it did not take: not asked twice
TRIED = "BAR_SERVE_TRIED"


def main(args: list[str]) -> int:
    """Run ``bar ARGS`` (the first code bar runs)."""
    # Loading bar makes tens of thousands of objects that live as long as the process
    # (modules, classes, functions) and frees almost none, so the cycle collector would
    # only walk them again and again: a fifth of a ``bar status``. It is off until the
    # command's code is loaded (``bar.cli.main.collect_from_here``).
    gc.disable()
    standard_descriptors()
    absolute_home()
    if PARENT in os.environ:
        die_with_parent(os.environ.pop(PARENT))
    tried = os.environ.pop(TRIED, None) is not None
    if args[:1] and (args[0] in resident.SERVED or args[0] in resident.QUIET) and not tried:
        code = resident.serve(args)
        if code is not None:  # served: this process made nothing that needs finalizing
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(code & 0xFF)
    from bar.cli.main import run_here

    try:
        code = run_here(args)
    finally:
        if resident.starts_one(args):
            resident.start(WARM)  # for the next one
    if "temporalio" in sys.modules:
        # Temporal's native client can crash while the interpreter tears down (a
        # segfault or an abort at exit, about one run in six with SDK 1.35): a command
        # that loaded it ends here, its output flushed, as a served command does
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code & 0xFF)
    return code


def die_with_parent(wanted: str) -> None:
    """This process is sent SIGTERM when its parent, the ``bar worker`` whose pid is
    ``wanted``, dies (Linux): a ``bar run`` then records its step (and, served by the
    resident, passes the signal on to the fork that runs it), so no command goes on in a
    worktree nobody watches. A parent already gone: SIGTERM now. Set in the child, so
    nothing runs between the worker's fork and exec."""
    if not wanted.isdigit():
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: a worker stops its steps when it is stopped
    if os.getppid() != int(wanted):
        os.kill(os.getpid(), signal.SIGTERM)


def standard_descriptors() -> None:
    """Descriptors 0, 1 and 2 open, on ``/dev/null`` where the caller closed them
    (``2>&-``), as git does for its own: else the first file bar opens would take the
    place of a standard stream. Python gives no stream for one closed at its start: one
    is made here (``bar.terminal.stdio`` explains why a recording command needs them)."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # (the lowest free number: ``fd`` or below)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            else:  # (the command inherits it, as it would have the caller's)
                os.set_inheritable(fd, True)
        if getattr(sys, name) is None:
            errors = "backslashreplace" if fd else "strict"
            stream = open(fd, "w" if fd else "r", encoding="utf-8", errors=errors, closefd=False)  # noqa: SIM115
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)


def absolute_home() -> None:
    """A relative ``BAR_HOME`` made absolute from where bar was started, for bar and
    every process it starts (a step's ``bar hook`` runs elsewhere; the resident in
    ``/``): one bar home, whatever the working directory."""
    home = os.environ.get("BAR_HOME")
    if home and not os.path.isabs(home):
        os.environ["BAR_HOME"] = os.path.abspath(os.path.expanduser(home))
