"""The command line of what agents drive: ``bar decide`` and ``bar flow``. Part of
``bar.cli.parser``, kept apart for length."""

from __future__ import annotations

import os
from typing import Any

from bar.cli.parser import _cmd, _Formatter, _json_opt, _task_opt, implied_action

_FLOW_ACTIONS = {
    "start": (
        "start the task's flow in its first phase",
        'bar flow start "implement the user authentication module"',
    ),
    "next-step": (
        "record a step forward in the current phase",
        'bar flow next-step "finished the user model"',
    ),
    "back-step": (
        "go back a step in the current phase (--rollback: and its files)",
        'bar flow back-step --rollback "the field names break the convention"',
    ),
    "next-part": ("move on to the next phase", 'bar flow next-part "design done, implementing"'),
    "back-part": (
        "return to an earlier phase (default: the one before)",
        'bar flow back-part --to impl "verify found a missing case"',
    ),
    "issue": ("record a problem to come back to", 'bar flow issue "test coverage is low"'),
    "error": ("record an error", 'bar flow error "the migration fails on an empty table"'),
}


_DECIDE_ACTIONS = ("submit", "answer", "result", "list", "show", "path", "clean")


def _is_decide_input(word: str) -> bool:
    """Whether ``bar decide WORD`` is the short form of ``bar decide submit WORD`` (as aide's
    ``aide decide '<json>'``): JSON text, ``-``, ``@FILE``, or a file (which submit names
    back with its ``@``). Any other word is an action, or a mistyped one."""
    if word in _DECIDE_ACTIONS:
        return False
    if word == "-" or word.startswith("@") or word.lstrip().startswith(("{", "[")):
        return True
    return not word.startswith("-") and os.path.isfile(word)


def commands(sub: Any) -> None:
    """Add ``decide`` and ``flow`` to ``sub``, the commands of ``bar``."""
    # --- decide -----------------------------------------------------------------------
    dec = sub.add_parser(
        "decide",
        help="the agent asks you to decide; you answer (docs/decide-flow.md)",
        formatter_class=_Formatter,
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
        formatter_class=_Formatter,
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
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:submit")
    p = dsub.add_parser(
        "answer",
        help="answer the pending decision, in the terminal or with --choose",
        formatter_class=_Formatter,
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
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:answer")
    p = dsub.add_parser(
        "result",
        help="print the answer to the latest decision (a DecideOutput)",
        formatter_class=_Formatter,
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
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:result")
    p = dsub.add_parser(
        "list",
        help="the answered decisions and the pending one",
        formatter_class=_Formatter,
        description="List the task's answered decisions, oldest first, and the pending one.",
        epilog="examples:\n  bar decide list\n  bar decide list --json",
    )
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:list_")
    p = dsub.add_parser(
        "show",
        help="one answered decision: its questions and the choices (default: the latest)",
        formatter_class=_Formatter,
        description="Show an answered decision (a DecisionRecord): each question, its options\n"
        "and what was chosen, with the notes. The pending decision is not answered yet:\n"
        "exit 21 (`bar decide answer` shows its questions).",
        epilog="examples:\n  bar decide show\n  bar decide show 2025-01-15T10-30-00 --json",
    )
    p.add_argument("session_id", nargs="?", metavar="SESSION_ID", help="default: the latest")
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:show")
    p = dsub.add_parser(
        "path",
        help="where aide's clients find the decisions: .aide/decisions in the worktree",
        formatter_class=_Formatter,
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
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:path")
    p = dsub.add_parser(
        "clean",
        help="remove old answered decisions (kept in the step that records it)",
        formatter_class=_Formatter,
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
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "decide:clean")

    # --- flow -------------------------------------------------------------------------
    flw = sub.add_parser(
        "flow",
        help="where the task's work stands: phases, steps, a snapshot each",
        formatter_class=_Formatter,
        description="Record the task's progress through its phases (flow.phases; default\n"
        "flow-design, impl, verify, docs, finish): each action is an entry of\n"
        "flow-status.json with a snapshot commit of the worktree ([bar] impl: SUMMARY).\n"
        "Inside a running step, the step's bar run records it, as a checkpoint.\n"
        "`bar log` groups the steps by phase. See docs/decide-flow.md.",
        epilog="examples:\n"
        + "\n".join(f"  {ex}" for _, ex in _FLOW_ACTIONS.values())
        + "\n  bar flow status",
    )
    fsub = flw.add_subparsers(dest="flow_command", metavar="ACTION")
    flw.set_defaults(_help=flw)
    for action, (helped, example) in _FLOW_ACTIONS.items():
        p = fsub.add_parser(
            action,
            help=helped,
            formatter_class=_Formatter,
            description=helped[0].upper() + helped[1:] + ".",
            epilog=f"examples:\n  {example}",
        )
        p.add_argument("summary", metavar="SUMMARY", help="what was done, or why")
        if action in ("back-step", "back-part"):
            p.add_argument(
                "--rollback",
                action="store_true",
                help="also restore the files to the state of the entry it returns "
                "to (an undoable rollback)",
            )
        if action == "back-part":
            p.add_argument(
                "--to",
                dest="phase",
                metavar="PHASE",
                help="the phase to return to (default: the one before)",
            )
        _task_opt(p)
        _json_opt(p)
        p.set_defaults(action=action)
        _cmd(p, "flow:act")
    p = fsub.add_parser(
        "status",
        help="the current phase and step, and the history",
        formatter_class=_Formatter,
        description="Print the task's flow: its phase and step now, and every entry.",
        epilog="examples:\n  bar flow status\n  bar flow status --json",
    )
    _task_opt(p)
    _json_opt(p)
    _cmd(p, "flow:status")
