"""Programs that run a script given in their arguments or on their input, and what
commands print.

Each ``RUNNERS`` handler reads the arguments of one program, adds the scripts it runs
(text a shell parses), the commands it runs (words) and whether it reads a script from
stdin to a ``Runs``, and returns the indexes of the arguments to show masked. The rest
computes output known without running anything: what ``echo``/``printf`` print, and
what a decoding filter (``base64 -d``, ``xxd -r -p``, ``rev``…) makes of its input.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bar.shell.quoting import ansi_c
from bar.shell.wrappers import has_option, skip_options

if TYPE_CHECKING:
    from collections.abc import Callable


class Runs:
    """What a command runs besides itself."""

    __slots__ = ("nested", "scripts", "stdin_code", "stdin_shell")

    def __init__(self) -> None:
        self.scripts: list[str] = []
        self.nested: list[list[str]] = []
        self.stdin_shell = False  # it reads a script from stdin
        self.stdin_code: str | None = None  # ... or code in this language


def _rest(args: list[str], start: int, runs: Runs) -> set[int]:
    """The words from ``start`` on are one script (joined by spaces, as ``parallel``
    and ``tmux run-shell`` do) and are shown masked."""
    if start >= len(args):
        return set()
    runs.scripts.append(" ".join(args[start:]))
    return set(range(start, len(args)))


def _script_or_argv(args: list[str], start: int, runs: Runs) -> set[int]:
    """The words from ``start`` on, shown masked: one word is a script, several are
    the words of a command run without a shell (``tmux new 'a; b'`` and ``tmux new
    bash -c 'a; b'``)."""
    if len(args) - start == 1:
        runs.scripts.append(args[start])
    elif start < len(args):
        runs.nested.append(args[start:])
    return set(range(start, len(args)))


def _script(args: list[str], runs: Runs) -> set[int]:
    """``script [-q] -c CMD [FILE]``; BSD's ``script [-q] FILE CMD…``."""
    masked = take_value(args, ("-c", "--command"), runs.scripts)
    if masked:
        return masked
    j = skip_options(["script", *args], 0, "EIOBTmt") - 1
    if j + 1 < len(args):  # a file, then a command
        runs.nested.append(args[j + 1 :])
    return set()


def _flock(args: list[str], runs: Runs) -> set[int]:
    """``flock [opts] FILE -c CMD`` (the other forms are wrappers)."""
    return take_value(args, ("-c", "--command"), runs.scripts)


def _expect(args: list[str], runs: Runs) -> set[int]:
    """``expect -c CMDS``: Tcl, read as shell words (``spawn`` is a wrapper); with no
    script and no file, expect reads its script from stdin."""
    masked = take_value(args, ("-c",), runs.scripts)
    operands = [a for a in args if not a.startswith("-")]
    runs.stdin_shell = not masked and "-f" not in args and not operands
    return masked


def _at(args: list[str], runs: Runs) -> set[int]:
    """``at TIME`` / ``batch`` run the script on their stdin (not with -f FILE, nor when
    listing, showing or removing jobs)."""
    j = skip_options(["at", *args], 0, "qft") - 1
    runs.stdin_shell = not has_option(args[:j], "fldrc", "--file --list --delete", "qft")
    return set()


_PARALLEL_NAMES = (
    "arg-file colsep delimiter eof jobs max-args max-lines max-chars sshlogin sshloginfile "
    "results joblog tmpdir workdir env delay timeout halt retries load memfree block "
    "recstart recend header nice tagstring basefile return replace profile shebang-wrap"
)
_PARALLEL_LONG = frozenset("--" + name for name in _PARALLEL_NAMES.split())
_PARALLEL_SOURCES = frozenset([":::", "::::", ":::+", "::::+"])


def _parallel(args: list[str], runs: Runs) -> set[int]:
    """GNU ``parallel [opts] CMD ::: ARGS`` runs CMD with ARGS through a shell; with no
    command the arguments after ``:::`` (or the lines on stdin) are the commands."""
    j = skip_options(["parallel", *args], 0, "aCdEIjJLnNPsS", _PARALLEL_LONG) - 1
    if j >= len(args):
        runs.stdin_shell = True
        return set()
    if args[j] not in _PARALLEL_SOURCES:
        return _rest(args, j, runs)
    masked = set()
    for k in range(j + 1, len(args)):
        if args[k] in _PARALLEL_SOURCES:
            break
        if args[j] == ":::":
            runs.scripts.append(args[k])
            masked.add(k)
    return masked


