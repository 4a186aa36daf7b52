#!/usr/bin/env python3
"""Tasks stepping at once on one large repository: which are watched, and how many of the
user's inotify watches and fanotify marks bar holds meanwhile.

Not a figure (it measures counts, not time): a check of the watch budgets at scale. It
makes ``--tasks`` tasks of the generated repository (the large one, 200,000 files, by
default), then runs ``--rounds`` rounds in which every task steps at once (a one-line edit
each), sampling the kernel's count of inotify watches and fanotify marks held by every
process (``/proc/*/fdinfo``) while they run. It prints, for each task, how ``bar status``
says it is watched, and the peaks against the user's limits.

    python bench/tasks_at_once.py                      # 10 tasks, the large repository
    python bench/tasks_at_once.py --size medium --tasks 4 --rounds 2
    python bench/tasks_at_once.py --home DIR           # again, on the tasks made before

bar's budgets are half of each limit: the inotify peak should stay under 50%, and so
should the fanotify one.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import genrepo  # noqa: E402
import run  # noqa: E402


def held() -> tuple[int, int]:
    """inotify watches and fanotify marks held now by every process this user can see."""
    watches = marks = 0
    for info in glob.glob("/proc/[0-9]*/fdinfo/*"):
        try:
            with open(info) as f:
                text = f.read()
        except OSError:
            continue
        watches += text.count("inotify wd:")
        marks += text.count("fanotify ino:")
    return watches, marks


def limit(path: str) -> int:
    with open(path) as f:
        return int(f.read())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="large", choices=sorted(genrepo.SIZES))
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--home", type=Path, help="a directory of an earlier run: reuse its tasks")
    ap.add_argument("--keep", action="store_true", help="leave the directory and its watchers")
    args = ap.parse_args(argv)
    bar = str(run.find_bar(None).bar)
    fresh = args.home is None
    where = Path(tempfile.mkdtemp(prefix="bar-at-once-")) if fresh else args.home
    env = {**os.environ, "BAR_HOME": str(where / "home")}
    repo = where / "repo"
    names = [f"t{i}" for i in range(args.tasks)]
    if fresh:
        source, _ = run.ensure_repo(args.size, genrepo.DEFAULT_SEED)
        subprocess.run(["git", "clone", "-q", "--local", str(source), str(repo)], check=True)
        subprocess.run([bar, "init"], cwd=repo, env=env, check=True, capture_output=True)
        for n, name in enumerate(names, 1):
            print(f"making task {n} of {len(names)}", file=sys.stderr)
            subprocess.run(
                [bar, "task", "new", name], cwd=repo, env=env, check=True, capture_output=True
            )
    peak = (0, 0)
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}: {len(names)} steps at once", file=sys.stderr)
        steps = [
            subprocess.Popen(
                [bar, "run", "--task", name, "--no-pty", "--", "sh", "-c", f"echo {r} >> at-once"],
                cwd=repo,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for name in names
        ]
        while any(step.poll() is None for step in steps):
            now = held()
            peak = (max(peak[0], now[0]), max(peak[1], now[1]))
            time.sleep(0.2)
        for step in steps:
            _, err = step.communicate()
            if step.returncode != 0:
                print(err.decode(errors="replace"), file=sys.stderr)
                return 1
    time.sleep(2)  # (the last watchers to start)
    for name in names:
        said = subprocess.run(
            [bar, "status", "--task", name, "--json"],
            cwd=repo,
            env=env,
            capture_output=True,
            check=True,
        )
        watch = json.loads(said.stdout)["watch"] or {}
        line = f"{name}: {watch.get('mode')}"
        if watch.get("mode") != "scanning":
            line += f", {watch.get('dirs'):,} directories, {watch.get('marks') or 0:,} by fanotify"
        else:
            line += f" ({watch.get('reason')})"
        print(line)
    now = held()
    peak = (max(peak[0], now[0]), max(peak[1], now[1]))
    watches = limit("/proc/sys/fs/inotify/max_user_watches")
    marks = limit("/proc/sys/fs/fanotify/max_user_marks")
    print(
        f"inotify watches: {now[0]:,} after, {peak[0]:,} at most ({peak[0] / watches:.0%} of {watches:,})"
    )
    print(
        f"fanotify marks:  {now[1]:,} after, {peak[1]:,} at most ({peak[1] / marks:.0%} of {marks:,})"
    )
    if args.keep:
        print(f"left in {where}", file=sys.stderr)
        return 0
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from bar.changes.fast import watcher, resident; "
            "watcher.stop_all(Path(sys.argv[1])); resident.stop(sys.argv[1])",
            str(where / "home"),
        ],
        check=True,
    )
    shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
