"""The command line: bar's parser, its rules (errors with hints, global options, help
formatting) and the helpers every command's options use. Each command's options and help
sit beside its handler, in ``bar.cli.commands.<module>.options`` (``COMMANDS`` says which
module holds which command); the parser of one command line builds just that command's.

Kept apart from ``bar.cli.main`` so that the hot paths (``bar hook``, ``bar --version``) never
import argparse or build the parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NoReturn, Protocol, cast

from bar import VERSION_LINE

EXIT_CODES = """\
exit codes:
  0    success (bar run: the command's own exit code)
  1    error
  2    bad command line
  3    task, step or ref not found
  4    not a git repository, or not registered (run `bar init`)
  5    unrecorded or uncommitted changes are in the way
  6    apply or sync would conflict; bar push: the remote went on without you
  7    another bar process holds the task (see --no-wait)
  8    a file bar reads is broken or of an unknown version (see `bar doctor`)
  9    git failed unexpectedly
  10   a pre_run hook stopped the step
  11   sandbox.required is set and the kernel cannot confine the step
  12   bar push: something that must not leave the machine was found (--allow ID)
  13   workers: no Temporal server answers, or the workers extra is not installed
  20   bar decide: no pending decision (nothing submitted, or nothing answered)
  21   bar decide: the pending decision is not decided yet (submit --wait: in time)
  70   internal error (traceback in $BAR_HOME/logs)
  126  blocked by policy (also: the command could not be executed)
  127  bar run: command not found
  128+N bar run: the command was stopped by signal N (Ctrl-C: 130)
  130  interrupted (Ctrl-C)
"""

OUTPUT = """\
output:
  On a terminal, log, show, diff and blame go through a pager: BAR_PAGER, else
  PAGER, else less (LESS=FRX unless LESS is set); `cat` or an empty value, or
  --no-pager, prints straight. Nothing is paged when stdout is not a terminal.
  Colour, the first rule that applies: --color always|never; NO_COLOR set and
  not empty (never); FORCE_COLOR set and not 0 (always); output.color: false in
  config.yaml (never); else colour only on a terminal (the pager's included).
  Global options go before the command: bar --no-pager log, bar --color never show 3.
"""


class Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        # argparse would import shutil for the width each time an option is added
        super().__init__(prog, max_help_position=32, width=_width())


def _width() -> int:
    """What argparse would wrap help at: the terminal's width less two."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(columns - 2, 11)


# global options that take no value, and the one that takes a value (`--color WHEN`)
_GLOBAL_FLAGS = ("--debug", "--no-pager", "-P")
_GLOBAL_VALUED = "--color"


class _Parser(argparse.ArgumentParser):
    """argparse's parser with bar's errors: ``bar: <message>`` and a ``hint:`` line
    (a command or option close to a mistyped one, a global option moved before the
    command), not argparse's usage line and ``bar log: error: ...``."""

    innermost: ClassVar[_Parser | None] = None  # the (sub)command parser that parsed last
    argv: ClassVar[list[str]] = []  # the command line being parsed, for the hints
    # (action, test): a command whose first word passes ``test`` runs ``action`` with it,
    # as `bar decide JSON` runs `bar decide submit JSON` (see ``implied_action``)
    implied: tuple[str, Callable[[str], bool]] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        if self.prog == "bar":
            _Parser.argv = list(sys.argv[1:] if args is None else args)
        if self.implied is not None and args:
            action, test = self.implied
            if test(args[0]):
                args = [action, *args]
        _Parser.innermost = self
        self._bad_choice: tuple[argparse.Action, Any] | None = None
        return super().parse_known_args(args, namespace)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            self._bad_choice = (action, value)
            raise

    def error(self, message: str) -> NoReturn:
        message, hint = _explain(self, message)
        self.exit(2, f"bar: {message}\n" + (f"hint: {hint}\n" if hint else ""))


# words people bring from git and other tools for what a command of bar does: the hint
# names that command (a close spelling alone would send `bar help` to `bar shell`)
_MEANT = {
    "list": "task list",
    "ls": "task list",
    "tasks": "task list",
    "new": "task new",
    "create": "task new",
    "switch": "task switch",
    "checkout": "task switch",
    "close": "task close",
    "start": "task start",
    "rename": "task rename",
    "history": "log",
    "steps": "log",
    "revert": "undo",
    "reset": "rollback",
    "restore": "rollback",
    "commit": "apply",
    "merge": "apply",
    "exec": "run",
}


def meant(word: str, choices: Sequence[str], prog: str) -> str | None:
    """The command (or action of ``prog``) a word that is none most likely meant, as
    ``prog ...`` to type; None when none is close. A word borrowed from git (``commit``)
    names bar's command for it; a misspelling names the choice with the same letters in
    another order (``lgo``: log; ``deit``: edit, not delete), else the one spelled like it
    that starts with one of its first two letters (``hlep``: help; ``help`` is not
    ``shell`` misspelt)."""
    import difflib  # only when there is an error to explain

    if prog == "bar" and word in _MEANT:
        return f"bar {_MEANT[word]}"
    # two letters swapped: first (`iu` is too far from `ui` for difflib)
    close = [c for c in choices if sorted(c) == sorted(word)][:1]
    alike = [c for c in choices if c[:1] and c[0] in word[:2]]
    close = close or difflib.get_close_matches(word, alike, n=1)
    return f"{prog} {close[0]}" if close else None


def _explain(parser: _Parser, message: str) -> tuple[str, str | None]:
    """The message and hint for argparse's ``message`` from ``parser``."""
    import difflib  # only when there is an error to explain

    bad = getattr(parser, "_bad_choice", None)
    if bad is not None and isinstance(bad[0], argparse._SubParsersAction):
        what = "a command" if parser.prog == "bar" else f"an action of {parser.prog}"
        command = meant(str(bad[1]), list(bad[0].choices), parser.prog)
        if command:
            return f"{bad[1]!r} is not {what}", f"did you mean `{command}`?"
        return f"{bad[1]!r} is not {what}", f"`{parser.prog} --help` lists them"
    if bad is not None and bad[0].choices is not None:
        close = difflib.get_close_matches(str(bad[1]), [str(c) for c in bad[0].choices], n=1)
        return message, (f"did you mean `{close[0]}`?" if close else None)
    inner = _Parser.innermost or parser
    prefix = "unrecognized arguments: "
    if message.startswith(prefix):
        moved = _moved_globals(_Parser.argv)
        if moved is not None:
            return message, f"global options go before the command: {moved}"
        options = list(inner._option_string_actions)
        unknown = [w for w in message[len(prefix) :].split() if w.startswith("-")]
        close = difflib.get_close_matches(unknown[0].split("=")[0], options, n=1) if unknown else []
        if close:
            return message, f"did you mean {close[0]}? (see `{inner.prog} --help`)"
        return message, f"see `{inner.prog} --help`"
    return message, f"see `{parser.prog} --help`"


def _moved_globals(argv: list[str]) -> str | None:
    """``argv`` with the global options given after the command moved before it, as a
    command line to copy; None when there are none."""
    import shlex

    head: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # the global options already in place
        i += 2 if argv[i] == _GLOBAL_VALUED else 1
    head, rest = argv[:i], argv[i:]
    moved: list[str] = []
    kept: list[str] = []
    j = 0
    while j < len(rest):
        word = rest[j]
        if word == "--":
            kept += rest[j:]
            break
        if word in _GLOBAL_FLAGS or word.startswith(_GLOBAL_VALUED + "="):
            moved.append(word)
        elif word == _GLOBAL_VALUED:
            moved += rest[j : j + 2]
            j += 1
        else:
            kept.append(word)
        j += 1
    if not moved:
        return None
    return shlex.join(["bar", *head, *moved, *kept])


def implied_action(
    parser: argparse.ArgumentParser, action: str, test: Callable[[str], bool]
) -> None:
    """Let ``parser``'s command run ``action`` when its first word passes ``test`` (and is
    no action of its own): the short form of a command that has actions."""
    if isinstance(parser, _Parser):  # (not a skipped command's stand-in)
        parser.implied = (action, test)


def task_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task",
        "-t",
        metavar="ID|NAME",
        help="the task to act on: its id, the id's first 4+ characters, or its name "
        "(default: the task whose worktree you are in, else the active task)",
    )


def task_ref_opts(p: argparse.ArgumentParser) -> None:
    """The task an action of ``bar task`` is about: a word (``bar task close fix-login``)
    or ``--task``, as every other command takes it (``task_ref``, ``task``: see
    ``bar.cli.commands.task.ref``)."""
    p.add_argument("task_ref", nargs="?", metavar="ID|NAME", help="default: the active task")
    task_opt(p)


def json_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", dest="as_json", action="store_true", help="print machine-readable JSON"
    )


