#!/usr/bin/env python3
"""What ``bar verify`` costs beside ``git status``, on a generated repository.

``bar verify`` reads and hashes every file of the last recorded state; ``git status``
stats them (its index's stat cache says the bytes are unchanged). Both run warm (the
files in the page cache), alternately in the same run, so a loaded machine weighs on
both alike; the ratio of medians is the figure, in both speed modes (``BAR_FAST=0``).

    python bench/verify.py                 # 40,000 files (bench/genrepo.py --size medium)
    python bench/verify.py --files 5000 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BAR = str(Path(sys.executable).with_name("bar"))


def _timed(argv: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    took = time.perf_counter() - t0
    if res.returncode not in ok:
        raise SystemExit(f"{argv}: exit {res.returncode}: {res.stderr.decode()[-2000:]}")
    return took


def measure(files: int, runs: int, fast: bool, tmp: Path) -> dict[str, object]:
    repo = tmp / f"repo-{'fast' if fast else 'slow'}"
    subprocess.run(
        [sys.executable, str(HERE / "genrepo.py"), "--files", str(files), str(repo)],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "BAR_HOME": str(tmp / f"home-{fast}"), "BAR_FAST": "1" if fast else "0"}
    for argv in (["init"], ["task", "new", "v"]):
        subprocess.run([BAR, *argv], cwd=repo, env=env, check=True, capture_output=True)
    path = subprocess.run(
        [BAR, "task", "path", "v"], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    wt = Path(path)
    subprocess.run([BAR, "run", "--", "true"], cwd=wt, env=env, check=True, capture_output=True)
    said = json.loads(
        subprocess.run(
            [BAR, "verify", "--json"], cwd=wt, env=env, capture_output=True, check=True
        ).stdout
    )
    status, verify = [], []
    for _ in range(runs):
        status.append(_timed(["git", "status", "--porcelain"], wt, env))
        verify.append(_timed([BAR, "verify"], wt, env))
    s, v = statistics.median(status), statistics.median(verify)
    return {
        "mode": "fast" if fast else "slow",
        "files": said["files"],
        "bytes_hashed": said["bytes_hashed"],
        "git_status_s": round(s, 3),
        "bar_verify_s": round(v, 3),
        "verify_inside_s": said["seconds"],
        "ratio": round(v / s, 2),
        "load": os.getloadavg()[0],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=40_000)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bar-bench-verify-") as d:
        for fast in (True, False):
            print(json.dumps(measure(args.files, args.runs, fast, Path(d))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
