"""Turning rows into the Markdown table of docs/performance.md and the JSON record."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from figures import Row

METHOD = """\
## How each figure is measured

Every contender runs as a child process timed from spawn to exit; what the figure's set-up
wrote is flushed to disk first (`sync`), a warm-up call of each
is discarded, then the contenders run in turn (A, B, A, B, ...) and each figure is the
ratio of their medians. The spread column is the lowest and highest ratio seen within a
single round, a direct view of how noisy the machine was. Each figure gets a fresh
`BAR_HOME`, its own clone of the generated repository, and (in a bar task worktree) the
repository's ignored build output, so `git status` and snapshots must skip it. bar runs
as a user's does: a task's watcher (`bar.changes.fast.watcher`) and the bar home's resident
(`bar.changes.fast.resident`), once a first command has started them, serve the commands that follow;
each is waited for outside any timing when it starts, and stopped after each figure.

1. A small change (one line appended to one tracked file) is made before each `bar run`,
   which therefore records it. 1b is the same command when there is nothing new to record;
   1c the same for `echo`, a command that prints a line, as nearly every real one does
   (the secret scrubber then reads its output). `git status --porcelain` runs in the same
   task worktree.
2. `bar.history.snapshot.take` (tree, commit and ref of the worktree) timed inside bar's own
   interpreter, interleaved there with `git status --porcelain`; a small change precedes
   each. 2b is the bare git work on a copy of the task's side index.
3. Tasks of each length are built by real `bar run` steps (three files edited per step,
   a file added every third step, one removed every fifth). `bar rollback` alternates
   between the last step and the step ten before it (`base` for a ten-step task);
   `git checkout --detach` alternates between the same two snapshot commits in a separate
   worktree of the same repository. 3-floor adds to each round's checkout that round's
   `git diff-files` on a copy of the shortest task's side index in its worktree (the
   look for hand edits every rollback begins with).
4. The task holds ten steps; the target branch has a commit of its own, so the merge is
   three-way. Each apply goes to a fresh branch at that commit, as does each plumbing run
   (`git merge-tree --write-tree`, `git commit-tree`, `git update-ref`). 4-dry: `bar apply
   --dry-run` against `merge-tree` + `commit-tree`. Like every command that changes a task,
   apply first looks for hand edits (a stat of every file, as `git status` does), which
   the plumbing does not: 4-look and 4-dry-look add a `git status --porcelain` of the task
   worktree to the plumbing, the same work done with git's own commands.
5. Each new task or worktree is removed (`bar task close --force`, `git worktree remove`)
   outside the timing, so their number stays constant.
6. Two tasks of the same project. Each ledger is a real step, then valid synthetic steps
   that changed nothing (the ledger format of [storage.md](storage.md)), each with the
   output artifact of a command that printed a line, then a real step again. 6-log-all:
   `bar log` of every step of the long task (after a first one, untimed, which makes the
   rows kept beside the ledger; its ratio is in the note) against `git log --oneline` in a
   repository of as many commits in a line (fast-import); 6-rollback: `bar rollback`
   alternating between the long task's first and last steps against `git checkout
   --detach` alternating between their snapshot commits in a separate worktree. The
   other commands of figure 6 take turns with 0.2 s between two of them, untimed, as a
   developer types them (back to back, the spare the resident forks after a served
   command lands in the next command's time).
7. Same interpreter as bar (`python -c pass`). The hook runs as `bar run --agent claude`
   installs it, with a Claude Code `PreToolUse` Bash event on stdin and the project's
   default policy enabled. A running step answers only its own processes, so 7-version,
   7-hook and their `python -c pass` are timed from inside a step (`bench/inside.py`: the
   step's command runs what it is sent and times it). `bar status` stats every file for
   unrecorded changes, so 7-status compares it with `git status --porcelain`; its start-up
   alone shows on the small repository (7-status-start), and 7-status-tiny times it in the
   worktree of a task (one step run) of a repository of 20 files against plain `git
   status` there, rounds interleaved with the others. Its output is a pipe, as a
   script's or an agent's is, so the resident the `bar run` before it started serves it. 7-imports: `python -c "import
   ..."` of every module the `bar` command loaded for a `bar run -- true` in the task that
   `python -c pass` does not (bar's and the standard library's, listed by a probe before
   the timing), with the bar home's resident running the step (`bar.changes.fast.resident`: what
   every `bar run` but the first in 15 minutes loads); 7-imports-here: the same for a
   `bar run` that does the step itself (the first one, or `BAR_RESIDENT_IDLE=0`);
   7-imports-stdlib imports only those of 7-imports-here that are not bar's, the floor
   bar's own cannot go under.
