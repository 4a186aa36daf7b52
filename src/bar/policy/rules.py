"""Judging commands: rules, the policy that holds them, and what it decides.

A command is cut into units by ``bar.shell`` and every rule is ``re.search``-ed
against every unit's views; the strictest action among the matches is the decision,
and every match is an event. A rule's pattern is compiled on first use and skipped
without compiling while none of its required literals is in the text (see
``bar.policy.literals``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bar import shell
from bar.base.record import record
from bar.errors import PolicyError
from bar.policy.literals import required_literals

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from bar.policy.places import Places

ACTIONS = ("block", "warn", "log")
_SEVERITY = {"allow": 0, "log": 1, "warn": 2, "block": 3}
PARSE_ERROR_RULE = "bar:unparseable"
_PARSE_ERROR_REASON = (
    "the command line could not be fully parsed ({why}); its raw text was matched too"
)


@record(frozen=True)
class PolicyEvent:
    """One rule matching one unit. ``matched`` is the text the pattern matched."""

    rule: str
    action: str
    matched: str
    reason: str

    def to_record(self) -> dict[str, str]:
        """The ledger's ``policy_events`` entry."""
        return {"rule": self.rule, "action": self.action, "matched": self.matched}

    def to_json(self) -> dict[str, str]:
        return {**self.to_record(), "reason": self.reason}


@record(frozen=True)
class Decision:
    """``action`` is ``allow`` (nothing matched), ``log``, ``warn`` or ``block``."""

    action: str
    events: tuple[PolicyEvent, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))

    @property
    def blocked(self) -> bool:
        return self.action == "block"

    def to_json(self) -> dict[str, object]:
        return {"decision": self.action, "events": [event.to_json() for event in self.events]}


class Rule:
    """One validated rule. ``literals``, when known, are strings of which every text
    the pattern can match contains at least one; rules whose literals are absent from a
    command are skipped without compiling the pattern (see ``required_literals``).

    Not a record: its pattern is compiled lazily, so it compares by identity."""

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
        if self.literals is not None:
            for literal in self.literals:  # a loop: cheaper than any() on the hot path
                if literal in text:
                    break
            else:
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


class Policy:
    """Validated rules from ``path`` (a file name, or a label for text)."""

    __slots__ = ("_named", "on_parse_error", "path", "rules")

    def __init__(self, rules: Sequence[Rule], path: str, on_parse_error: str = "warn") -> None:
        self.rules = tuple(rules)
        self.path = path
        self.on_parse_error = on_parse_error
        self._named: frozenset[str] | None = None

    def __repr__(self) -> str:
        return f"Policy(path={self.path!r}, rules={len(self.rules)})"

    def needed(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The strings one of which any text a rule matches holds: those compared as
        they are, and those of rules matched without regard to case (to be compared
        so); None when some rule needs none, or one that a quoted word could hold
        across its quotes (a quote or a backslash): then every text must be tried.
        What the exec check answers without judging rests on it
        (``bar.sandbox.exec_quick``)."""
        exact: set[str] = set()
        folded: set[str] = set()
        for rule in self.rules:
            if rule.literals is not None:
                exact.update(rule.literals)
                continue
            found = required_literals(rule.pattern, folded=True)
            if found is None:
                return None
            folded.update(found)
        if any(c in literal for literal in exact | folded for c in "'\\\0"):
            return None
        return tuple(sorted(exact)), tuple(sorted(folded))

    def may_name(self, program: str) -> bool:
        """Whether a rule's required strings are in ``program`` (a name a program is also
        known by: judging the same arguments again under it can only matter then)."""
        if self._named is None:
            self._named = frozenset(lit for rule in self.rules for lit in rule.literals or ())
        return any(lit in program for lit in self._named)

    def evaluate_line(self, line: str, places: Places | None = None) -> Decision:
        """Judge a shell command line, as an agent would hand it to ``sh -c``; with
        ``places``, paths of the worktree and the homes are tried in the rules' words
        (``bar.policy.places``)."""
        return self._decide(shell.analyse_line(line), line, places)

    def evaluate_argv(self, argv: Sequence[str], places: Places | None = None) -> Decision:
        """Judge an argument vector run without a shell (``bar run -- ARGV``)."""
        return self._decide(shell.analyse_argv(argv), shell.render(argv), places)

    def evaluate_exec(
        self,
        path: str,
        argv: Sequence[str],
        places: Places | None = None,
        *,
        cwd: str = "",
        exists: Callable[[str], bool] | None = None,
    ) -> Decision:
        """Judge a program about to be executed: ``path`` as the call named it (it, not
        ``argv[0]``, says which program runs), ``argv`` as it receives it, run in
        ``cwd``, where ``exists`` tells whether an argument names an entry there. A
        multi-call program (busybox) is judged by the name it was called by. What the
        line's parser could not follow is not reported: at exec, what runs is judged
        as it runs."""
        words = exec_words(path, argv, places, cwd=cwd, exists=exists)
        decision = self._decide(shell.analyse_argv(words), shell.render(words), places)
        events = tuple(e for e in decision.events if e.rule != PARSE_ERROR_RULE)
        if len(events) == len(decision.events):
            return decision
        return Decision(_strictest(events), events)

    def _decide(
        self, analysis: shell.Analysis, source: str, places: Places | None = None
    ) -> Decision:
        events: list[PolicyEvent] = []
        seen: set[tuple[str, str]] = set()
        hit: list[set[int]] = [set() for _ in self.rules]
        for index, unit in enumerate(analysis.units):
            views = unit.views if places is None else tuple(places.text(v) for v in unit.views)
            for rule, hit_units in zip(self.rules, hit, strict=True):
                if unit.parts and not hit_units.isdisjoint(unit.parts):
                    continue  # already reported for one of the pipeline's stages
                for view in views:
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
        return Decision(_strictest(events), tuple(events))


MULTI_CALL = frozenset({"busybox", "toybox", "coreutils"})


def exec_words(
    path: str,
    argv: Sequence[str],
    places: Places | None = None,
    *,
    cwd: str = "",
    exists: Callable[[str], bool] | None = None,
) -> list[str]:
    """The words judged for a program about to be executed (``Policy.evaluate_exec``):
    the program as the call named it, then its arguments, those naming an entry of a
    working directory outside the worktree made absolute."""
    name = path.rsplit("/", 1)[-1]
    words = list(argv)
    if name and name not in MULTI_CALL:
        words = [path, *words[1:]] if words else [path]
    if places is not None and exists is not None:
        words = places.words(words, cwd, exists)
    return words


def seen(analysis: shell.Analysis, places: Places | None = None) -> list[tuple[str, ...]]:
    """The views of each unit as the rules are tried on them (``bar policy explain``)."""
    if places is None:
        return [unit.views for unit in analysis.units]
    return [tuple(places.text(v) for v in unit.views) for unit in analysis.units]


def _strictest(events: Sequence[PolicyEvent]) -> str:
    action = "allow"
    for event in events:
        if _SEVERITY[event.action] > _SEVERITY[action]:
            action = event.action
    return action


@record(frozen=True)
class ExampleFailure:
    """A rule's example that did not behave as the rule says it should."""

    rule: str
    command: str
    expected: str
    got: str


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
