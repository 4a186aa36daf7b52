"""Which tests ``make test-fast`` leaves out: ``tests/data/long_tests.txt``, made from a
timed run of the whole suite.

``make test-fast`` is for work in progress: it gives a verdict on every module's quick
tests in a few minutes. A test that took longer than the threshold in a timed run (a real
agent CLI, a Temporal worker, two machines, a browser, a crash sweep, a random property)
is marked ``long`` by ``tests/conftest.py``: ``make test`` runs it, ``make test-fast`` does
not. Remake the list after a timed run of the whole suite::

    .venv/bin/python -m pytest -n 4 --dist worksteal --junitxml=/tmp/run.xml
    .venv/bin/python tests/support/long_tests.py /tmp/run.xml --seconds 4

(the threshold is in the timed run's seconds: on a loaded machine, several times an idle
one's). The sweeps are marked ``slow`` in their own files besides.

When ``make test-fast`` itself grows past its three minutes, a timed run of it adds its
longest tests to the list, keeping what is listed (``--keep``)::

    .venv/bin/python -m pytest -n 4 --dist worksteal -m "not slow and not long" --junitxml=/tmp/fast.xml
    .venv/bin/python tests/support/long_tests.py /tmp/fast.xml --seconds 2 --keep
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

LIST = Path(__file__).resolve().parent.parent / "data" / "long_tests.txt"
HEADER = (
    "# Tests make test-fast leaves out (marked long by tests/conftest.py; make test runs them):\n"
    "# those that took more than {seconds:g} s in a timed run of the whole suite.\n"
    "# Remade by tests/support/long_tests.py (its docstring says how).\n"
)


def listed() -> set[str]:
    """The node ids the list names."""
    if not LIST.exists():
        return set()
    lines = LIST.read_text(encoding="utf-8").splitlines()
    return {line for line in lines if line and not line.startswith("#")}


def node_id(case: ET.Element) -> str:
    """A JUnit test case's pytest node id (the suite has no test classes)."""
    module = case.get("classname", "").replace(".", "/")
    return f"{module}.py::{case.get('name', '')}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="remake tests/data/long_tests.txt")
    parser.add_argument("junit", type=Path, help="the JUnit XML of a timed run of the suite")
    parser.add_argument("--seconds", type=float, default=4.0, help="longer than this: long")
    parser.add_argument(
        "--keep", action="store_true", help="add to the tests listed rather than replace them"
    )
    args = parser.parse_args(argv)
    try:
        cases = ET.parse(args.junit).getroot().iter("testcase")
    except (OSError, ET.ParseError) as exc:
        parser.error(f"cannot read {args.junit} as JUnit XML: {exc}")
    found = {node_id(case) for case in cases if float(case.get("time", "0")) > args.seconds}
    kept = listed() if args.keep else set()
    header = HEADER.format(seconds=args.seconds)
    if args.keep:  # the list's own words, and what this run added
        said = [line for line in LIST.read_text(encoding="utf-8").splitlines() if line[:1] == "#"]
        added = f"# and those over {args.seconds:g} s in a timed run of make test-fast."
        words = [line for line in said if not line.startswith("# Remade")]
        header = "\n".join([*words, *([added] if added not in words else []), said[-1]]) + "\n"
    long = sorted(found | kept)
    LIST.write_text(header + "".join(f"{n}\n" for n in long), encoding="utf-8")
    print(f"{len(long)} tests listed in {LIST} ({len(found - kept)} new)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
