#!/usr/bin/env python3
"""Benchmark bar against plain git (and stepback) on generated repositories.

    python bench/run.py --sizes small,medium          # full run; writes docs/performance.md
    python bench/run.py --quick --sizes small         # every figure's smoke test (~4 min)
    python bench/run.py --quick --sizes small --repeat 1 --pick 0.25  # make test's: a quarter
    python bench/run.py --only 1,3,7 --repeat 9
    python bench/run.py --repo ~/src/project          # also measure a real repository

Every figure is a ratio of medians measured in one run (see bench/README.md). Progress
goes to stderr, the Markdown table to stdout, and the full record (every sample) to
bench/results/<time>.json. Exit status: 1 if a command failed; with --strict, also if a
figure missed its target. --quick never fails on timing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import apply_here  # noqa: E402
import exec_check  # noqa: E402
import genrepo  # noqa: E402
import loose  # noqa: E402
import marks  # noqa: E402
import network  # noqa: E402
import report  # noqa: E402
import sessions  # noqa: E402
import sharing  # noqa: E402
import telemetry  # noqa: E402
from figures import FIGURES, FULL_ONLY, Params, Row  # noqa: E402
from harness import BenchError, Fixture, Tools, base_env, log  # noqa: E402

FIGURES[sessions.NUMBER] = sessions.FIGURE  # (kept in a module of its own)
FIGURES[sharing.NUMBER] = sharing.FIGURE  # (likewise)
FIGURES[loose.NUMBER] = loose.FIGURE  # (likewise)
FIGURES[marks.NUMBER] = marks.FIGURE  # (likewise)
FIGURES[telemetry.NUMBER] = telemetry.FIGURE  # (likewise)
FIGURES[network.NUMBER] = network.FIGURE  # (likewise)
FIGURES[exec_check.NUMBER] = exec_check.FIGURE  # (likewise)
FIGURES[apply_here.NUMBER] = apply_here.FIGURE  # (likewise)

ROOT = HERE.parent
WORK = HERE / ".work"
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "performance.md"
STEPBACK_VERSION = "0.2.0"


def _parse_ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas: {text!r}"
        ) from None


def _share(text: str) -> float:
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"expected a share above 0 and at most 1: {text!r}")
    return share


def picked(figures: list[int], share: float, seed: str) -> list[int]:
    """``share`` of ``figures`` (at least one), drawn by ``seed``: a smoke test that visits
    every figure over a few days, each day's draw named so that it can be made again."""
    import random

    count = max(1, round(len(figures) * share))
    return sorted(random.Random(f"bench-pick:{seed}").sample(figures, count))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("--sizes", default="small,medium", help="from small, medium, large")
    p.add_argument("--repo", type=Path, help="also measure (a copy of) this repository")
    p.add_argument("--only", type=_parse_ints, help="figure numbers, e.g. 1,3,7")
    p.add_argument("--repeat", type=int, help="interleaved rounds per figure (default 7, quick 2)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: fewer rounds, smaller workloads; fails only on errors",
    )
    p.add_argument("--rollback-steps", type=_parse_ints, help="task lengths for figure 3")
    p.add_argument("--ledger-steps", type=int, help="long ledger length for figure 6")
    p.add_argument("--output-bytes", type=int, help="what the command of figure 8 prints")
    p.add_argument("--many-files", type=int, help="files the big step of figure 8 changes")
    p.add_argument(
        "--pick",
        type=_share,
        metavar="SHARE",
        help="run this share of the figures (at least one), drawn anew each day "
        "(BENCH_PICK_SEED=N draws the same again): make test's smoke",
    )
    p.add_argument("--seed", type=int, default=genrepo.DEFAULT_SEED)
    p.add_argument("--bar", type=Path, help="the bar executable (default: .venv/bin/bar)")
    p.add_argument(
        "--doc",
        type=Path,
        help=f"write the Markdown here (default {DOC.relative_to(ROOT)}, not with --quick)",
    )
    p.add_argument("--no-doc", action="store_true", help="do not write the Markdown file")
    p.add_argument("--strict", action="store_true", help="exit 1 when a figure misses its target")
    p.add_argument("--keep", action="store_true", help="keep each figure's work directory")
    args = p.parse_args(argv)
    args.size_list = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for size in args.size_list:
        if size not in genrepo.SIZES:
            p.error(f"unknown size {size!r} (choose from {', '.join(genrepo.SIZES)})")
    if args.repo and not args.repo.exists():
        p.error(f"--repo {args.repo} does not exist")
    return args


def params(args: argparse.Namespace) -> Params:
    q = args.quick
    return Params(
        repeat=args.repeat or (2 if q else 7),
        warmup=0 if q else 1,
        rollback_steps=args.rollback_steps or ((10, 12) if q else (10, 100, 1000)),
        ledger_steps=args.ledger_steps or (500 if q else 100_000),
        output_bytes=args.output_bytes or (10_000_000 if q else 1_000_000_000),
        many_files=args.many_files or (300 if q else 10_000),
        quick=q,
    )


