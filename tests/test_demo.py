"""make demo's script runs from nothing and prints each command as a shell would read it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

DEMO = ROOT / "demo" / "demo.sh"


def test_the_demo_runs_and_its_printed_commands_paste_safely(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(
        os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", TMPDIR=str(scratch)
    )
    proc = subprocess.run(["bash", str(DEMO)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = [m.group(1) for m in re.finditer(r"\033\[1m\$ (.*)\033\[0m", proc.stdout)]
    assert "bar run --no-pty -- sh -c 'cd /tmp && rm -rf / --no-preserve-root'" in shown
    assert "bar task new add-discounts -d 'Add percentage discounts to the cart'" in shown
    # each printed line splits back into the words the demo ran: none would do more
    blocked = next(line for line in shown if "rm -rf" in line)
    assert shlex.split(blocked)[-3:] == ["sh", "-c", "cd /tmp && rm -rf / --no-preserve-root"]
    assert "Applied task add-discounts" in proc.stdout
    assert not list(scratch.iterdir()), "the demo leaves nothing behind"
