"""Command-line parsing and dispatch only; the work is done in ``bar.cli.commands``.

Command modules are imported only when their command runs, so ``bar hook`` and
``bar status`` do not pay for what they do not use. One handler turns a ``BarError`` into
``bar: <message>`` (+ hint) and its exit code; Ctrl-C exits 130; anything else is a bug:
one line for the user, the traceback in ``$BAR_HOME/logs/`` (``--debug`` prints it).
"""

from __future__ import annotations

import gc
import os
import sys

# (the names of annotations only: ``collections`` and ``typing`` cost more than the
# start of a command, which ``bar.changes.fast.resident`` runs here when no resident serves it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# namespace entries that are the parser's bookkeeping, not arguments of a command
_INTERNAL = {
    "_run",
    "_help",
    "command",
    "task_command",
    "agent_command",
    "policy_command",
    "debug",
    "color",
    "no_pager",
    "decide_command",
    "worker_command",
    "flow_command",
    "resident_command",
    "worktree_command",
    "notes_command",
    "trash_command",
}
_GLOBAL_FLAGS = {"--debug", "--no-pager", "-P"}  # global options that take no value
# commands that begin by looking for hand edits in a task's worktree (``bar.changes.fast.prescan``)
_LOOKS_FOR_HAND_EDITS = {"run", "shell", "apply", "rollback", "undo", "redo", "status"}
# the commands that record: their standard streams never stop them (``bar.terminal.stdio``)
_RECORDS = _LOOKS_FOR_HAND_EDITS | {"sync"}


