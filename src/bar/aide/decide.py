"""``bar decide``: the agent asks the person questions, and waits for the answers.

The formats are aide decide's (docs/decide-flow.md; their field names are fixed), and bar
keeps them as aide does, so that a client that only knows aide reads and writes the same
files: the agent submits a DecideInput (``task``, ``source``, ``items[]``, each with ``id``,
``title``, ``location?``, ``context?``, ``options[]`` of ``value``, ``label``, ``score?``,
``pros?``, ``cons?``, and ``recommend?``); bar keeps it as ``decisions/pending.json`` in the
task directory with ``_meta`` {``created_at``, ``session_id``}. The person's answer is the
DecideOutput {``decisions[]``: ``id``, ``chosen``, ``note?``}, kept with the input as the
DecisionRecord ``decisions/<session_id>.json`` {``input``, ``output``, ``completed_at``},
and a ``decision`` step records the choices in the ledger.

``pending.json`` stays once answered (aide keeps it, and its ``result`` finds the answer
through it); a new submission replaces it. So a submission is *pending* while its
``<session_id>.json`` does not exist: that is derived, never a key of bar's in aide's
files. Times are aide's: ISO 8601 to the second with the local offset
(``2025-01-15T10:30:00+08:00``), session ids ``2025-01-15T10-30-00``. An older bar removed
``pending.json`` on answering: then the latest answered record is the latest submission.

Each file is copied to where aide's clients look, ``.aide/decisions/`` in the task's
worktree (``bar.aide.place``); an answer aide's web server writes there is taken by
``bar.aide.answers``. A new session id is never one that has a record in either place.
``plan_clean`` and the order ``decide.clean`` are reference 003 §5.2's ``aide decide
clean``: old records removed, recorded as a ``decision`` step that keeps them.

Writing goes through orders (``bar.changes.orders``): inside a running step the agent cannot
write bar's files, so its ``bar run`` does. Reading is plain reading.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bar.aide import place
from bar.base.clock import now_iso
from bar.changes import orders
from bar.errors import BarError, CorruptFile, ExitCode, NotFound, UsageError
from bar.model.records import DecisionStep
from bar.model.tasks import Task
from bar.store.files import ensure_dir, write_bytes_atomic

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

# what each field is: the hint of an error about it
_ABOUT = {
    "task": "'task' is a string: the work the questions are about",
    "source": "'source' is a string: the document the questions come from, like \"task-now.md\"",
    "items": "'items' is a list of questions, each with id, title, options and, if you like, "
    "location, context and recommend",
    "id": "'id' is a whole number, a different one for each item",
    "title": "'title' is the question: a string that is not empty",
    "location": '\'location\' is {"file": NAME, "start": LINE, "end": LINE}, lines counted from 1',
    "context": "'context' is a string: what the person needs to know to decide",
    "options": "'options' is a list of at least 2 options, each with value, label and, if you "
    "like, score, pros and cons",
    "recommend": "'recommend' is the value of one of the item's options",
    "value": "'value' is a string that is not empty, a different one for each option of an item",
    "label": "'label' is a string that is not empty: what the person reads",
    "score": "'score' is a number from 0 to 100",
    "pros": "'pros' is a list of strings",
    "cons": "'cons' is a list of strings",
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _kind(value: object) -> str:
    """What ``value`` is, in the words of an error: ``a string``, ``a list``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, int | float):
        return f"the number {_text(value)}"
    return "a list" if isinstance(value, list) else "an object"


def _quoted(title: object) -> str:
    """An item's title as an error names it: quoted, and cut when long."""
    text = " ".join(str(title).split())
    return _text(text if len(text) <= 40 else text[:39] + "…")


class _Where:
    """Which part of the input an error is about, said as ``decision item 2 (id 7, "pick
    a db"), option 1 ("pg")``: its place, and its id and title where it has them."""

    def __init__(self, name: str) -> None:
        self.name = name

    def bad(self, what: str, field: str | None = None, hint: str | None = None) -> BadDecideInput:
        if hint is None and field is not None:
            hint = _ABOUT.get(field.partition(".")[0])  # location.end: what location is
        joint = " " if what.startswith("must ") else ": "  # (the part itself is wrong)
        return BadDecideInput(f"{self.name}{joint}{what}", hint=hint)

    def missing(self, field: str) -> BadDecideInput:
        return self.bad(f"missing field '{field}'", field)

    def wrong(self, field: str, should: str, value: object) -> BadDecideInput:
        return self.bad(f"'{field}' must be {should}, not {_kind(value)}", field)

    def unknown(self, field: str, known: tuple[str, ...]) -> BadDecideInput:
        return self.bad(
            f"unknown field {_named(field)}", hint="the fields it may have: " + ", ".join(known)
        )


