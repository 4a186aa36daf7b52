"""The policy's round-three measure: what leaves the machine (pushes to protected
branches, cloud and infrastructure deletes, databases, publishing, secrets sent away,
devices, crontab, keys) and the shell's tricks that hide a command from a check of the
text, each next to look-alikes that must pass (docs/policy.md, "Accuracy").

The lines are in ``tests/data/policy_round_three/``: about a third written with the
rules, two thirds written apart from them, without reading the rules, to measure how the
classes hold on spellings nobody tuned for. The home directory of the lines is
``/home/me``, which the check knows as ``~`` (``bar.policy.places``)."""

from __future__ import annotations

import pytest
from helpers import DATA

from bar.policy import default_policy
from bar.policy.places import Places

DANGEROUS = (DATA / "policy_round_three" / "dangerous.txt").read_text().splitlines()
BENIGN = (DATA / "policy_round_three" / "benign.txt").read_text().splitlines()


def test_dangerous_lines_are_caught_and_benign_ones_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/me")
    policy, places = default_policy(), Places.of()
    missed = [
        line
        for line in DANGEROUS
        if policy.evaluate_line(line, places).action not in ("block", "warn")
    ]
    blocked = [line for line in BENIGN if policy.evaluate_line(line, places).blocked]
    caught = 1 - len(missed) / len(DANGEROUS)
    assert len(DANGEROUS) >= 1000 and len(BENIGN) >= 900
    assert caught >= 0.98, f"caught {caught:.1%}; missed: {missed}"
    assert len(blocked) / len(BENIGN) <= 0.01, f"benign blocked: {blocked}"