def _command_word(args: list[str]) -> str:
    """The command's name: the first argument after the global options ("" if none)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--color":
            i += 2
        elif arg in _GLOBAL_FLAGS or arg.startswith("--color="):
            i += 1
        else:
            return arg
    return ""


# the options of ``bar run`` that take a value: its command starts at the first word that
# is neither one of its options nor such a value (``tests/cli/test_main.py`` checks the list)
RUN_VALUED = (
    "--task",
    "-t",
    "--cwd",
    "-e",
    "--agent",
    "--network",
    "--max-tokens",
    "--max-cost",
    "--on",
    "--server",
)


def _task_named(command: str, args: list[str]) -> str | None:
    """What ``--task``/``-t`` names on a command line, read before it is parsed (the last
    given, as argparse takes it; a prefix of ``--task`` too; None: none). Not past ``--``,
    nor, for ``bar run``, into its command (``bar run sort -t, f``). A wrong reading
    costs nothing: the early look it starts answers only the task the command asks about."""
    named = None
    words = iter(args[args.index(command) + 1 :] if command in args else args)
    for word in words:
        if word == "--":
            break
        if word.startswith("--") and "=" in word:
            name, _, value = word.partition("=")
            if len(name) >= 3 and "--task".startswith(name):
                named = value
        elif word == "-t" or (len(word) >= 3 and "--task".startswith(word)):
            named = next(words, None)
        elif word.startswith("-t") and not word.startswith("--"):
            named = word[2:]
        elif command == "run" and word in RUN_VALUED:
            next(words, None)
        elif command == "run" and not word.startswith("-"):
            break  # (the command)
    return named


def _inside_a_step() -> str | None:
    """Why bar cannot write, when it runs inside a (confined) step of ``bar run``."""
    step = os.environ.get("BAR_STEP_ID")
    if not step:
        return None
    return (
        f"this runs inside step {step} of task {os.environ.get('BAR_TASK_NAME')}, which "
        "is confined: bar's own files are read-only here; run it outside the step"
    )


def _log_traceback() -> str | None:
    import traceback

    from bar.base.clock import now_iso
    from bar.errors import BarError
    from bar.store.files import create_file, ensure_dir
    from bar.store.layout import bar_home

    try:
        logs = bar_home() / "logs"
        ensure_dir(logs)
        path = logs / f"crash-{now_iso().replace(':', '')}-{os.getpid()}.log"
        create_file(path, traceback.format_exc().encode("utf-8", "backslashreplace"))
        return str(path)
    except (OSError, BarError):
        return None


def _configure_output(args: object) -> None:
    """This command line's colour, pager and progress choices (reset on every call)."""
    from bar.base import progress
    from bar.cli import pager, render

    render.set_color(str(getattr(args, "color", "auto")))
    pager.configure(enabled=not getattr(args, "no_pager", False))
    progress.configure(enabled=not getattr(args, "as_json", False))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one bar command line in this process (``bar.cli.entry`` is the ``bar`` command,
    which a warm bar may serve instead)."""
    return _main(list(sys.argv[1:] if argv is None else argv))


def run_here(args_list: list[str]) -> int:
    """Run ``bar ARGS`` in this process (what the resident did not take)."""
    return _main(args_list)


def collect_from_here() -> None:
    """The cycle collector on again, once the command's code is loaded, for what the
    command makes (``bar.cli.entry`` turns it off for the start); what the start made is
    set aside for good (``gc.freeze``): it lives as long as the process. A caller that
    runs bar in its own process, with the collector on, is left as it is."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _main(args_list: list[str]) -> int:
    import io

    from bar import VERSION_LINE
    from bar.errors import BarError, ExitCode, WriteFailed

    if args_list == ["--version"]:
        print(VERSION_LINE)
        return ExitCode.OK
    if args_list[:1] == ["hook"]:
        # the hot path: before every shell command an agent runs; skip argparse setup
        from bar.cli.commands.hook import hook_main

        collect_from_here()
        return hook_main(args_list[1:])
    if args_list[:1] == ["__complete"]:
        # run by the shell completion scripts on each Tab press: as light as the hook
        from bar.cli.commands.completion import complete_main

        collect_from_here()
        return complete_main(args_list[1:])
    from bar.cli.parser import build_parser

    for stream in (sys.stdout, sys.stderr):  # names and arguments that are not UTF-8
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    first = _command_word(args_list)
    early = first in _LOOKS_FOR_HAND_EDITS
    if early:
        from bar.changes import fast

        # while the command's code loads and its options are built
        fast.prescan_begin(_task_named(first, args_list))
    if first.startswith("-") and first not in ("-h", "--help"):
        parser = build_parser(whole=True)  # (an option argparse may read as a global one)
    else:
        parser = build_parser(first or None)
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        if early:
            fast.prescan_discard()
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    _configure_output(args)
    debug = bool(getattr(args, "debug", False)) or bool(os.environ.get("BAR_DEBUG"))
    func: Callable[..., int] | None = getattr(args, "_run", None)
    if func is None:
        help_parser = getattr(args, "_help", parser)
        help_parser.print_help(sys.stderr)
        return ExitCode.USAGE
    try:
        collect_from_here()
        if getattr(args, "command", None) not in _RECORDS:
            return int(func(**{k: v for k, v in vars(args).items() if k not in _INTERNAL}))
        from bar.terminal.stdio import keep_recording

        with keep_recording():  # (a reader gone mid-record must not stop it: ``| head -1``)
            return int(func(**{k: v for k, v in vars(args).items() if k not in _INTERNAL}))
    except BarError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        print(f"bar: {exc}", file=sys.stderr)
        hint = (_inside_a_step() if isinstance(exc, WriteFailed) else None) or exc.hint
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("bar: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # the reader of our output went away (`bar log | head`): not an error
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return ExitCode.OK
    except OSError as exc:
        # disk full, read-only file system, quota: the failed write was to a temporary
        # file or an unrecorded step, so what was recorded before is intact
        what = f" {exc.filename}" if exc.filename else ""
        print(f"bar: could not write{what}: {exc.strerror or exc}", file=sys.stderr)
        print(f"hint: {_inside_a_step() or WriteFailed.hint}", file=sys.stderr)
        return ExitCode.ERROR
    except Exception as exc:
        where = _log_traceback()
        if debug:
            import traceback

            traceback.print_exc()
        print(f"bar: internal error: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        if where:
            print(f"hint: the traceback is in {where}; please report it", file=sys.stderr)
        return ExitCode.INTERNAL
    finally:
        if early:
            fast.prescan_discard()


if __name__ == "__main__":
    raise SystemExit(main())
