"""Write ``src/bar/data/default_literals.json`` again: the strings each pattern of bar's
default policy cannot match without (``bar.policy.literals.known_literals``), read now.

Run it after changing a pattern of ``src/bar/data/default_policy.yaml`` or how
``bar.policy.literals`` reads a pattern (then also bump its ``KNOWN_TAG``)::

    .venv/bin/python tests/support/default_literals.py

``tests/policy/test_literals.py`` fails until the table says what reading the patterns
says; until then bar reads every pattern the table does not hold, as before.
"""

from __future__ import annotations

import json

from bar.base import yaml_text
from bar.policy import literals
from bar.policy.loader import DEFAULT_POLICY_TEXT


def main() -> None:
    rules = yaml_text.load(DEFAULT_POLICY_TEXT)["rules"]
    table = literals.known_table([rule["pattern"] for rule in rules])
    with open(literals.KNOWN_PATH, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {literals.KNOWN_PATH}: {len(rules)} patterns")


if __name__ == "__main__":
    main()
