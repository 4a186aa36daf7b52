"""The per-repository policy: load and validate ``.bar/policy.yaml``, judge commands.

A policy is a list of rules, each a Python regex with an action (``block`` > ``warn`` >
``log``). A command is cut into units by ``bar.shell`` (one per simple command the
shell would run, plus one per pipeline and function definition) and every rule is
``re.search``-ed against every unit's views; the strictest action among the matches is
the decision, and every match is an event. ``docs/policy.md`` says exactly what text a
pattern sees.

Latency matters because ``bar hook`` runs this before every shell command an agent
issues. So: YAML is imported only when a policy file has to be parsed; the validated
rules are cached as JSON keyed by the file's (mtime_ns, size, inode), so an unchanged
file costs one ``stat`` and a small JSON read; tree-sitter is loaded only for lines that
are not plain words; and records are slotted classes rather than dataclasses, whose
import (through ``inspect``) would cost more than everything else here.
"""

from __future__ import annotations

import json
import os
import re

from bar import __version__, shell
from bar.errors import PolicyError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Literal, TypeAlias

    Action: TypeAlias = Literal["block", "warn", "log"]
else:
    Action = str

ACTIONS = ("block", "warn", "log")
_SEVERITY = {"allow": 0, "log": 1, "warn": 2, "block": 3}
PARSE_ERROR_RULE = "bar:unparseable"
_PARSE_ERROR_REASON = (
    "the command line could not be fully parsed ({why}); its raw text was matched too"
)
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_TOP_KEYS = ("version", "rules", "on_parse_error")
_RULE_KEYS = ("name", "pattern", "action", "reason", "examples")
_EXAMPLE_KEYS = ("match", "no_match")
_CACHE_FORMAT = 2


class PolicyEvent:
    """One rule matching one unit. ``matched`` is the text the pattern matched."""

    __slots__ = ("action", "matched", "reason", "rule")
    rule: str
    action: str
    matched: str
    reason: str

    def __init__(self, rule: str, action: str, matched: str, reason: str) -> None:
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "matched", matched)
        object.__setattr__(self, "reason", reason)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"PolicyEvent is immutable (cannot set {name!r})")

    def _key(self) -> tuple[str, str, str, str]:
        return (self.rule, self.action, self.matched, self.reason)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PolicyEvent) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "PolicyEvent(rule={!r}, action={!r}, matched={!r}, reason={!r})".format(*self._key())

    def to_record(self) -> dict[str, str]:
        """The ledger's ``policy_events`` entry."""
        return {"rule": self.rule, "action": self.action, "matched": self.matched}

    def to_json(self) -> dict[str, str]:
        return {**self.to_record(), "reason": self.reason}


class Decision:
    """``action`` is ``allow`` (nothing matched), ``log``, ``warn`` or ``block``."""

    __slots__ = ("action", "events")
    action: str
    events: tuple[PolicyEvent, ...]

    def __init__(self, action: str, events: tuple[PolicyEvent, ...] = ()) -> None:
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "events", tuple(events))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Decision is immutable (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decision) and (self.action, self.events) == (
            other.action,
            other.events,
        )

    def __hash__(self) -> int:
        return hash((self.action, self.events))

    def __repr__(self) -> str:
        return f"Decision(action={self.action!r}, events={self.events!r})"

    @property
    def blocked(self) -> bool:
        return self.action == "block"

    def to_json(self) -> dict[str, object]:
        return {"decision": self.action, "events": [event.to_json() for event in self.events]}


class Rule:
    """One validated rule. ``literals``, when known, are strings of which every text
    the pattern can match contains at least one; rules whose literals are absent from a
    command are skipped without compiling the pattern (see ``required_literals``)."""

    __slots__ = ("_regex", "action", "literals", "match", "name", "no_match", "pattern", "reason")
    name: str
    pattern: str
    action: str
    reason: str
    match: tuple[str, ...]  # examples the rule must match
    no_match: tuple[str, ...]  # examples it must not match
    literals: tuple[str, ...] | None

    def __init__(
        self,
        name: str,
        pattern: str,
        action: str,
        reason: str,
        match: Sequence[str] = (),
        no_match: Sequence[str] = (),
        *,
        literals: Sequence[str] | None = None,
        compiled: bool = True,
    ) -> None:
        self.name = name
        self.pattern = pattern
        self.action = action
        self.reason = reason
        self.match = tuple(match)
        self.no_match = tuple(no_match)
        self._regex: re.Pattern[str] | None = re.compile(pattern) if compiled else None
        if compiled and literals is None:
            literals = required_literals(pattern)
        self.literals = tuple(literals) if literals is not None else None

    @property
    def regex(self) -> re.Pattern[str]:
        if self._regex is None:
            try:
                self._regex = re.compile(self.pattern)
            except re.error as exc:  # only a hand-edited cache gets here
                raise PolicyError(f"policy rule {self.name!r}: bad pattern: {exc}") from None
        return self._regex

    def search(self, text: str) -> bool:
        if self.literals is not None and not any(lit in text for lit in self.literals):
            return False
        return self.regex.search(text) is not None

    def __repr__(self) -> str:
        return f"Rule(name={self.name!r}, pattern={self.pattern!r}, action={self.action!r})"

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "pattern": self.pattern,
            "action": self.action,
            "reason": self.reason,
            "match": list(self.match),
            "no_match": list(self.no_match),
            "literals": list(self.literals) if self.literals is not None else None,
        }


