#!/usr/bin/env python3
"""Figure 19: a task watched with fanotify marks, where bar's inotify watches ran out.

bar's inotify budget (half of the user's watches) is shared by every task. Before
fanotify, a task that found it held by others was watched partially: each command
statted the directories its share did not cover. Now the rest are marked with fanotify
(``bar.base.fanotify``), from a second budget (half of the user's marks).

Three tasks on one repository, in one bar home whose inotify budget (``BAR_WATCHES``) is
what the first task claims (its directories, and room for new ones), so that:

* task A holds every inotify watch bar may use (``watch on``, no marks);
* task B, next, is watched with fanotify marks (``watch on``, every directory marked);
* task C, with no marks allowed either (``BAR_MARKS=0`` in its commands), is scanned.

* 19: `bar run` of a one-line edit in B ÷ the same in A.
* 19-true: `bar run -- true` (nothing new) in B ÷ the same in A.
* 19-scan: the edit in C (nothing watched: what B would pay without marks) ÷ the same in A.

    python bench/marks.py                         # the figure alone on the small repository
    python bench/marks.py --sizes small,medium    # any option of run.py (--only 19 implied)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figures import Params, Row, ratio_row  # noqa: E402
from harness import BenchError, Fixture, interleave  # noqa: E402

NUMBER = 19


def _watch(f: Fixture, wt: Path, task: str, env: dict[str, str]) -> dict[str, object]:
    said = f.run([f.tools.bar, "status", "--task", task, "--json"], wt, capture=True, env=env)
    watch = json.loads(said.stdout)["watch"]
    return watch if isinstance(watch, dict) else {}


def _depth(path: str) -> tuple[int, str]:
    return path.count("/"), path


def fig19(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone("repo")
    f.init(repo)
    tasks = {name: f.new_task(repo, name) for name in ("a", "b", "c")}
    envs = {"a": f.env, "b": f.env, "c": {**f.env, "BAR_MARKS": "0"}}
    for name, (task, wt) in tasks.items():  # stamps; a watch handed to a watcher; sure
        for _ in range(3):
            f.run(
                [f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"], wt, env=envs[name]
            )
        if name == "a":  # the inotify budget from here on: what task A's watcher holds
            claims = [c.read_text().split() for c in (f.home / "watches").glob("[0-9]*")]
            if len(claims) != 1:
                raise BenchError(f"task A's watcher should hold the one claim: {claims}")
            f.env["BAR_WATCHES"] = envs["c"]["BAR_WATCHES"] = claims[0][0]
    said = {name: _watch(f, wt, task, envs[name]) for name, (task, wt) in tasks.items()}
    a, b, c = said["a"], said["b"], said["c"]
    if a.get("mode") != "watching" or a.get("marks"):
        raise BenchError(f"task A is not watched with inotify alone: {a}")
    if b.get("mode") != "watching" or not b.get("marks"):
        raise BenchError(f"task B is not watched with fanotify marks: {b}")
    if c.get("mode") != "scanning":
        raise BenchError(f"task C is watched: {c}")
    rel = max(f.git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines(), key=_depth)
    n = iter(range(1_000_000))

    def edit(name: str) -> float:
        task, wt = tasks[name]
        script = f"echo {next(n)} >> {rel}"
        argv: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty", "--"]
        argv += ["sh", "-c", script]
        return f.run(argv, wt, env=envs[name]).seconds

    def true(name: str) -> float:
        task, wt = tasks[name]
        argv: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"]
        return f.run(argv, wt, env=envs[name]).seconds

    s = interleave(
        {
            "edit, inotify": lambda: edit("a"),
            "edit, fanotify": lambda: edit("b"),
            "edit, scanned": lambda: edit("c"),
            "true, inotify": lambda: true("a"),
            "true, fanotify": lambda: true("b"),
        },
        p.repeat,
        p.warmup,
    )
    return [
        ratio_row(
            "19",
            "`bar run` of a one-line edit, the task watched with fanotify marks "
            "(bar's inotify watches held by another task) ÷ the same, watched with inotify",
            s,
            "edit, fanotify",
            "edit, inotify",
            1.2,
        ),
        ratio_row(
            "19-true",
            "`bar run -- true`, nothing new, watched with fanotify marks ÷ with inotify",
            s,
            "true, fanotify",
            "true, inotify",
            None,
        ),
        ratio_row(
            "19-scan",
            "`bar run` of the same edit, neither watches nor marks left (every file statted) ÷ "
            "watched with inotify",
            s,
            "edit, scanned",
            "edit, inotify",
            None,
        ),
    ]


FIGURE = ("a task watched with fanotify marks", fig19)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
