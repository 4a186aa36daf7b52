#!/usr/bin/env python3
"""Figure 18: what a task's loose objects cost every step, and what packing them costs.

bar writes snapshots with git's plumbing, which never starts git's ``gc --auto``; so,
before ``bar.git.packing``, the objects a long task wrote stayed loose. The object guard
watches the 256 fan-out directories of the object store during each step, and the kernel
walks every cached entry of a directory when a watch is added or removed: each step paid
for every loose object git had read.

* 18: ``bar run -- true`` (nothing new to record) in a task whose repository holds
  ``LOOSE`` loose objects that git has read (``cat-file --batch-all-objects``, so their
  entries are cached, as after a long task), with ``gc.auto=0`` (bar never packs them),
  against the same command in a clone holding the same objects after bar packed them
  (``python -m bar.git.packing``, the process a step past ``gc.auto`` starts).
* 18-git: the packed side against ``git status --porcelain`` in its worktree.
* 18-pack: bar's packing (``python -m bar.git.packing``, the process a step starts) of
  ``BATCH`` new loose objects, against ``git gc --auto`` packing the same number in a clone
  of its own, both in the foreground.

Objects are written as git writes loose objects (zlib of ``blob N\\0`` and the body,
named by their SHA-1), distinct per round, so every round packs new ones, and reached from
a ref as a task's snapshots reach its objects (git's gc packs only what a ref reaches).

    python bench/loose.py                         # the figure alone on the small repository
    python bench/loose.py --sizes small,medium    # any option of run.py (--only 18 implied)
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from figures import Params, Row, ratio_row  # noqa: E402
from harness import BenchError, Fixture, interleave, log  # noqa: E402

NUMBER = 18
LOOSE = 150_000  # loose objects of the unpacked side
QUICK_LOOSE = 600
BATCH = 9_000  # objects per packing round: past git's gc.auto (6,700)
QUICK_BATCH = 2_000  # (past the gc.auto of 1,000 git gc --auto is run with)


def plant(repo: Path, count: int, tag: str) -> None:
    """Write ``count`` loose blobs into ``repo``'s object store, as git writes them, and a
    tree, a commit and a ref (``refs/bench/TAG``) that reach them, as a task's snapshots
    reach what its steps wrote (git's gc packs only what a ref reaches)."""
    store = repo / ".git" / "objects"
    listing = []
    for i in range(count):
        body = f"loose object {tag} {i}\n".encode()
        raw = b"blob %d\0" % len(body) + body
        oid = hashlib.sha1(raw).hexdigest()
        folder = store / oid[:2]
        folder.mkdir(exist_ok=True)
        (folder / oid[2:]).write_bytes(zlib.compress(raw, 1))
        listing.append(f"100644 blob {oid}\tf{i}\n")

    def git(*args: str, data: str | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=repo, input=data, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    tree = git("mktree", data="".join(listing))
    commit = git("commit-tree", tree, "-m", f"bench {tag}")
    git("update-ref", f"refs/bench/{tag}", commit)


def _loose(f: Fixture, repo: Path) -> int:
    return int(f.git(repo, "count-objects").split()[0])


def fig18(f: Fixture, p: Params) -> list[Row]:
    loose = QUICK_LOOSE if p.quick else LOOSE
    batch = QUICK_BATCH if p.quick else BATCH
    sides: dict[str, tuple[Path, str, Path]] = {}
    for name in ("loose", "packed"):
        repo = f.clone(name)
        f.init(repo)
        task, wt = f.new_task(repo, name)
        f.git(repo, "config", "gc.auto", "0")  # (bar packs neither while it is timed)
        log(f"  planting {loose:,} loose objects in the {name} clone")
        plant(repo, loose, "kept")
        f.bar(wt, "run", "--task", task, "--no-pty", "--", "true")
        if name == "packed":  # what a step past gc.auto starts
            store = repo / ".git" / "objects"
            f.run([f.tools.python, "-m", "bar.git.packing", repo, store, f.dir / "log", "-1"], repo)
        sides[name] = (repo, task, wt)
    if _loose(f, sides["packed"][0]) != 0 or _loose(f, sides["loose"][0]) < loose:
        raise BenchError("the packed clone kept loose objects, or the loose one lost some")
    f.git(sides["loose"][0], "cat-file", "--batch-check", "--batch-all-objects")  # read: cached

    def bar_true(name: str) -> float:
        _, task, wt = sides[name]
        return f.t([f.tools.bar, "run", "--task", task, "--no-pty", "--", "true"], wt)

    s = interleave(
        {
            "bar run (loose objects)": lambda: bar_true("loose"),
            "bar run (packed)": lambda: bar_true("packed"),
            "git status": lambda: f.t(["git", "status", "--porcelain"], sides["packed"][2]),
        },
        p.repeat,
        p.warmup,
    )

    mine, theirs = f.clone("bar-packs"), f.clone("git-packs")
    n = iter(range(1_000_000))

    def bar_packs() -> float:
        plant(mine, batch, f"bar-{next(n)}")
        store = mine / ".git" / "objects"
        packer: list[str | Path] = [f.tools.python, "-m", "bar.git.packing", mine, store]
        packer += [f.dir / "pack.log", "-1"]
        seconds = f.t(packer, mine)
        if _loose(f, mine):
            raise BenchError("bar's packing left loose objects")
        return seconds

    def git_packs() -> float:
        plant(theirs, batch, f"git-{next(n)}")
        # (gc.auto lowered: git's estimate, from one fan-out directory, can fall short)
        gc = ["git", "-c", "gc.auto=1000", "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"]
        seconds = f.t(gc, theirs)
        if _loose(f, theirs) > batch // 2:
            raise BenchError(f"git gc --auto did not pack: {f.git(theirs, 'count-objects', '-v')}")
        return seconds

    packing = interleave({"bar packs": bar_packs, "git gc --auto": git_packs}, p.repeat, p.warmup)
    return [
        ratio_row(
            "18",
            f"`bar run -- true`, nothing new, its repository holding {loose:,} loose objects "
            "git has read ÷ the same once bar packed them",
            s,
            "bar run (loose objects)",
            "bar run (packed)",
            None,
        ),
        ratio_row(
            "18-git",
            "`bar run -- true`, nothing new, the packed repository ÷ `git status --porcelain`",
            s,
            "bar run (packed)",
            "git status",
            None,
        ),
        ratio_row(
            "18-pack",
            f"bar packing {batch:,} new loose objects (`python -m bar.git.packing`) ÷ "
            "`git gc --auto` packing as many",
            packing,
            "bar packs",
            "git gc --auto",
            None,
        ),
    ]


FIGURE = ("loose objects: their cost per step, and packing them", fig18)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
