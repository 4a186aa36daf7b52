"""Filters of the list pages: the tasks of the overview and the board, a task's timeline.

A filter is the page's query string (``?q=login&owner=alice``), so a filtered page is a
link like any other and works without the page's script. Words (``q``) match when every
one is in what the item says of itself, whatever the case: a task's name, id,
description, owner and branch; a step's id, kind, what it did (its command), its result,
the files it changed and the commands its agent ran. A timeline with a filter reads the whole ledger, newest first,
and lists a hundred matches a page; one without reads only its page (``views``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from html import escape

from bar import api
from bar.model.records import RunStep, Step
from bar.model.tasks import Task

NOBODY = "-"  # the owner filter's value for tasks no one took
# the results a step filter offers: (value, label)
RESULTS = (("ok", "succeeded"), ("failed", "failed"), ("blocked", "blocked by the policy"))


def words(text: str) -> list[str]:
    return [w for w in text.casefold().split() if w]


def has_all(terms: list[str], *texts: object) -> bool:
    """Every term is in one of ``texts`` (ignoring case)."""
    if not terms:
        return True
    said = "\n".join(str(t) for t in texts if t).casefold()
    return all(term in said for term in terms)


def description(task: Task) -> str:
    found = task.metadata.get("description") if isinstance(task.metadata, dict) else None
    return found if isinstance(found, str) else ""


@dataclass(frozen=True)
class TaskFilter:
    text: str = ""
    state: str = ""  # a state word (``bar task list``'s), "open" (all but closed), "" any
    owner: str = ""  # an owner, NOBODY, or "" any

    @classmethod
    def of(cls, query: Mapping[str, str]) -> TaskFilter:
        return cls(
            query.get("q", "").strip(), query.get("state", "").strip(), query.get("owner", "")
        )

    @property
    def active(self) -> bool:
        return bool(self.text or self.state or self.owner)

    def keeps(self, s: api.TaskSummary) -> bool:
        t = s.task
        if self.state == "open" and s.state.state == "closed":
            return False
        if self.state not in ("", "open") and s.state.state != self.state:
            return False
        if self.owner == NOBODY and t.board.owner:
            return False
        if self.owner not in ("", NOBODY) and t.board.owner != self.owner:
            return False
        return has_all(words(self.text), t.name, t.id, description(t), t.board.owner, t.branch)


@dataclass(frozen=True)
class StepFilter:
    text: str = ""
    kind: str = ""
    result: str = ""  # ok | failed | blocked | ""
    file: str = ""  # a part of a changed file's path

    @classmethod
    def of(cls, query: Mapping[str, str]) -> StepFilter:
        return cls(
            query.get("q", "").strip(),
            query.get("kind", "").strip(),
            query.get("result", "").strip(),
            query.get("file", "").strip(),
        )

    @property
    def active(self) -> bool:
        return bool(self.text or self.kind or self.result or self.file)

    def query(self) -> dict[str, str]:
        return {"q": self.text, "kind": self.kind, "result": self.result, "file": self.file}

    def keeps(self, step: Step, what: str, result_text: str) -> bool:
        """``what``: what the step did, in words (``pages.describe``); ``result_text``:
        its result column (``exit 1``)."""
        if self.kind and step.kind != self.kind:
            return False
        if self.result and _result_of(step) != self.result:
            return False
        files = step.diff_stat.file_list
        if self.file and not any(self.file.casefold() in f.casefold() for f in files):
            return False
        terms = words(self.text)
        calls = (
            [e.command or e.matched for e in step.policy_events]
            if isinstance(step, RunStep)
            else []
        )
        return has_all(terms, step.step_id, step.kind, what, result_text, *files, *calls)

    def raw_may_keep(self, line: bytes) -> bool:
        """Whether a ledger line can hold a match, before it is parsed: each word that is
        written in the line as it is (``PLAIN``: what JSON leaves alone, and no word the
        page's own columns add, ``SAID``) must be in it."""
        lowered = line.lower()
        for term in [*words(self.text), self.file.casefold()]:
            plain = PLAIN.match(term) and not any(term in w for w in SAID)
            if plain and term.encode() not in lowered:
                return False
        return True


# a word JSON writes as it is (and ``shlex.join`` quotes without adding to it)
PLAIN = re.compile(r"^[a-z0-9_./-]+$")
# the words the timeline's "what" and "result" columns add to what the ledger says
# (``pages.describe``, ``pages.result``): a search for one of them reads every line
SAID = frozenset(
    [
        "done",
        "exit",
        "signal",
        "interrupted",
        "no",
        "blocked",
        "rollback",
        "to",
        "hard",
        "undo",
        "redo",
        "of",
        "step",
        "applied",
        "as",
        "sync",
        "onto",
        "conflicts",
        "decide",
        "clean",
        "answered",
        "decision",
        "decision(s)",
        "removed",
        "read",
        "from",
        "a",
        "file",
        "changes",
        "made",
        "by",
        "hand",
        "between",
        "steps",
        "commit",
        "merge",
    ]
)


def _result_of(step: Step) -> str:
    if not isinstance(step, RunStep):
        return "ok"
    if step.blocked:
        return "blocked"
    if step.exit_code == 0 and not step.signal and not step.interrupted:
        return "ok"
    return "failed"


def matching_steps(
    task: Task,
    keep: StepFilter,
    said: Callable[[Step], tuple[str, str]],
    skip: int,
    limit: int,
) -> tuple[list[Step], int]:
    """The steps ``keep`` keeps, newest first, after the first ``skip`` of them: at most
    ``limit``, and how many it keeps in all. ``said``: what a step did and its result, in
    words (the timeline's columns). Lines that cannot hold the words are not parsed."""
    found: list[Step] = []
    total = 0
    for step in task.ledger.iter_reverse(warn=False, may_match=keep.raw_may_keep):
        what, result = said(step)
        if not keep.keeps(step, what, result):
            continue
        total += 1
        if skip < total <= skip + limit:
            found.append(step)
    return found, total


def options(values: Iterable[tuple[str, str]], chosen: str) -> str:
    """``<option>`` elements of a ``<select>``, ``chosen`` selected."""
    return "".join(
        f'<option value="{escape(v)}"{" selected" if v == chosen else ""}>{escape(label)}</option>'
        for v, label in values
    )
