#!/usr/bin/env python3
"""Figure 16: ``bar push`` of a long task against ``git push`` of the very same objects.

``bar push`` (docs/sharing.md, ``bar.share.push``) builds a task's history commit (its ledger,
every artifact, ``task.json`` and ``history.json`` hashed into a tree:
``bar.share.history_commit.build``), asks the remote what it has, reads every object that would
leave for secrets (``bar.share.scan``: the history's new files, then every blob of the
task's states the remote lacks, with the ignore rules and ``sandbox.deny_read``), and
only then runs one ``git push``. This figure prices all of that against the ``git push``
it cannot avoid, the same objects sent the same way.

A task of 1,000 real steps is built first (``bar run -- sh -c``: three files edited, a
file added every third step and one removed every fifth, a few lines printed, so each
step has its patch and its output artifact). Every remote is a fresh bare clone of the
generated repository (``main`` only, as ``origin`` holds the code a task started from),
reached by a ``file://`` URL; so both sides send the task's objects, never the base's.

* 16-first: ``bar push URL --task ID`` to a fresh remote, as on a machine that never
  pushed the task: before each, ``refs/bar/history/<id>``, ``refs/bar/fetched/<id>/...``,
  the blob cache (``<project>/cache/history-<id>.json``) and every loose object the
  last push made are removed, so all of it is built, hashed, written and scanned again
  (the commit is the same each time: its dates are the last step's). Against ``git
  push URL2 HISTORY:refs/bar/history/<id> SNAPSHOT:refs/bar/tasks/<id>`` to another
  fresh remote, of the two commits bar pushed, from the same repository.
* 16-incr: one more step (not timed), then ``bar push`` to the remote of the last
  16-first round, which has the task as it was; against ``git push`` of bar's two new
  commits to the remote the git side pushed to, which has the same.
* 16-noop: ``bar push`` with nothing new (the history rebuilt, found unchanged, and
  one ``ls-remote``) against ``git push`` of the same refs, already there.

The generated code holds lines the scan takes for secrets (``token=2938``), in the files
the steps edit and in the context lines of their patches, so a push is refused as a
user's would be. Each timed ``bar push`` is therefore given ``--allow`` for every finding
a dry run (``--dry-run --json``, not timed) reported, as a user passes them after reading
them: bar still scans everything and lets those through by id. The dry run's traces (the
blobs it wrote, the blob cache it saved) are removed before the timed push.

What went (objects reachable from the pushed commits and not from the remote's refs,
their size, and the thin pack ``git pack-objects`` makes of them, as a push sends) is
printed on stderr and kept in each row's note; a check at the end walks every object
reachable from both remotes' refs (none missing) and that both hold the same commits. Timings are ratios of medians over interleaved rounds, never bare
times (see bench/README.md).

    python bench/sharing.py                       # the figure alone on the small repository
    python bench/sharing.py --sizes small,medium  # any option of run.py (--only 16 implied)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import edits  # noqa: E402
from figures import Params, Row, ratio_row  # noqa: E402
from harness import BenchError, Fixture, interleave, log, median  # noqa: E402

NUMBER = 16
STEPS = 1_000  # steps of the pushed task
QUICK_STEPS = 8


def _step_script(pool: list[str], k: int) -> str:
    """Step ``k``: figure 3's edits, then a few lines of output, as a test run prints."""
    return (
        edits.step_script(pool, k)
        + f" && printf 'step {k}: edited 3 files\\n' && printf 'running checks...\\n'"
        + f" && printf 'ok: {400 + k % 50} passed, 0 failed\\n'"
    )


def _loose_objects(repo: Path) -> set[str]:
    objects = repo / ".git" / "objects"
    found: set[str] = set()
    for entry in os.scandir(objects):
        if len(entry.name) == 2 and entry.is_dir():
            found.update(f"{entry.name}/{name}" for name in os.listdir(entry.path))
    return found


def _remote_refs(f: Fixture, bare: Path, task: str) -> tuple[str, str]:
    """The history commit and the snapshot ``bare`` holds for ``task``."""
    hist = f.git(bare, "rev-parse", "--verify", f"refs/bar/history/{task}")
    snap = f.git(bare, "rev-parse", "--verify", f"refs/bar/tasks/{task}")
    return hist, snap


