"""Human output of the command line: colour, column layout, one-line descriptions of
steps, JSON for scripts.

Whether to colour, first rule that applies: ``--color always|never``; ``NO_COLOR`` set
to anything but the empty string (never); ``FORCE_COLOR`` set to anything but ``""`` or
``0`` (always); config ``output.color: false`` (never); else only when stdout is a
terminal (or a pager showing on one) whose ``TERM`` is not ``dumb``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.base.clock import duration_text
from bar.base.cmdline import line_of
from bar.base.ids import short as short  # the commands read object ids through here
from bar.base.notices import byte_size as byte_size  # (the core's notices say sizes so too)
from bar.base.notices import plural as plural  # the core words its notices with it too
from bar.cli import pager
from bar.git import DiffStat
from bar.model.records import (
    ApplyStep,
    DecisionStep,
    ManualStep,
    RollbackStep,
    RunStep,
    Step,
    SyncStep,
)

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.model.tasks import Task

_ESCAPE = re.compile(r"\033\[[0-9;]*m")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


COLOR_CHOICES = ("auto", "always", "never")
_flag = {"color": "auto"}


def set_color(when: str) -> None:
    """The ``--color`` of this command line: auto, always or never."""
    _flag["color"] = when if when in COLOR_CHOICES else "auto"


def use_color(enabled: bool = True) -> bool:
    """Whether to colour stdout; ``enabled``: the project's ``output.color``."""
    when = _flag["color"]
    if when != "auto":
        return when == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    return enabled and os.environ.get("TERM") != "dumb" and on_terminal()