8. `ru_maxrss` from `wait4` on `bar run` doing the step itself (`BAR_RESIDENT_IDLE=0`:
   a step the resident runs is not a child of the `bar` process): the largest process in
   its tree (bar, git, the command). It is forked from a small interpreter
   (`bench/peak.py`, ~10 MB, the floor): a child's `ru_maxrss` counts the memory of the
   process it was forked from until it execs, so forked from the benchmark itself any
   command would look as large as the benchmark. 8-speed compares the time with the same
   output piped into `cat` (8-file: into `cat > FILE`; 8-tee: through `tee FILE`); 8-pty
   times `bar run --pty` served by the resident, as a developer's terminal runs it, against
   `script -qc`. 8-many times the step of 8-files
   (its command modifies up to half of the files from the repository and creates the
   rest, in directories of a hundred) against the same command, then `git add -A` and
   `git commit`, in a checked-out clone.
9. Two clones of the same repository, the same edit script per step, alternating between
   `bar run` and `stepback run`. 9b times one checkpoint inside each tool's interpreter.
10. `bar run -- true` with nothing new to record, confined (Landlock) and with
    `--no-sandbox`, in a HOME where `~/.ssh`, `~/.aws` and `~/.gnupg` exist (bar's default
    `sandbox.deny_read`, carved out of what the command may read), three times as many
    rounds as the other figures. Next to each ratio, the difference of the two medians in
    ms; 10 also passes within 10 ms. The other rows are timed inside bar's interpreter,
    each contender until `true` exits, 30 calls of each per round, interleaved call by
    call: `bar.sandbox.confine(plan.for_step(task, plan.ground(task)))` and `Confinement.start` of
    `subprocess.Popen(["true"])` against a plain `Popen`, with nothing to carve
    (10-inproc) and with the three directories present (10-carve); and, where `bwrap`
    runs, bubblewrap given the same plan as binds (`--ro-bind / /`, `--dev`, `--proc`,
    `--bind` per writable root, `--tmpfs` per hidden directory).
11. Inside a running `bar run --agent claude` step (`bench/inside.py`), Claude Code's
    `PostToolUse` event for a shell command goes to `bar hook claude`, timed from the
    hook's start to its answer, which comes after the checkpoint is recorded: after a
    small change (one line appended to one tracked file, 11-changed) and with nothing
    changed (11-unchanged), against `git status --porcelain` run the same way (inside
    the step; 11-changed-out and 11-unchanged-out: run outside it, as a developer runs
    it, in the same rounds). 11-log:
    `bar log` of a 1,000-step task (a real step, synthetic ones, a real step) one of
    whose steps is a session of 500 checkpointed calls, against the same task without it.