def required_literals(pattern: str) -> list[str] | None:
    """Strings of which any text matching ``pattern`` contains at least one, or None.

    Read from the parsed pattern: a sequence needs each of its parts, so any one part's
    strings will do (the longest are the most selective); an alternation needs one of
    its branches; a repeat needs its body only if it must occur; a lookaround needs its
    body somewhere in the text. Case-insensitive parts give nothing.
    """
    import importlib

    try:
        parser: Any = importlib.import_module("re._parser")
        consts: Any = importlib.import_module("re._constants")
        tree = parser.parse(pattern)
        if tree.state.flags & re.IGNORECASE:
            return None
        found = _literals_of(list(tree), consts)
    except Exception:  # an unexpected pattern shape only costs the shortcut
        return None
    return sorted(found) if found else None


def _literals_of(items: list[Any], c: Any) -> frozenset[str] | None:
    candidates: list[frozenset[str]] = []
    run: list[str] = []
    for op, av in [*items, (None, None)]:
        if op is c.LITERAL:
            run.append(chr(av))
            continue
        if run:
            candidates.append(frozenset(["".join(run)]))
            run = []
        found: frozenset[str] | None = None
        if op is c.SUBPATTERN and not av[1] & re.IGNORECASE:
            found = _literals_of(list(av[3]), c)
        elif op is c.ATOMIC_GROUP:
            found = _literals_of(list(av), c)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] >= 1:
            found = _literals_of(list(av[2]), c)
        elif op is c.ASSERT:
            found = _literals_of(list(av[1]), c)
        elif op is c.BRANCH:
            branches = [_literals_of(list(branch), c) for branch in av[1]]
            if all(b is not None for b in branches):
                found = frozenset().union(*(b for b in branches if b is not None))
        if found:
            candidates.append(found)
    if not candidates:
        return None
    return max(candidates, key=lambda s: (min(len(x) for x in s), -len(s)))


class Policy:
    """Validated rules from ``path`` (a file name, or a label for text)."""

    __slots__ = ("on_parse_error", "path", "rules")

    def __init__(self, rules: Sequence[Rule], path: str, on_parse_error: str = "warn") -> None:
        self.rules = tuple(rules)
        self.path = path
        self.on_parse_error = on_parse_error

    def __repr__(self) -> str:
        return f"Policy(path={self.path!r}, rules={len(self.rules)})"

    def evaluate_line(self, line: str) -> Decision:
        """Judge a shell command line, as an agent would hand it to ``sh -c``."""
        return self._decide(shell.analyse_line(line), line)

    def evaluate_argv(self, argv: Sequence[str]) -> Decision:
        """Judge an argument vector run without a shell (``bar run -- ARGV``)."""
        return self._decide(shell.analyse_argv(argv), shell.render(argv))

    def _decide(self, analysis: shell.Analysis, source: str) -> Decision:
        events: list[PolicyEvent] = []
        seen: set[tuple[str, str]] = set()
        hit: list[set[int]] = [set() for _ in self.rules]
        for index, unit in enumerate(analysis.units):
            for rule, hit_units in zip(self.rules, hit, strict=True):
                if unit.parts and not hit_units.isdisjoint(unit.parts):
                    continue  # already reported for one of the pipeline's stages
                for view in unit.views:
                    if rule.search(view):
                        hit_units.add(index)
                        if (rule.name, view) not in seen:
                            seen.add((rule.name, view))
                            events.append(PolicyEvent(rule.name, rule.action, view, rule.reason))
                        break
        if analysis.error is not None:
            reason = _PARSE_ERROR_REASON.format(why=analysis.error)
            flat = " ".join(source.split())
            events.append(PolicyEvent(PARSE_ERROR_RULE, self.on_parse_error, flat, reason))
        action = "allow"
        for event in events:
            if _SEVERITY[event.action] > _SEVERITY[action]:
                action = event.action
        return Decision(action, tuple(events))


