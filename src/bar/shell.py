"""What a shell command line will run, as plain text that policy rules can match.

A line is parsed with tree-sitter-bash and turned into *units*. Each simple command the
shell would run is one unit, wherever it sits: in a list (``;``, ``&&``, ``||``), a
pipeline, a subshell, a ``{ }`` group, a function body, ``$(…)``/backticks (also inside
double quotes and ``${x:-…}``), ``<(…)``, the script of ``sh -c``/``bash -c``/``eval``/
``su -c``/``ssh host CMD``/``watch``, a heredoc or here-string fed to a shell, the
``echo``/``printf``/``cat <<EOF`` output piped into a shell, and ``find -exec``.

A command is rendered as its words, unquoted, joined by single spaces, after:

* wrappers are removed (``sudo``/``doas``/``env`` with their options, leading
  ``VAR=value``, ``nohup``, ``timeout DURATION``, ``nice``, ``command``, ``exec``,
  ``xargs``, ``time``, ``stdbuf``, ``ionice``, ``chroot DIR``, ``busybox``);
* the program is reduced to its base name (``/usr/bin/rm`` -> ``rm``);
* words that are only data are replaced by ``…``: the text of ``echo``/``printf``, a
  commit or tag message, a grep pattern, a prompt given to a coding agent, the script
  of ``sh -c`` (its commands are units of their own);
* a word containing whitespace is shown single-quoted; redirections follow as single
  tokens such as ``>/dev/sda``, ``2>&1``, ``<<EOF``, ``<<<…`` (heredoc bodies are
  never shown).

A unit has *views*: the command as above, then (if wrappers were removed) the whole
command with its wrappers (``sudo -u x rm -rf /``), so rules can see either. A pipeline
is one more unit whose view joins the views of its stages with `` | `` (so a rule can
see ``curl … | sh``). A function definition is a unit ``name() { body }``.

Lines made only of plain characters skip tree-sitter (see ``_is_plain``); the test
suite checks that both paths give identical units wherever tree-sitter accepts the
line. When tree-sitter reports a syntax
error, units are still built from what it recovered, the raw text is added as extra
units (whole, and cut at ``;``, ``&``, ``|``, parentheses and backticks with quotes
dropped), and ``Analysis.error`` says why, so the caller can apply its own policy.

No dataclasses here: on the hook's hot path ``import dataclasses`` costs about as
much as the whole rest of this module (it imports ``inspect``), so records are small
slotted classes.
"""

from __future__ import annotations

import itertools
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from tree_sitter import Node, Parser

PLACEHOLDER = "…"
_MAX_SCRIPT_DEPTH = 8  # sh -c inside eval inside …
_MAX_NODE_DEPTH = 120  # nesting inside one script; keeps Python's stack safe
_MAX_BRACE_WORDS = 64


class Unit:
    """One thing rules are matched against: ``views`` are tried in order.

    ``parts`` (pipelines only) are the indexes of the stage units, so a rule that
    already matched a stage need not report the whole pipeline again.
    """

    __slots__ = ("parts", "views")
    views: tuple[str, ...]
    parts: tuple[int, ...]

    def __init__(self, views: tuple[str, ...], parts: tuple[int, ...] = ()) -> None:
        self.views = views
        self.parts = parts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unit) and (self.views, self.parts) == (other.views, other.parts)

    def __hash__(self) -> int:
        return hash((self.views, self.parts))

    def __repr__(self) -> str:
        return f"Unit(views={self.views!r}, parts={self.parts!r})"


class Analysis:
    """The units of a line in execution order, and why the line was not fully
    understood (``error``), if it was not."""

    __slots__ = ("error", "units")
    units: tuple[Unit, ...]
    error: str | None

    def __init__(self, units: tuple[Unit, ...], error: str | None) -> None:
        self.units = units
        self.error = error

    def texts(self) -> list[str]:
        """Every view of every unit, for tests and debugging."""
        return [view for unit in self.units for view in unit.views]

    def __repr__(self) -> str:
        return f"Analysis(units={self.units!r}, error={self.error!r})"


