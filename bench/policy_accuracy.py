"""How well bar's default policy separates dangerous commands from benign ones.

    .venv/bin/python bench/policy_accuracy.py [--misses] [--latency] [--corpus FILE]

Reads tests/data/policy_corpus.yaml (or FILE, or a directory with dangerous.txt and
benign.txt such as tests/data/policy_round_three): command lines labeled dangerous or
benign. Evaluates each with the default policy and prints:

- dangerous caught: the share of dangerous lines the policy blocks or warns about;
- benign blocked: the share of benign lines it blocks (warn and log are allowed);

``--misses`` lists the dangerous lines it lets through and the benign lines it blocks.
``--latency`` also times in-process evaluation (per line, best of 20 runs) and the first
evaluation that needs the shell parser.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from bar.policy import default_policy  # noqa: E402
from bar.policy.places import Places  # noqa: E402
from bar.shell.analysis import is_plain  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "policy_corpus.yaml"


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]


def _labeled(path: Path) -> tuple[list[str], list[str]]:
    """(dangerous, benign) lines: a YAML file with both lists, or a directory holding
    ``dangerous.txt`` and ``benign.txt`` (one line each; ``tests/data/policy_round_three``)."""
    if path.is_dir():
        return _lines(path / "dangerous.txt"), _lines(path / "benign.txt")
    corpus = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(corpus["dangerous"]), list(corpus["benign"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="list the misclassified lines")
    parser.add_argument("--latency", action="store_true", help="time in-process evaluation")
    parser.add_argument("--corpus", type=Path, help="read these labeled lines instead")
    args = parser.parse_args()

    source = args.corpus or CORPUS.relative_to(ROOT)
    dangerous, benign = _labeled(args.corpus or CORPUS)

    start = time.perf_counter()
    policy = default_policy()
    load_ms = (time.perf_counter() - start) * 1000
    first = time.perf_counter()
    policy.evaluate_line('echo "warm up the parser" | cat')
    first_ms = (time.perf_counter() - first) * 1000

    places = Places.of()  # (the home directory, whatever a line spells it as, is ~)
    missed = [
        line
        for line in dangerous
        if policy.evaluate_line(line, places).action not in ("block", "warn")
    ]
    blocked = [line for line in benign if policy.evaluate_line(line, places).blocked]
    caught = len(dangerous) - len(missed)
    print(f"corpus: {len(dangerous)} dangerous, {len(benign)} benign ({source})")
    print(
        f"dangerous caught (block or warn): {caught}/{len(dangerous)} = "
        f"{100 * caught / len(dangerous):.1f}%"
    )
    print(f"benign blocked: {len(blocked)}/{len(benign)} = {100 * len(blocked) / len(benign):.1f}%")
    if args.misses:
        for line in missed:
            print(f"  missed:  {line!r}")
        for line in blocked:
            events = ", ".join(e.rule for e in policy.evaluate_line(line, places).events)
            print(f"  blocked: {line!r} ({events})")

    if args.latency:
        # per line, the best of 20 runs: the machine's noise is not the policy's cost
        best: dict[str, float] = {}
        for _ in range(20):
            for line in dangerous + benign:
                began = time.perf_counter_ns()
                policy.evaluate_line(line)
                took = (time.perf_counter_ns() - began) / 1000
                best[line] = min(took, best.get(line, took))
        print(f"policy parse (YAML, no cache): {load_ms:.1f} ms")
        print(f"first line needing the shell parser (loads tree-sitter): {first_ms:.1f} ms")
        for plain, label in ((True, "plain lines (no parser)"), (False, "lines parsed")):
            values = sorted(t for line, t in best.items() if is_plain(line) == plain)
            if values:
                print(
                    f"{label}: median {statistics.median(values):.0f} µs, "
                    f"90th percentile {values[int(len(values) * 0.9)]:.0f} µs, "
                    f"max {values[-1]:.0f} µs ({len(values)} lines)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