def _named(field: str) -> str:
    """A field's name as an error says it: 'options' (JSON's quoting if it is odd)."""
    return f"'{field}'" if field.isprintable() and "'" not in field else _text(field)


def _item_where(number: int, item: Mapping[str, Any]) -> _Where:
    said = []
    if _is_int(item.get("id")):
        said.append(f"id {item['id']}")
    if isinstance(item.get("title"), str) and item["title"].strip():
        said.append(_quoted(item["title"]))
    return _Where(f"decision item {number}" + (f" ({', '.join(said)})" if said else ""))


def _option_where(item: _Where, number: int, option: Mapping[str, Any]) -> _Where:
    value = option.get("value")
    said = f" ({_quoted(value)})" if isinstance(value, str) and value else ""
    return _Where(f"{item.name}, option {number}{said}")


def validate(data: object) -> dict[str, Any]:
    """``data`` if it is a DecideInput exactly as the format says; else ``BadDecideInput``:
    one sentence naming the item (its place, id and title) and the field, and a hint
    saying what the field is."""
    top = _Where("the decision input")
    if not isinstance(data, dict):
        raise top.bad(
            f"must be a JSON object, not {_kind(data)}",
            hint="its fields: task, source, items (docs/decide-flow.md)",
        )
    for key in data:
        if key not in _TOP:
            if key == "_meta":
                raise top.bad("unknown field '_meta'", hint="bar writes _meta itself")
            raise top.unknown(key, _TOP)
    for key in ("task", "source"):
        if key not in data:
            raise top.missing(key)
        if not isinstance(data[key], str):
            raise top.wrong(key, "a string", data[key])
    if "items" not in data:
        raise top.missing("items")
    items = data["items"]
    if not isinstance(items, list):
        raise top.wrong("items", "a list of questions", items)
    if not items:
        raise top.bad("'items' is empty: there is nothing to ask", "items")
    seen: dict[int, int] = {}
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise _Where(f"decision item {number}").bad(
                f"must be an object, not {_kind(item)}", "items"
            )
        where = _item_where(number, item)
        if "id" not in item:
            raise where.missing("id")
        if not _is_int(item["id"]):
            raise where.wrong("id", "a whole number", item["id"])
        if item["id"] in seen:
            raise where.bad(
                f"'id' {item['id']} is taken by item {seen[item['id']]}; ids are unique", "id"
            )
        seen[item["id"]] = number
        _check_item(item, where)
    return data


def _check_item(item: dict[str, Any], where: _Where) -> None:
    for key in item:
        if key not in _ITEM:
            raise where.unknown(key, _ITEM)
    if "title" not in item:
        raise where.missing("title")
    if not isinstance(item["title"], str) or not item["title"].strip():
        raise where.wrong("title", "a string that is not empty", item["title"])
    if "context" in item and not isinstance(item["context"], str):
        raise where.wrong("context", "a string", item["context"])
    if "location" in item:
        _check_location(item["location"], where)
    if "options" not in item:
        raise where.missing("options")
    options = item["options"]
    if not isinstance(options, list):
        raise where.wrong("options", "a list of at least 2 options", options)
    if len(options) < 2:
        many = "no options" if not options else "1 option"
        raise where.bad(f"'options' has {many}; it needs at least 2", "options")
    values: list[str] = []
    for n, option in enumerate(options, 1):
        at = _option_where(where, n, option) if isinstance(option, dict) else None
        _check_option(option, at or _Where(f"{where.name}, option {n}"))
        if option["value"] in values:
            raise (at or where).bad(
                f"'value' {_text(option['value'])} is taken by option "
                f"{values.index(option['value']) + 1}; values are unique within an item",
                "value",
            )
        values.append(option["value"])
    if "recommend" in item and item["recommend"] not in values:
        raise where.bad(
            f"'recommend' is {_text(item['recommend'])}, which is not one of its options "
            f"({', '.join(values)})",
            "recommend",
        )


def _check_location(loc: object, where: _Where) -> None:
    if not isinstance(loc, dict):
        raise where.wrong("location", "an object of file, start and end", loc)
    for key in loc:
        if key not in _LOCATION:
            raise where.bad(f"unknown field {_named('location.' + key)}", "location")
    for key in _LOCATION:
        if key not in loc:
            raise where.missing(f"location.{key}")
    if not isinstance(loc["file"], str) or not loc["file"]:
        raise where.wrong("location.file", "a file name", loc["file"])
    for key in ("start", "end"):
        if not _is_int(loc[key]) or loc[key] < 1:
            raise where.wrong(f"location.{key}", "a line number (1 or more)", loc[key])
    if loc["end"] < loc["start"]:
        raise where.bad("'location.end' is before 'location.start'", "location")


