"""``bar decide submit|answer|result|list|show|path|clean``: the agent's questions and your
answers, and where aide's clients find them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bar import api
from bar.aide import decide, place
from bar.api import orders
from bar.base.notices import plural
from bar.cli.render import Painter, print_json
from bar.errors import NotFound, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar decide``: its options and help."""
    from bar.cli.parser import Formatter, implied_action, json_opt, task_opt

    dec = sub.add_parser(
        "decide",
        formatter_class=Formatter,
        usage="%(prog)s JSON|-|@FILE [--wait [--timeout SECONDS]] [--task ID|NAME] [--json]\n"
        "       %(prog)s ACTION ...",
        description="An agent submits questions, each with options (scores, pros and cons,\n"
        "a recommendation); you answer them in the terminal (or in bar ui), and the\n"
        "agent reads your choices. Each answer is a `decision` step of the ledger.\n\n"
        "Short form: `bar decide JSON` (JSON text, - for stdin, or @FILE) is `bar decide\n"
        "submit JSON`, as aide's `aide decide '<json>'` is; its options are submit's.\n"
        "The files are aide's too (decisions/pending.json, decisions/<session_id>.json),\n"
        "copied where aide keeps them, .aide/decisions in the worktree (`bar decide\n"
        "path`), so a client that only knows aide reads them, and an answer aide's web\n"
        "page writes there is yours, unless a step could have written it.\n"
        "Formats: docs/decide-flow.md.",
        epilog="examples:\n"
        '  bar decide \'{"task": "auth", "source": "task.md", "items": [...]}\' --wait\n'
        "  bar decide @questions.json          (the same as: bar decide submit @questions.json)\n"
        "  bar decide answer\n"
        "  bar decide result --json",
    )
    dsub = dec.add_subparsers(dest="decide_command", metavar="ACTION")
    dec.set_defaults(_help=dec)
    implied_action(dec, "submit", _is_decide_input)
    p = dsub.add_parser(
        "submit",
        help="submit questions (a DecideInput) for a person to answer",
        formatter_class=Formatter,
        description="Check a DecideInput (JSON: task, source, items[] with id, title, location?,\n"
        "context?, options[] of value, label, score?, pros?, cons?, and recommend?) and\n"
        "keep it as the task's pending decision; a pending one is replaced. An invalid\n"
        "input is one sentence naming the item (its place, id and title) and the field,\n"
        "with a hint saying what the field holds (exit 2), and nothing is kept.\n"
        "Inside a running step, the step's bar run keeps it. --wait blocks until the\n"
        "person has answered and prints the answer (a DecideOutput), so an agent can ask\n"
        "and go on; past --timeout it exits 21. `bar decide JSON` is the same, the\n"
        "short form aide's clients use (aide decide '<json>').",
        epilog="examples:\n"
        "  bar decide submit @questions.json --wait\n"
        "  bar decide @questions.json --wait\n"
        "  bar decide submit - < questions.json\n"
        '  bar decide submit \'{"task": "auth", "source": "task.md", "items": [{"id": 1,\n'
        '    "title": "Sessions or tokens?", "options": [{"value": "jwt", "label": "JWT"},\n'
        '    {"value": "session", "label": "Server sessions"}], "recommend": "jwt"}]}\'',
    )
    p.add_argument(
        "input", metavar="JSON|-|@FILE", help="the DecideInput: JSON text, - for stdin, or @FILE"
    )
    p.add_argument("--wait", action="store_true", help="wait for the answer and print it")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="with --wait: give up after SECONDS (exit 21)",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=submit)
    p = dsub.add_parser(
        "answer",
        help="answer the pending decision, in the terminal or with --choose",
        formatter_class=Formatter,
        description="Show each question of the pending decision with its options, scores,\n"
        "pros and cons, and ask for your choice (Enter takes the recommended one) and an\n"
        "optional note. With --choose, nothing is asked: every item must be chosen.\n"
        "The answer is recorded as a `decision` step (after the running step, if one\n"
        "runs). Only you answer: a process of the running step is refused.",
        epilog="examples:\n"
        "  bar decide answer\n"
        "  bar decide answer --choose 1=jwt --choose 2=bcrypt --note 2='we know bcrypt'",
    )
    p.add_argument(
        "--choose",
        action="append",
        default=[],
        metavar="ID=VALUE",
        help="choose option VALUE for item ID (repeat for each item)",
    )
    p.add_argument(
        "--note",
        action="append",
        default=[],
        metavar="ID=TEXT",
        help="a note for item ID (with --choose)",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=answer)
    p = dsub.add_parser(
        "result",
        help="print the answer to the latest decision (a DecideOutput)",
        formatter_class=Formatter,
        description="Print the choices made for the latest submitted decision. Exit 21 when it\n"
        "is not answered yet, 20 when nothing was ever submitted. With --wait, a pending\n"
        "decision is waited for (after a `submit --wait` that timed out, say).",
        epilog="examples:\n  bar decide result --json\n  bar decide result --wait --timeout 600 --json",
    )
    p.add_argument(
        "--wait", action="store_true", help="wait for the pending decision's answer and print it"
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="with --wait: give up after SECONDS (exit 21)",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=result)
    p = dsub.add_parser(
        "list",
        help="the answered decisions and the pending one",
        formatter_class=Formatter,
        description="List the task's answered decisions, oldest first, and the pending one.",
        epilog="examples:\n  bar decide list\n  bar decide list --json",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=list_)
    p = dsub.add_parser(
        "show",
        help="one answered decision: its questions and the choices (default: the latest)",
        formatter_class=Formatter,
        description="Show an answered decision (a DecisionRecord): each question, its options\n"
        "and what was chosen, with the notes. The pending decision is not answered yet:\n"
        "exit 21 (`bar decide answer` shows its questions).",
        epilog="examples:\n  bar decide show\n  bar decide show 2025-01-15T10-30-00 --json",
    )
    p.add_argument("session_id", nargs="?", metavar="SESSION_ID", help="default: the latest")
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=show)
    p = dsub.add_parser(
        "path",
        help="where aide's clients find the decisions: .aide/decisions in the worktree",
        formatter_class=Formatter,
        description="Print the directory where aide's front ends and agents find the task's\n"
        "decisions (aide keeps them in .aide/decisions of the project it works on): the\n"
        ".aide/decisions directory of the task's worktree, where bar keeps a copy of\n"
        "pending.json and of each answered <session_id>.json, beside\n"
        ".aide/flow-status.json. An answer written there as aide's web server writes it\n"
        "is taken as yours unless a step could have written it (docs/decide-flow.md).\n"
        "--json adds the flow's file and bar's own directory.",
        epilog="examples:\n"
        "  bar decide path\n"
        '  cat "$(bar decide path)/pending.json"\n'
        "  bar decide path --json",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=path)
    p = dsub.add_parser(
        "clean",
        help="remove old answered decisions (kept in the step that records it)",
        formatter_class=Formatter,
        description="Remove the records of answered decisions (<session_id>.json), the clean\n"
        "aide's storage design suggests: every one but the latest submission's, which\n"
        "`bar decide result` still reads; --keep N keeps the N newest too, --days N\n"
        "those answered in the last N days (a record either keeps stays). pending.json\n"
        "is never removed (the next submission replaces it). The removal is a\n"
        "`decision` step, whose artifact keeps every record it removed. --dry-run only\n"
        "says which.",
        epilog="examples:\n"
        "  bar decide clean --dry-run\n"
        "  bar decide clean --keep 10\n"
        "  bar decide clean --days 30 --json",
    )
    p.add_argument("--keep", type=int, metavar="N", help="keep the N newest answered decisions too")
    p.add_argument(
        "--days",
        type=float,
        metavar="N",
        help="keep the decisions answered in the last N days too",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="say what would be removed; remove nothing"
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=clean)