# --- tools ------------------------------------------------------------------------------


def find_bar(given: Path | None) -> Tools:
    bar = given or ROOT / ".venv" / "bin" / "bar"
    if not bar.exists():
        found = shutil.which("bar")
        if not found:
            raise SystemExit("bench: no bar executable found; install it or pass --bar")
        bar = Path(found)
    bar = bar.resolve() if bar.is_symlink() else bar
    script = bar
    if bar.read_bytes()[:4] == b"\x7fELF":  # the compiled bar: its Python script beside it
        script = bar.with_name("bar-python")
    first = script.read_bytes().split(b"\n", 1)[0]
    if not first.startswith(b"#!"):
        raise SystemExit(f"bench: cannot tell which interpreter runs {bar}")
    python = Path(first[2:].decode().strip().split()[0])
    return Tools(bar=bar.absolute(), python=python)


def ensure_stepback(tools: Tools) -> str | None:
    """Install stepback from PyPI into its own venv under bench/.work; None if it worked,
    else why not."""
    venv = WORK / f"venv-stepback-{STEPBACK_VERSION}"
    exe = venv / "bin" / "stepback"
    if not exe.exists():
        log(f"installing stepback {STEPBACK_VERSION} into {venv}")
        # with bar's own pip where it has one (``--python``: into the new venv), which
        # spares installing a pip into the venv first (about half the CPU of the two)
        has_pip = (
            subprocess.run([str(tools.python), "-m", "pip", "--version"], capture_output=True)
        ).returncode == 0
        pip = (
            [str(tools.python), "-m", "pip", "--python", str(venv / "bin" / "python")]
            if has_pip
            else [str(venv / "bin" / "pip")]
        )
        try:
            subprocess.run(
                [
                    str(tools.python),
                    "-m",
                    "venv",
                    *(["--without-pip"] if has_pip else []),
                    str(venv),
                ],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                [
                    *pip,
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    f"stepback=={STEPBACK_VERSION}",
                ],
                check=True,
                capture_output=True,
            )
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(venv, ignore_errors=True)
            return f"pip could not install stepback: {exc.stderr.decode(errors='replace')[-500:]}"
    tools.stepback = exe
    tools.stepback_python = venv / "bin" / "python"
    return None


# --- repositories -----------------------------------------------------------------------


def ensure_repo(size: str, seed: int) -> tuple[Path, dict[str, object]]:
    """The generated repository for ``size``, cached under bench/.work/repos."""
    name = f"{size}-seed{seed}-gen{genrepo.GENERATOR_VERSION}"
    path = WORK / "repos" / name
    stamp = WORK / "repos" / f"{name}.json"
    if path.exists() and stamp.exists():
        return path, json.loads(stamp.read_text())
    if path.exists():
        shutil.rmtree(path)
    log(f"generating the {size} repository ({genrepo.SIZES[size]:,} files) in {path}")
    stats = genrepo.generate(path, genrepo.SIZES[size], seed)
    stamp.write_text(json.dumps(stats, indent=2))
    return path, stats


def copy_user_repo(src: Path) -> tuple[str, Path, dict[str, object]]:
    digest = hashlib.sha256(str(src.resolve()).encode()).hexdigest()[:8]
    label = f"repo:{src.resolve().name}"
    path = WORK / "repos" / f"user-{src.resolve().name}-{digest}"
    if path.exists():
        shutil.rmtree(path)
    log(f"copying {src} to {path}")
    return label, path, genrepo.copy_repo(src, path)


# --- main -------------------------------------------------------------------------------