def _check_option(option: object, where: _Where) -> None:
    if not isinstance(option, dict):
        raise where.bad(f"must be an object, not {_kind(option)}", "options")
    for key in option:
        if key not in _OPTION:
            raise where.unknown(key, _OPTION)
    for key in ("value", "label"):
        if key not in option:
            raise where.missing(key)
        if not isinstance(option[key], str) or not option[key]:
            raise where.wrong(key, "a string that is not empty", option[key])
    if "score" in option:
        score = option["score"]
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
            or not 0 <= score <= 100
        ):
            raise where.bad(
                f"'score' is {_text(score)}; it must be a number from 0 to 100", "score"
            )
    for key in ("pros", "cons"):
        if key in option and not (
            isinstance(option[key], list) and all(isinstance(v, str) for v in option[key])
        ):
            raise where.wrong(key, "a list of strings", option[key])


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


def submitted(task: Task) -> dict[str, Any] | None:
    """``pending.json``: the latest submission (a DecideInput with its ``_meta``), answered
    or not, or None (nothing submitted, or an older bar removed it once answered)."""
    return _read(directory(task) / PENDING)


def session_of(data: Mapping[str, Any] | None) -> str:
    """The session id in a submission's ``_meta`` ("" if it has none)."""
    meta = data.get("_meta") if data is not None else None
    return str(meta.get("session_id") or "") if isinstance(meta, dict) else ""


def answered(task: Task, session_id: str) -> bool:
    """Whether ``session_id`` has its DecisionRecord: answered, as the seed tells (its
    ``result`` looks for ``<session_id>.json``)."""
    if not session_id or "/" in session_id or session_id.startswith("."):
        return False
    return (directory(task) / f"{session_id}.json").is_file()


def pending(task: Task) -> dict[str, Any] | None:
    """The submission that waits for an answer (a DecideInput with its ``_meta``), or
    None: nothing submitted, or the latest submission is answered."""
    data = submitted(task)
    if data is None or answered(task, session_of(data)):
        return None
    return data


def sessions(task: Task) -> list[str]:
    """The answered sessions, oldest first."""
    found = directory(task).glob("*.json")
    return sorted(p.stem for p in found if p.name != PENDING and not p.name.startswith("."))


def record(task: Task, session_id: str | None = None) -> dict[str, Any]:
    """The DecisionRecord of ``session_id`` (None: the latest answered)."""
    waiting_sid = session_of(pending(task)) or None
    if session_id is None:
        done = sessions(task)
        if not done and waiting_sid:
            session_id = waiting_sid  # said below: not answered yet
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
    latest = submitted(task)
    if latest is not None:
        sid = session_of(latest)
        done = _read(directory(task) / f"{sid}.json") if answered(task, sid) else None
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


