"""make test smokes a quarter of the benchmark's figures a day (``bench/run.py --pick``):
the same draw for the same seed, at least one figure, and every figure within days."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run_module() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        import run  # the benchmark's driver (bench/run.py)
    finally:
        sys.path.remove(str(BENCH))
    return run


def test_a_day_draws_a_share_of_the_figures_and_the_days_draw_them_all() -> None:
    run = _run_module()
    figures = list(range(1, 21))
    today = run.picked(figures, 0.25, "20261201")
    assert len(today) == 5 and today == sorted(set(today)) and set(today) <= set(figures)
    assert run.picked(figures, 0.25, "20261201") == today  # (the seed draws it again)
    assert run.picked(figures, 0.01, "20261201") != []  # (at least one)
    seen: set[int] = set()
    for day in range(1, 29):
        seen |= set(run.picked(figures, 0.25, f"202612{day:02d}"))
    assert seen == set(figures)


@pytest.mark.parametrize("share", ["0", "1.5", "a quarter"])
def test_a_share_outside_what_makes_sense_is_refused(share: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--quick", "--pick", share],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "expected a share above 0 and at most 1" in proc.stderr
