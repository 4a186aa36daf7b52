"""Normalising a simple command's words: what a policy rule is shown of it.

Pure functions over lists of words (no parser): wrappers such as ``sudo``, ``env`` or
``timeout DURATION`` are removed, the program is reduced to its base name, and words
that are only data (the text of ``echo``, a commit message, a grep pattern, a prompt
given to a coding agent, the script of ``sh -c``) are replaced by ``PLACEHOLDER``. What
a command runs besides itself (the script of ``sh -c``, ``find -exec``…) is collected
for the caller to analyse as commands of their own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

PLACEHOLDER = "…"


def word_set(names: str) -> frozenset[str]:
    return frozenset(names.split())


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
SHELLS = word_set("sh bash zsh dash ksh mksh ash yash posh fish csh tcsh")
_ECHOES = word_set("echo printf logger notify-send")
_GREPS = word_set("grep egrep fgrep zgrep rg ag ack ack-grep pcregrep pcre2grep ggrep")
_AGENTS = word_set(
    "claude codex gemini aider opencode cursor-agent amp goose llm copilot qwen crush ollama"
)
# Programs whose message-like option values are data; value options per program.
_MESSAGE_OPTIONS = {
    "gh": word_set("-t --title -b --body -m --message --notes"),
    "glab": word_set("-t --title -d --description -m --message"),
    "hg": word_set("-m --message"),
    "jj": word_set("-m --message"),
    "svn": word_set("-m --message"),
}
_GIT_MESSAGE_COMMANDS = word_set("commit merge tag stash notes")
_GIT_GLOBAL_WITH_VALUE = word_set(
    "-C -c --git-dir --work-tree --namespace --super-prefix --config-env"
)


def _program(word: str) -> str:
    """``/usr/bin/rm`` -> ``rm``; a word built by a substitution is left alone."""
    if "/" in word and "$(" not in word and "`" not in word:
        return word.rstrip("/").rsplit("/", 1)[-1] or word
    return word


def _skip_options(
    words: list[str], i: int, short: str = "", long: frozenset[str] = frozenset()
) -> int:
    """Index of the first word after the options of the program at ``i``.

    ``short`` lists the short options that take a value, ``long`` the long ones that
    take a separate value (``--user root``; ``--user=root`` is one word anyway).
    """
    j = i + 1
    while j < len(words):
        word = words[j]
        if word == "--":
            return j + 1
        if word.startswith("--"):
            j += 2 if ("=" not in word and word in long) else 1
        elif word.startswith("-") and len(word) > 1:
            for k, ch in enumerate(word[1:], 1):
                if ch in short:
                    if k == len(word) - 1:
                        j += 1  # the value is the next word
                    break
            j += 1
        else:
            break
    return j


def _wrap_sudo(words: list[str], i: int) -> int | None:
    long = word_set("--user --group --prompt --close-from --chdir --host --role --type")
    return _skip_options(words, i, "ugpCDrtTUR", long | {"--other-user", "--chroot"})


def _wrap_doas(words: list[str], i: int) -> int | None:
    return _skip_options(words, i, "uC")


def _wrap_env(words: list[str], i: int) -> int | None:
    j = i + 1
    while j < len(words):
        word = words[j]
        if word == "--":
            return j + 1
        if word in ("-S", "--split-string") and j + 1 < len(words):
            words[j : j + 2] = words[j + 1].split()  # env splits the string into words
            continue
        if word.startswith(("-S", "--split-string=")):
            value = word[2:] if word.startswith("-S") else word.split("=", 1)[1]
            words[j : j + 1] = value.split()
            continue
        if word in ("-u", "-C", "--unset", "--chdir"):
            j += 2
        elif word.startswith("-"):
            j += 1
        else:
            break
    return j


def _wrap_timeout(words: list[str], i: int) -> int | None:
    j = _skip_options(words, i, "sk", frozenset({"--signal", "--kill-after"}))
    return j + 1  # the duration


def _wrap_nice(words: list[str], i: int) -> int | None:
    return _skip_options(words, i, "n", frozenset({"--adjustment"}))


def _wrap_command(words: list[str], i: int) -> int | None:
    j = _skip_options(words, i)
    if any(set(w[1:]) & {"v", "V"} for w in words[i + 1 : j] if w.startswith("-")):
        return None  # `command -v rm` looks rm up; it does not run it
    return j


def _wrap_xargs(words: list[str], i: int) -> int | None:
    long = word_set("--arg-file --delimiter --max-args --max-procs --max-chars --process-slot-var")
    return _skip_options(words, i, "adEILnPs", long)


def _wrap_chroot(words: list[str], i: int) -> int | None:
    return _skip_options(words, i, "", frozenset({"--userspec", "--groups"})) + 1


def _wrap_simple(short: str = "", long: Iterable[str] = ()) -> Callable[[list[str], int], int]:
    frozen = frozenset(long)
    return lambda words, i: _skip_options(words, i, short, frozen)


_WRAPPERS: dict[str, Callable[[list[str], int], int | None]] = {
    "sudo": _wrap_sudo,
    "doas": _wrap_doas,
    "env": _wrap_env,
    "nohup": _wrap_simple(),
    "timeout": _wrap_timeout,
    "gtimeout": _wrap_timeout,
    "nice": _wrap_nice,
    "command": _wrap_command,
    "builtin": _wrap_simple(),
    "exec": _wrap_simple("a"),
    "xargs": _wrap_xargs,
    "time": _wrap_simple("fo", ("--format", "--output")),
    "stdbuf": _wrap_simple("ioe", ("--input", "--output", "--error")),
    "ionice": _wrap_simple("cnp", ("--class", "--classdata", "--pid")),
    "chroot": _wrap_chroot,
    "busybox": _wrap_simple(),
    "unbuffer": _wrap_simple(),
    "caffeinate": _wrap_simple("tw"),
}


class Norm:
    """A command after normalising: what to show and what else it runs."""

    __slots__ = ("nested", "scripts", "stdin_shell", "stdout", "words", "wrapped")

    def __init__(self, words: list[str], wrapped: list[str] | None) -> None:
        self.words = words
        self.wrapped = wrapped
        self.scripts: list[str] = []
        self.nested: list[list[str]] = []
        self.stdout: str | None = None  # what it prints, when known statically
        self.stdin_shell = False  # a shell that reads its script from stdin


def normalise(words: list[str]) -> Norm:
    words = list(words)
    i, wrappers = 0, []
    while True:
        while i < len(words) and _ASSIGNMENT.match(words[i]):
            i += 1
        if i >= len(words):
            break
        skip = _WRAPPERS.get(_program(words[i]))
        j = skip(words, i) if skip is not None else None
        if j is None or j >= len(words):
            break
        wrappers.append(i)
        i = j
    if i >= len(words):  # only assignments
        return Norm(words, None)
    prog = _program(words[i])
    norm = Norm([prog], None)
    _apply_program(prog, words[i + 1 :], norm)
    if i:
        prefix = [_program(w) if k in wrappers else w for k, w in enumerate(words[:i])]
        norm.wrapped = prefix + norm.words
    return norm


def _apply_program(prog: str, args: list[str], norm: Norm) -> None:
    """Mask data arguments and find scripts and nested commands of ``prog``."""
    shown = norm.words
    if prog in _ECHOES:
        shown += [PLACEHOLDER] * len(args)
        norm.stdout = " ".join(a for a in args if prog != "echo" or a not in ("-n", "-e", "-E"))
    elif prog in SHELLS:
        mode, k = _shell_mode(args)
        if mode == "c":
            norm.scripts.append(args[k])
            args = [*args[:k], PLACEHOLDER, *args[k + 1 :]]
        norm.stdin_shell = mode == "stdin"
        shown += args
    elif prog == "eval":
        norm.scripts.append(" ".join(args))
        shown += [PLACEHOLDER] * len(args)
    elif prog == "alias":  # `alias x='rm -rf /'` defines a script that `x` runs
        for arg in args:
            name, eq, value = arg.partition("=")
            if eq:
                norm.scripts.append(value)
            shown.append(name + eq + PLACEHOLDER if eq else arg)
    elif prog == "trap" and args and not args[0].startswith("-"):
        norm.scripts.append(args[0])
        shown += [PLACEHOLDER, *args[1:]]
    elif prog in ("su", "runuser"):
        shown += _take_value(args, ("-c", "--command"), norm.scripts)
    elif prog == "ssh":
        k = _skip_options(["ssh", *args], 0, "BbcDEeFIiJLlmOoPpQRSWw") - 1
        if k + 1 < len(args):
            norm.scripts.append(" ".join(args[k + 1 :]))
            args = [*args[: k + 1], *[PLACEHOLDER] * len(args[k + 1 :])]
        shown += args
    elif prog == "watch":
        k = _skip_options(["watch", *args], 0, "n", frozenset({"--interval"})) - 1
        if k < len(args):
            if any(a in ("-x", "--exec") for a in args[:k]):
                norm.nested.append(args[k:])
            else:
                norm.scripts.append(" ".join(args[k:]))
                args = [*args[:k], *[PLACEHOLDER] * len(args[k:])]
        shown += args
    elif prog == "find":
        shown += args
        _find_exec(args, norm.nested)
    elif prog in _GREPS:
        shown += _mask_patterns(args)
    elif prog in _AGENTS:
        shown += [_mask_agent_word(a) for a in args]
    elif prog == "git":
        shown += _mask_git(args)
    elif prog in _MESSAGE_OPTIONS:
        shown += _mask_values(args, _MESSAGE_OPTIONS[prog])
    else:
        shown += args


def _shell_mode(args: list[str]) -> tuple[str, int]:
    """("c", index of the script) | ("stdin", -1) | ("file", index of the file)."""
    has_c = reads_stdin = False
    j = 0
    while j < len(args):
        arg = args[j]
        if arg == "--":
            j += 1
            break
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            j += 2
        elif arg.startswith("--"):
            j += 1
        elif arg[:1] in ("-", "+") and len(arg) > 1:
            has_c = has_c or (arg[0] == "-" and "c" in arg)
            reads_stdin = reads_stdin or (arg[0] == "-" and "s" in arg)
            j += 1
        else:
            break
    if has_c and j < len(args):
        return "c", j
    if reads_stdin or j >= len(args) or args[j] == "-":
        return "stdin", -1
    return "file", j


def _take_value(args: list[str], options: tuple[str, ...], out: list[str]) -> list[str]:
    """Copy ``args`` with the values of ``options`` moved to ``out`` and masked."""
    shown = list(args)
    for k, arg in enumerate(args):
        for opt in options:
            if arg == opt and k + 1 < len(args):
                out.append(args[k + 1])
                shown[k + 1] = PLACEHOLDER
            elif opt.startswith("--") and arg.startswith(opt + "="):
                out.append(arg[len(opt) + 1 :])
                shown[k] = opt + "=" + PLACEHOLDER
            elif (
                len(opt) == 2
                and arg[:1] == "-"
                and arg[1:2] != "-"
                and arg[-1] == opt[1]
                and arg != opt
                and k + 1 < len(args)
            ):
                out.append(args[k + 1])  # a cluster ending in it: `su -lc CMD`
                shown[k + 1] = PLACEHOLDER
    return shown


def _find_exec(args: list[str], nested: list[list[str]]) -> None:
    k = 0
    while k < len(args):
        if args[k] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = k + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            if end > k + 1:
                nested.append(args[k + 1 : end])
            k = end
        k += 1


def _mask_patterns(args: list[str]) -> list[str]:
    """grep-like: every operand and every ``-e`` value is data."""
    shown, after_dashes, value_next = [], False, False
    for arg in args:
        if value_next or after_dashes or not arg.startswith("-") or arg == "-":
            shown.append(PLACEHOLDER)
            value_next = False
        elif arg == "--":
            shown.append(arg)
            after_dashes = True
        elif arg in ("-e", "--regexp"):
            shown.append(arg)
            value_next = True
        elif arg.startswith("--regexp="):
            shown.append("--regexp=" + PLACEHOLDER)
        else:
            shown.append(arg)
    return shown


def _mask_agent_word(arg: str) -> str:
    if not arg.startswith("-"):
        return PLACEHOLDER
    if arg.startswith("--") and "=" in arg:
        return arg.split("=", 1)[0] + "=" + PLACEHOLDER
    return arg


def _mask_values(args: list[str], options: frozenset[str]) -> list[str]:
    shown = list(args)
    for k, arg in enumerate(args):
        if arg in options and k + 1 < len(args):
            shown[k + 1] = PLACEHOLDER
        elif arg.startswith("--") and arg.split("=", 1)[0] in options and "=" in arg:
            shown[k] = arg.split("=", 1)[0] + "=" + PLACEHOLDER
    return shown


def _mask_git(args: list[str]) -> list[str]:
    k = 0
    while k < len(args) and args[k].startswith("-"):
        k += 2 if args[k] in _GIT_GLOBAL_WITH_VALUE else 1
    if k >= len(args):
        return list(args)
    sub, rest = args[k], args[k + 1 :]
    if sub == "grep":
        shown = _mask_patterns(rest)
    elif sub in _GIT_MESSAGE_COMMANDS:
        shown = _mask_values(rest, frozenset({"-m", "--message", "--grep"}))
        for j, arg in enumerate(rest):
            if len(arg) > 2 and arg[0] == "-" and arg[1] != "-" and "m" in arg:
                at = arg.index("m")
                if at == len(arg) - 1 and j + 1 < len(rest):
                    shown[j + 1] = PLACEHOLDER  # `-am MSG`
                elif at < len(arg) - 1:
                    shown[j] = arg[: at + 1] + PLACEHOLDER  # `-mMSG`
    else:
        shown = _mask_values(rest, frozenset({"--grep"}))
    return [*args[: k + 1], *shown]