class ExampleFailure:
    """A rule's example that did not behave as the rule says it should."""

    __slots__ = ("command", "expected", "got", "rule")

    def __init__(self, rule: str, command: str, expected: str, got: str) -> None:
        self.rule = rule
        self.command = command
        self.expected = expected
        self.got = got

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExampleFailure) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[str, str, str, str]:
        return (self.rule, self.command, self.expected, self.got)

    def __repr__(self) -> str:
        return "ExampleFailure(rule={!r}, command={!r}, expected={!r}, got={!r})".format(
            *self._key()
        )


def check_examples(policy: Policy) -> list[ExampleFailure]:
    """Run every rule's ``examples``: each ``match`` line must make that rule report,
    each ``no_match`` line must not."""
    failures = []
    for rule in policy.rules:
        for command in rule.match:
            if not _events_of(policy, rule, command):
                failures.append(ExampleFailure(rule.name, command, "match", "no match"))
        for command in rule.no_match:
            events = _events_of(policy, rule, command)
            if events:
                got = f"match: {events[0].matched}"
                failures.append(ExampleFailure(rule.name, command, "no match", got))
    return failures


def _events_of(policy: Policy, rule: Rule, command: str) -> list[PolicyEvent]:
    return [e for e in policy.evaluate_line(command).events if e.rule == rule.name]


# --------------------------------------------------------------------- loading


DEFAULT_POLICY_PATH = os.path.join(os.path.dirname(__file__), "data", "default_policy.yaml")


def _read_default() -> str:
    with open(DEFAULT_POLICY_PATH, encoding="utf-8") as handle:
        return handle.read()


DEFAULT_POLICY_TEXT: str = _read_default()


def default_policy(*, cache_dir: str | os.PathLike[str] | None = None) -> Policy:
    """bar's default policy (what `bar init` writes); cached like any policy file."""
    if cache_dir is None:
        return parse_policy_text(DEFAULT_POLICY_TEXT, "<default policy>")
    return load_policy(DEFAULT_POLICY_PATH, cache_dir=cache_dir)


def load_policy(
    path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None
) -> Policy:
    """Load and validate a policy file; with ``cache_dir``, reuse the validated rules
    while the file's (mtime_ns, size, inode) stay the same."""
    name = os.path.abspath(os.fspath(path))
    try:
        with open(name, "rb") as handle:
            st = os.fstat(handle.fileno())
            key = [st.st_mtime_ns, st.st_size, st.st_ino]
            cache = _cache_file(os.fspath(cache_dir), name) if cache_dir is not None else None
            if cache is not None:
                cached = _read_cache(cache, name, key)
                if cached is not None:
                    return cached
            data = handle.read()
    except FileNotFoundError:
        raise PolicyError(
            f"policy file {name} does not exist",
            hint="run `bar init` to write the default policy, or fix policy.path in config.yaml",
        ) from None
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {name}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"policy file {name} is not UTF-8 text ({exc.reason})") from None
    policy = parse_policy_text(text, name)
    if cache is not None:
        _write_cache(cache, name, key, policy)
    return policy