def server_opt(p: argparse.ArgumentParser) -> None:
    """``--server``: the Temporal server of the workers (``bar worker``, ``--on``)."""
    p.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="the Temporal server (default: BAR_TEMPORAL, else workers.server in config.yaml, "
        "127.0.0.1:7233)",
    )


def on_opts(p: argparse.ArgumentParser, *, detach: bool) -> None:
    """``--on QUEUE`` (with ``--detach`` if ``detach``) and ``--server``: a command that a
    worker may run instead (``bar run``, ``bar task new``)."""
    p.add_argument(
        "--on",
        metavar="QUEUE",
        help="run on the workers of this task queue (bar worker --queue QUEUE), not here",
    )
    if detach:
        p.add_argument(
            "--detach",
            action="store_true",
            help="with --on: send the step and return at once (bar status follows it; bar "
            "fetch brings the result)",
        )
    server_opt(p)


class _Skipped:
    """Stands for the parser of a command that is not the one being run: building every
    command's options costs more than running ``bar run -- true`` does in Python."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


class Commands(Protocol):
    """What a command module's ``options`` adds its command (or a command's action) to."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


class _Only:
    """``add_subparsers()``, building only the parser of ``only`` (None: all of them)."""

    def __init__(self, real: Any, only: str | None) -> None:
        self._real, self._only = real, only
        self.built: list[str] = []

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if self._only is not None and name != self._only:
            return cast(argparse.ArgumentParser, _Skipped())
        self.built.append(name)
        parser: argparse.ArgumentParser = self._real.add_parser(
            name, help=COMMANDS[name][1], **kwargs
        )
        return parser