def analyse_line(line: str, *, fast: bool = True) -> Analysis:
    """Units of a shell command line. ``fast=False`` always uses tree-sitter."""
    analyser = _Analyser(fast)
    try:
        analyser.script(line, 0)
    except RecursionError:  # scripts within scripts, each nested to the limit
        analyser.fail("nested too deeply")
        analyser.raw(line)
    return analyser.result()


def analyse_argv(argv: Sequence[str]) -> Analysis:
    """Units of a command given as an argument vector (no shell involved)."""
    analyser = _Analyser(True)
    try:
        if argv:
            analyser.command(list(argv), [], None, 0)
    except RecursionError:
        analyser.fail("nested too deeply")
        analyser.raw(render(argv))
    return analyser.result()


def render(words: Iterable[str]) -> str:
    return " ".join(_quote(word) for word in words)


def _quote(word: str) -> str:
    if not word:
        return "''"
    if _has_blank(word):
        return "'" + word.replace("'", "'\\''") + "'"
    return word


def _has_blank(word: str) -> bool:
    """Whitespace outside ``$(…)``/``<(…)``/``>(…)``: a substitution is shown as its
    rendered commands, whose own words are already quoted."""
    if not any(ch.isspace() for ch in word):
        return False
    depth, k = 0, 0
    while k < len(word):
        ch = word[k]
        if ch in "$<>" and word[k + 1 : k + 2] == "(":
            depth += 1
            k += 2
            continue
        if depth and ch == "(":
            depth += 1
        elif depth and ch == ")":
            depth -= 1
        elif not depth and ch.isspace():
            return True
        k += 1
    return False


def _set(names: str) -> frozenset[str]:
    return frozenset(names.split())


# ---------------------------------------------------------------- the fast path

# A line of only these characters holds no quoting, expansion, redirection, comment,
# brace or separator, so bash splits it on blanks into the words of one simple command.
# `*` and `?` may glob, `~` may expand, and `%`, `^` and `@` mean nothing to bash
# outside interactive history and job control; every path here keeps such words as
# written, so they are the same words either way. Reserved words are the only other
# syntax such a line can hold, and those lines go to the parser.
_PLAIN = re.compile(r"[A-Za-z0-9_\-./:=@%+,~^*? \t]*")
_RESERVED = _set(
    "if then else elif fi case esac for select while until do done in function time "
    "coproc declare typeset export local readonly unset"
)


def _is_plain(text: str) -> bool:
    return _PLAIN.fullmatch(text) is not None and _RESERVED.isdisjoint(text.split())


# ------------------------------------------------------------------ normalising

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
SHELLS = _set("sh bash zsh dash ksh mksh ash yash posh fish csh tcsh")
_ECHOES = _set("echo printf logger notify-send")
_GREPS = _set("grep egrep fgrep zgrep rg ag ack ack-grep pcregrep pcre2grep ggrep")
_AGENTS = _set(
    "claude codex gemini aider opencode cursor-agent amp goose llm copilot qwen crush ollama"
)
# Programs whose message-like option values are data; value options per program.
_MESSAGE_OPTIONS = {
    "gh": _set("-t --title -b --body -m --message --notes"),
    "glab": _set("-t --title -d --description -m --message"),
    "hg": _set("-m --message"),
    "jj": _set("-m --message"),
    "svn": _set("-m --message"),
}
_GIT_MESSAGE_COMMANDS = _set("commit merge tag stash notes")
_GIT_GLOBAL_WITH_VALUE = _set("-C -c --git-dir --work-tree --namespace --super-prefix --config-env")


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
    long = _set("--user --group --prompt --close-from --chdir --host --role --type")
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
    long = _set("--arg-file --delimiter --max-args --max-procs --max-chars --process-slot-var")
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


class _Norm:
    """A command after normalising: what to show and what else it runs."""

    __slots__ = ("nested", "scripts", "stdin_shell", "stdout", "words", "wrapped")

    def __init__(self, words: list[str], wrapped: list[str] | None) -> None:
        self.words = words
        self.wrapped = wrapped
        self.scripts: list[str] = []
        self.nested: list[list[str]] = []
        self.stdout: str | None = None  # what it prints, when known statically
        self.stdin_shell = False  # a shell that reads its script from stdin


