"""Human output of the command line: colour only on a terminal (and never with
NO_COLOR), one-line descriptions of steps, JSON for scripts."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.git import DiffStat
from bar.git import short as short  # the commands read object ids through here
from bar.records import ApplyStep, ManualStep, RollbackStep, RunStep, Step, SyncStep

if TYPE_CHECKING:
    from bar.checkpoints import Checkpoint

_ESCAPE = re.compile(r"\033\[[0-9;]*m")
_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def use_color(enabled: bool = True) -> bool:
    return (
        enabled
        and "NO_COLOR" not in os.environ
        and os.environ.get("TERM") != "dumb"
        and sys.stdout.isatty()
    )


class Painter:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = use_color(enabled)

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"

    @staticmethod
    def pad(painted: str, width: int) -> str:
        """``painted`` left-aligned in ``width`` columns, its colour codes not counted."""
        visible = len(painted)
        if "\033[" in painted:
            visible -= sum(len(code) for code in _ESCAPE.findall(painted))
        return painted + " " * max(0, width - visible)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def describe(step: Step) -> str:
    """One line saying what a step was."""
    if isinstance(step, RunStep):
        text = one_line(shlex.join(step.cmd))
        return text if len(text) <= 72 else text[:69] + "..."
    if isinstance(step, ManualStep):
        return "changes made outside bar"
    if isinstance(step, RollbackStep):
        if step.undo_of or step.redo_of:
            return f"{'undo' if step.undo_of else 'redo'} of step {step.undo_of or step.redo_of}"
        return f"rollback to {step.target_text}" + (" (--hard)" if step.hard else "")
    if isinstance(step, SyncStep):
        moved = f" ({short(step.base_before)} -> {short(step.base_after)})"
        clash = f", conflict markers in {len(step.conflicts)} file(s)" if step.conflicts else ""
        return f"sync onto {step.onto}{moved}{clash}"
    assert isinstance(step, ApplyStep)
    return f"apply ({step.mode}) onto {step.target_branch} as {short(step.commit_sha)}"


def one_line(text: str) -> str:
    """``text`` on one line: its line breaks and tabs shown as ``\\n`` and ``\\t``."""
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def checkpoint_line(cp: Checkpoint, paint: Painter) -> str:
    """One line for a checkpoint: its name, tool, diff stat and what it acted on."""
    tool = cp.tool or cp.kind
    what = one_line(cp.target_text)
    what = what if len(what) <= 60 else what[:57] + "..."
    fate = paint(" failed", "red") if cp.outcome == "failed" else ""
    return f"{paint(cp.name, 'dim')}  {tool:<12} {stat_text(cp.diff_stat):<22} {what}{fate}"


def outcome(step: Step, paint: Painter) -> str:
    if not isinstance(step, RunStep):
        return ""
    if step.blocked:
        return paint("blocked", "red")
    if step.interrupted:
        return paint("interrupted", "yellow")
    if step.exit_code == 0:
        return paint("exit 0", "green")
    return paint(f"exit {step.exit_code}", "red")


def stat_text(stat: DiffStat) -> str:
    if stat.files == 0:
        return "no changes"
    return f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"


def duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    return f"{ms // 60_000}m{(ms % 60_000) // 1000:02d}s"


def copy_file(path: Path) -> bool:
    """Copy a file to stdout as it is; False if it does not exist."""
    import shutil

    try:
        with path.open("rb") as fh:
            out = sys.stdout.buffer
            shutil.copyfileobj(fh, out)
            out.flush()
    except FileNotFoundError:
        return False
    return True
