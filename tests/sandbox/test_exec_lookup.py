"""The exec check reaches the program a step runs as the kernel does (``openat2`` from the
process's root, ``RESOLVE_IN_ROOT``). Under that flag the kernel answers EAGAIN when a
rename or a mount anywhere on the machine races a ``..`` of the lookup (a package
manager's ``.bin/tool -> ../pkg/bin/tool.js``), and asks for a retry: the check retries,
and never calls such a program missing (``command not found``, exit 127)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bar.sandbox import exec_watch

RENAMES = """
import os, sys, time
a, b, until = sys.argv[1], sys.argv[2], time.monotonic() + 60
open(a, "w").close()
while time.monotonic() < until and os.path.exists(sys.argv[3]):
    os.rename(a, b)
    os.rename(b, a)
"""


def test_a_program_behind_a_dotdot_link_is_found_while_the_machine_renames(
    tmp_path: Path,
) -> None:
    (tmp_path / "pkg" / "bin").mkdir(parents=True)
    (tmp_path / "pkg" / "bin" / "tool.js").write_text("#!/usr/bin/env node\n")
    (tmp_path / ".bin").mkdir()
    (tmp_path / ".bin" / "tool").symlink_to("../pkg/bin/tool.js")
    running = tmp_path / "running"
    running.touch()
    renamer = subprocess.Popen(
        [sys.executable, "-c", RENAMES, str(tmp_path / "r1"), str(tmp_path / "r2"), str(running)]
    )
    missing = 0
    try:
        for _ in range(5000):
            fd = exec_watch._reach(os.getpid(), str(tmp_path / ".bin" / "tool"))
            if fd is None:
                missing += 1
            else:
                os.close(fd)
    finally:
        running.unlink()
        renamer.wait(timeout=60)
    assert missing == 0