_DECIDE_ACTIONS = ("submit", "answer", "result", "list", "show", "path", "clean")


def _is_decide_input(word: str) -> bool:
    """Whether ``bar decide WORD`` is the short form of ``bar decide submit WORD`` (as aide's
    ``aide decide '<json>'``): JSON text, ``-``, ``@FILE``, or a file (which submit names
    back with its ``@``). Any other word is an action, or a mistyped one."""
    if word in _DECIDE_ACTIONS:
        return False
    if word == "-" or word.startswith("@") or word.lstrip().startswith(("{", "[")):
        return True
    import os

    return not word.startswith("-") and os.path.isfile(word)


# --- the command -----------------------------------------------------------------------


def _read_input(text: str) -> object:
    if text == "-":
        raw = sys.stdin.read()
    elif text.startswith("@"):
        try:
            raw = Path(text[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(
                f"cannot read {text[1:]}: {why}",
                hint="@FILE names a file of JSON; - reads it from stdin",
            ) from None
    else:
        raw = text
    try:
        return json.loads(raw)
    except ValueError as exc:
        if raw is text and not text.lstrip().startswith(("{", "[")) and Path(text).is_file():
            raise UsageError(
                f"{text} is a file name, not JSON text", hint=f"to read the file, give @{text}"
            ) from None
        raise UsageError(
            f"the input is not JSON: {exc}", hint="give JSON text, - (stdin) or @FILE"
        ) from None


def submit(
    *, input: str, wait: bool, timeout: float | None, task: str | None, as_json: bool
) -> int:
    if timeout is not None and not wait:
        raise UsageError("--timeout goes with --wait")
    data = _read_input(input)
    the_task = api.get_task(api.open_project(), task)
    done = orders.decide_submit(the_task, data)
    sid = str(done["session_id"])
    if done.get("replaced"):
        print(
            f"bar: decision {done['replaced']} was still pending and is replaced by {sid}",
            file=sys.stderr,
        )
    if wait:
        print(f"bar: waiting for an answer to decision {sid} (bar decide answer)", file=sys.stderr)
        print_json(orders.decide_wait(the_task, sid, timeout))
        return 0
    if as_json:
        print_json(done)
        return 0
    print(
        f"Submitted decision {sid}: waiting for an answer (bar decide answer); "
        "`bar decide result` prints it"
    )
    return 0


def _pairs(values: list[str], what: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for value in values:
        ident, sep, rest = value.partition("=")
        if not sep or not ident.strip().lstrip("-").isdigit():
            raise UsageError(f"{what} {value!r} is not ID=VALUE", hint="like --choose 1=jwt")
        found[int(ident)] = rest
    return found


def answer(*, choose: list[str], note: list[str], task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    orders.take_answer(the_task)  # (an answer aide's web server wrote: taken first)
    waiting = orders.pending_decision(the_task)
    if waiting is None:
        earlier = decide.sessions(the_task)
        hint = (
            f"the last one is answered: `bar decide show {earlier[-1]}`"
            if earlier
            else "the agent asks with `bar decide submit`"
        )
        raise decide.NoPendingDecision(f"task {the_task.name} has no pending decision", hint=hint)
    sid = str(waiting.get("_meta", {}).get("session_id", ""))
    if choose:
        chosen, notes = _pairs(choose, "--choose"), _pairs(note, "--note")
        stray = sorted(set(notes) - set(chosen))
        if stray:
            raise UsageError(f"--note {stray[0]} names an item that --choose does not answer")
        decisions: list[dict[str, Any]] = [
            {"id": i, "chosen": v, **({"note": notes[i]} if notes.get(i) else {})}
            for i, v in chosen.items()
        ]
    elif note:
        raise UsageError("--note goes with --choose")
    else:
        decisions = _ask(waiting, Painter(the_task.project.config.output.color))
    done = orders.decide_answered(the_task, decisions, session_id=sid)
    if as_json:
        print_json(done)
        return 0
    picked = ", ".join(f"{d['id']}={d['chosen']}" for d in decisions)
    step = done.get("step")
    where = (
        f"step {step['step_id']}"
        if isinstance(step, dict)
        else "sent to the agent on its worker; recorded there"
        if done.get("on_workers")
        else "a step recorded when the running step ends"
    )
    print(f"Answered decision {sid}: {picked} ({where})")
    return 0


def _ask(waiting: dict[str, Any], paint: Painter) -> list[dict[str, Any]]:
    """Each item in the terminal: its options, and the person's choice and note."""
    items = waiting["items"]
    print(f"{paint(str(waiting.get('task')), 'bold')}  (from {waiting.get('source')})")
    decisions = []
    for number, item in enumerate(items, 1):
        print()
        print(paint(f"[{number}/{len(items)}] {item['title']}", "bold") + f"  (id {item['id']})")
        loc = item.get("location")
        if loc:
            lines = (
                f"line {loc['start']}"
                if loc["start"] == loc["end"]
                else f"lines {loc['start']}-{loc['end']}"
            )
            print(f"  where: {loc['file']} {lines}")
        if item.get("context"):
            print(f"  {item['context']}")
        options = item["options"]
        for n, option in enumerate(options, 1):
            score = f"  score {option['score']:g}" if "score" in option else ""
            star = (
                paint("  (recommended)", "green")
                if option["value"] == item.get("recommend")
                else ""
            )
            print(f"  {n}) {option['value']}: {option['label']}{score}{star}")
            for pro in option.get("pros", []):
                print(f"       + {pro}")
            for con in option.get("cons", []):
                print(f"       - {con}")
        decisions.append({"id": item["id"], "chosen": _choice(item, options)})
        text = _line("  note (Enter: none): ").strip()
        if text:
            decisions[-1]["note"] = text
    return decisions


def _choice(item: dict[str, Any], options: list[dict[str, Any]]) -> str:
    values = [o["value"] for o in options]
    default = item.get("recommend")
    while True:
        prompt = f"  choose 1-{len(options)} or a value" + (
            f" (Enter: {default})" if default else ""
        )
        text = _line(prompt + ": ").strip()
        if not text and default:
            return str(default)
        if text.isdigit() and 1 <= int(text) <= len(options):
            return str(values[int(text) - 1])
        if text in values:
            return text
        print(
            f"  {text!r} is not an option here: a number from 1 to {len(options)}, or one of "
            f"{', '.join(values)}"
        )


def _line(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        raise UsageError(
            "the answers ended before every item was answered",
            hint="answer in a terminal, or give --choose ID=VALUE for each item",
        ) from None


def result(
    *, task: str | None, as_json: bool, wait: bool = False, timeout: float | None = None
) -> int:
    if timeout is not None and not wait:
        raise UsageError("--timeout goes with --wait")
    the_task = api.get_task(api.open_project(), task)
    orders.take_answer(the_task)  # (an answer aide's web server wrote: recorded as it is read)
    waiting = decide.pending(the_task) if wait else None
    if waiting is not None:
        sid = waiting.get("_meta", {}).get("session_id")
        print(
            f"bar: waiting for an answer to decision {sid} (bar decide answer)",
            file=sys.stderr,
            flush=True,
        )
    output = orders.decide_awaited(the_task, timeout) if wait else decide.result(the_task)
    if as_json:
        print_json(output)
        return 0
    for d in output["decisions"]:
        print(f"{d['id']}: {d['chosen']}" + (f"  ({d['note']})" if d.get("note") else ""))
    return 0


def list_(*, task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    orders.take_answer(the_task)
    answered = []
    for sid in decide.sessions(the_task):
        rec = decide.record(the_task, sid)
        answered.append(
            {
                "session_id": sid,
                "task": rec["input"].get("task"),
                "completed_at": rec.get("completed_at"),
                "decisions": rec["output"]["decisions"],
            }
        )
    waiting = orders.pending_decision(the_task)
    pending = None
    if waiting is not None:
        meta = waiting.get("_meta", {})
        pending = {
            "session_id": meta.get("session_id"),
            "task": waiting.get("task"),
            "created_at": meta.get("created_at"),
            "items": len(waiting.get("items", [])),
        }
    if as_json:
        print_json({"pending": pending, "answered": answered})
        return 0
    if not answered and pending is None:
        print(f"Task {the_task.name} has no decisions. An agent asks with: bar decide submit JSON")
    for a in answered:
        picked = ", ".join(f"{d['id']}={d['chosen']}" for d in a["decisions"])
        print(f"{a['session_id']}  answered  {a['task']}: {picked}")
    if pending is not None:
        print(
            f"{pending['session_id']}  pending   {pending['task']} "
            f"({pending['items']} item{'s' if pending['items'] != 1 else ''})"
        )
    return 0


def show(*, session_id: str | None, task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    orders.take_answer(the_task)
    rec = decide.record(the_task, session_id)
    if as_json:
        print_json(rec)
        return 0
    paint = Painter(the_task.project.config.output.color)
    chosen = {d["id"]: d for d in rec["output"]["decisions"]}
    print(f"{paint(str(rec['input'].get('task')), 'bold')}  answered {rec.get('completed_at')}")
    for item in rec["input"]["items"]:
        got = chosen.get(item["id"], {})
        print(f"\n{item['id']}. {item['title']}")
        for option in item["options"]:
            mark = "*" if option["value"] == got.get("chosen") else " "
            rec_mark = " (recommended)" if option["value"] == item.get("recommend") else ""
            print(f"  {mark} {option['value']}: {option['label']}{rec_mark}")
        if got.get("note"):
            print(f"  note: {got['note']}")
    return 0


def path(*, task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    if not the_task.worktree.is_dir():
        raise NotFound(
            f"task {the_task.name} has no worktree: its decisions are in {decide.directory(the_task)}",
            hint="`bar task reopen` (or `bar task start`) makes its worktree; aide's clients "
            "find them there",
        )
    if not place.prepare(the_task):
        raise UsageError(
            f"{place.decisions(the_task)} (or {place.root(the_task).name}) is not a directory "
            "of its own (a link or a file stands there): bar keeps no copy of aide's files in it",
            hint="move it away; the next `bar decide` or `bar run` makes the directory",
        )
    place.sync(the_task)
    if as_json:
        print_json(
            {
                "decisions": str(place.decisions(the_task)),
                "flow_status": str(place.flow_status(the_task)),
                "store": str(decide.directory(the_task)),
            }
        )
        return 0
    print(place.decisions(the_task))
    return 0


def clean(
    *,
    keep: int | None,
    days: float | None,
    dry_run: bool,
    task: str | None,
    as_json: bool,
) -> int:
    if keep is not None and keep < 0:
        raise UsageError(f"--keep {keep}: give a number of decisions, 0 or more")
    if days is not None and not days >= 0:
        raise UsageError(f"--days {days:g}: give a number of days, 0 or more")
    the_task = api.get_task(api.open_project(), task)
    orders.take_answer(the_task)
    if dry_run:
        removed, kept = decide.plan_clean(the_task, keep, days)
        done: dict[str, object] = {"removed": removed, "kept": kept, "step": None, "queued": False}
    else:
        done = orders.decide_clean(the_task, keep=keep, days=days)
    if as_json:
        print_json({**done, "dry_run": dry_run})
        return 0
    removed_ids = [str(s) for s in done["removed"]] if isinstance(done["removed"], list) else []
    kept_ids = [str(s) for s in done["kept"]] if isinstance(done["kept"], list) else []
    if not removed_ids:
        print(f"Nothing to remove: {plural(len(kept_ids), 'answered decision')} kept.")
        return 0
    verb = "Would remove" if dry_run else "Removed"
    print(f"{verb} {plural(len(removed_ids), 'answered decision')}: {', '.join(removed_ids)}")
    print(
        f"Kept {plural(len(kept_ids), 'answered decision')}"
        + (f": {', '.join(kept_ids)}" if kept_ids else "")
    )
    step = done.get("step")
    if isinstance(step, dict):
        print(
            f"(step {step['step_id']}; its artifact {step['artifacts'].get('cleaned')} keeps "
            "what was removed)"
        )
    elif not dry_run:
        print("(a step recorded when the running step ends)")
    return 0