def _normalise(words: list[str]) -> _Norm:
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
        return _Norm(words, None)
    prog = _program(words[i])
    norm = _Norm([prog], None)
    _apply_program(prog, words[i + 1 :], norm)
    if i:
        prefix = [_program(w) if k in wrappers else w for k, w in enumerate(words[:i])]
        norm.wrapped = prefix + norm.words
    return norm


def _apply_program(prog: str, args: list[str], norm: _Norm) -> None:
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


# ------------------------------------------------------------------- the walker


class _Emitted:
    """What a pipeline needs to know about one of its stages."""

    __slots__ = ("index", "stdin_shell", "stdout", "text", "wrapped")

    def __init__(
        self,
        index: int | None,
        text: str,
        stdout: str | None,
        stdin_shell: bool,
        wrapped: str | None = None,
    ) -> None:
        self.index = index
        self.text = text
        self.wrapped = wrapped or text
        self.stdout = stdout
        self.stdin_shell = stdin_shell


class _Analyser:
    def __init__(self, fast: bool) -> None:
        self.fast = fast
        self.units: list[Unit] = []
        self.error: str | None = None

    def result(self) -> Analysis:
        return Analysis(tuple(self.units), self.error)

    def add(self, views: tuple[str, ...], parts: tuple[int, ...] = ()) -> int:
        self.units.append(Unit(views, parts))
        return len(self.units) - 1

    def fail(self, why: str) -> None:
        if self.error is None:
            self.error = why

    def script(self, text: str, depth: int) -> str:
        """Analyse ``text`` as a shell script; return its rendering."""
        if depth > _MAX_SCRIPT_DEPTH:
            self.fail("scripts nested too deeply")
            self.raw(text)
            return PLACEHOLDER
        if self.fast and _is_plain(text):
            words = text.split()
            return self.command(words, [], None, depth).text if words else ""
        try:
            parser = _parser()
        except Exception as exc:  # a broken install must not disable the policy
            self.fail(f"shell parser unavailable ({type(exc).__name__})")
            self.raw(text)
            return text
        source = text.encode("utf-8", "surrogatepass")
        root = parser.parse(_parser_safe(text, source)).root_node
        walker = _Tree(self, source, depth)
        rendered = walker.seq(root, 0)
        if root.has_error:
            self.fail("syntax error")
        if walker.too_deep:
            self.fail("nested too deeply")
        if root.has_error or walker.too_deep:
            self.raw(text)
        return rendered

    def raw(self, text: str) -> None:
        """Add the raw text as units: a conservative view of what was not understood."""
        seen = {view for unit in self.units for view in unit.views}
        pieces = [text, *re.split(_RAW_SPLIT, text)]
        for k, piece in enumerate(pieces):
            if k:
                piece = piece.replace('"', "").replace("'", "").replace("\\", "")
            flat = " ".join(piece.split())
            if flat and flat not in seen:
                seen.add(flat)
                self.add((flat,))

    def command(
        self, words: list[str], redirects: list[str], stdin: str | None, depth: int
    ) -> _Emitted:
        norm = _normalise(words)
        suffix = "".join(" " + r for r in redirects)
        text = (render(norm.words) + suffix).strip()
        views = (text,) if norm.wrapped is None else (text, render(norm.wrapped) + suffix)
        index = self.add(views) if text else None
        for script in norm.scripts:
            self.script(script, depth + 1)
        for nested in norm.nested:
            if depth <= _MAX_SCRIPT_DEPTH:
                self.command(nested, [], None, depth + 1)
        if norm.stdin_shell and stdin is not None:
            self.script(stdin, depth + 1)
        stdout = norm.stdout
        if norm.words == ["cat"] and stdin is not None:
            stdout = stdin
        return _Emitted(index, text, stdout, norm.stdin_shell, views[-1])

    def pipeline(self, stages: list[_Emitted], depth: int) -> str:
        for before, stage in itertools.pairwise(stages):
            if stage.stdin_shell and before.stdout is not None:
                self.script(before.stdout, depth + 1)
        text = " | ".join(stage.text for stage in stages)
        wrapped = " | ".join(stage.wrapped for stage in stages)
        parts = tuple(stage.index for stage in stages if stage.index is not None)
        if len(stages) > 1:
            self.add((text,) if wrapped == text else (text, wrapped), parts)
        return text