def _sent(f: Fixture, repo: Path, tips: list[str], have: list[str]) -> dict[str, int]:
    """What a push of ``tips`` to a remote holding ``have`` sends: the objects, their
    size, and the thin pack of them (as ``git push`` builds it)."""
    listed = f.git(repo, "rev-list", "--objects", *tips, "--not", *have)
    shas = [line.split(" ", 1)[0] for line in listed.splitlines() if line]
    sizes = subprocess.run(
        ["git", "cat-file", "--batch-check=%(objectsize)"],
        cwd=repo,
        env=f.env,
        input="".join(f"{s}\n" for s in shas).encode(),
        capture_output=True,
        check=True,
    ).stdout.split()
    pack = subprocess.run(
        ["git", "pack-objects", "--revs", "--thin", "--stdout", "-q", "--delta-base-offset"],
        cwd=repo,
        env=f.env,
        input="".join([*(f"{t}\n" for t in tips), *(f"^{h}\n" for h in have)]).encode(),
        capture_output=True,
        check=True,
    ).stdout
    return {"objects": len(shas), "bytes": sum(int(s) for s in sizes), "pack_bytes": len(pack)}


def _fmt_bytes(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _fmt_sent(sent: dict[str, int]) -> str:
    return (
        f"{sent['objects']:,} objects, {_fmt_bytes(sent['bytes'])} "
        f"({_fmt_bytes(sent['pack_bytes'])} packed)"
    )


def fig16(f: Fixture, p: Params) -> list[Row]:
    repo = f.clone()
    f.init(repo)
    task, wt = f.new_task(repo, "shared")
    pool = edits.make_pool(wt, f.dir / "pool.txt")
    steps = QUICK_STEPS if p.quick else STEPS
    bar_run: list[str | Path] = [f.tools.bar, "run", "--task", task, "--no-pty", "--", "sh", "-c"]
    made = 0

    def step() -> None:
        nonlocal made
        made += 1
        f.run([*bar_run, _step_script(pool, made)], wt)

    log(f"  building a task of {steps:,} steps")
    for _ in range(steps):
        step()
        if made % 100 == 0:
            log(f"    {made}/{steps} steps")
    artifacts = f.task_dir(task) / "artifacts"
    kinds: dict[str, int] = {}
    for name in os.listdir(artifacts):
        kind = name.split(".", 1)[-1]
        kinds[kind] = kinds.get(kind, 0) + 1
    log(f"  artifacts: {', '.join(f'{n:,} {k}' for k, n in sorted(kinds.items()))}")
    if kinds.get("output", 0) < steps or kinds.get("patch", 0) < steps:
        raise BenchError(f"a step of the task has no output or no patch: {kinds}")

    base_main = f.git(f.base_repo, "rev-parse", "--verify", "main")
    remotes = f.dir / "remotes"
    remotes.mkdir()
    n_remote = 0

    def fresh_remote(side: str) -> Path:
        """A bare clone of the generated repository: ``main`` only, as origin has."""
        nonlocal n_remote
        n_remote += 1
        bare = remotes / f"{side}-{n_remote}.git"
        f.run(["git", "clone", "-q", "--bare", "--local", f.base_repo, bare], remotes)
        return bare

    def url(bare: Path) -> str:
        return f"file://{bare}"

    cache = f.project_dir() / "cache" / f"history-{task}.json"
    findings: list[int] = []

    def allowed(bare: Path) -> list[str]:
        """``--allow`` for each finding a push to ``bare`` would refuse, as a user passes
        after reading them: found by a dry run whose traces (the blobs it wrote, the blob
        cache it saved) are removed, so the timed push hashes and scans all again."""
        loose = _loose_objects(repo)
        kept = cache.read_bytes() if cache.exists() else None
        out = f.run(
            [f.tools.bar, "push", url(bare), "--task", task, "--dry-run", "--json"],
            wt,
            capture=True,
            ok=(0, 12),
        )
        for name in _loose_objects(repo) - loose:
            (repo / ".git" / "objects" / name).unlink(missing_ok=True)
        if kept is None:
            cache.unlink(missing_ok=True)
        else:
            cache.write_bytes(kept)
        ids = sorted({x["id"] for t in json.loads(out.stdout)["tasks"] for x in t["findings"]})
        findings.append(len(ids))
        return [a for i in ids for a in ("--allow", i)]

    def bar_push(bare: Path, expect: str) -> float:
        allow = allowed(bare)
        out = f.run(
            [f.tools.bar, "push", url(bare), "--task", task, "--json", *allow], wt, capture=True
        )
        got = [t["outcome"] for t in json.loads(out.stdout)["tasks"]]
        if got != [expect]:
            raise BenchError(f"`bar push` said {got}, expected [{expect!r}]: {out.stdout[:500]!r}")
        return out.seconds

    def git_push(bare: Path, hist: str, snap: str) -> float:
        return f.t(
            [
                "git",
                "push",
                "-q",
                url(bare),
                f"{hist}:refs/bar/history/{task}",
                f"{snap}:refs/bar/tasks/{task}",
            ],
            repo,
        )

    # --- 16-first: everything built, hashed, scanned and sent ----------------------------
    before = _loose_objects(repo)
    dropped: list[int] = []

    def forget() -> None:
        """This machine as before it ever pushed the task (outside the timing)."""
        listed = f.git(
            repo,
            "for-each-ref",
            "--format=%(refname)",
            f"refs/bar/history/{task}",
            f"refs/bar/fetched/{task}/",
        )
        for ref in listed.splitlines():
            f.git(repo, "update-ref", "-d", ref)
        cache.unlink(missing_ok=True)
        new = _loose_objects(repo) - before
        for name in new:
            (repo / ".git" / "objects" / name).unlink(missing_ok=True)
        dropped.append(len(new))

    last: dict[str, Path] = {}
    pushed: dict[str, str] = {}

    def bar_first() -> float:
        forget()
        old = last.get("bar")
        if old is not None:
            shutil.rmtree(old)
        last["bar"] = bare = fresh_remote("bar")
        seconds = bar_push(bare, "pushed")
        hist, snap = _remote_refs(f, bare, task)
        if pushed and (hist, snap) != (pushed["hist"], pushed["snap"]):
            raise BenchError("a first push built another history commit than the last one")
        pushed.update(hist=hist, snap=snap)
        return seconds

    def git_first() -> float:
        old = last.get("git")
        if old is not None:
            shutil.rmtree(old)
        last["git"] = bare = fresh_remote("git")
        return git_push(bare, pushed["hist"], pushed["snap"])

    log(f"  first pushes of the {steps:,}-step task ({p.repeat} rounds)")
    s = interleave(
        {"bar push (first)": bar_first, "git push (first)": git_first}, p.repeat, p.warmup
    )
    first_sent = _sent(f, repo, [pushed["hist"], pushed["snap"]], [base_main])
    first_found = findings[-1]
    log(
        f"  first push sent {_fmt_sent(first_sent)}; {first_found} findings allowed by id; "
        f"each round removed {median(dropped[1:] or dropped):,.0f} loose objects the last "
        "push made"
    )
    findings.clear()

    # --- 16-incr: one more step ------------------------------------------------------------
    incr_sent: list[dict[str, int]] = []

    def bar_incr() -> float:
        step()  # (not timed)
        old = [pushed["hist"], pushed["snap"]]
        seconds = bar_push(last["bar"], "pushed")
        hist, snap = _remote_refs(f, last["bar"], task)
        pushed.update(hist=hist, snap=snap)
        incr_sent.append(_sent(f, repo, [hist, snap], old))
        return seconds

    def git_incr() -> float:
        return git_push(last["git"], pushed["hist"], pushed["snap"])

    log(f"  pushes after one more step ({p.repeat} rounds)")
    s.update(
        interleave(
            {"bar push (one more step)": bar_incr, "git push (one more step)": git_incr},
            p.repeat,
            p.warmup,
        )
    )

    incr = {
        key: int(median([x[key] for x in incr_sent])) for key in ("objects", "bytes", "pack_bytes")
    }
    log(
        f"  one more step sent {_fmt_sent(incr)} (median of {len(incr_sent)}); findings "
        f"allowed by id: {max(findings)} at most"
    )

    # --- 16-noop: nothing new --------------------------------------------------------------
    log(f"  pushes with nothing new ({p.repeat} rounds)")
    s.update(
        interleave(
            {
                "bar push (up to date)": lambda: bar_push(last["bar"], "up to date"),
                "git push (up to date)": lambda: git_push(
                    last["git"], pushed["hist"], pushed["snap"]
                ),
            },
            p.repeat,
            p.warmup,
        )
    )

    for side, bare in last.items():  # both hold bar's commits, and every object they need
        if _remote_refs(f, bare, task) != (pushed["hist"], pushed["snap"]):
            raise BenchError(f"the {side} remote holds other commits than bar pushed")
        f.git(bare, "rev-list", "--objects", "--all", "--quiet")

    what = f"a {steps:,}-step task"
    rows = [
        ratio_row(
            "16-first",
            f"`bar push` of {what} to a fresh remote holding its base (history built, "
            "hashed, scanned) ÷ `git push` of the same objects",
            s,
            "bar push (first)",
            "git push (first)",
            None,
            note=f"{_fmt_sent(first_sent)}; {first_found} findings allowed by id",
        ),
        ratio_row(
            "16-incr",
            f"`bar push` of {what} after one more step ÷ `git push` of the same increment",
            s,
            "bar push (one more step)",
            "git push (one more step)",
            None,
            note=_fmt_sent(incr),
        ),
        ratio_row(
            "16-noop",
            f"`bar push` of {what}, nothing new ÷ `git push` of the same refs, up to date",
            s,
            "bar push (up to date)",
            "git push (up to date)",
            None,
            note="0 objects",
        ),
    ]
    return rows


FIGURE = ("bar push ÷ git push of the same objects", fig16)


def main(argv: list[str]) -> int:
    import run

    return run.one_figure(NUMBER, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
