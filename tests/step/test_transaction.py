"""The one way a command changes a task (``bar.step.transaction``): each intent a stopped
bar may leave is finished by its own verb's completion, which the verb registers with its
journal as its module loads; the transaction names the verbs only to load them, and only
once a journal is found, so a command that finds none loads none of them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "bar"

_PROBE = """
import sys
from bar.step import transaction
from bar.model import journals
loaded = sorted(m for m in ("bar.changes.apply", "bar.changes.rollback", "bar.changes.sync",
                            "bar.step.complete") if m in sys.modules)
for load in journals._VERBS:
    load()
finishers = {j.what: j._finish.__module__ for j in journals.INTERRUPTED if j._finish}
print(loaded)
print(sorted(finishers.items()))
"""


def test_each_interrupted_intent_is_finished_by_its_own_verb_loaded_only_when_needed() -> None:
    said = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert said[0] == "[]"  # the transaction alone loads no verb
    assert said[1] == str(
        [
            ("apply journal", "bar.changes.apply"),
            ("rollback journal", "bar.changes.rollback"),
            ("running marker", "bar.step.complete"),
            ("sync journal", "bar.changes.sync"),
        ]
    )


def test_the_transaction_and_the_lock_clearing_name_no_verb_but_to_load_it() -> None:
    verbs = ("bar.changes.apply", "bar.changes.rollback", "bar.changes.sync", "bar.step.complete")
    for name in ("transaction.py", "recovery.py"):
        tree = ast.parse((SRC / "step" / name).read_text())
        loaders = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_verbs"]
        inside = {id(n) for f in loaders for n in ast.walk(f)}
        named = [
            f"{node.module}.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and id(node) not in inside and node.module
            for alias in node.names
            if f"{node.module}.{alias.name}" in verbs or node.module in verbs
        ]
        assert not named, f"step/{name} imports a verb: {named}"