def on_terminal() -> bool:
    """Whether stdout is seen on a terminal: directly, or through the pager."""
    if pager.active():
        return True
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width() -> int | None:
    """The width to fit lines to: the terminal's when stdout is one (COLUMNS wins), None
    when stdout goes to a pager (which wraps or scrolls) or to a file or pipe."""
    if pager.active() or not on_terminal():
        return None
    try:
        return max(int(os.environ["COLUMNS"]), 20)
    except (KeyError, ValueError):
        pass
    try:
        columns = os.get_terminal_size(sys.stdout.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return max(columns, 20) if columns else 80  # 0: a terminal that does not say


def visible_len(text: str) -> int:
    """How many columns ``text`` takes: its colour codes not counted."""
    return len(_ESCAPE.sub("", text)) if "\033[" in text else len(text)


def fit(text: str, width: int | None) -> str:
    """``text`` cut with "..." to ``width`` columns (None: whole)."""
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."


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
        return painted + " " * max(0, width - visible_len(painted))


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def describe(step: Step, task: Task | None = None) -> str:
    """One line saying what a step was; ``task``: its task, whose ledger says what the
    step an undo or redo names was (``bar ui`` says the same)."""
    if isinstance(step, RunStep):
        return one_line(line_of(step.cmd))
    if isinstance(step, ManualStep):
        return "changes made outside bar"
    if isinstance(step, RollbackStep):
        from bar import api

        return one_line(api.rollback_text(task, step))
    if isinstance(step, SyncStep):
        moved = f" ({short(step.base_before)} -> {short(step.base_after)})"
        clash = (
            f", conflict markers in {plural(len(step.conflicts), 'file')}" if step.conflicts else ""
        )
        return f"sync onto {step.onto}{moved}{clash}"
    if isinstance(step, DecisionStep):
        if step.cleaned:
            return one_line(f"decide clean: {plural(len(step.cleaned), 'record')} removed")
        chosen = ", ".join(f"{d.get('id')}={d.get('chosen')}" for d in step.decisions)
        via = " (read from a file)" if step.via == "file" else ""
        return one_line(f"decision {step.session_id}: {chosen}{via}")
    assert isinstance(step, ApplyStep)
    return f"apply ({step.mode}) onto {step.target_branch} as {short(step.commit_sha)}"


def visible(text: str) -> str:
    """``text`` with its control characters (an escape sequence someone else wrote: an
    agent's words) shown as ``\\x1b``, never sent to the terminal as they are."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def one_line(text: str) -> str:
    """``text`` on one line: its line breaks and tabs shown as ``\\n`` and ``\\t``, its
    other control characters as ``visible`` shows them."""
    return visible(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t"))


def checkpoint_columns(cps: Sequence[Checkpoint]) -> tuple[int, int, int]:
    """The widths of the columns of ``cps`` listed together (``checkpoint_line``): their
    names, their tools and their diff stats, each its widest cell, so that a long tool
    name (Gemini CLI's ``run_shell_command``) moves its column, never one line."""
    return (
        max((len(cp.name) for cp in cps), default=0),
        max((len(cp.tool or cp.kind) for cp in cps), default=0),
        max((len(stat_text(cp.diff_stat)) for cp in cps), default=0),
    )


def checkpoint_line(
    cp: Checkpoint,
    paint: Painter,
    width: int | None = None,
    columns: tuple[int, int, int] | None = None,
) -> str:
    """One line for a checkpoint: its name, tool, diff stat and what it acted on, cut to
    ``width`` columns (None: whole); ``columns``: the widths of the first three
    (``checkpoint_columns`` of the checkpoints listed with it; None: its own)."""
    tool = cp.tool or cp.kind
    name_w, tool_w, stat_w = columns or checkpoint_columns([cp])
    head = (
        f"{paint(cp.name, 'dim')}{' ' * (name_w - len(cp.name))}  {tool:<{tool_w}}  "
        f"{stat_text(cp.diff_stat):<{stat_w}}  "
    )
    fate = f" {cp.outcome}" if cp.outcome in ("failed", "interrupted") else ""
    if cp.verified is False:  # not in the agent's transcript: some process made it up
        fate += " unverified"
    room = None if width is None else max(width - visible_len(head) - len(fate), 10)
    return head + fit(one_line(cp.target_text), room) + (paint(fate, "red") if fate else "")


def outcome(step: Step, paint: Painter) -> str:
    text, style = outcome_parts(step)
    return paint(text, style) if style else text


_TONE = {"ok": "green", "warn": "yellow", "bad": "red"}


def outcome_parts(step: Step) -> tuple[str, str | None]:
    """How a step ended, in words (``RunStep.ending``: the same in every face), and the
    colour to show them in."""
    if not isinstance(step, RunStep):
        return "", None
    ending = step.ending
    return ending.word, _TONE[ending.tone]


def session_text(summary: dict[str, Any], *, calls: bool = False) -> str:
    """An agent step's session in one line: ``claude-opus-4-8 · 4 turns · 40 in, 20 out``
    (``calls``: with its tool calls), and its cost when known."""
    from bar import api  # (not at the top: every command, ``bar hook`` too, loads this module)

    parts = [
        visible(str(summary.get("model") or "model unknown")),
        plural(_count(summary, "turns"), "turn"),
    ]
    if calls:
        parts.append(plural(_count(summary, "tool_calls"), "tool call"))
    parts.append(api.tokens_text(summary))
    cost = api.cost_text(summary)
    if cost:
        parts.append(cost)
    return " · ".join(parts)


def abandoned_text(summary: dict[str, Any]) -> str | None:
    """The answers a session gave up (a rewind, a branch), in one line: ``1 abandoned
    answer (5.0k in, 50 out)``; None when there were none."""
    from bar import api

    gone = summary.get("abandoned")
    if not isinstance(gone, dict) or not _count(gone, "turns"):
        return None
    said = [api.tokens_text(gone)]
    cost = api.cost_text(gone)
    if cost:
        said.append(cost)
    return f"{plural(_count(gone, 'turns'), 'abandoned answer')} ({', '.join(said)})"


def totals_text(totals: dict[str, Any]) -> str:
    """What a task's agent steps add up to, in one line (``api.session_totals``)."""
    from bar import api

    parts = [
        plural(_count(totals, "steps"), "agent step"),
        plural(_count(totals, "turns"), "turn"),
        plural(_count(totals, "tool_calls"), "tool call"),
        api.tokens_text(totals),
    ]
    cost = api.cost_text(totals)
    if cost:
        parts.append(cost)
    models = totals.get("models")
    if isinstance(models, list) and models:
        parts.append(visible(", ".join(map(str, models))))
    return " · ".join(parts)


def _count(rec: dict[str, Any], key: str) -> int:
    value = rec.get(key)
    return value if isinstance(value, int) else 0


def stat_text(stat: DiffStat) -> str:
    if stat.files == 0:
        return "no changes"
    return f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"


def changes_text(stat: DiffStat, extra: Mapping[str, Any]) -> str:
    """A step's changes (``stat_text``), and, where it moved the worktree's HEAD (a
    commit, a reset: ``head_moved``), that it did."""
    said = stat_text(stat)
    return f"{said} (HEAD moved)" if extra.get("head_moved") is True else said


def duration(ms: int) -> str:
    """A step's length as every face says it: "0.6 s", "1 min 12 s" (``bar.base.clock``)."""
    return duration_text(ms)


def copy_file(path: Path) -> bool:
    """Copy a file to stdout as it is; False if it does not exist."""
    import shutil

    try:
        with path.open("rb") as fh:
            sys.stdout.flush()  # what was printed before it comes first
            out = sys.stdout.buffer
            shutil.copyfileobj(fh, out)
            out.flush()
    except FileNotFoundError:
        return False
    return True