# bar's commands in the order of `bar --help`: the module of ``bar.cli.commands`` whose
# ``options`` adds each (a module may add more than one: ``undo`` adds ``redo`` too), and
# the line `bar --help` says of it (which needs no command's module loaded)
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("init", "register this repository with bar"),
    "task": ("task", "create, list, inspect, switch and close tasks"),
    "shell": ("shell", "an interactive shell in the task's worktree, recorded as one step"),
    "worktree": ("board", "list the task worktrees; keep or remove one"),
    "events": ("board", "the project's task and worktree events"),
    "run": ("run", "run a command in the task's worktree as a recorded step"),
    "log": ("log", "list the task's steps, newest last"),
    "show": ("show", "show one step or checkpoint in full with its patch and output"),
    "diff": ("diff", "diff any two recorded states (default: base to now)"),
    "status": ("status", "project, active task, worktree and unrecorded changes"),
    "verify": ("verify", "prove the worktree holds a recorded state: every file's bytes hashed"),
    "blame": ("blame", "each line of a file with the step or tool call that last changed it"),
    "rollback": ("rollback", "restore the worktree to an earlier step (undoable)"),
    "undo": ("undo", "undo the last step not undone yet (itself a step)"),
    "redo": ("undo", "redo the step undone last (itself a step)"),
    "trash": ("trash", "what bar moved aside instead of deleting it; put it back"),
    "apply": ("apply", "land the task's work on a branch, as one commit or a merge"),
    "push": ("share", "publish task histories to a git remote (scanned for secrets first)"),
    "fetch": ("share", "bring other machines' task histories here, as read-only tasks"),
    "review": ("review", "the steps, sessions and policy decisions behind a pushed branch"),
    "export": (
        "export",
        "write a task's record for other tools (ATIF, OpenTelemetry, Agent Trace)",
    ),
    "notes": ("notes", "line attribution as git-ai notes (refs/notes/ai): export, import"),
    "worker": (
        "workers",
        "take steps from a task queue and run them on this machine (Temporal); dev-server: a Temporal server for one machine",
    ),
    "cancel": ("workers", "stop a task's running step, here or on a worker"),
    "policy": ("policy", "check commands against the policy; test the policy file"),
    "doctor": (
        "doctor",
        "check every project file, ledger line, ref and worktree; --repair fixes them",
    ),
    "replay": ("replay", "play back an interactive step's terminal session"),
    "hook": ("hook", "policy check for an agent's shell commands (called by the agent)"),
    "agent": ("agent", "wire an agent's hooks to bar"),
    "resident": ("resident", "the warm bar that serves bar run: its state; start or stop it"),
    "completion": ("completion", "print the shell completion script for bash, zsh or fish"),
    "ui": ("ui", "review every project's tasks in the browser: steps, diffs, rollback, apply"),
    "decide": ("decide", "the agent asks you to decide; you answer (docs/decide-flow.md)"),
    "flow": ("flow", "where the task's work stands: phases, steps, a snapshot each"),
    "mcp": ("mcp", "serve the task to an agent as a Model Context Protocol server (stdio)"),
    "help": ("help", "show the help of bar or of a command (bar help run, bar help task new)"),
}