# tree-sitter-bash 0.25 can crash the process (SIGSEGV) on `{` followed by a 4-byte
# UTF-8 character (tree-sitter/tree-sitter-bash#337). Such characters, and lone
# surrogates, are parsed as stand-ins of the same byte length that shell syntax treats
# alike (ordinary word characters), so node offsets still index the original text.
_UNSAFE_FOR_PARSER = "[\U00010000-\U0010ffff\ud800-\udfff]"


def _parser_safe(text: str, source: bytes) -> bytes:
    if text.isascii() or re.search(_UNSAFE_FOR_PARSER, text) is None:
        return source
    # 4 bytes -> two 2-byte characters; a surrogate (3 bytes) -> U+FFFD (3 bytes)
    safe = re.sub(
        _UNSAFE_FOR_PARSER, lambda m: "\u00a4\u00a4" if ord(m.group()) > 0xFFFF else "\ufffd", text
    )
    return safe.encode("utf-8")


_RAW_SPLIT = r"&&|\|\||\$\(|[;&|()`{}\n]"

_parser_cache: list[Parser] = []


def _parser() -> Parser:
    """The tree-sitter parser, loaded on first use.

    The two compiled modules are loaded straight from their package directories:
    ``import tree_sitter`` imports ``typing`` and ``import tree_sitter_bash`` imports
    ``importlib.resources``, which together cost several times more than the parser
    itself, for things bar never uses. Anything unexpected falls back to the imports.
    """
    if _parser_cache:
        return _parser_cache[0]
    try:
        binding = _extension("tree_sitter")
        parser: Parser = binding.Parser(binding.Language(_extension("tree_sitter_bash").language()))
    except Exception:
        import tree_sitter
        import tree_sitter_bash

        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    _parser_cache.append(parser)
    return parser


def _extension(package: str) -> Any:
    """``package._binding``, without running ``package/__init__.py``."""
    import sys
    from importlib.machinery import ExtensionFileLoader, ModuleSpec, PathFinder

    name = package + "._binding"
    if name in sys.modules:
        return sys.modules[name]
    spec = PathFinder.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(package)
    folder = next(iter(spec.submodule_search_locations))
    path = os.path.join(folder, next(f for f in os.listdir(folder) if f.startswith("_binding.")))
    loader = ExtensionFileLoader(name, path)
    module = loader.create_module(ModuleSpec(name, loader, origin=path))
    loader.exec_module(module)
    sys.modules[name] = module  # a later `import tree_sitter` shares these types
    return module


_STATEMENTS = _set(
    "command redirected_statement pipeline list subshell compound_statement "
    "negated_command function_definition variable_assignment variable_assignments "
    "declaration_command unset_command comment program"
)
_SEPARATORS = frozenset([";", "&", "&&", "||", "|", "|&", ";;", ";&", ";;&"])


