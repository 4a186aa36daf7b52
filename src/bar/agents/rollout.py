"""How a Codex tool call ended, as Codex's own record of the session says.

Codex's post-tool event carries a command's output only, not how it ended, and a command
the model leaves running (``exec_command`` with ``yield_time_ms``: it returns while the
process goes on) gets no post-tool event at all. Codex writes both to its *rollout*, the
session's JSONL in its home (``CODEX_HOME/sessions/…``, named in each event's
``transcript_path``), before the hook runs: an ``item_completed`` event with the command's
``exit_code``, and a ``function_call_output`` whose text starts ``Process exited with code
N`` or ``Process running with session ID …``, or ends ``aborted by user`` for a call the
person stopped (Ctrl-C). Observed with Codex CLI 0.169.0.

Only a rollout inside the agent's home for the task is read (``within``), reached
without following any link; what it cannot tell is None, and the caller keeps what it knew.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bar.store.files import read_beneath

if TYPE_CHECKING:
    from bar.agents.protocol import HookEvent
    from bar.model.tasks import Task

_TAIL = 1 << 20  # bytes read from the end first: a post-tool event's call is recent
_EXITED = re.compile(r"^Process exited with code (-?\d+)$", re.M)
_RUNNING = re.compile(r"^Process running with session ID ", re.M)
_ABORTED = re.compile(r"^aborted by user$", re.M)
# the exit codes of a command a stopping signal ended (SIGHUP, SIGINT, SIGKILL, SIGTERM)
_STOPPED = frozenset({128 + 1, 128 + 2, 128 + 9, 128 + 15})


def said(task: Task, events: list[HookEvent], *, recent: bool = False) -> dict[str, str]:
    """What Codex's rollouts say of the calls ``events`` name, by call id: only a rollout
    in its home for ``task`` is read."""
    from bar.agents import homes

    home = homes.path(task, "codex")
    found: dict[str, str] = {}
    for path in {e.transcript for e in events}:
        if (rollout := within(home, path)) is not None:
            ids = [e.tool_use_id or "" for e in events if e.transcript == path]
            found.update(outcomes(home, rollout, ids, recent=recent))
    return found


def settle(task: Task, calls: list[tuple[int, HookEvent]]) -> list[tuple[int, str]]:
    """(number, outcome) of each call the rollout says ended or was left running: the
    calls Codex sent no post-tool event for (the model left them running)."""
    found = said(task, [event for _, event in calls]) if calls else {}
    return [(n, found[e.tool_use_id or ""]) for n, e in calls if (e.tool_use_id or "") in found]


def within(home: Path, path: str | None) -> Path | None:
    """The file ``path`` names under ``home``, as a path from ``home`` (its directories as
    bar named them, for ``read_beneath``, which follows no link on the way); None if it
    names nothing there."""
    if not path or not os.path.isabs(path):
        return None
    for base, name in ((str(home), path), (os.path.realpath(home), os.path.realpath(path))):
        rel = os.path.relpath(os.path.normpath(name), base)
        if rel != os.curdir and not rel.startswith(os.pardir):
            return home / rel
    return None


def outcomes(
    home: Path, rollout: Path, call_ids: Iterable[str], *, recent: bool = False
) -> dict[str, str]:
    """For each call the rollout tells about: "ran" (it ended with 0, was left running by
    the model's choice, or was still running when Codex or a signal stopped it), "failed" (a
    non-zero exit code) or "interrupted" (the person stopped the turn while it ran).
    ``recent``: look only at the rollout's last mebibyte."""
    wanted = {i for i in call_ids if i}
    if not wanted:
        return {}
    data = read_beneath(home, rollout, tail=_TAIL if recent else None) or b""
    found: dict[str, str] = {}
    left: set[str] = set()  # the calls the model left running
    for line in data.splitlines():
        if not any(i.encode() in line for i in wanted):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # (the first line of a tail, cut, or one being written)
        payload = rec.get("payload") if isinstance(rec, dict) else None
        if isinstance(payload, dict):
            _note(payload, wanted, found, left)
    return found


def _note(
    payload: dict[str, object], wanted: set[str], found: dict[str, str], left: set[str]
) -> None:
    item = payload.get("item")
    if payload.get("type") == "item_completed" and isinstance(item, dict):
        code = item.get("exit_code")
        call = str(item.get("id"))
        known = isinstance(code, int) and not isinstance(code, bool)
        # -1: no exit status, Codex stopped it (a command left running when the session
        # ended, or one the person stopped: its output said so, and that stays); a
        # command left running that a signal ended was stopped so too (Codex may reap
        # it first, on a busy machine, and give its status: 128 + the signal)
        if call in wanted and known and found.get(call) != "interrupted":
            assert isinstance(code, int)
            stopped = call in left and code in _STOPPED
            found[call] = "failed" if code > 0 and not stopped else "ran"
    elif payload.get("type") == "function_call_output" and payload.get("call_id") in wanted:
        call = str(payload["call_id"])
        output = payload.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        exited = _EXITED.search(text)
        if _ABORTED.search(text):
            found[call] = "interrupted"  # (its item says -1: stopped, not why)
        elif exited is not None:
            found.setdefault(call, "ran" if exited.group(1) == "0" else "failed")
        elif _RUNNING.search(text):
            left.add(call)
            found.setdefault(call, "ran")
