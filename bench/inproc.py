"""In-process timings of a tool's own snapshot function, run under that tool's interpreter.

run.py starts this script with bar's interpreter (or stepback's, from its own venv) so the
function under test is timed without the interpreter's start-up, the way the tool itself
calls it. Results are printed as one JSON object on stdout.

    python bench/inproc.py bar-snapshot WORKTREE INDEX POOL ROUNDS
        interleaved: [small change, bar.history.snapshot.take()] and [small change, git status]
    python bench/inproc.py bar-take WORKTREE INDEX
        one bar.history.snapshot.take() of the worktree as it is
    python bench/inproc.py stepback-checkpoint WORKTREE
        one stepback Engine.checkpoint() of the worktree as it is
    python bench/inproc.py sandbox WORKTREE PLAIN_HOME HOME ROUNDS CALLS WARMUP BWRAP|-
        interleaved, each until `true` exits: Popen(true); bar's confinement of a step of
        the worktree's task (plan, ruleset, confined thread) starting true, with HOME
        set to PLAIN_HOME and to HOME (whose ~/.ssh etc. must be carved out); and, unless
        BWRAP is -, bubblewrap given the binds of the same plan starting true
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Snapshots made here go to a ref of their own, never to a task's chain.
BENCH_REF = "refs/bench/snapshots"


def _take(worktree: Path, index: Path) -> tuple[float, bool]:
    from bar import git
    from bar.history import snapshot

    # the index's own git directory beside it, as a task's is (``figures._side_index``)
    common = Path(git.out(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    git.pin_own(index.parent, index.parent / "git", common, worktree)
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


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def bwrap_argv(bwrap: str, plan: Any) -> list[str]:
    """bubblewrap's equivalent of a ``bar.sandbox.Plan``: everything read-only, fresh
    /dev and /proc, each writable root bound writable, a protected path inside one bound
    read-only again, each path to hide covered (a directory by an empty tmpfs, a file by
    /dev/null). A deeper mount goes over a shallower one, so they are made in that order."""
    real = [os.path.realpath(x) for x in plan.writable]
    writable = [w for w in real if os.path.lexists(w) and not _under(w, "/dev")]
    mounts: list[tuple[str, ...]] = [("--bind", w, w) for w in writable]
    for x in map(os.path.realpath, plan.protected):
        if os.path.lexists(x) and any(_under(x, w) for w in writable):
            mounts.append(("--ro-bind", x, x))
    for x in map(os.path.realpath, plan.deny_read):
        if os.path.isdir(x):
            mounts.append(("--tmpfs", x))
        elif os.path.lexists(x):
            mounts.append(("--ro-bind", "/dev/null", x))
    mounts.sort(key=lambda m: m[-1].rstrip("/").count("/"))
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for m in mounts:
        argv += m
    return argv


def _count_rules(task: Any, home: str) -> int:
    """How many Landlock rules bar's plan of a step gives (counted outside the timing)."""
    from bar.sandbox import confine, landlock
    from bar.sandbox.plan import for_step, ground

    count = 0
    allow = landlock.Ruleset.allow

    def counting(self: Any, *args: Any, **kwargs: Any) -> bool:
        nonlocal count
        count += 1
        return allow(self, *args, **kwargs)

    os.environ["HOME"] = home
    landlock.Ruleset.allow = counting  # type: ignore[method-assign]
    try:
        confine(for_step(task, ground(task))).close()
    finally:
        landlock.Ruleset.allow = allow  # type: ignore[method-assign]
    return count


def sandbox_setup(
    worktree: Path,
    plain_home: str,
    home: str,
    rounds: int,
    calls: int,
    warmup: int,
    bwrap: str | None,
) -> dict[str, object]:
    from bar import api
    from bar.sandbox import confine
    from bar.sandbox.plan import for_step, ground

    task = api.get_task(api.open_project(worktree))
    os.environ["HOME"] = home
    probe = confine(for_step(task, ground(task)))
    probe.close()
    if not probe.enabled:
        return {"unavailable": probe.reason}
    rules = {"plain": _count_rules(task, plain_home), "carve": _count_rules(task, home)}

    def checked(proc: subprocess.Popen[bytes], what: str) -> None:
        code = proc.wait()
        if code != 0:
            raise SystemExit(f"inproc: {what} exited with {code}")

    def popen() -> float:
        t0 = time.perf_counter()
        checked(subprocess.Popen(["true"]), "true")
        return time.perf_counter() - t0

    def landlock(home_dir: str) -> Callable[[], float]:
        def go() -> float:
            os.environ["HOME"] = home_dir
            t0 = time.perf_counter()
            confinement = confine(for_step(task, ground(task)))
            try:
                started = confinement.start(
                    lambda prepare: subprocess.Popen(["true"], preexec_fn=prepare)
                )
                checked(started, "confined true")
            finally:
                confinement.close()
            return time.perf_counter() - t0

        return go

    def bubblewrap() -> float:
        os.environ["HOME"] = home
        t0 = time.perf_counter()
        argv = bwrap_argv(str(bwrap), for_step(task, ground(task)))
        checked(subprocess.Popen([*argv, "true"]), "bwrap true")
        return time.perf_counter() - t0

    contenders = {
        "popen": popen,
        "landlock": landlock(plain_home),
        "landlock carve": landlock(home),
    }
    result: dict[str, Any] = {"rules": rules}
    if bwrap:
        os.environ["HOME"] = home
        argv = bwrap_argv(bwrap, for_step(task, ground(task)))
        tried = subprocess.run([*argv, "true"], capture_output=True)
        if tried.returncode == 0:
            contenders["bwrap carve"] = bubblewrap
            result["bwrap_argv"] = " ".join(argv)
        else:
            err = tried.stderr.decode(errors="replace").strip()
            result["bwrap_problem"] = f"bwrap exited with {tried.returncode}: {err[-300:]}"
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for r in range(warmup + rounds):
        total = dict.fromkeys(contenders, 0.0)
        for _ in range(calls):
            for name, fn in contenders.items():
                total[name] += fn()
        if r >= warmup:
            for name in contenders:
                samples[name].append(total[name] / calls)
    result["samples"] = samples
    return result


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else ""
    if mode == "bar-snapshot" and len(argv) == 5:
        result = bar_snapshot(Path(argv[1]), Path(argv[2]), Path(argv[3]), int(argv[4]))
    elif mode == "bar-take" and len(argv) == 3:
        dt, changed = _take(Path(argv[1]), Path(argv[2]))
        result = {"seconds": dt, "changed": changed}
    elif mode == "stepback-checkpoint" and len(argv) == 2:
        result = stepback_checkpoint(Path(argv[1]))
    elif mode == "sandbox" and len(argv) == 8:
        result = sandbox_setup(
            Path(argv[1]),
            argv[2],
            argv[3],
            int(argv[4]),
            int(argv[5]),
            int(argv[6]),
            None if argv[7] == "-" else argv[7],
        )
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