# tmux commands that run a shell command, and their short options that take a value
_TMUX_COMMANDS = {
    "new-session": "cefFnstxy",
    "new-window": "ceFnt",
    "split-window": "ceFlt",
    "respawn-pane": "cet",
    "respawn-window": "cet",
    "run-shell": "cdt",
    "display-popup": "bcdehsStTwxy",
    "pipe-pane": "t",
    "if-shell": "t",
    "send-keys": "cNt",
}
_TMUX_ALIASES = {
    "new": "new-session",
    "neww": "new-window",
    "splitw": "split-window",
    "respawnp": "respawn-pane",
    "respawnw": "respawn-window",
    "run": "run-shell",
    "popup": "display-popup",
    "pipep": "pipe-pane",
    "if": "if-shell",
    "send": "send-keys",
}
_KEYS = {"Enter": "\n", "C-m": "\n", "C-j": "\n", "KPEnter": "\n", "Space": " ", "Tab": "\t"}


def _tmux(args: list[str], runs: Runs) -> set[int]:
    """``tmux [-c CMD] new -d CMD \\; send-keys 'CMD' Enter …``: every shell command of
    every tmux command on the line; keys sent to a pane are typed into its shell, and a
    pane's command of several words runs without a shell."""
    start = skip_options(["tmux", *args], 0, "cfLST") - 1
    masked = take_value(args[:start], ("-c",), runs.scripts)  # `tmux -c CMD`
    while start < len(args):
        end = start
        while end < len(args) and args[end] != ";":
            end += 1
        name = _TMUX_ALIASES.get(args[start], args[start])
        values = _TMUX_COMMANDS.get(name)
        if values is not None:
            k = start + skip_options(args[start:end], 0, values)
            if name == "send-keys" and k < end:
                runs.scripts.append("".join(_KEYS.get(a, a) for a in args[k:end]))
                masked.update(range(k, end))
            elif name == "if-shell" and k < end:
                runs.scripts.append(args[k])
                masked.add(k)
            elif name in ("run-shell", "pipe-pane"):
                masked |= _rest(args[:end], k, runs)
            elif k < end:
                masked |= _script_or_argv(args[:end], k, runs)
        start = end + 1
    return masked


def _screen(args: list[str], runs: Runs) -> set[int]:
    """``screen -X stuff TEXT`` types TEXT into a running session's shell (the other
    forms that run a command are wrappers)."""
    for k, arg in enumerate(args[:-2]):
        if arg == "-X" and args[k + 1] == "stuff":
            text = args[k + 2]
            for typed in ("\\n", "\\r", "^M", "^J"):
                text = text.replace(typed, "\n")
            runs.scripts.append(text)
            return {k + 2}
    return set()


RUNNERS: dict[str, Callable[[list[str], Runs], set[int]]] = {
    "script": _script,
    "flock": _flock,
    "expect": _expect,
    "at": _at,
    "batch": _at,
    "parallel": _parallel,
    "sem": _parallel,
    "tmux": _tmux,
    "screen": _screen,
}


def take_value(args: list[str], options: tuple[str, ...], out: list[str]) -> set[int]:
    """Move the values of ``options`` to ``out``; the indexes to show masked (an
    ``--opt=value`` word is masked after its ``=``)."""
    masked = set()
    for k, arg in enumerate(args):
        for opt in options:
            if arg == opt and k + 1 < len(args):
                out.append(args[k + 1])
                masked.add(k + 1)
            elif opt.startswith("--") and arg.startswith(opt + "="):
                out.append(arg[len(opt) + 1 :])
                masked.add(k)
            elif (
                len(opt) == 2
                and arg[:1] == "-"
                and arg[1:2] != "-"
                and arg[-1] == opt[1]
                and arg != opt
                and k + 1 < len(args)
            ):
                out.append(args[k + 1])  # a cluster ending in it: `su -lc CMD`
                masked.add(k + 1)
    return masked


# ---------------------------------------------------------------- what is printed

_PRINTF_DIRECTIVE = r"(%(?:%|[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*)?)?[a-zA-Z]))"


def printed(prog: str, args: list[str]) -> str | None:
    """What ``echo``/``printf`` print (escapes decoded where they decode them)."""
    if prog == "echo":
        k, escapes = 0, False
        while k < len(args) and re.fullmatch(r"-[neE]+", args[k]):
            escapes = "e" in args[k] or (escapes and "E" not in args[k])
            k += 1
        text = " ".join(args[k:])
        return ansi_c(text) if escapes else text
    if prog != "printf":
        return None
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or args[0].startswith("-v"):
        return ""  # `printf -v NAME …` assigns; it prints nothing
    pieces = re.split(_PRINTF_DIRECTIVE, args[0])
    rest, used, out = args[1:], 0, []
    for _ in range(64):  # the format is reused while arguments remain
        before = used
        for n, piece in enumerate(pieces):
            if n % 2 == 0:
                out.append(ansi_c(piece))
            elif piece == "%%":
                out.append("%")
            else:
                arg = rest[used] if used < len(rest) else ""
                used += 1
                out.append(ansi_c(arg) if piece.endswith("b") else arg)
        if used >= len(rest) or used == before:
            break
    return "".join(out)


