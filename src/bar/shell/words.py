"""Normalising a simple command's words: what a policy rule is shown of it.

Pure functions over lists of words (no parser): wrappers such as ``sudo``, ``env`` or
``timeout DURATION`` are removed (``bar.shell.wrappers``), the program is reduced to its
base name, abbreviated long options are written out (``bar.shell.options``), and words
that are only data (the text of ``echo``, a commit message, a grep pattern, a prompt
given to a coding agent, the script of ``sh -c``) are replaced by ``PLACEHOLDER``. What
a command runs besides itself (the script of ``sh -c``, ``find -exec``, a git alias…)
is collected for the caller to analyse as commands of their own.
"""

from __future__ import annotations

import re

from bar.shell.options import LONG_OPTIONS, expand_long, git_config, git_setting
from bar.shell.programs import (
    RUNNERS,
    Runs,
    path_printed,
    printed,
    reads_into,
    take_value,
    transform,
)
from bar.shell.quoting import render
from bar.shell.wrappers import WRAPPERS, skip_options

PLACEHOLDER = "…"


def word_set(names: str) -> frozenset[str]:
    return frozenset(names.split())


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
SHELLS = word_set("sh bash zsh dash ksh mksh ash yash posh fish csh tcsh")
_ECHOES = word_set("echo printf logger notify-send")
# Variables whose value a program runs through a shell: `GIT_SSH_COMMAND='…' git fetch`
# (git, and the editor and pager of git and many other programs).
_COMMAND_VARIABLES = word_set(
    "GIT_SSH_COMMAND GIT_PROXY_COMMAND GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_PAGER "
    "GIT_EXTERNAL_DIFF EDITOR VISUAL PAGER"
)
# interpreters whose one-liners ``bar.shell.interpreters`` reads
_INTERPRETER = re.compile(
    r"(?:python|pypy|perl|php)[0-9.]*|ruby|node|nodejs|bun|deno|lua(?:jit|[0-9.]*)|[gmn]?awk"
)
_DECLARATIONS = word_set("export declare typeset local readonly")
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
# Options whose value is the program git runs at the other end of a transport (through
# a shell, on this machine for a local remote).
_GIT_PROGRAM_OPTIONS = {
    "push": ("--receive-pack", "--exec"),
    "send-pack": ("--receive-pack", "--exec"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("--upload-pack", "-u"),
    "ls-remote": ("--upload-pack",),
    "fetch-pack": ("--upload-pack", "--exec"),
    "archive": ("--exec",),
}
_GIT_GLOBAL_WITH_VALUE = word_set(
    "-C -c --git-dir --work-tree --namespace --super-prefix --config-env"
)


def _program(word: str) -> str:
    """``/usr/bin/rm`` -> ``rm``; a word built by a substitution is left alone."""
    if "/" in word and "$(" not in word and "`" not in word:
        return word.rstrip("/").rsplit("/", 1)[-1] or word
    return word


class Norm(Runs):
    """A command after normalising: what to show and what else it runs (``Runs``)."""

    __slots__ = ("stdout", "transform", "words", "wrapped")

    def __init__(self, words: list[str], wrapped: list[str] | None) -> None:
        super().__init__()
        self.words = words
        self.wrapped = wrapped
        self.stdout: str | None = None  # what it prints, when known statically
        self.transform: str | None = None  # how it turns stdin into stdout (programs.decode)


def normalise(words: list[str]) -> Norm:
    words = list(words)
    i, wrappers, env = 0, [], {}
    while True:
        while i < len(words) and _ASSIGNMENT.match(words[i]):
            name, _, value = words[i].partition("=")
            env[name] = value
            i += 1
        if i >= len(words):
            break
        skip = WRAPPERS.get(_program(words[i]))
        j = skip(words, i) if skip is not None else None
        if j is None or j >= len(words):
            break
        wrappers.append(i)
        i = j
    if i >= len(words):  # only assignments
        norm = Norm(words, None)
        _command_variables(env, norm.scripts)
        return norm
    prog = _program(words[i])
    rest = words[i + 1 :]
    if prog.startswith("git-") and prog[4:] and prog[4:] not in _GIT_HELPERS:
        prog, rest = "git", [prog[4:], *rest]  # `git-reset --hard` is `git reset --hard`
    norm = Norm([prog], None)
    _command_variables(env, norm.scripts)
    _apply_program(prog, rest, norm, env)
    if i:
        prefix = [_program(w) if k in wrappers else w for k, w in enumerate(words[:i])]
        norm.wrapped = prefix + norm.words
    return norm


# programs named git-… that are no git command of that name
_GIT_HELPERS = frozenset({"lfs", "annex", "crypt", "secret"})


def read_as_words(prog: str) -> bool:
    """Whether ``normalise`` shows a program called ``prog`` (a base name) as its words
    alone, whatever its arguments: no wrapper, shell, interpreter or other program whose
    words it masks, expands or reads a command from (``_apply_program``'s last case)."""
    return not (
        prog in WRAPPERS
        or prog in LONG_OPTIONS
        or prog in SHELLS
        or prog in _ECHOES
        or prog in _SPECIAL
        or prog in _GREPS
        or prog in _AGENTS
        or prog in _DECLARATIONS
        or prog in _MESSAGE_OPTIONS
        or prog.startswith("git-")
        or _INTERPRETER.fullmatch(prog) is not None
        or _ASSIGNMENT.match(prog) is not None
        or reads_into(prog)
    )


# the programs ``_apply_program`` names one by one
_SPECIAL = word_set("eval alias trap su runuser ssh watch find git")


def _command_variables(env: dict[str, str], scripts: list[str]) -> None:
    """The values of ``_COMMAND_VARIABLES`` are scripts."""
    scripts += [value for name, value in env.items() if name in _COMMAND_VARIABLES and value]


def _apply_program(prog: str, args: list[str], norm: Norm, env: dict[str, str]) -> None:
    """Mask data arguments and find scripts and nested commands of ``prog`` (``env``:
    the variables assigned for it)."""
    shown = norm.words
    if prog in LONG_OPTIONS:
        args = expand_long(args, LONG_OPTIONS[prog])
    norm.transform = transform(prog, args)
    norm.stdout = path_printed(prog, args)
    if prog in _ECHOES:
        shown += [PLACEHOLDER] * len(args)
        norm.stdout = printed(prog, args)
    elif prog in SHELLS:
        mode, k = _shell_mode(args)
        if mode == "c":
            norm.scripts.append(args[k])
            if k + 1 < len(args):  # sh -c 'SCRIPT' $0 $1…: the script with them put in
                norm.scripts.append(positional(args[k], args[k + 1], args[k + 2 :]))
            elif _POSITIONAL.search(args[k]):  # none given: "$1" is empty (`rm -rf "$1"/*`)
                norm.scripts.append(positional(args[k], prog, []))
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
        shown += _masked(args, take_value(args, ("-c", "--command"), norm.scripts))
    elif prog in RUNNERS:
        shown += _masked(args, RUNNERS[prog](args, norm))
    elif prog == "ssh":
        k = skip_options(["ssh", *args], 0, "BbcDEeFIiJLlmOoPpQRSWw") - 1
        if k + 1 < len(args):
            norm.scripts.append(" ".join(args[k + 1 :]))
            args = [*args[: k + 1], *[PLACEHOLDER] * len(args[k + 1 :])]
        shown += args
    elif prog == "watch":
        k = skip_options(["watch", *args], 0, "n", frozenset({"--interval"})) - 1
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
    elif _INTERPRETER.fullmatch(prog):
        from bar.shell.interpreters import code_of, language, runs  # (only when one runs)

        shown += args
        lang = language(prog)
        code = code_of(lang, args) if lang is not None else None
        if lang is not None and code is not None:
            scripts, commands = runs(lang, code)
            norm.scripts += scripts
            norm.nested += commands
        elif lang is not None and all(a.startswith("-") for a in args):  # code on stdin
            norm.stdin_code = lang
    elif prog in _GREPS:
        shown += _mask_patterns(args)
    elif prog in _AGENTS:
        shown += [_mask_agent_word(a) for a in args]
    elif prog == "git":
        shown += _git(args, norm, env)
    elif prog in _DECLARATIONS:  # `export GIT_SSH_COMMAND='…'`
        assigned = (arg.partition("=") for arg in args if "=" in arg)
        _command_variables({name: value for name, _, value in assigned}, norm.scripts)
        shown += args
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


def _masked(args: list[str], masked: set[int]) -> list[str]:
    """``args`` with those at the ``masked`` indexes shown as ``PLACEHOLDER`` (an
    ``--opt=value`` word keeps its ``--opt=``)."""
    shown = list(args)
    for k in masked:
        arg = args[k]
        shown[k] = arg.split("=", 1)[0] + "=" + PLACEHOLDER if arg[:2] == "--" else PLACEHOLDER
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
                roots = [a for a in args[:k] if not a.startswith(("-", "(", "!"))][:1]
                if roots and "{}" in args[k + 1 : end]:  # {} is a path under the root
                    nested.append(
                        [
                            f"{roots[0].rstrip('/')}/{{}}" if a == "{}" else a
                            for a in args[k + 1 : end]
                        ]
                    )
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


def _git(args: list[str], norm: Norm, env: dict[str, str]) -> list[str]:
    """Masks messages and patterns, and finds what git runs: settings that define an
    alias or a command (``core.sshCommand``…), given with ``-c KEY=VALUE`` or
    ``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` or set with ``git config``; a call of
    such an alias; a transport program (``push --receive-pack=CMD``)."""
    head, aliases = list(args), {}

    def define(key: str, value: str) -> bool:
        if key.lower().startswith("alias."):
            aliases[key[6:].lower()] = value
        return git_setting(key, value, norm.scripts, norm.nested)

    for name, key in env.items():
        if name.startswith("GIT_CONFIG_KEY_"):
            define(key, env.get("GIT_CONFIG_VALUE_" + name[15:], ""))
    k = 0
    while k < len(args) and args[k].startswith("-"):
        if args[k] == "-c" and k + 1 < len(args):
            key, eq, value = args[k + 1].partition("=")
            if eq and value and define(key, value):  # (an empty value turns it off)
                head[k + 1] = key + "=" + PLACEHOLDER
        k += 2 if args[k] in _GIT_GLOBAL_WITH_VALUE else 1
    if k >= len(args):
        return head
    sub = args[k]
    alias = aliases.get(sub.lower())
    # `git -c alias.p=push p --force` runs `git push --force`. The command is still shown
    # as written: git ignores an alias named like one of its own commands.
    if alias is not None and alias.startswith("!"):
        norm.scripts.append(" ".join([alias[1:], *args[k + 1 :]]))
    elif alias is not None:
        norm.nested.append(["git", *alias.split(), *args[k + 1 :]])
    rest = expand_long(args[k + 1 :], LONG_OPTIONS.get("git " + sub))
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
    elif sub == "config":
        setting = git_config(rest, norm.scripts, norm.nested)
        shown = _masked(rest, {setting} if setting is not None else set())
    elif sub in _GIT_PROGRAM_OPTIONS:
        shown = _masked(rest, take_value(rest, _GIT_PROGRAM_OPTIONS[sub], norm.scripts))
    else:
        shown = _mask_values(rest, frozenset({"--grep"}))
    return [*head[: k + 1], *shown]


_POSITIONAL = re.compile(r"\$(?:\{[1-9@*][0-9]*\}|[1-9@*])")


def positional(script: str, zero: str, args: list[str]) -> str:
    """``script`` with its positional parameters (``$0``, ``$1``…, ``$@``) put in."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in ("@", "*"):
            return " ".join(args)
        k = int(name)
        return zero if k == 0 else args[k - 1] if k <= len(args) else ""

    # "$@" is each argument a word of its own, quoted as it was given
    script = re.sub(r'"\$(?:@|\{@\})"', lambda _: render(args) if args else "", script)
    return re.sub(r"\$\{([0-9]+|[@*])\}|\$([0-9]|[@*])", value, script)
