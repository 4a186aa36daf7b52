"""A client of aide's data formats, written from its format document alone (reference
004, ``aide-program/docs/formats/data.md``), as a user of aide would write one: nothing
of bar in it.

It reads what the document places in the project: the flow's status
``.aide/flow-status.json`` (§3.1), and the decisions ``.aide/decisions/pending.json``
and ``.aide/decisions/{timestamp}.json`` (§4), checking each against the document's
types, and its times (§6); and it reads the git commits a flow's history names, whose
messages §5 gives as ``[aide] <phase>: <summary>`` (``[aide] <phase> issue: ...``,
``back-step``, ...).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

ACTIONS = ("start", "next-step", "back-step", "next-part", "back-part", "issue", "error")
# §6: ISO 8601 with the offset; names of files and ids: the simplified form
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d$")
# §5: "[aide] <phase>: <summary>", "[aide] <phase> issue: <summary>", ...; the tool's name
# in the brackets is read as it is
SUBJECT = re.compile(
    r"^\[(?P<tool>[^\]]+)\] (?P<phase>\S+)(?: (?P<kind>issue|error|back-step|back-part))?: "
    r"(?P<summary>.*)$"
)


class FormatError(Exception):
    """What the project holds is not as the document says."""


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise FormatError(what)


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FormatError(f"{path} is missing") from None
    _need(isinstance(data, dict), f"{path} holds no JSON object")
    assert isinstance(data, dict)
    return data


def flow_status(root: Path) -> dict[str, Any]:
    """§3.1's FlowStatus, read from ``root/.aide/flow-status.json`` and checked."""
    status = _load(root / ".aide" / "flow-status.json")
    _need(isinstance(status.get("task_id"), str), "task_id is a string")
    _need(bool(STAMP.match(status["task_id"])), f"task_id {status['task_id']!r} is a timestamp")
    _need(isinstance(status.get("current_phase"), str), "current_phase is a string")
    _need(isinstance(status.get("current_step"), int), "current_step is a number")
    _need(bool(TIME.match(str(status.get("started_at")))), "started_at is ISO 8601")
    _need(isinstance(status.get("history"), list), "history is a list")
    for entry in status["history"]:
        _need(bool(TIME.match(str(entry.get("timestamp")))), f"timestamp of {entry}")
        _need(entry.get("action") in ACTIONS, f"action of {entry}")
        _need(isinstance(entry.get("phase"), str), f"phase of {entry}")
        _need(isinstance(entry.get("step"), int), f"step of {entry}")
        _need(isinstance(entry.get("summary"), str), f"summary of {entry}")
        if "git_commit" in entry:
            _need(isinstance(entry["git_commit"], str), f"git_commit of {entry}")
    if status["history"]:
        last = status["history"][-1]
        _need(last["phase"] == status["current_phase"], "current_phase is the last entry's")
        _need(last["step"] == status["current_step"], "current_step is the last entry's")
    return status


def pending(root: Path) -> dict[str, Any]:
    """§4.2: ``pending.json``, a DecideInput (§2.1)."""
    data = _load(root / ".aide" / "decisions" / "pending.json")
    _decide_input(data)
    return data


def _decide_input(data: dict[str, Any]) -> None:
    _need(isinstance(data.get("task"), str), "task is a string")
    _need(isinstance(data.get("source"), str), "source is a string")
    _need(isinstance(data.get("items"), list), "items is a list")
    for item in data["items"]:
        _need(isinstance(item.get("id"), int), f"id of {item}")
        _need(isinstance(item.get("title"), str), f"title of {item}")
        _need(len(item.get("options", [])) >= 2, f"at least 2 options in {item}")
        for option in item["options"]:
            _need(isinstance(option.get("value"), str), f"value of {option}")
            _need(isinstance(option.get("label"), str), f"label of {option}")
            if "score" in option:
                _need(0 <= option["score"] <= 100, f"score of {option}")
        if "recommend" in item:
            values = [o["value"] for o in item["options"]]
            _need(item["recommend"] in values, f"recommend of {item}")
        if "location" in item:
            loc = item["location"]
            _need(isinstance(loc.get("file"), str), f"location of {item}")
            _need(isinstance(loc.get("start"), int) and isinstance(loc.get("end"), int), "lines")


def record(root: Path, timestamp: str) -> dict[str, Any]:
    """§4.3: ``{timestamp}.json``, a DecisionRecord (input, output, completed_at)."""
    _need(bool(STAMP.match(timestamp)), f"{timestamp!r} is a file name's timestamp")
    data = _load(root / ".aide" / "decisions" / f"{timestamp}.json")
    _need(set(data) == {"input", "output", "completed_at"}, f"the record's keys: {sorted(data)}")
    _decide_input(data["input"])
    _need(bool(TIME.match(str(data["completed_at"]))), "completed_at is ISO 8601")
    for decision in data["output"].get("decisions", []):
        _need(isinstance(decision.get("id"), int), f"id of {decision}")
        _need(isinstance(decision.get("chosen"), str), f"chosen of {decision}")
        _need(set(decision) <= {"id", "chosen", "note"}, f"keys of {decision}")
    return data


def records(root: Path) -> list[str]:
    """The timestamps of the decision records kept (§4.1), oldest first."""
    folder = root / ".aide" / "decisions"
    return sorted(p.stem for p in folder.glob("*.json") if STAMP.match(p.stem))


def subject(root: Path, commit: str) -> dict[str, str]:
    """The parts of a flow commit's message (§5): tool, phase, kind (issue, error,
    back-step, back-part, or ""), summary."""
    said = subprocess.run(
        ["git", "log", "-1", "--format=%s", commit],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    found = SUBJECT.match(said)
    _need(found is not None, f"the message of {commit} is not §5's: {said!r}")
    assert found is not None
    return {k: v or "" for k, v in found.groupdict().items()}


def expected_kind(entry: dict[str, Any]) -> str:
    """§5.2, §5.3: which message an entry's commit has."""
    return (
        entry["action"] if entry["action"] in ("issue", "error", "back-step", "back-part") else ""
    )


def on_branch(root: Path, commit: str) -> bool:
    """Whether ``commit`` is in the history of what the project has checked out."""
    res = subprocess.run(
        ["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=root, capture_output=True
    )
    return res.returncode == 0
