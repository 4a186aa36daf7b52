#!/usr/bin/env python3
"""Figure 23: ``bar apply`` onto the branch that is checked out, as a developer applies.

Figure 4 applies to branches nobody has checked out. A developer usually applies onto
the branch of their own checkout, and then bar does what git's plumbing does for a
fast-forward of a checkout (a commit, the branch moved, the changed files written) plus
its own checks: the task worktree looked at for hand edits, every path the apply writes
found clean in the checkout, the files written so that a kill leaves each whole.

* 23: ``bar apply`` of a task of ten steps onto ``main``, checked out in the repository,
  against ``git commit-tree`` of the task's tree + ``git update-ref`` + ``git read-tree
  -m -u`` (the same commit landed and written by git alone). After each round the
  checkout is put back (``git reset --hard``, outside the timing).
* 23-git: the same ``bar apply`` against ``git status --porcelain`` in the checkout (one
  look at its files, which any safe update of it needs).

    python bench/apply_here.py                          # the figure on the small repository
    python bench/apply_here.py --sizes small,medium     # any option of run.py (--only 23)
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import edits  # noqa: E402
from figures import LOOK, Params, Row, _look_env, ratio_row  # noqa: E402
from harness import Fixture, interleave  # noqa: E402

NUMBER = 23
STEPS = 10


def fig23(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone("here", checkout=True)
    f.init(repo)
    task, wt = f.new_task(repo, "here")
    pool = edits.make_pool(wt, f.dir / "pool.txt")
    for k in range(1, STEPS + 1):
        script = edits.step_script(pool, k)
        f.t([f.tools.bar, "run", "--task", task, "--no-pty", "--", "sh", "-c", script], wt)
    before = f.git(repo, "rev-parse", "main")
    state = f.git(repo, "rev-parse", f"refs/bar/tasks/{task}")
    tree = f.git(repo, "rev-parse", f"{state}^{{tree}}")

    def back() -> None:  # (not timed) the checkout and main as they were
        f.git(repo, "reset", "-q", "--hard", before)

    def bar_apply() -> float:
        took = f.t([f.tools.bar, "apply", "--task", task, "-m", "Apply"], repo)
        back()
        return took

    def plumbing() -> float:
        made = f.run(["git", "commit-tree", tree, "-p", before, "-m", "Apply"], repo, capture=True)
        commit = made.stdout.decode().strip()
        moved = f.run(["git", "update-ref", "refs/heads/main", commit, before], repo)
        wrote = f.run(["git", "read-tree", "-m", "-u", before, commit], repo)
        back()
        return made.seconds + moved.seconds + wrote.seconds

    def status() -> float:
        return f.t(["git", "status", "--porcelain"], repo)

    # the task's look for hand edits, which an apply makes first (a stat of every recorded
    # file of the task's worktree: figure 24's), on a copy of its side index
    look_env = _look_env(f, repo, task, wt, "apply-floor")

    s = interleave(
        {
            "bar apply": bar_apply,
            "commit-tree+update-ref+read-tree -m -u": plumbing,
            "git status": status,
            "look": lambda: f.t(LOOK, wt, env=look_env),
        },
        p.repeat,
        p.warmup,
    )
    # (each round's look and plumbing, added: the floor of that round's apply)
    s["look + plumbing"] = [
        a + b for a, b in zip(s["look"], s["commit-tree+update-ref+read-tree -m -u"], strict=True)
    ]
    return [
        ratio_row(
            "23",
            "`bar apply` onto the checked-out branch ÷ `git commit-tree` + `update-ref` + "
            "`read-tree -m -u`",
            s,
            "bar apply",
            "commit-tree+update-ref+read-tree -m -u",
            2.0,
        ),
        ratio_row(
            "23-git",
            "`bar apply` onto the checked-out branch ÷ `git status --porcelain` there",
            s,
            "bar apply",
            "git status",
            None,
        ),
        ratio_row(
            "23-floor",
            "floor of an apply: the task's look for hand edits (`git diff-files` on its side "
            "index) and the plumbing of 23 ÷ the plumbing",
            s,
            "look + plumbing",
            "commit-tree+update-ref+read-tree -m -u",
            None,
        ),
        ratio_row(
            "23-bar-floor",
            "`bar apply` onto the checked-out branch ÷ its floor",
            s,
            "bar apply",
            "look + plumbing",
            None,
        ),
    ]


FIGURE = ("apply onto the checked-out branch ÷ git plumbing", fig23)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
