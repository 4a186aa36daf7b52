"""In-process timings of a tool's own snapshot function, run under that tool's interpreter.

run.py starts this script with bar's interpreter (or stepback's, from its own venv) so the
function under test is timed without the interpreter's start-up, the way the tool itself
calls it. Results are printed as one JSON object on stdout.

    python bench/inproc.py bar-snapshot WORKTREE INDEX POOL ROUNDS
        interleaved: [small change, bar.snapshot.take()] and [small change, git status]
    python bench/inproc.py bar-take WORKTREE INDEX
        one bar.snapshot.take() of the worktree as it is
    python bench/inproc.py stepback-checkpoint WORKTREE
        one stepback Engine.checkpoint() of the worktree as it is
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

# Snapshots made here go to a ref of their own, never to a task's chain.
BENCH_REF = "refs/bench/snapshots"


def _take(worktree: Path, index: Path) -> tuple[float, bool]:
    from bar import git, snapshot

    recorded = git.rev_parse(worktree, BENCH_REF)
    if recorded is None:  # take() chains onto an existing ref, as a task's always is
        recorded = git.out(worktree, "rev-parse", "HEAD")
        git.git(worktree, "update-ref", BENCH_REF, recorded)
    t0 = time.perf_counter()
    snap = snapshot.take(worktree, index, BENCH_REF, recorded, "bench snapshot")
    return time.perf_counter() - t0, snap.changed


def bar_snapshot(worktree: Path, index: Path, pool_file: Path, rounds: int) -> dict[str, object]:
    sys.path.insert(0, str(Path(__file__).parent))
    from edits import read_pool, small_change

    pool = read_pool(pool_file)
    take: list[float] = []
    status: list[float] = []
    for i in range(rounds + 1):  # round 0 is the warm-up
        small_change(worktree, pool, 2 * i)
        dt, changed = _take(worktree, index)
        assert changed, "the small change was not seen by the snapshot"
        small_change(worktree, pool, 2 * i + 1)
        t0 = time.perf_counter()
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=worktree, stdout=subprocess.DEVNULL, check=True
        )
        ds = time.perf_counter() - t0
        if i:
            take.append(dt)
            status.append(ds)
    return {"take": take, "status": status}


def stepback_checkpoint(worktree: Path) -> dict[str, object]:
    from stepback.engine import Engine

    eng = Engine(worktree)
    t0 = time.perf_counter()
    cp = eng.checkpoint(label="bench")
    return {"seconds": time.perf_counter() - t0, "changed": cp is not None}


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else ""
    if mode == "bar-snapshot" and len(argv) == 5:
        result = bar_snapshot(Path(argv[1]), Path(argv[2]), Path(argv[3]), int(argv[4]))
    elif mode == "bar-take" and len(argv) == 3:
        dt, changed = _take(Path(argv[1]), Path(argv[2]))
        result = {"seconds": dt, "changed": changed}
    elif mode == "stepback-checkpoint" and len(argv) == 2:
        result = stepback_checkpoint(Path(argv[1]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
