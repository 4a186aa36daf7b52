"""tree-sitter-bash: loading the parser, and walking what it parses into commands.

The walk renders every statement, word and redirection of a script and hands each
simple command and pipeline to a ``Collector`` (the analyser), which normalises it and
records units; the walk never decides what a unit is.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Protocol

from bar.base.record import record
from bar.shell.programs import pipeline_printed
from bar.shell.quoting import ansi_c, expand_braces, quote, unescape, unescape_dq
from bar.shell.words import PLACEHOLDER, word_set

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_MAX_NODE_DEPTH = 120  # nesting inside one script; keeps Python's stack safe


@record(frozen=True)
class Emitted:
    """What a pipeline needs to know about one of its stages."""

    index: int | None
    text: str
    stdout: str | None
    stdin_shell: bool
    wrapped: str = ""  # the stage with its wrappers (``sudo``...): ``text`` when none
    transform: str | None = None  # how it turns what it reads into what it prints
    stdin_code: str | None = None  # the language of the code it reads, if an interpreter does

    def __post_init__(self) -> None:
        if not self.wrapped:
            object.__setattr__(self, "wrapped", self.text)


class Collector(Protocol):
    """What the walk reports to, in execution order: ``add`` a unit (its index), a
    simple ``command`` (``stdin`` is its input when known statically) and a
    ``pipeline`` of commands already reported (its rendering)."""

    def add(self, views: tuple[str, ...], parts: tuple[int, ...] = ()) -> int: ...

    def command(
        self, words: list[str], redirects: list[str], stdin: str | None, depth: int
    ) -> Emitted: ...

    def pipeline(self, stages: list[Emitted], depth: int) -> str: ...

    def define(self, name: str, body: str) -> None: ...  # a function of the line's

    def assign(self, name: str, value: str) -> None: ...  # a variable the line sets


# ----------------------------------------------------------------- the parser


# tree-sitter-bash 0.25 can crash the process (SIGSEGV) on `{` followed by a 4-byte
# UTF-8 character (tree-sitter/tree-sitter-bash#337). Such characters, and lone
# surrogates, are parsed as stand-ins of the same byte length that shell syntax treats
# alike (ordinary word characters), so node offsets still index the original text.
_UNSAFE_FOR_PARSER = "[\U00010000-\U0010ffff\ud800-\udfff]"


def parser_safe(text: str, source: bytes) -> bytes:
    if text.isascii() or re.search(_UNSAFE_FOR_PARSER, text) is None:
        return source
    # 4 bytes -> two 2-byte characters; a surrogate (3 bytes) -> U+FFFD (3 bytes)
    safe = re.sub(
        _UNSAFE_FOR_PARSER, lambda m: "\u00a4\u00a4" if ord(m.group()) > 0xFFFF else "\ufffd", text
    )
    return safe.encode("utf-8")


_parser_cache: list[Parser] = []


def load_parser() -> Parser:
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


# ------------------------------------------------------------------- the walk

_STATEMENTS = word_set(
    "command redirected_statement pipeline list subshell compound_statement "
    "negated_command function_definition variable_assignment variable_assignments "
    "declaration_command unset_command comment program"
)
_SEPARATORS = frozenset([";", "&", "&&", "||", "|", "|&", ";;", ";&", ";;&"])


class Tree:
    """Walks one parsed script, adding units to the analyser as it goes."""

    def __init__(self, analyser: Collector, source: bytes, depth: int) -> None:
        self.an = analyser
        self.src = source
        self.depth = depth
        self.too_deep = False
        self.heredocs: dict[tuple[int, int], tuple[str, str | None]] = {}
        self.heredoc_target: Emitted | None = None  # the command that took a moved heredoc

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
        """Unknown or compound syntax (if, for, case, [[ ]]…): visit what is inside (a
        ``for`` loop's variable holds all its words at once, as every turn is run)."""
        if level > _MAX_NODE_DEPTH:
            self.too_deep = True
            return PLACEHOLDER
        variable = node.child_by_field_name("variable") if node.type == "for_statement" else None
        if variable is not None:
            values = node.children_by_field_name("value")
            self.an.assign(self.text(variable), " ".join(self.word(v, level + 1) for v in values))
        for child in _named(node):
            self.any(child, level + 1)
        return " ".join(self.text(node).split())

    def function(self, node: Node, level: int) -> str:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = self.word(name_node, level) if name_node is not None else ""
        text = f"{name}() " + (self.stmt(body, level + 1) if body is not None else "")
        self.an.add((text.strip(),))
        self.an.define(name, self.text(body) if body is not None else "")
        return text.strip()

    def simple(self, node: Node, redirects: list[str], stdin: str | None, level: int) -> Emitted:
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

    def redirected(self, node: Node, level: int) -> tuple[str, Emitted | None]:
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
        emitted: Emitted | None = None
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
                first = emitted or self.heredoc_target or Emitted(None, text, None, False)
                self.an.pipeline([first, *rest], self.depth)
                text = " | ".join([text, *(stage.text for stage in rest)])
                emitted = None
            elif extra.is_named:
                text += " " + self.any(extra, level + 1)
            elif extra.type in _SEPARATORS:
                text += " " + extra.type
        return text, emitted

    def stages(self, node: Node, level: int) -> list[Emitted]:
        out: list[Emitted] = []
        for child in _named(node):
            if child.type == "pipeline":
                out.extend(self.stages(child, level + 1))
            elif child.type == "command":
                out.append(self.simple(child, [], None, level + 1))
            elif child.type == "redirected_statement":
                text, emitted = self.redirected(child, level + 1)
                out.append(emitted or Emitted(None, text, None, False))
            elif child.type != "comment":
                out.append(Emitted(None, self.any(child, level + 1), None, False))
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
        return token + quote(" ".join(target)) if target else token

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
        if node.type == "command_substitution":
            text, output = self.substitution(node, level)
            return [text] if output is None else output.split()  # unquoted: split
        value = self.word(node, level)
        if node.type == "concatenation" and "{" in value and "," in value:
            raw = self.text(node)
            if not any(ch in raw for ch in "'\"\\$`"):
                return expand_braces(value)
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
            return unescape(self.text(node))
        if kind == "raw_string":
            return self.text(node)[1:-1]
        if kind == "ansi_c_string":
            return ansi_c(self.text(node)[2:-1])
        if kind in ("string", "translated_string", "concatenation"):
            return self.joined(node, level)
        if kind == "command_substitution":
            return self.substitution(node, level)[0]
        if kind == "process_substitution":
            return self.text(node)[:2] + self.seq(node, level + 1) + ")"
        if kind == "array":
            return "(" + " ".join(self.word(c, level + 1) for c in _named(node)) + ")"
        for child in _named(node):
            self.any(child, level + 1)
        return self.text(node)

    def substitution(self, node: Node, level: int) -> tuple[str, str | None]:
        """``$(…)`` as ``$(`` + its commands + ``)``, and its output when that is known:
        ``$(echo ~)`` is ``~``, shown as such (the command is still a unit)."""
        named = [child for child in _named(node) if child.type != "comment"]
        if len(named) == 1 and named[0].type == "command":
            emitted = self.simple(named[0], [], None, level + 2)
            if emitted.stdout is not None:
                output = emitted.stdout.rstrip("\n")
                return output, output
            return "$(" + emitted.text + ")", None
        inner = self.seq(node, level + 1)
        known = pipeline_printed(inner)  # (getent passwd me | cut -d: -f6)
        return ("$(" + inner + ")", None) if known is None else (known, known)

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
                out.append(unescape_dq(self.text(child)))
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
        return unescape_dq(text) if quoted else unescape(text)


_WORDS = word_set(
    "word raw_string ansi_c_string string translated_string concatenation "
    "command_substitution process_substitution simple_expansion expansion "
    "arithmetic_expansion number array brace_expression"
)


def skipped_text(root: Node, source: bytes) -> bool:
    """True when tree-sitter passed over some of ``source`` without a word for it.

    Text no leaf covers may be a command the walk never saw, so the caller treats it as
    a syntax error. Blanks and line continuations are not text, and neither is a lone
    ``-`` word, which tree-sitter-bash drops without a word (``python3 - <<EOF`` is
    ``python3 <<EOF`` to it); lines with one never take the fast path (``is_plain``).
    """
    covered = 0
    stack = [root]
    leaves: list[tuple[int, int]] = []
    while stack:
        node = stack.pop()
        if node.child_count == 0 or node.type in ("comment", "heredoc_body", "raw_string"):
            leaves.append((node.start_byte, node.end_byte))
        else:
            stack.extend(node.children)
    gaps = []
    for start, end in sorted(leaves):
        if start > covered:
            gaps.append(source[covered:start])
        covered = max(covered, end)
    gaps.append(source[covered:])
    return any(set(gap.replace(b"\\\n", b" ").split()) - {b"-"} for gap in gaps)


def _named(node: Node) -> list[Node]:
    return [child for child in node.children if child.is_named]


def _last_command(node: Node) -> Node | None:
    while node.type in ("list", "pipeline", "redirected_statement", "negated_command"):
        named = [c for c in _named(node) if c.type != "comment"]
        if not named:
            return None
        node = named[-1] if node.type != "redirected_statement" else named[0]
    return node if node.type == "command" else None