class _Tree:
    """Walks one parsed script, adding units to the analyser as it goes."""

    def __init__(self, analyser: _Analyser, source: bytes, depth: int) -> None:
        self.an = analyser
        self.src = source
        self.depth = depth
        self.too_deep = False
        self.heredocs: dict[tuple[int, int], tuple[str, str | None]] = {}
        self.heredoc_target: _Emitted | None = None  # the command that took a moved heredoc

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    # statements ---------------------------------------------------------------

    def stmt(self, node: Node, level: int) -> str:
        if level > _MAX_NODE_DEPTH:
            self.too_deep = True
            return PLACEHOLDER
        kind = node.type
        if kind == "command":
            return self.simple(node, [], None, level).text
        if kind == "redirected_statement":
            return self.redirected(node, level)[0]
        if kind == "pipeline":
            return self.an.pipeline(self.stages(node, level), self.depth)
        if kind in ("list", "program"):
            return self.seq(node, level)
        if kind == "subshell":
            return "( " + self.seq(node, level) + " )"
        if kind == "compound_statement":
            return "{ " + self.seq(node, level) + " }"
        if kind == "negated_command":
            return "! " + self.seq(node, level)
        if kind == "function_definition":
            return self.function(node, level)
        if kind in ("variable_assignment", "variable_assignments"):
            nodes = [node] if kind == "variable_assignment" else _named(node)
            words = [self.assignment(n, level) for n in nodes]
            return self.an.command(words, [], None, self.depth).text
        if kind in ("declaration_command", "unset_command"):
            words = [node.children[0].type if node.children else kind]
            for child in _named(node):
                if child.type == "variable_assignment":
                    words.append(self.assignment(child, level))
                else:
                    words.append(self.word(child, level))
            return self.an.command(words, [], None, self.depth).text
        if kind == "comment":
            return ""
        return self.generic(node, level)

    def seq(self, node: Node, level: int) -> str:
        pieces = []
        for child in node.children:
            if child.is_named:
                piece = self.any(child, level + 1)
                if piece:
                    pieces.append(piece)
            elif child.type in _SEPARATORS:
                pieces.append(child.type)
        return " ".join(pieces)

    def any(self, node: Node, level: int) -> str:
        if node.type in _STATEMENTS:
            return self.stmt(node, level)
        if node.type in _WORDS:
            return self.word(node, level)
        return self.generic(node, level)

    def generic(self, node: Node, level: int) -> str:
        """Unknown or compound syntax (if, for, case, [[ ]]…): visit what is inside."""
        if level > _MAX_NODE_DEPTH:
            self.too_deep = True
            return PLACEHOLDER
        for child in _named(node):
            self.any(child, level + 1)
        return " ".join(self.text(node).split())

    def function(self, node: Node, level: int) -> str:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = self.word(name_node, level) if name_node is not None else ""
        text = f"{name}() " + (self.stmt(body, level + 1) if body is not None else "")
        self.an.add((text.strip(),))
        return text.strip()

    def simple(self, node: Node, redirects: list[str], stdin: str | None, level: int) -> _Emitted:
        words: list[str] = []
        redirects = list(redirects)
        pending = self.heredocs.pop((node.start_byte, node.end_byte), None)
        if pending is not None:
            redirects.append(pending[0])
            stdin = pending[1]
        for child in _named(node):
            kind = child.type
            if kind == "variable_assignment":
                words.append(self.assignment(child, level))
            elif kind == "command_name":
                inner = _named(child)
                words.append(self.word(inner[0], level) if inner else self.text(child))
            elif kind == "herestring_redirect":
                token, stdin = self.herestring(child, level)
                redirects.append(token)
            elif kind == "heredoc_redirect":
                token, body, _ = self.heredoc(child, level)
                redirects.append(token)
                stdin = body if body is not None else stdin
            elif kind == "file_redirect":
                redirects.append(self.redirect(child, level))
            elif kind == "comment":
                continue
            else:
                words.extend(self.argument(child, level))
        emitted = self.an.command(words, redirects, stdin, self.depth)
        if pending is not None:
            self.heredoc_target = emitted
        return emitted

    def redirected(self, node: Node, level: int) -> tuple[str, _Emitted | None]:
        body = node.child_by_field_name("body")
        redirects: list[str] = []
        heredoc: str | None = None
        stdin: str | None = None
        after: list[Node] = []
        for child in node.children_by_field_name("redirect"):
            if child.type == "heredoc_redirect":
                heredoc, stdin, trailing = self.heredoc(child, level)
                redirects.append(heredoc)
                after.extend(trailing)
            elif child.type == "herestring_redirect":
                token, stdin = self.herestring(child, level)
                redirects.append(token)
            else:
                redirects.append(self.redirect(child, level))
        emitted: _Emitted | None = None
        self.heredoc_target = None
        if body is None:
            text = " ".join(redirects)
            self.an.add((text,))
        elif body.type == "command":
            emitted = self.simple(body, redirects, stdin, level + 1)
            text = emitted.text
        else:
            last = _last_command(body) if heredoc is not None else None
            if heredoc is not None and last is not None:
                # tree-sitter hangs the heredoc of `a && cat <<EOF` on the whole list;
                # it belongs to the last command.
                self.heredocs[(last.start_byte, last.end_byte)] = (heredoc, stdin)
                redirects.remove(heredoc)
            text = " ".join([self.stmt(body, level + 1), *redirects])
            if redirects:
                self.an.add((" ".join(redirects),))
        for extra in after:
            if extra.type == "pipeline" and extra.children and extra.children[0].type == "|":
                rest = self.stages(extra, level)
                first = emitted or self.heredoc_target or _Emitted(None, text, None, False)
                self.an.pipeline([first, *rest], self.depth)
                text = " | ".join([text, *(stage.text for stage in rest)])
                emitted = None
            elif extra.is_named:
                text += " " + self.any(extra, level + 1)
            elif extra.type in _SEPARATORS:
                text += " " + extra.type
        return text, emitted

    def stages(self, node: Node, level: int) -> list[_Emitted]:
        out: list[_Emitted] = []
        for child in _named(node):
            if child.type == "pipeline":
                out.extend(self.stages(child, level + 1))
            elif child.type == "command":
                out.append(self.simple(child, [], None, level + 1))
            elif child.type == "redirected_statement":
                text, emitted = self.redirected(child, level + 1)
                out.append(emitted or _Emitted(None, text, None, False))
            elif child.type != "comment":
                out.append(_Emitted(None, self.any(child, level + 1), None, False))
        return out

    # redirections -------------------------------------------------------------

    def redirect(self, node: Node, level: int) -> str:
        token, target = "", []
        for child in node.children:
            if child.type == "file_descriptor":
                token += self.text(child)
            elif not child.is_named:
                token += child.type
            else:
                target.append(self.word(child, level + 1))
        return token + _quote(" ".join(target)) if target else token

    def herestring(self, node: Node, level: int) -> tuple[str, str]:
        value = " ".join(self.word(child, level + 1) for child in _named(node))
        return "<<<" + PLACEHOLDER, value

    def heredoc(self, node: Node, level: int) -> tuple[str, str | None, list[Node]]:
        """(token, body, what follows the start on its line)."""
        token, body, trailing, started = "<<", None, [], False
        for child in node.children:
            if child.type in ("<<", "<<-"):
                token = child.type
            elif child.type == "heredoc_start":
                token += self.text(child)
                started = True
            elif child.type == "heredoc_body":
                body = self.text(child)
                for inner in _named(child):
                    self.any(inner, level + 1)  # $(…) in an unquoted heredoc runs
            elif child.type == "heredoc_end":
                continue
            elif started:
                trailing.append(child)
        redirects = [c for c in trailing if c.type in ("file_redirect", "herestring_redirect")]
        # `cat <<EOF >out` puts `>out` inside the heredoc node
        token_extra = [self.redirect(c, level) for c in redirects if c.type == "file_redirect"]
        trailing = [c for c in trailing if c not in redirects]
        return " ".join([token, *token_extra]), body, trailing

    # words --------------------------------------------------------------------

    def argument(self, node: Node, level: int) -> list[str]:
        value = self.word(node, level)
        if node.type == "concatenation" and "{" in value and "," in value:
            raw = self.text(node)
            if not any(ch in raw for ch in "'\"\\$`"):
                return _expand_braces(value)
        return [value]

    def assignment(self, node: Node, level: int) -> str:
        out = ""
        for child in node.children:
            if child.is_named and child.type not in ("variable_name", "subscript"):
                out += self.word(child, level + 1)
            else:
                out += self.text(child)
        return out

    def word(self, node: Node, level: int) -> str:
        """The word as the program receives it; expansions keep their source text."""
        if level > _MAX_NODE_DEPTH:
            self.too_deep = True
            return PLACEHOLDER
        kind = node.type
        if kind == "word":
            return _unescape(self.text(node))
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "ansi_c_string":
            return _ansi_c(self.text(node)[2:-1])
        if kind in ("string", "translated_string", "concatenation"):
            return self.joined(node, level)
        if kind == "command_substitution":
            return "$(" + self.seq(node, level + 1) + ")"
        if kind == "process_substitution":
            return self.text(node)[:2] + self.seq(node, level + 1) + ")"
        if kind == "array":
            return "(" + " ".join(self.word(c, level + 1) for c in _named(node)) + ")"
        for child in _named(node):
            self.any(child, level + 1)
        return self.text(node)

    def joined(self, node: Node, level: int) -> str:
        """A string or concatenation, rebuilt from its byte range so text between
        children (tree-sitter does not always make a node of it) is kept."""
        quoted = node.type != "concatenation"
        start, end = node.start_byte, node.end_byte
        if quoted:
            start += 2 if node.type == "translated_string" else 1
            end -= 1
        out, pos = [], start
        for child in node.children:
            if child.end_byte <= start or child.start_byte >= end:
                continue
            if child.start_byte > pos:
                out.append(self._gap(pos, child.start_byte, quoted))
            if child.type == "string_content":
                out.append(_unescape_dq(self.text(child)))
            elif child.is_named:
                out.append(self.word(child, level + 1))
            else:
                out.append(self.text(child))
            pos = max(pos, child.end_byte)
        if pos < end:
            out.append(self._gap(pos, end, quoted))
        return "".join(out)

    def _gap(self, start: int, end: int, quoted: bool) -> str:
        text = self.src[start:end].decode("utf-8", "replace")
        return _unescape_dq(text) if quoted else _unescape(text)


