"""``bar decide``: the agent asks the person questions, and waits for the answers.

The formats are aide decide's (SPEC §12; their field names are fixed): the agent submits a
DecideInput (``task``, ``source``, ``items[]``, each with ``id``, ``title``,
``location?``, ``context?``, ``options[]`` of ``value``, ``label``, ``score?``,
``pros?``, ``cons?``, and ``recommend?``); bar keeps it as ``decisions/pending.json`` in
the task directory with ``_meta`` {``created_at``, ``session_id``}. The person's answer is
the DecideOutput {``decisions[]``: ``id``, ``chosen``, ``note?``}, kept with the input as
the DecisionRecord ``decisions/<session_id>.json`` {``input``, ``output``,
``completed_at``}; the pending file is removed then, and a ``decision`` step records the
choices in the ledger. A new submission replaces a pending one.

Writing goes through orders (``bar.step.orders``): inside a running step the agent cannot
write bar's files, so its ``bar run`` does. Reading is plain reading.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bar.base.clock import now_iso
from bar.errors import BarError, CorruptFile, ExitCode, NotFound, UsageError
from bar.ledger.records import DecisionStep
from bar.step import orders
from bar.store.files import ensure_dir, write_bytes_atomic
from bar.task.tasks import Task

PENDING = "pending.json"


class NoPendingDecision(BarError):
    exit_code = ExitCode.NO_DECISION


class NotDecidedYet(BarError):
    exit_code = ExitCode.NOT_DECIDED


class BadDecideInput(UsageError):
    """A DecideInput (or an answer) that is not as the format says: one sentence."""


def directory(task: Task) -> Path:
    return task.dir / "decisions"


# --- the formats ---------------------------------------------------------------------

_TOP = ("task", "source", "items")
_ITEM = ("id", "title", "location", "context", "options", "recommend")
_OPTION = ("value", "label", "score", "pros", "cons")
_LOCATION = ("file", "start", "end")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def validate(data: object) -> dict[str, Any]:
    """``data`` if it is a DecideInput exactly as the format says; else ``BadDecideInput``
    naming the item and the field."""
    if not isinstance(data, dict):
        raise BadDecideInput("the input must be a JSON object with task, source and items")
    for key in data:
        if key not in _TOP:
            hint = (
                "bar writes _meta itself" if key == "_meta" else "the fields: task, source, items"
            )
            raise BadDecideInput(f"unknown field {_text(key)} in the input", hint=hint)
    for key in ("task", "source"):
        if not isinstance(data.get(key), str):
            raise BadDecideInput(f'"{key}" must be a string')
    items = data.get("items")
    if not isinstance(items, list) or not items:
        raise BadDecideInput('"items" must be a list of at least one item')
    seen: set[int] = set()
    for number, item in enumerate(items, 1):
        where = f"item {number}"
        if not isinstance(item, dict):
            raise BadDecideInput(f"{where} must be an object")
        if not _is_int(item.get("id")):
            raise BadDecideInput(f'{where}: "id" must be a whole number')
        ident = item["id"]
        where = f"item {number} (id {ident})"
        if ident in seen:
            raise BadDecideInput(
                f'{where}: "id" {ident} is used by an earlier item; ids are unique'
            )
        seen.add(ident)
        _check_item(item, where)
    return data


def _check_item(item: dict[str, Any], where: str) -> None:
    for key in item:
        if key not in _ITEM:
            raise BadDecideInput(
                f"{where}: unknown field {_text(key)}", hint="an item's fields: " + ", ".join(_ITEM)
            )
    if not isinstance(item.get("title"), str) or not item["title"].strip():
        raise BadDecideInput(f'{where}: "title" must be a string that is not empty')
    if "context" in item and not isinstance(item["context"], str):
        raise BadDecideInput(f'{where}: "context" must be a string')
    if "location" in item:
        _check_location(item["location"], where)
    options = item.get("options")
    if not isinstance(options, list) or len(options) < 2:
        raise BadDecideInput(f'{where}: "options" must be a list of at least 2 options')
    values: list[str] = []
    for n, option in enumerate(options, 1):
        _check_option(option, f"{where}, option {n}")
        if option["value"] in values:
            raise BadDecideInput(
                f'{where}, option {n}: "value" {_text(option["value"])} is '
                "used by an earlier option"
            )
        values.append(option["value"])
    if "recommend" in item and item["recommend"] not in values:
        raise BadDecideInput(
            f'{where}: "recommend" is {_text(item["recommend"])}, which is not '
            f"one of its options ({', '.join(values)})"
        )


def _check_location(loc: object, where: str) -> None:
    if not isinstance(loc, dict) or set(loc) != set(_LOCATION):
        raise BadDecideInput(f'{where}: "location" must be an object of file, start and end')
    if not isinstance(loc["file"], str) or not loc["file"]:
        raise BadDecideInput(f'{where}: "location.file" must be a file name')
    for key in ("start", "end"):
        if not _is_int(loc[key]) or loc[key] < 1:
            raise BadDecideInput(f'{where}: "location.{key}" must be a line number (1 or more)')
    if loc["end"] < loc["start"]:
        raise BadDecideInput(f'{where}: "location.end" is before "location.start"')


def _check_option(option: object, where: str) -> None:
    if not isinstance(option, dict):
        raise BadDecideInput(f"{where} must be an object")
    for key in option:
        if key not in _OPTION:
            raise BadDecideInput(
                f"{where}: unknown field {_text(key)}",
                hint="an option's fields: " + ", ".join(_OPTION),
            )
    for key in ("value", "label"):
        if not isinstance(option.get(key), str) or not option[key]:
            raise BadDecideInput(f'{where}: "{key}" must be a string that is not empty')
    if "score" in option:
        score = option["score"]
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
            or not 0 <= score <= 100
        ):
            raise BadDecideInput(
                f'{where}: "score" is {_text(score)}; it must be a number from 0 to 100'
            )
    for key in ("pros", "cons"):
        if key in option and not (
            isinstance(option[key], list) and all(isinstance(v, str) for v in option[key])
        ):
            raise BadDecideInput(f'{where}: "{key}" must be a list of strings')


def check_answers(data: Mapping[str, Any], decisions: object) -> list[dict[str, Any]]:
    """``decisions`` as a DecideOutput's list, if it answers every item of the input
    ``data`` with one of its options; else a clear error."""
    if not isinstance(decisions, list):
        raise BadDecideInput('"decisions" must be a list')
    items = {item["id"]: item for item in data["items"]}
    answered: dict[int, dict[str, Any]] = {}
    for d in decisions:
        if not isinstance(d, dict) or not _is_int(d.get("id")):
            raise BadDecideInput('each decision needs an "id" (a whole number)')
        item = items.get(d["id"])
        if item is None:
            raise BadDecideInput(
                f"there is no item {d['id']} to decide (the items: "
                f"{', '.join(str(i) for i in items)})"
            )
        values = [o["value"] for o in item["options"]]
        if d.get("chosen") not in values:
            raise BadDecideInput(
                f"item {d['id']}: {_text(d.get('chosen'))} is not one of its "
                f"options ({', '.join(values)})"
            )
        if d["id"] in answered:
            raise BadDecideInput(f"item {d['id']} is answered twice")
        note = d.get("note")
        if note is not None and not isinstance(note, str):
            raise BadDecideInput(f'item {d["id"]}: "note" must be a string')
        answered[d["id"]] = {
            "id": d["id"],
            "chosen": d["chosen"],
            **({"note": note} if note else {}),
        }
    missing = [str(i) for i in items if i not in answered]
    if missing:
        raise BadDecideInput(
            f"item{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            "not answered: every item needs a choice"
        )
    return [answered[i] for i in items]  # in the items' order


# --- reading -------------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CorruptFile(
            f"cannot read {path}: {exc}", hint="submit the questions again (bar decide submit)"
        ) from None
    if not isinstance(data, dict):
        raise CorruptFile(f"{path} does not hold a JSON object")
    return data


def pending(task: Task) -> dict[str, Any] | None:
    """The pending DecideInput with its ``_meta``, or None."""
    return _read(directory(task) / PENDING)


def sessions(task: Task) -> list[str]:
    """The answered sessions, oldest first."""
    found = directory(task).glob("*.json")
    return sorted(p.stem for p in found if p.name != PENDING and not p.name.startswith("."))


def record(task: Task, session_id: str | None = None) -> dict[str, Any]:
    """The DecisionRecord of ``session_id`` (None: the latest answered)."""
    waiting = pending(task)
    waiting_sid = waiting.get("_meta", {}).get("session_id") if waiting is not None else None
    if session_id is None:
        done = sessions(task)
        if not done and waiting_sid:
            session_id = str(waiting_sid)  # said below: not answered yet
        elif not done:
            raise NoPendingDecision(
                f"task {task.name} has no decisions yet: nothing was submitted",
                hint="the agent asks with `bar decide submit`",
            )
        else:
            session_id = done[-1]
    if "/" in session_id or session_id.startswith("."):
        raise UsageError(f"{session_id!r} is not a session id", hint="like 2025-01-15T10-30-00")
    found = _read(directory(task) / f"{session_id}.json")
    if found is None and session_id == waiting_sid:
        raise NotDecidedYet(
            f"decision {session_id} is not answered yet",
            hint="`bar decide answer` shows its questions and asks for your choices",
        )
    if found is None:
        raise NotFound(
            f"task {task.name} has no decision {session_id}", hint="`bar decide list` lists them"
        )
    return found


def result(task: Task) -> dict[str, Any]:
    """The DecideOutput of the latest submission: an error if it is not answered yet, or
    if nothing was ever submitted."""
    waiting = pending(task)
    if waiting is not None:
        sid = str(waiting.get("_meta", {}).get("session_id", ""))
        done = _read(directory(task) / f"{sid}.json") if sid else None
        if done is None:
            raise NotDecidedYet(
                f"decision {sid} is not decided yet",
                hint="the person answers with `bar decide answer` (or in bar ui); "
                "`bar decide submit --wait` waits for it",
            )
        return dict(done["output"])
    if not sessions(task):
        raise NoPendingDecision(
            f"task {task.name} has no decisions yet: nothing was submitted",
            hint="ask with `bar decide submit JSON`",
        )
    return dict(record(task)["output"])


def awaited(task: Task, timeout: float | None = None) -> tuple[str | None, dict[str, Any]]:
    """``result``, after waiting (up to ``timeout`` seconds; None: for as long as it takes)
    for the pending decision's answer if one is pending: (the session waited for, or
    None, and the DecideOutput)."""
    waiting = pending(task)
    sid = str(waiting.get("_meta", {}).get("session_id", "")) if waiting is not None else ""
    if not sid:
        return None, result(task)
    return sid, wait(task, sid, timeout)


def wait(task: Task, session_id: str, timeout: float | None = None) -> dict[str, Any]:
    """Block until ``session_id`` is answered; its DecideOutput."""
    deadline = None if timeout is None else time.monotonic() + timeout
    path = directory(task) / f"{session_id}.json"
    while True:
        found = _read(path)
        if found is not None:
            return dict(found["output"])
        now = pending(task)
        sid = now.get("_meta", {}).get("session_id") if now is not None else None
        if sid != session_id:
            raise NotDecidedYet(
                f"decision {session_id} was replaced by a newer submission"
                + (f" ({sid})" if sid else "")
                + " before it was answered"
            )
        if deadline is not None and time.monotonic() >= deadline:
            raise NotDecidedYet(
                f"decision {session_id} is not decided yet ({timeout:g} s waited)",
                hint="`bar decide result` prints the answer once there is one "
                "(exit 21 until then); the person runs `bar decide answer`",
            )
        time.sleep(0.2)


# --- writing (through orders) --------------------------------------------------------


def _session_id(task: Task) -> str:
    """``YYYY-MM-DDTHH-mm-ss`` now, later by a second while one is taken."""
    moment = dt.datetime.now().astimezone().replace(microsecond=0)
    taken = set(sessions(task))
    waiting = pending(task)
    if waiting is not None:  # a replaced one too: its waiter must not take the new answer
        taken.add(str(waiting.get("_meta", {}).get("session_id")))
    while moment.strftime("%Y-%m-%dT%H-%M-%S") in taken:
        moment += dt.timedelta(seconds=1)
    return moment.strftime("%Y-%m-%dT%H-%M-%S")


def _write(path: Path, obj: object) -> None:
    ensure_dir(path.parent)
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"))


@orders.register("decide.submit", "any")
def _submit(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    data = validate(args.get("input"))
    old = pending(ctx.task)
    sid = _session_id(ctx.task)
    meta = {
        "created_at": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "session_id": sid,
    }
    path = directory(ctx.task) / PENDING
    _write(path, {**data, "_meta": meta})
    replaced = old.get("_meta", {}).get("session_id") if old is not None else None
    return {"session_id": sid, "pending": str(path), "replaced": replaced}


@orders.register("decide.answer", "outside")
def _answer(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    waiting = pending(ctx.task)
    if waiting is None:
        raise NoPendingDecision(
            f"task {ctx.task.name} has no pending decisions",
            hint="the agent asks with `bar decide submit`",
        )
    sid = str(waiting.get("_meta", {}).get("session_id", ""))
    wanted = args.get("session_id")
    if wanted is not None and wanted != sid:
        raise NotFound(
            f"decision {wanted} is no longer pending: {sid} replaced it",
            hint="answer the pending one (`bar decide answer`)",
        )
    data = {k: v for k, v in waiting.items() if k != "_meta"}
    validate(data)
    chosen = check_answers(data, args.get("decisions"))
    started = now_iso()
    completed = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    rec = {"input": data, "output": {"decisions": chosen}, "completed_at": completed}
    _write(directory(ctx.task) / f"{sid}.json", rec)
    step = DecisionStep(
        step_id="0001",
        started_at=started,
        ended_at=now_iso(),
        duration_ms=0,
        session_id=sid,
        decisions=chosen,
    )
    added = ctx.add_step(step)
    (directory(ctx.task) / PENDING).unlink(missing_ok=True)
    return {
        "session_id": sid,
        "record": rec,
        "step": added.to_record() if added is not None else None,
        "queued": added is None,
    }
