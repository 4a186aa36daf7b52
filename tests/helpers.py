"""Helpers for driving bar in tests: in-process ``main(argv)`` and the installed executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bar.cli import main

BAR_EXE = str(Path(sys.executable).parent / "bar")


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def bar(capfd: pytest.CaptureFixture[str], *args: str) -> Ran:
    """Run ``bar ARGS`` in-process and capture what it printed."""
    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return Ran(code, out, err)


def bar_exe(*args: str, cwd: Path | None = None, input: bytes | None = None,
            env: dict[str, str] | None = None, timeout: float = 120) -> Ran:  # fmt: skip
    """Run the installed ``bar`` executable in a child process."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [BAR_EXE, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=full_env,
        timeout=timeout,
    )
    return Ran(proc.returncode, proc.stdout.decode(errors="replace"),
               proc.stderr.decode(errors="replace"))  # fmt: skip


def bar_home() -> Path:
    return Path(os.environ["BAR_HOME"])


def project_dir() -> Path:
    (pdir,) = (bar_home() / "projects").iterdir()
    return pdir


def task_dir(task_id: str) -> Path:
    return project_dir() / "tasks" / task_id


def ledger(task_id: str) -> list[dict[str, Any]]:
    path = task_dir(task_id) / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def new_task(capfd: pytest.CaptureFixture[str], name: str = "t1", *extra: str) -> dict[str, Any]:
    res = bar(capfd, "task", "new", name, "--json", *extra)
    assert res.code == 0, res.err
    data: dict[str, Any] = res.json()
    return data


def worktree(task: dict[str, Any]) -> Path:
    return Path(task["worktree"])