def run_figures(
    args: argparse.Namespace,
    p: Params,
    tools: Tools,
    repos: dict[str, tuple[Path, dict[str, object]]],
    figures: list[int],
    stepback_problem: str | None,
) -> dict[str, list[Row]]:
    env = base_env(WORK / "home")
    rows: dict[str, list[Row]] = {}
    timeout = 600 if p.quick else 3600
    for size, (repo, _) in repos.items():
        rows[size] = []
        for number in figures:
            title, fn = FIGURES[number]
            if number == 9 and stepback_problem and p.quick:
                log(f"[{size}] figure 9 skipped: {stepback_problem}")
                rows[size].append(Row("9", title, note=f"skipped: {stepback_problem}"))
                continue
            log(f"[{size}] figure {number}: {title}")
            t0 = time.monotonic()
            fixture_dir = WORK / "run" / size.replace(":", "-") / f"fig{number}"
            fixture: Fixture | None = None
            try:
                fixture = Fixture(fixture_dir, repo, tools, env, args.seed, timeout)
                got = [row.at_size(size) for row in fn(fixture, p)]
                if fixture.bar_warnings and got:
                    got[0].bar_warnings = dict(fixture.bar_warnings)
                    for line, count in fixture.bar_warnings.items():
                        log(f"  bar printed {count}x: {line}")
                for row in got:
                    verdict = f" ({row.verdict})" if row.verdict else ""
                    log(f"  {row.key}: {report.fmt_value(row)}{verdict}")
                rows[size].extend(got)
            except BenchError as exc:
                log(f"  figure {number} failed: {exc}")
                rows[size].append(Row(str(number), title, error=str(exc)))
            except Exception as exc:  # a bug in the benchmark: report it, keep going
                log(f"  figure {number} crashed:\n{traceback.format_exc()}")
                rows[size].append(Row(str(number), title, error=f"{exc.__class__.__name__}: {exc}"))
            finally:
                if fixture is not None:
                    fixture.stop_watchers()
                if not args.keep:
                    shutil.rmtree(fixture_dir, ignore_errors=True)
            log(f"  figure {number} took {time.monotonic() - t0:.0f} s")
    return rows


def one_figure(number: int, argv: list[str]) -> int:
    """A figure kept in a module of its own, run alone (``python bench/sharing.py ...``):
    any option of run.py, the small repository unless ``--sizes`` says otherwise, and no
    rewrite of docs/performance.md (which holds every figure) unless asked for."""
    given = {a.split("=", 1)[0] for a in argv}
    extra = [] if "--sizes" in given else ["--sizes", "small"]
    if not given & {"--doc", "--no-doc"}:
        extra.append("--no-doc")
    return main(["--only", str(number), *extra, *argv])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    p = params(args)
    command = "python bench/run.py " + shlex.join(argv) if argv else "python bench/run.py"
    t_start = time.monotonic()
    WORK.mkdir(parents=True, exist_ok=True)
    tools = find_bar(args.bar)
    figures = sorted(args.only) if args.only else sorted(FIGURES)
    if args.quick and not args.only:  # those whose set-up alone takes more than ~10 s
        figures = [n for n in figures if n not in FULL_ONLY]
    bad = [n for n in figures if n not in FIGURES]
    if bad:
        raise SystemExit(f"bench: no figure {bad[0]} (figures are 1-{max(FIGURES)})")
    if args.pick is not None and args.pick < 1:
        seed = os.environ.get("BENCH_PICK_SEED") or time.strftime("%Y%m%d")
        every = len(figures)
        figures = picked(figures, args.pick, seed)
        log(
            f"figures {', '.join(map(str, figures))} ({len(figures)} of {every}, drawn by "
            f"seed {seed}: BENCH_PICK_SEED={seed} draws them again; make test-long runs all)"
        )
    stepback_problem = ensure_stepback(tools) if 9 in figures else None
    facts = report.machine_facts(tools.python, tools.bar)
    if tools.stepback:
        facts["stepback"] = STEPBACK_VERSION

    repos: dict[str, tuple[Path, dict[str, object]]] = {}
    for size in args.size_list:
        repos[size] = ensure_repo(size, args.seed)
    if args.repo:
        label, path, stats = copy_user_repo(args.repo)
        repos[label] = (path, stats)

    rows = run_figures(args, p, tools, repos, figures, stepback_problem)
    facts["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    facts["bar_source_digest_end"] = report.source_digest(tools.python)
    if facts["bar_source_digest_end"] != facts["bar_source_digest"]:
        log("warning: bar's sources changed during the run; the figures mix two versions")
    facts["seconds"] = round(time.monotonic() - t_start)
    sizes = list(repos)
    repo_info = {size: info for size, (_, info) in repos.items()}
    text = report.markdown(rows, sizes, command, facts, repo_info, p.repeat)
    print(text)

    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    record = {
        "command": command,
        "machine": facts,
        "params": p.__dict__,
        "repositories": repo_info,
        "rows": report.as_json(rows),
    }
    out = RESULTS / f"{stamp}.json"
    out.write_text(json.dumps(record, indent=2, default=str))
    log(f"results: {out.relative_to(ROOT)}")
    doc = args.doc or (None if p.quick else DOC)
    if doc and not args.no_doc:
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text(text)
        log(f"wrote {doc}")
    log(f"done in {facts['seconds']} s")

    errs = report.errors(rows)
    if errs:
        log(f"{len(errs)} figure(s) could not be measured")
        return 1
    if args.strict and not p.quick:
        judged = "medium" if "medium" in rows else sizes[-1]
        misses = [
            f"{r.key} ({size})"
            for size, rs in rows.items()
            for r in rs
            if r.verdict == "miss" and (size == judged or size in r.size_targets)
        ]
        if misses:
            log(f"missed targets: {', '.join(misses)}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
