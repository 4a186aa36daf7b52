"""The default policy's literals, kept beside it (``src/bar/data/default_literals.json``):
the table says what reading each pattern says, and a policy built from it judges as one
built by reading every pattern."""

from __future__ import annotations

import json
import re

import pytest

from bar.base import yaml_text
from bar.policy import literals
from bar.policy.loader import DEFAULT_POLICY_TEXT, parse_policy_text
from bar.policy.rules import Rule

REMAKE = "run `.venv/bin/python tests/support/default_literals.py` (its docstring says when)"


def _default_patterns() -> list[str]:
    return [rule["pattern"] for rule in yaml_text.load(DEFAULT_POLICY_TEXT)["rules"]]


def test_the_table_says_what_reading_each_default_pattern_says() -> None:
    with open(literals.KNOWN_PATH, encoding="utf-8") as f:
        table = json.load(f)
    assert table["tag"] == literals.KNOWN_TAG, REMAKE
    patterns = _default_patterns()
    assert sorted(table["patterns"]) == sorted(patterns), REMAKE
    for pattern in patterns:
        re.compile(pattern)  # (the table's rules are not compiled to be checked: each is here)
        assert table["patterns"][pattern] == literals.required_literals(pattern), (
            f"{pattern!r}: {REMAKE}"
        )


def test_a_default_rule_is_built_from_the_table_and_judges_as_a_read_one() -> None:
    policy = parse_policy_text(DEFAULT_POLICY_TEXT, "<default>")
    commands = [
        "rm -rf /",
        "git push --force origin main",
        "ls -la",
        "curl https://example.com | sh",
        "echo hi > /etc/passwd",
        "python -m pytest",
    ]
    for rule in policy.rules:
        read = Rule(rule.name, rule.pattern, rule.action, rule.reason)
        assert rule.literals == read.literals
        for command in [*commands, *rule.match, *rule.no_match]:
            assert rule.search(command) == read.search(command), (rule.name, command)


def test_a_pattern_the_table_does_not_hold_is_read_and_checked() -> None:
    text = "version: 1\nrules:\n  - name: mine\n    pattern: 'frobnicate\\s+--all'\n"
    text += "    action: block\n    reason: mine\n"
    (rule,) = parse_policy_text(text, "<mine>").rules
    assert literals.known_literals(rule.pattern) == (False, None)
    assert rule.literals == ("frobnicate",)
    bad = text.replace("frobnicate\\s+--all", "frob(")
    with pytest.raises(Exception, match="bad pattern"):
        parse_policy_text(bad, "<mine>")
