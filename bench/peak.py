"""Run a command and write its peak RSS and time to a file: ``peak.py [--own] OUT ARGV...``.

A child's ``ru_maxrss`` (``wait4``) starts from the memory of the process it was forked
from: the kernel counts the pages a forked child shares with its parent until it execs,
and keeps that high-water mark across the exec. Measured from the benchmark's own
process (tens of MB once it holds every sample), any command would look at least that
large. Forked from this small interpreter instead (~10 MB, the floor of the figure), the
number is the command's own: the largest of it and every descendant it waited for.

OUT receives ``<peak RSS in KiB> <seconds>``; the exit status is the command's (128 + N
when a signal N ended it). With ``--own``, a third number: the peak of the command's own
process alone (its ``VmHWM``, a high-water mark the kernel keeps, read every 2 ms until
it ends: only what it reached in its last 2 ms could be missed), so that bar's memory
is told from that of the git it starts (docs/performance.md, "a million files").
"""

from __future__ import annotations

import os
import resource
import sys
import time


def main(argv: list[str]) -> int:
    own = argv[:1] == ["--own"]
    argv = argv[1:] if own else argv
    if len(argv) < 2:
        print("usage: peak.py [--own] OUT COMMAND [ARG...]", file=sys.stderr)
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
    if own:
        highest, status, usage = _watch(pid)
    else:
        (_, status, usage), highest = os.wait4(pid, 0), 0
    seconds = time.perf_counter() - started
    with open(out, "w", encoding="ascii") as fh:
        fh.write(f"{usage.ru_maxrss} {seconds}" + (f" {highest}" if own else "") + "\n")
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _watch(pid: int) -> tuple[int, int, resource.struct_rusage]:
    """Wait for ``pid``, reading its high-water mark meanwhile: (that mark, ``wait4``'s
    status and usage)."""
    highest = 0
    while True:
        highest = max(highest, _high_water(pid))
        ended, status, usage = os.wait4(pid, os.WNOHANG)
        if ended:
            return highest, status, usage
        time.sleep(0.002)


def _high_water(pid: int) -> int:
    """The process's peak resident memory so far, in KiB (0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