def wait(
    task: Task,
    session_id: str,
    timeout: float | None = None,
    look: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Block until ``session_id`` is answered; its DecideOutput. ``look``: called before
    each look at bar's record (``bar.api.orders`` takes an answer another program wrote
    there, as aide's web server does: ``bar.aide.answers``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    path = directory(task) / f"{session_id}.json"
    while True:
        if look is not None:
            look()
        found = _read(path)
        if found is not None:
            return dict(found["output"])
        sid = session_of(submitted(task))  # (answered meanwhile: read again above)
        if sid != session_id and _read(path) is None:
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
    # the latest one too, answered or not: a replaced one's waiter must not take the new answer
    taken.add(session_of(submitted(task)))
    # and every answer in aide's place in the worktree: one there before its question was
    # asked was never the person's (``bar.aide.answers``)
    taken.update(name[: -len(".json")] for name in place.names(task))
    while moment.strftime("%Y-%m-%dT%H-%M-%S") in taken:
        moment += dt.timedelta(seconds=1)
    return moment.strftime("%Y-%m-%dT%H-%M-%S")


def _write(path: Path, obj: object) -> None:
    ensure_dir(path.parent)
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"))


def keep_record(task: Task, session_id: str, rec: Mapping[str, Any]) -> None:
    """Write the DecisionRecord of ``session_id``, and its copy where aide's clients look."""
    _write(directory(task) / f"{session_id}.json", rec)
    place.copy(task, f"{session_id}.json")


@orders.register("decide.submit", "any")
def _submit(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    data = validate(args.get("input"))
    old = pending(ctx.task)  # replaced if it is not answered; an answered one stays read
    sid = _session_id(ctx.task)
    meta = {
        "created_at": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "session_id": sid,
    }
    path = directory(ctx.task) / PENDING
    _write(path, {**data, "_meta": meta})
    place.copy(ctx.task, PENDING)  # where aide's clients look
    return {"session_id": sid, "pending": str(path), "replaced": session_of(old) or None}


@orders.register("decide.answer", "outside")
def _answer(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    waiting = pending(ctx.task)
    wanted = args.get("session_id")
    if waiting is None:
        latest = session_of(submitted(ctx.task))
        raise NoPendingDecision(
            f"decision {wanted} is answered already"
            if wanted is not None and wanted == latest
            else f"task {ctx.task.name} has no pending decisions",
            hint="the agent asks with `bar decide submit`",
        )
    sid = session_of(waiting)
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
    keep_record(ctx.task, sid, rec)
    step = DecisionStep(
        step_id="0001",
        started_at=started,
        ended_at=now_iso(),
        duration_ms=0,
        session_id=sid,
        decisions=chosen,
    )
    added = ctx.add_step(step)  # pending.json stays, as the seed keeps it: answered now
    return {
        "session_id": sid,
        "record": rec,
        "step": added.to_record() if added is not None else None,
        "queued": added is None,
    }


# --- cleaning (reference 003 §5.2) ----------------------------------------------------


def plan_clean(
    task: Task, keep: int | None = None, days: float | None = None
) -> tuple[list[str], list[str]]:
    """(the answered sessions ``bar decide clean`` removes, those it keeps), oldest first.
    Kept whatever is asked: the record of the latest submission (``result`` reads it
    through ``pending.json``, which is never removed: the next submission replaces it).
    ``keep``: the newest N records are kept too; ``days``: those answered in the last N
    days. Neither: only the latest submission's is kept."""
    done = sessions(task)
    kept = {session_of(submitted(task))} & set(done)
    if keep:
        kept.update(done[-keep:])
    if days is not None:
        since = dt.datetime.now().astimezone() - dt.timedelta(days=days)
        for sid in done:
            when = _answered_at(task, sid)
            if when is None or when >= since:  # (a time it cannot tell: kept)
                kept.add(sid)
    return [s for s in done if s not in kept], [s for s in done if s in kept]


def _answered_at(task: Task, session_id: str) -> dt.datetime | None:
    """When ``session_id`` was answered: its ``completed_at``, else its session id's time."""
    with contextlib.suppress(BarError):
        said = (_read(directory(task) / f"{session_id}.json") or {}).get("completed_at")
        if isinstance(said, str):
            with contextlib.suppress(ValueError):
                moment = dt.datetime.fromisoformat(said)
                return moment if moment.tzinfo else moment.astimezone()
    with contextlib.suppress(ValueError):
        return dt.datetime.strptime(session_id, "%Y-%m-%dT%H-%M-%S").astimezone()
    return None


@orders.register("decide.clean", "outside")
def _clean(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    keep, days = args.get("keep"), args.get("days")
    removed, kept = plan_clean(
        ctx.task,
        keep if isinstance(keep, int) else None,
        float(days) if isinstance(days, int | float) else None,
    )
    if not removed:
        return {"removed": [], "kept": kept, "step": None, "queued": False}
    records = {sid: _read(directory(ctx.task) / f"{sid}.json") for sid in removed}
    # what it removes is kept in the step's artifact first: nothing is lost unrecorded
    name = f"artifacts/cleaned-{time.time_ns():x}.json"
    artifact = ctx.task.dir / name
    ensure_dir(artifact.parent)
    text = json.dumps({"version": 1, "records": records}, indent=2, ensure_ascii=False)
    write_bytes_atomic(artifact, (text + "\n").encode("utf-8", "backslashreplace"))
    started = now_iso()
    for sid in removed:
        (directory(ctx.task) / f"{sid}.json").unlink(missing_ok=True)
        place.remove(ctx.task, f"{sid}.json")
    step = DecisionStep(
        step_id="0001",
        started_at=started,
        ended_at=now_iso(),
        duration_ms=0,
        session_id="",
        cleaned=removed,
    )
    step.artifacts.cleaned = name
    added = ctx.add_step(step)
    return {
        "removed": removed,
        "kept": kept,
        "step": added.to_record() if added is not None else None,
        "queued": added is None,
    }