# the modules of ``bar.cli.commands`` besides ``task`` whose ``task_options`` add actions
# of ``bar task`` (those actions' handlers are theirs: ``bar task claim`` is the board's)
TASK_ACTIONS = ("board", "share", "sync")


def task_actions(tsub: Commands) -> None:
    """Add to ``tsub`` the actions of ``bar task`` that other modules handle."""
    import importlib

    for module in TASK_ACTIONS:
        importlib.import_module(f"bar.cli.commands.{module}").task_options(tsub)


_prebuilt: dict[str | None, argparse.ArgumentParser] = {}


def prebuild(only: str | None) -> None:
    """Build ``build_parser(only)`` now, for the next call to take (the resident's forks,
    ``bar.changes.fast.resident_daemon``: each takes it once)."""
    _prebuilt[only] = build_parser(only)


def build_parser(only: str | None = None, *, whole: bool = False) -> argparse.ArgumentParser:
    """bar's parser: with ``only`` (a command), that command's options alone; with
    ``whole``, every command's (the completion scripts read it); else the commands as
    `bar --help` lists them, none with its options, which is what ``bar``, ``bar --help``
    and a word that is no command need (no command's module is loaded)."""
    _Parser.innermost = None
    ready = _prebuilt.pop(only, None)
    if ready is not None:
        return ready
    parser = _Parser(
        prog="bar",
        formatter_class=Formatter,
        description=(
            "Hand work to AI coding agents without fear.\n\n"
            "Each task gets its own git worktree and branch; every command run in it is a\n"
            "step recorded with the exact patch it made and what it printed. Review the\n"
            "steps, roll back to any of them, and apply the result to a real branch."
        ),
        epilog=(
            "a first session:\n"
            "  bar init                          register this repository\n"
            "  bar task new fix-login            new task, worktree and branch\n"
            "  bar run -- claude                 run an agent as a recorded step\n"
            "  bar log -p                        review the steps and their patches\n"
            "  bar undo                          undo the last step (bar redo: again)\n"
            "  bar apply                         land the work on the base branch\n\n"
            + OUTPUT
            + "\n"
            + EXIT_CODES
        ),
    )
    parser.add_argument("--version", action="version", version=VERSION_LINE)
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        metavar="WHEN",
        help="colour: auto (default: on a terminal), always or never; see 'output' below",
    )
    parser.add_argument(
        "-P",
        "--no-pager",
        action="store_true",
        help="print straight to the terminal, not through a pager",
    )
    if only not in COMMANDS:
        only = None  # (a word that is no command: the list of them, for the error's hint)
    sub = _Only(parser.add_subparsers(dest="command", metavar="COMMAND"), only)

    import importlib

    if only is not None:
        importlib.import_module(f"bar.cli.commands.{COMMANDS[only][0]}").options(sub)
    elif whole:
        for module in dict.fromkeys(module for module, _ in COMMANDS.values()):
            importlib.import_module(f"bar.cli.commands.{module}").options(sub)
    else:
        for name in COMMANDS:
            sub.add_parser(name, formatter_class=Formatter)
    return parser
