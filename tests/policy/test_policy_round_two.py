"""The policy's round-two classes (docs/policy.md, "The default policy"): deletes through
interpreter one-liners, paths built by command substitution or the line's own variables,
truncating the developer's dotfiles and credentials, moving branches other than the task's;
each next to look-alikes that must still pass. Lines are only analysed here; the last test
runs one for real."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from helpers import DATA, bar_exe, ledger

from bar.policy import Policy, default_policy

# lines of a review's disguises (and look-alikes), one per line
BLOCKED = (DATA / "policy_round_two_blocked.txt").read_text().splitlines()
ALLOWED = (DATA / "policy_round_two_allowed.txt").read_text().splitlines()


@cache
def _policy() -> Policy:
    """Parsed once for the module's hundreds of lines (a tenth of a second each time)."""
    return default_policy()


@pytest.mark.parametrize("line", BLOCKED)
def test_blocked(line: str) -> None:
    decision = _policy().evaluate_line(line)
    assert decision.action == "block", [e.rule for e in decision.events]


@pytest.mark.parametrize("line", ALLOWED)
def test_not_blocked(line: str) -> None:
    decision = _policy().evaluate_line(line)
    assert decision.action != "block", [e.rule for e in decision.events]


def test_an_interpreter_deleting_the_home_directory_is_stopped_in_a_run(
    repo: Path, tmp_path: Path
) -> None:
    home = Path.home()
    victim = home / "precious"
    victim.mkdir(exist_ok=True)
    (victim / "notes.txt").write_text("keep me\n")
    assert bar_exe("init", cwd=repo).code == 0
    res = bar_exe("task", "new", "interp", "--json", cwd=repo)
    assert res.code == 0, res.err
    task_id = res.json()["id"]
    code = "import os, shutil; shutil.rmtree(os.path.join(os.path.expanduser('~'), 'precious'))"
    res = bar_exe("run", "--no-sandbox", "--", "python3", "-c", code, cwd=repo)
    assert res.code == 126 and "blocked" in res.err, res.err
    assert (victim / "notes.txt").read_text() == "keep me\n"
    (step,) = ledger(task_id)
    assert step["blocked"] is True
    assert {e["rule"] for e in step["policy_events"]} >= {"rm-recursive-outside-worktree"}
