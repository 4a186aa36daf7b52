"""Run a command and write its peak RSS and time to a file: ``peak.py OUT ARGV...``.

A child's ``ru_maxrss`` (``wait4``) starts from the memory of the process it was forked
from: the kernel counts the pages a forked child shares with its parent until it execs,
and keeps that high-water mark across the exec. Measured from the benchmark's own
process (tens of MB once it holds every sample), any command would look at least that
large. Forked from this small interpreter instead (~10 MB, the floor of the figure), the
number is the command's own: the largest of it and every descendant it waited for.

OUT receives ``<peak RSS in KiB> <seconds>``; the exit status is the command's (128 + N
when a signal N ended it).
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: peak.py OUT COMMAND [ARG...]", file=sys.stderr)
        return 2
    out, command = argv[0], argv[1:]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"peak.py: {command[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    with open(out, "w", encoding="ascii") as fh:
        fh.write(f"{usage.ru_maxrss} {seconds}\n")
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