_FILTERS = frozenset(["tee", "cat", "rev", "base64", "gbase64", "xxd", "openssl"])


def transform(prog: str, args: list[str]) -> str | None:
    """How ``prog`` turns its stdin into its stdout, when it reads stdin and bar can
    compute it: "same", "base64", "hex" or "rev"."""
    if prog not in _FILTERS:
        return None
    operands = [a for a in args if not a.startswith("-") or a == "-"]
    letters = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
    if prog == "tee" or (prog == "cat" and all(a == "-" for a in operands)):
        return "same"
    if prog == "rev" and not operands:
        return "rev"
    decoding = "--decode" in args or "d" in letters or "D" in letters
    if prog in ("base64", "gbase64") and not operands and decoding:
        return "base64"
    if prog == "xxd" and "r" in letters and "p" in letters and len(operands) <= 1:
        return "hex"
    if prog == "openssl" and args[:1] in (["base64"], ["enc"]) and "-d" in args:
        as_base64 = args[0] == "base64" or bool({"-a", "-base64"} & set(args))
        return "base64" if as_base64 and "-in" not in args else None
    return None


def decode(kind: str, text: str) -> str | None:
    """``text`` through the ``transform`` ``kind``; None if it does not decode."""
    if kind == "same":
        return text
    if kind == "rev":
        return "\n".join(line[::-1] for line in text.split("\n"))
    import binascii

    try:
        if kind == "base64":
            data = binascii.a2b_base64("".join(text.split()))
        else:
            data = binascii.unhexlify("".join(text.split()))
    except (binascii.Error, ValueError):
        return None
    return data.decode("utf-8", "replace")


_PATH_PRINTERS = frozenset({"pwd", "dirname", "realpath", "readlink", "basename"})
_GIT_DIRS = frozenset(
    {"--git-dir", "--git-common-dir", "--absolute-git-dir", "--show-superproject-working-tree"}
)


def reads_into(prog: str) -> bool:
    """Whether this module reads more into ``prog``'s words than the words: what it
    runs, prints or turns its input into."""
    return prog in RUNNERS or prog in _FILTERS or prog in _PATH_PRINTERS or prog in _PRINTERS


_PRINTERS = frozenset({"echo", "printf"})


def path_printed(prog: str, args: list[str]) -> str | None:
    """What a program that prints a path prints, as a path a rule can read: ``pwd`` is
    ``$PWD``; ``dirname X`` is X's directory (``X/..`` where X is the working or home
    directory, or ends in ``..``); ``realpath X`` and ``readlink -f X`` are X."""
    if prog == "git" and args == ["rev-parse", "--show-toplevel"]:
        return "$PWD"  # (a step runs at the top of its worktree)
    if prog == "git" and len(args) == 2 and args[0] == "rev-parse" and args[1] in _GIT_DIRS:
        return "$PWD/../.git"  # (a worktree's git directories are the repository's, outside)
    if prog not in _PATH_PRINTERS:
        return None
    operands = [a for a in args if not a.startswith("-")]
    if prog == "pwd":
        return "$PWD" if not operands else None
    if len(operands) != 1 or prog == "basename":
        return None
    path = operands[0]
    if prog == "readlink" and not any(a in ("-f", "-e", "-m", "--canonicalize") for a in args):
        return None
    if prog != "dirname":
        return path
    stripped = path.rstrip("/") or "/"
    if stripped in (
        "~",
        ".",
        "..",
        "$PWD",
        "${PWD}",
        "$HOME",
        "${HOME}",
        "$OLDPWD",
    ) or stripped.endswith(("/..", "/.")):
        return stripped + "/.."
    if "$" in stripped:
        return None  # the directory of a path only known when it runs
    return stripped.rsplit("/", 1)[0] or "/" if "/" in stripped else "."


# a pipeline that prints a home directory: getent passwd NAME | cut -d: -f6
_HOME_LOOKUP = re.compile(r"getent passwd(?: \S+)? \| cut (?:-d ?: -f ?6|-f ?6 -d ?:)")


def pipeline_printed(text: str) -> str | None:
    """What a pipeline (as rendered) prints, where that is a path a rule should see."""
    return "~" if _HOME_LOOKUP.fullmatch(text) else None
