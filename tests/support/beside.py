"""Run one command in the foreground and others beside it: ``make test``'s way of
using the part of the cores the suite leaves idle (its test processes wait on git,
agents and servers: about a sixth of two cores, a whole run long).

    python tests/support/beside.py --log-dir .test-beside \\
        --beside typecheck=".venv/bin/mypy" --beside bench="python bench/run.py --quick" \\
        -- make unit

The foreground command keeps the terminal: its output comes as it is written. Each
command beside it writes to ``LOG_DIR/NAME.log``, shown whole once the foreground command
has ended and it has too, under a line that says how it ended. The exit status is the
foreground command's if it failed, else 1 if any beside it failed, else 0. A Ctrl-C (or a
SIGTERM) stops them all.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="beside.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--log-dir", type=Path, required=True, help="where each NAME.log goes")
    p.add_argument(
        "--beside",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="a command (a shell line) to run beside the foreground one (repeatable)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the foreground command")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("no foreground command (give it after --)")
    for spec in args.beside:
        if "=" not in spec or not spec.partition("=")[0]:
            p.error(f"--beside {spec!r}: expected NAME=COMMAND")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    started: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    ended: dict[str, tuple[int, float]] = {}  # how each ended, and after how long

    def watch(name: str, proc: subprocess.Popen[bytes], began: float) -> None:
        ended[name] = (proc.wait(), time.monotonic() - began)

    for spec in args.beside:
        name, _, line = spec.partition("=")
        with open(args.log_dir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                line, shell=True, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        started[name] = (proc, time.monotonic())
        threading.Thread(target=watch, args=(name, proc, started[name][1]), daemon=True).start()
    # SIGTERM as a Ctrl-C: the ``finally`` below stops what runs beside
    signal.signal(signal.SIGTERM, lambda signum, frame: signal.default_int_handler(signum, frame))
    try:
        code = subprocess.call(args.command)
        for proc, _ in started.values():
            proc.wait()
        while len(ended) < len(started):  # (each watch notes its end as its wait returns)
            time.sleep(0.01)
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
    failed = []
    for name in started:
        status, seconds = ended[name]
        how = "passed" if status == 0 else f"FAILED (exit {status})"
        print(f"\n===== beside the suite: {name} {how} in {seconds:.0f} s =====", flush=True)
        sys.stdout.buffer.write((args.log_dir / f"{name}.log").read_bytes())
        sys.stdout.flush()
        if status != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed beside the suite: {', '.join(failed)}", file=sys.stderr)
    if code != 0:
        print(f"\nfailed: {shlex.join(args.command)} (exit {code})", file=sys.stderr)
        return code
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