12. One run of each command with `GIT_TRACE2_EVENT` set, counting the git processes it
    started (git's trace names each one, children included), outside any timing: in a
    task of ten steps, `bar run -- true` with nothing new and after a small change, a
    step changing three files, a rollback ten steps back, `bar apply --dry-run`, `bar
    apply`, `bar status`.
13. A `bar ui` child serving over HTTP, each page fetched by a logged-in client: the
    first timeline page of a 10,000-step task (a real step, synthetic ones, a real step)
    against the same page of a 100-step task, both a hundred rows (13-timeline-10: of a
    10-step task; 13-first-byte: the time to the first byte of the page's body); the
    page of a step changing 5,000 files, its file list without the
    diffs the page fetches later, against `git diff --numstat` of the same two trees. Not
    in `--quick`: its set-up alone takes over ten seconds.
24. The floor of an exact look, in a task after one step: `git diff-files
    --ignore-submodules=dirty --name-only -z` on a copy of the task's side index (its
    index and git directory, as bar keeps them) in the task's worktree, once (24-look)
    and twice (24-1b: a step's look for hand edits, then its own), and, after a one-line
    edit (the task's watcher given 0.3 s, untimed, to stage it), once or twice with
    `git add PATH` and `git write-tree` (24-11, 24-1): what git alone does for the same
    work, against `git status --porcelain`; in the same rounds `bar run -- true` with
    nothing new and after a one-line edit, each against its floor (24-1b-bar, 24-1-bar).
"""


def _git_version() -> str:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True)
    return out.stdout.strip().removeprefix("git version ")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def source_digest(bar_python: Path) -> str | None:
    """A digest of the bar package's sources, to notice when an editable install changes
    while the benchmark runs (results would then mix two versions)."""
    where = subprocess.run(
        [str(bar_python), "-c", "import bar, os; print(os.path.dirname(bar.__file__))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not where:
        return None
    digest = hashlib.sha256()
    for path in sorted(Path(where).rglob("*.py")):
        digest.update(str(path.relative_to(where)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def machine_facts(bar_python: Path, bar: Path) -> dict[str, object]:
    py = subprocess.run(
        [str(bar_python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    bar_version = subprocess.run([str(bar), "--version"], capture_output=True, text=True)
    repo = Path(__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "git": _git_version(),
        "python": py,
        "bar": bar_version.stdout.strip(),
        "bar_commit": commit,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "bar_source_digest": source_digest(bar_python),
    }


def fmt_value(row: Row) -> str:
    if row.error:
        return "error"
    if row.value is None:
        return "—"
    if row.unit == "MB":
        return f"{row.value:.0f} MB"
    if row.unit == "git":
        return f"{row.value:.0f} git"
    if row.extra_ms is not None:
        return f"{row.value:.2f}× ({row.extra_ms:+.1f} ms)"
    return f"{row.value:.2f}×"


def _fmt_target(row: Row) -> str:
    if row.target is None:
        return "context"
    if row.unit == "MB":
        return f"{row.op} {row.target:g} MB"
    if row.unit == "git":
        return f"{row.op} {row.target:g} git"
    if row.extra_ms_target is not None:
        return f"{row.op} {row.target:g}× or {row.op} +{row.extra_ms_target:g} ms"
    return f"{row.op} {row.target:g}×"


def _judged_size(sizes: Sequence[str]) -> str:
    return "medium" if "medium" in sizes else sizes[-1]


def _verdict_cell(row: Row) -> str:
    return {"pass": "pass", "miss": "**miss**", "error": "**error**"}.get(row.verdict or "", "—")


def table(rows: dict[str, list[Row]], sizes: Sequence[str]) -> str:
    """One line per figure; one column per size; the verdict at the judged size, and at
    any other size that has a target of its own."""
    judged = _judged_size(sizes)
    order: list[str] = []
    by_key: dict[str, dict[str, Row]] = {}
    for size in sizes:
        for row in rows.get(size, []):
            if row.key not in by_key:
                order.append(row.key)
                by_key[row.key] = {}
            by_key[row.key][size] = row
    head = ["#", "Figure", "Target", *sizes, f"Spread ({judged})", f"Result ({judged})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in order:
        cells = by_key[key]
        some = cells.get(judged) or next(iter(cells.values()))
        target = _fmt_target(some)
        verdict, spread = "—", "—"
        if judged in cells:
            verdict = _verdict_cell(cells[judged])
            judged_spread = cells[judged].spread
            if judged_spread:
                low, high = judged_spread
                spread = f"{low:.2f}–{high:.2f}"
        for size, row in cells.items():
            if size != judged and size in row.size_targets:
                target += f" ({size}: {_fmt_target(row)})"
                verdict += f"; {size}: {_verdict_cell(row)}"
        values = [fmt_value(cells[s]) if s in cells else "" for s in sizes]
        lines.append("| " + " | ".join([key, some.label, target, *values, spread, verdict]) + " |")
    return "\n".join(lines)


def medians_table(rows: dict[str, list[Row]], sizes: Sequence[str]) -> str:
    lines = ["| # | Size | Medians (ms) |", "|---|---|---|"]
    for size in sizes:
        for row in rows.get(size, []):
            if row.medians_ms:
                text = ", ".join(f"{k}: {v:.1f}" for k, v in row.medians_ms.items())
                lines.append(f"| {row.key} | {size} | {text} |")
    return "\n".join(lines)


def errors(rows: dict[str, list[Row]]) -> list[str]:
    return [
        f"{size} {row.key}: {row.error}" for size, rs in rows.items() for row in rs if row.error
    ]


def markdown(
    rows: dict[str, list[Row]],
    sizes: Sequence[str],
    command: str,
    facts: dict[str, object],
    repos: dict[str, dict[str, object]],
    repeat: int,
) -> str:
    judged = _judged_size(sizes)
    repo_lines = [
        f"- {size}: {info.get('files', '?'):,} tracked files"
        + (f" ({float(str(info['bytes'])) / 1e6:.0f} MB)" if "bytes" in info else "")
        + (f", {info['ignored_files']:,} ignored files" if info.get("ignored_files") else "")
        + (f", cloned from `{info['source']}`" if "source" in info else "")
        for size, info in repos.items()
    ]
    out = [
        "# Performance",
        "",
        "Written by `bench/run.py`; rerun the command below rather than editing by hand.",
        "Every figure is a ratio of two medians measured in the same run (interleaved, after",
        "a discarded warm-up), never a bare time: the machines are shared and noisy.",
        f"Targets are set for the medium repository; the result column judges the {judged} one",
        "(and the small one where a figure has a target of its own for it).",
        "",
        "```",
        command,
        "```",
        "",
        f"- Machine: {facts['cores']} cores ({facts['cpu']}), {facts['memory_gib']} GiB RAM, "
        f"{facts['os']}",
        f"- git {facts['git']}, Python {facts['python']}, {facts['bar']} "
        f"(commit {facts['bar_commit']})",
        f"- {repeat} interleaved rounds per figure; load average "
        f"{facts['load_average_start']} at start, {facts.get('load_average_end')} at end",
        *repo_lines,
        *(
            ["", "**bar's sources changed while this ran: the figures mix two versions.**"]
            if facts.get("bar_source_digest_end") != facts.get("bar_source_digest")
            else []
        ),
        "",
        table(rows, sizes),
        "",
    ]
    errs = errors(rows)
    if errs:
        out += ["Errors:", "", *[f"- {e}" for e in errs], ""]
    skipped = [
        f"- {size}, {row.key}: {row.note}"
        for size, rs in rows.items()
        for row in rs
        if row.value is None and row.note and not row.error
    ]
    if skipped:
        out += ["Not measured:", "", *skipped, ""]
    warned = [
        f"- {size}, figure {row.key.split('-')[0].split('@')[0]}: `{line}` ({count}×)"
        for size, rs in rows.items()
        for row in rs
        for line, count in row.bar_warnings.items()
    ]
    if warned:
        out += ["Warnings bar printed while being measured:", "", *warned, ""]
    out += [
        METHOD,
        "## Medians behind the ratios",
        "",
        "For reading the ratios only; they depend on the machine and its load.",
        "",
        medians_table(rows, sizes),
        "",
    ]
    return "\n".join(out)


def as_json(rows: dict[str, list[Row]]) -> dict[str, list[dict[str, object]]]:
    return {size: [{**asdict(r), "verdict": r.verdict} for r in rs] for size, rs in rows.items()}