_WORDS = _set(
    "word raw_string ansi_c_string string translated_string concatenation "
    "command_substitution process_substitution simple_expansion expansion "
    "arithmetic_expansion number array brace_expression"
)


def _named(node: Node) -> list[Node]:
    return [child for child in node.children if child.is_named]


def _last_command(node: Node) -> Node | None:
    while node.type in ("list", "pipeline", "redirected_statement", "negated_command"):
        named = [c for c in _named(node) if c.type != "comment"]
        if not named:
            return None
        node = named[-1] if node.type != "redirected_statement" else named[0]
    return node if node.type == "command" else None


# Patterns below are kept as strings and compiled by `re` on first use (it caches
# them): most lines never need them, and compiling costs more than matching.
_ESCAPE = r"\\(.)"
_ESCAPE_DQ = r'\\([$`"\\\n])'


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(_ESCAPE, lambda m: "" if m.group(1) == "\n" else m.group(1), text, flags=re.S)


def _unescape_dq(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(_ESCAPE_DQ, lambda m: "" if m.group(1) == "\n" else m.group(1), text)


_ANSI_C = r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)"
_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v",
}  # fmt: skip


def _ansi_c(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        esc = match.group(1)
        if esc[0] in "xuU" and len(esc) > 1:
            code = int(esc[1:], 16)
            return chr(code) if code <= 0x10FFFF else ""
        if esc[0] in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if esc[0] == "c" and len(esc) == 2:
            return chr(ord(esc[1]) & 0x1F)
        return _ANSI_SIMPLE.get(esc, esc)

    return re.sub(_ANSI_C, one, text, flags=re.S)


_BRACE = r"\{([^{}]*,[^{}]*)\}"


def _expand_braces(word: str) -> list[str]:
    """Comma brace expansion (``/{etc,usr}`` -> ``/etc /usr``), capped in size."""
    out: list[str] = []
    todo = [word]
    while todo:
        current = todo.pop(0)
        match = re.search(_BRACE, current)
        if match is None or len(out) + len(todo) > _MAX_BRACE_WORDS:
            out.append(current)
            continue
        head, tail = current[: match.start()], current[match.end() :]
        todo[0:0] = [head + choice + tail for choice in match.group(1).split(",")]
    return out