def parse_policy_text(text: str, source: str) -> Policy:
    """Validate policy YAML; ``source`` names it in every error."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PolicyError(
            f"policy file {source} is not valid YAML{where}: {exc.problem or exc}"
        ) from None
    except Exception as exc:  # YAML's reader and constructors raise several kinds
        raise PolicyError(f"policy file {source} is not valid YAML: {exc}") from None
    return _build(data, source)


def _build(data: object, source: str) -> Policy:
    if data is None:
        raise PolicyError(
            f"policy file {source} is empty: it needs 'version: 1' and a 'rules:' list",
            hint="`bar init` writes a commented default policy",
        )
    if not isinstance(data, dict):
        raise PolicyError(
            f"policy file {source} must be a mapping with 'version' and 'rules', not {_kind(data)}"
        )
    for key in data:
        if key not in _TOP_KEYS:
            raise PolicyError(
                f"unknown key {key!r} in policy file {source} (allowed: {', '.join(_TOP_KEYS)})"
            )
    version = data.get("version")
    if version is None:
        raise PolicyError(f"policy file {source} has no 'version' (expected 'version: 1')")
    if isinstance(version, bool) or not isinstance(version, int):
        raise PolicyError(f"policy file {source}: 'version' must be the number 1, not {version!r}")
    if version != 1:
        raise PolicyError(f"unsupported policy version {version} in {source}")
    on_error = data.get("on_parse_error", "warn")
    if on_error not in ACTIONS:
        raise PolicyError(
            f"policy file {source}: 'on_parse_error' must be one of {', '.join(ACTIONS)}, "
            f"not {on_error!r}"
        )
    if "rules" not in data:
        raise PolicyError(f"policy file {source} has no 'rules' list")
    raw_rules = data["rules"]
    if raw_rules is None:
        raw_rules = []
    if not isinstance(raw_rules, list):
        raise PolicyError(f"policy file {source}: 'rules' must be a list, not {_kind(raw_rules)}")
    rules: list[Rule] = []
    names: set[str] = set()
    for number, raw in enumerate(raw_rules, 1):
        rule = _build_rule(raw, number, source)
        if rule.name in names:
            raise PolicyError(f"policy rule {rule.name!r} in {source}: duplicate rule name")
        names.add(rule.name)
        rules.append(rule)
    return Policy(rules, source, str(on_error))


def _build_rule(raw: object, number: int, source: str) -> Rule:
    label = f"policy rule #{number} in {source}"
    if not isinstance(raw, dict):
        raise PolicyError(f"{label}: must be a mapping with name, pattern, action and reason")
    name = raw.get("name")
    if isinstance(name, str) and name:
        label = f"policy rule {name!r} in {source}"
    for key in raw:
        if key not in _RULE_KEYS:
            raise PolicyError(f"{label}: unknown key {key!r} (allowed: {', '.join(_RULE_KEYS)})")
    for field in ("name", "pattern", "action", "reason"):
        if field not in raw or raw[field] is None:
            raise PolicyError(f"{label}: missing field {field!r}")
        if not isinstance(raw[field], str):
            raise PolicyError(f"{label}: {field!r} must be a string, not {_kind(raw[field])}")
    assert isinstance(name, str)
    if not re.fullmatch(_NAME, name):
        raise PolicyError(
            f"{label}: bad name (use letters, digits, '.', '_' and '-', starting with a "
            "letter or digit)"
        )
    if raw["action"] not in ACTIONS:
        raise PolicyError(
            f"{label}: unknown action {raw['action']!r} (expected one of {', '.join(ACTIONS)})"
        )
    if not raw["pattern"]:
        raise PolicyError(f"{label}: empty pattern would match every command")
    match, no_match = _build_examples(raw.get("examples"), label)
    try:
        return Rule(name, raw["pattern"], raw["action"], raw["reason"], match, no_match)
    except re.error as exc:
        raise PolicyError(f"{label}: bad pattern: {exc}") from None
    except (OverflowError, RecursionError, ValueError) as exc:
        raise PolicyError(f"{label}: bad pattern: {exc}") from None


def _build_examples(raw: object, label: str) -> tuple[list[str], list[str]]:
    if raw is None:
        return [], []
    if not isinstance(raw, dict):
        raise PolicyError(f"{label}: 'examples' must be a mapping with 'match' and 'no_match'")
    out: dict[str, list[str]] = {"match": [], "no_match": []}
    for key, value in raw.items():
        if key not in _EXAMPLE_KEYS:
            raise PolicyError(
                f"{label}: unknown key {key!r} in 'examples' (allowed: match, no_match)"
            )
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PolicyError(f"{label}: 'examples.{key}' must be a list of strings")
        out[key] = value
    return out["match"], out["no_match"]


def _kind(value: object) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), type(value).__name__)


# ----------------------------------------------------------------------- cache


def _cache_file(cache_dir: str, name: str) -> str:
    digest = 0xCBF29CE484222325  # FNV-1a: stable across processes, and needs no import
    for byte in name.encode("utf-8", "surrogatepass"):
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return os.path.join(cache_dir, f"policy-{digest:016x}.json")


def _read_cache(cache: str, name: str, key: list[int]) -> Policy | None:
    try:
        with open(cache, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("format") != _CACHE_FORMAT or data.get("bar") != __version__:
            return None
        if data.get("path") != name or data.get("stat") != key:
            return None
        rules = [
            Rule(
                r["name"],
                r["pattern"],
                r["action"],
                r["reason"],
                r["match"],
                r["no_match"],
                literals=r["literals"],
                compiled=False,
            )
            for r in data["rules"]
        ]
        if any(
            not isinstance(r.pattern, str)
            or (r.literals is not None and not all(isinstance(x, str) and x for x in r.literals))
            for r in rules
        ):
            return None
        on_error = data["on_parse_error"]
        if on_error not in ACTIONS or any(r.action not in ACTIONS for r in rules):
            return None
        return Policy(rules, name, on_error)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, re.error):
        return None  # a missing or damaged cache is only a slower load


def _write_cache(cache: str, name: str, key: list[int], policy: Policy) -> None:
    data = {
        "format": _CACHE_FORMAT,
        "bar": __version__,
        "path": name,
        "stat": key,
        "on_parse_error": policy.on_parse_error,
        "rules": [rule.to_json() for rule in policy.rules],
    }
    tmp = f"{cache}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(cache), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, cache)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
