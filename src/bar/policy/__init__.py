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
are not plain words; a rule's regex is compiled only once a text holds one of the
strings it needs; and records are ``bar.base.record`` records rather than
dataclasses, whose import (through ``inspect``) would cost more than everything else
here.

The package: ``rules`` judges (rules, the policy, decisions and events), ``literals``
finds the strings a pattern needs, ``loader`` reads and caches policy files.
"""

from bar.policy.literals import required_literals
from bar.policy.loader import (
    DEFAULT_POLICY_PATH,
    DEFAULT_POLICY_TEXT,
    default_policy,
    load_policy,
    parse_policy_text,
)
from bar.policy.rules import (
    ACTIONS,
    PARSE_ERROR_RULE,
    Decision,
    ExampleFailure,
    Policy,
    PolicyEvent,
    Rule,
    check_examples,
)

__all__ = [
    "ACTIONS",
    "DEFAULT_POLICY_PATH",
    "DEFAULT_POLICY_TEXT",
    "PARSE_ERROR_RULE",
    "Decision",
    "ExampleFailure",
    "Policy",
    "PolicyEvent",
    "Rule",
    "check_examples",
    "default_policy",
    "load_policy",
    "parse_policy_text",
    "required_literals",
]
