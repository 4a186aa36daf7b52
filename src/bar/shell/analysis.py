"""Cutting a command line into units: the words of each command (``words``) found by
the parse (``tree``), or, for a line of plain words, without the parser."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bar.base.record import record
from bar.shell import tree
from bar.shell.programs import decode, printed
from bar.shell.quoting import render
from bar.shell.words import PLACEHOLDER, normalise, positional, read_as_words, word_set

if TYPE_CHECKING:
    from collections.abc import Sequence

_MAX_SCRIPT_DEPTH = 8  # sh -c inside eval inside …


@record(frozen=True)
class Unit:
    """One thing rules are matched against: ``views`` are tried in order.

    ``parts`` (pipelines only) are the indexes of the stage units, so a rule that
    already matched a stage need not report the whole pipeline again.
    """

    views: tuple[str, ...]
    parts: tuple[int, ...] = ()


@record(frozen=True)
class Analysis:
    """The units of a line in execution order, and why the line was not fully
    understood (``error``), if it was not."""

    units: tuple[Unit, ...]
    error: str | None

    def texts(self) -> list[str]:
        """Every view of every unit, for tests and debugging."""
        return [view for unit in self.units for view in unit.views]


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


# ---------------------------------------------------------------- the fast path

# A line of only these characters holds no quoting, expansion, redirection, comment,
# brace or separator, so bash splits it on blanks into the words of one simple command.
# `*` and `?` may glob, `~` may expand, and `%`, `^` and `@` mean nothing to bash
# outside interactive history and job control; every path here keeps such words as
# written, so they are the same words either way. Reserved words are the only other
# syntax such a line can hold, and those lines go to the parser.
_PLAIN = re.compile(r"[A-Za-z0-9_\-./:=@%+,~^*? \t]*")
_RESERVED = word_set(
    "if then else elif fi case esac for select while until do done in function time "
    "coproc declare typeset export local readonly unset"
)


def plain_program(name: str) -> bool:
    """Whether an argument vector whose program is called ``name`` (a base name) is
    analysed as one unit, its words as they are (``render``), whatever its arguments,
    so long as none holds a substitution (``$``, a backquote, ``<(``, ``>(``): the
    shortcut of the exec check rests on it (``bar.sandbox.exec_quick``)."""
    return (
        read_as_words(name) and name not in _NAMED and name not in _READS and name not in _RUNS_FILE
    )


# the programs the analyser itself reads into by name (``command``, ``_as_it_runs``)
_NAMED = frozenset(
    {"cat", "xargs", "cd", "pushd", "set", "read", "printf", "export", "declare", "local"}
)


def is_plain(text: str) -> bool:
    """A line of plain words, which needs no parser. A lone ``-`` word is not plain:
    tree-sitter-bash reads it differently (see ``tree.skipped_text``), and both paths
    must give the same units."""
    words = text.split()
    return _PLAIN.fullmatch(text) is not None and _RESERVED.isdisjoint(words) and "-" not in words


# ----------------------------------------------------------------- the analyser


class _Analyser:
    """Collects the units of one line or argument vector (a ``tree.Collector``)."""

    def __init__(self, fast: bool) -> None:
        self.fast = fast
        self.units: list[Unit] = []
        self.error: str | None = None
        self.known: dict[str, str] = {"IFS": " "}  # variables the line set to plain words
        self.outside: str | None = None  # where a `cd` out of the worktree went
        self.here: list[str] = []  # the way `cd` went from where the line began
        self.functions: dict[str, str] = {}  # the line's own functions, by name
        self.files: dict[str, str] = {}  # what the line wrote to files, by name

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
        if self.fast and is_plain(text):
            words = text.split()
            return self.command(words, [], None, depth).text if words else ""
        try:
            parser = tree.load_parser()
        except Exception as exc:  # a broken install must not disable the policy
            self.fail(f"shell parser unavailable ({type(exc).__name__})")
            self.raw(text)
            return text
        source = text.encode("utf-8", "surrogatepass")
        root = parser.parse(tree.parser_safe(text, source)).root_node
        walker = tree.Tree(self, source, depth)
        rendered = walker.seq(root, 0)
        broken = root.has_error or tree.skipped_text(root, source)
        if broken:
            self.fail("syntax error")
        if walker.too_deep:
            self.fail("nested too deeply")
        if broken or walker.too_deep:
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
    ) -> tree.Emitted:
        norm = normalise(words)
        suffix = "".join(" " + r for r in redirects)
        text = (render(norm.words) + suffix).strip()
        views = (text,) if norm.wrapped is None else (text, render(norm.wrapped) + suffix)
        index = self.add(views) if text else None
        if depth <= _MAX_SCRIPT_DEPTH:
            self._as_it_runs(words, norm.words, norm.wrapped, stdin, depth)
        for script in norm.scripts:
            self.script(script, depth + 1)
        for nested in norm.nested:
            if depth <= _MAX_SCRIPT_DEPTH:
                self.command(nested, [], None, depth + 1)
        if norm.stdin_code is not None and stdin is not None:
            self._code(norm.stdin_code, stdin, depth)
        if norm.stdin_shell and stdin is not None:
            self.script(stdin, depth + 1)
        stdout = norm.stdout
        if norm.transform is not None and stdin is not None:
            stdout = decode(norm.transform, stdin)
        if stdout is None and norm.words == ["cat"] and stdin is not None:
            stdout = stdin  # (`cat > x.sh <<EOF`)
        if norm.words[:1] and norm.words[0] in _READS:  # what it reads its commands from
            fed = self._fed(words, redirects, stdin)
            if fed:
                self.add((f"{text} <<< {render([fed])}",))
        if stdout is not None:  # a file the line writes, which it may run later
            for redirect in redirects:
                m = _WRITTEN.fullmatch(redirect)
                if m is not None:
                    name = _file_key(m.group(2))
                    earlier = self.files.get(name, "") if m.group(1) == ">>" else ""
                    self.files[name] = earlier + stdout
        return tree.Emitted(
            index, text, stdout, norm.stdin_shell, views[-1], norm.transform, norm.stdin_code
        )

    def define(self, name: str, body: str) -> None:
        self.functions[name] = body

    def assign(self, name: str, value: str) -> None:
        self.known[name] = value

    def _as_it_runs(
        self,
        words: list[str],
        shown: list[str],
        wrapped: list[str] | None,
        stdin: str | None,
        depth: int,
    ) -> None:
        """Units for what the command does that its words do not say: the body of the
        line's own function it calls, with its arguments; the command with the line's
        own variables (``a=rm; $a -rf ~``, ``rm${IFS}-rf``) put in; with the words
        ``xargs`` reads from a known input after it; and with relative paths taken from
        where a ``cd`` out of the worktree went (``cd .. && rm -rf *``)."""
        if shown[:2] == ["set", "--"]:  # set -- a b: the positional parameters
            self._positional(words[2:])
            return
        if shown[:1] == ["read"] and stdin is not None:  # read a b <<< 'x y': a=x, b=y
            names = [w for w in shown[1:] if _NAME.fullmatch(w)]
            values = stdin.split(None, max(len(names) - 1, 0)) if names else []
            for name, value in zip(names, values, strict=False):
                self.known[name] = value.strip()
            if len(names) == 1 and not values:
                self.known[names[0]] = ""
            return
        if shown[:1] == ["printf"] and len(words) > 3 and words[1] == "-v":  # printf -v NAME
            said = printed("printf", words[3:])
            if said is not None:
                self.known[words[2]] = said
            return
        assigned = [w for w in words if _ASSIGNED.match(w)]
        if len(assigned) == len(words) or (shown[:1] in (["export"], ["declare"], ["local"])):
            for word in assigned if len(assigned) == len(words) else words[1:]:
                name, eq, value = word.partition("=")
                if eq and value.startswith("(") and value.endswith(")"):  # an array
                    items = value[1:-1].split()
                    self.known.update({f"{name}[{k}]": item for k, item in enumerate(items)})
                    self.known[name] = items[0] if items else ""
                elif eq and "$(" not in value and "`" not in value:
                    self.known[name.rstrip("+")] = value
            return
        written = self._written(shown)
        if written is not None:  # a script the line wrote, run: what it holds runs
            self.script(written, depth + 1)
        body = self.functions.pop(shown[0], None) if shown else None
        if body is not None:  # a call of the line's own function: its body, with its arguments
            self.script(positional(body, shown[0], shown[1:]), depth + 1)
            self.functions[shown[0]] = body
        if any("$" in w for w in words):
            put, separators = [], self.known.get("IFS", " ")
            for word in words:
                every = self._every(word)
                if every is not None:  # "$@", "${a[@]}": each a word of its own
                    put += every
                    continue
                value = _VARIABLE.sub(self._value, word)
                if value != word:  # (unquoted: split where IFS says)
                    put += [w for w in re.split(f"[{re.escape(separators)}\\s]+", value) if w]
                else:
                    put.append(word)
            if put != words and put:
                self.command(put, [], stdin, depth + 1)
                return
            if _COMPUTED.search(shown[0]):
                self._computed(shown)
                return
        if wrapped and wrapped[0] == "xargs" and stdin is not None and stdin.split():
            self.add((render([*shown, *stdin.split()]),))
        if shown[:1] in (["cd"], ["pushd"]):
            operands = [w for w in shown[1:] if not w.startswith("-") or w == "-"]
            if len(operands) == 1 and operands[0] != "-":
                self._cd(operands[0])
            return
        if self.outside is not None and len(shown) > 1:
            moved = [shown[0], *(_from(self.outside, w) for w in shown[1:])]
            if moved != shown:
                self.add((render(moved),))

    def _cd(self, where: str) -> None:
        """Follow a ``cd``: ``self.here`` is the way from where the line began (``..``
        first once it climbed above it), ``self.outside`` where it went once it left."""
        if self.outside is not None and not _OUTSIDE.match(where):
            self.outside = f"{self.outside}/{where}".rstrip("/")
            return
        if where[:1] in ("/", "~", "$"):
            self.outside = where.rstrip("/") or "/"
            return
        for part in where.split("/"):
            if part == "..":
                if self.here and self.here[-1] != "..":
                    self.here.pop()
                else:
                    self.here.append("..")
            elif part not in ("", "."):
                self.here.append(part)
        if self.here[:1] == [".."]:
            self.outside = "/".join(self.here)

    def _fed(self, words: list[str], redirects: list[str], stdin: str | None) -> str | None:
        """The commands a program that reads them is given: a here-document or string,
        or a file the line wrote (``< FILE``, ``-f FILE``)."""
        for k, word in enumerate(words[:-1]):
            if word in ("-f", "--file", "-i", "--init"):
                found = self.files.get(_file_key(words[k + 1]))
                if found is not None:
                    return found.strip()
        for redirect in redirects:
            m = _READ_FROM.fullmatch(redirect)
            if m is not None and _file_key(m.group(1)) in self.files:
                return self.files[_file_key(m.group(1))].strip()
        return stdin.strip() if stdin else None

    def _written(self, shown: list[str]) -> str | None:
        """What the line wrote to the file ``shown`` runs (``./x.sh``, ``sh x.sh``,
        ``source x.sh``), if it wrote it."""
        if not shown or not self.files:
            return None
        if shown[0] in _RUNS_FILE:
            operands = [w for w in shown[1:] if not w.startswith("-")]
            return self.files.get(_file_key(operands[0])) if operands else None
        return self.files.get(_file_key(shown[0]))

    def _positional(self, words: list[str]) -> None:
        for key in [k for k in self.known if k.isdigit()]:
            del self.known[key]
        self.known.update({str(k): w for k, w in enumerate(words, 1)})

    def _every(self, word: str) -> list[str] | None:
        """The words of ``$@``/``$*`` (positional parameters the line set) or of
        ``${a[@]}`` (an array it set); None for any other word or one not known."""
        m = _EVERY.fullmatch(word)
        if m is None:
            return None
        if m.group(1) is None:
            found, k = [], 1
            while str(k) in self.known:
                found.append(self.known[str(k)])
                k += 1
            return found or None
        items, k = [], 0
        while f"{m.group(1)}[{k}]" in self.known:
            items.append(self.known[f"{m.group(1)}[{k}]"])
            k += 1
        return items or None

    def _computed(self, shown: list[str]) -> None:
        """A command whose program is computed as it runs (``$c -rf ~``, ``"$@"``) and
        not known from the line: what it would be were the program one the rules are
        about, and its arguments taken as a command of their own (``$SUDO rm -rf /``)."""
        rest = shown[1:]
        if not rest:
            return
        views = [render([program, *rest]) for program in _RULED_PROGRAMS]
        if _PROGRAM_NAME.fullmatch(rest[0]):
            views.insert(0, render(rest))
        self.add(tuple(views))

    def _code(self, language: str, code: str, depth: int) -> None:
        """What an interpreter's code runs and deletes (``bar.shell.interpreters``)."""
        from bar.shell.interpreters import runs  # (only when an interpreter reads code)

        scripts, commands = runs(language, code)
        for script in scripts:
            self.script(script, depth + 1)
        for nested in commands:
            self.command(nested, [], None, depth + 1)

    def _value(self, m: re.Match[str]) -> str:
        if m.group(4) is not None:  # ${NAME%/*}: the directory NAME is in
            return f"${m.group(4)}/.."
        if m.group(5) is not None:  # ${NAME:-WORD}: WORD unless the line set NAME
            known = self.known.get(m.group(5))
            return known if known else m.group(6)
        name = m.group(1) or m.group(3)
        value = self.known.get(name + (f"[{m.group(2)}]" if m.group(2) else ""))
        return m.group(0) if value is None else value

    def pipeline(self, stages: list[tree.Emitted], depth: int) -> str:
        flowing = stages[0].stdout
        for stage in stages[1:]:  # `echo ~ | xargs rm -rf`, `echo '…' | python3`
            if flowing is not None and flowing.split() and stage.wrapped.startswith("xargs "):
                self.add((stage.text.split(" <", 1)[0] + " " + " ".join(flowing.split()),))
            if flowing is not None and stage.stdin_code is not None:
                self._code(stage.stdin_code, flowing, depth)
            flowing = stage.stdout
        if any(stage.stdin_shell for stage in stages[1:]):
            # what each stage prints, where it is known, is the script of a shell after it
            flowing = stages[0].stdout
            for stage in stages[1:]:
                if stage.stdin_shell and flowing is not None:
                    self.script(flowing, depth + 1)
                if stage.transform is not None and stage.stdout is None and flowing is not None:
                    flowing = decode(stage.transform, flowing)
                else:
                    flowing = stage.stdout
        flowing = stages[0].stdout
        for stage in stages[1:]:  # `echo 'DROP DATABASE x' | psql`: the commands it reads
            if flowing is not None and flowing.strip() and stage.text.split(" ", 1)[0] in _READS:
                self.add((f"{stage.text} <<< {render([flowing.strip()])}",))
            flowing = stage.stdout
        text = " | ".join(stage.text for stage in stages)
        wrapped = " | ".join(stage.wrapped for stage in stages)
        parts = tuple(stage.index for stage in stages if stage.index is not None)
        if len(stages) > 1:
            self.add((text,) if wrapped == text else (text, wrapped), parts)
        return text


_RAW_SPLIT = r"&&|\|\||\$\(|[;&|()`{}\n]"
_ASSIGNED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_VARIABLE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9])(?:\[([0-9]+)\])?\}|\$([A-Za-z_][A-Za-z0-9_]*|[0-9])"
    r"|\$\{([A-Za-z_][A-Za-z0-9_]*)%%?/\*\}"
    r"|\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9]):?[-=]([^}$]*)\}"
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# programs that read the commands they run from their standard input
_READS = frozenset(
    {
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "mongosh",
        "mongo",
        "redis-cli",
        "cqlsh",
        "clickhouse-client",
        "duckdb",
        "sqlcmd",
        "bq",
        "crontab",
        "at",
        "batch",
    }
)
_READ_FROM = re.compile(r"[0-9]?<\s*(\S+)")
_WRITTEN = re.compile(r"[0-9]?(>>?|>\|)\s*(\S+)")
_RUNS_FILE = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "source", ".", "busybox"}
)
_EVERY = re.compile(r"\$(?:[@*]|\{[@*]\})|\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}")
# a program name computed as the command runs: a variable, a substitution
_COMPUTED = re.compile(r"\$|`")
_PROGRAM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*|/[A-Za-z0-9_./+-]+")
# the programs the default policy's rules are about, tried for a computed program
_RULED_PROGRAMS = (
    "rm",
    "git",
    "dd",
    "find",
    "mv",
    "chmod",
    "chown",
    "shred",
    "truncate",
    "mkfs",
    "curl",
    "wget",
    "crontab",
    "kill",
    "tar",
    "rsync",
)
# a `cd` that leaves the worktree: up, home, an absolute path
_OUTSIDE = re.compile(r"\.\.(?:/|$)|~|\$HOME\b|\$\{HOME\}|/")


def _from(where: str, word: str) -> str:
    """``word`` as a path from the working directory ``where`` (if it is a relative
    path: an option, an absolute path or an expansion stays as it is)."""
    if not word or word[0] in "-/~$" or word == PLACEHOLDER:
        return word
    return f"{where}/{word}"


def _file_key(path: str) -> str:
    """A file the line names, the same however written (``./x.sh``, ``x.sh``)."""
    path = path.strip("'\"")
    while path.startswith("./"):
        path = path[2:]
    return path
