"""The ``Bar-Task:`` / ``Bar-Step:`` lines that link a commit to the ledger.

``bar apply`` ends each commit message with them. A squash merge keeps them in its
message, though not always as trailers: ``git merge --squash`` indents the squashed
messages by four spaces, and a forge's squash lists them after ``* ``. So they are read
from anywhere in the message, in order, each ``Bar-Step`` paired with the ``Bar-Task``
before it; several applies squashed into one commit give several links.
"""

from __future__ import annotations

import re
from pathlib import Path

from bar import git
from bar.base.record import record
from bar.store.layout import STATE_ID_RE, TASK_ID_RE

_LINE = re.compile(r"^[ \t>*-]*Bar-(Task|Step):[ \t]*(\S+)[ \t]*$", re.MULTILINE)


@record(frozen=True)
class Link:
    task_id: str
    step_id: str | None  # None: the commit names the task only (a merge, a sync)


def links(message: str) -> list[Link]:
    """The (task, step) pairs ``message`` names, in order, without repeats."""
    found: list[Link] = []
    task: str | None = None
    step: str | None = None

    def flush() -> None:
        if task is not None:
            link = Link(task, step)
            if link not in found:
                found.append(link)

    for m in _LINE.finditer(message):
        kind, value = m.group(1), m.group(2)
        if kind == "Task" and TASK_ID_RE.match(value):
            flush()
            task, step = value, None
        elif kind == "Step" and STATE_ID_RE.match(value) and task is not None:
            if step is not None:
                flush()
            step = value
    flush()
    return found


def commit_links(repo: Path, commits: list[str]) -> dict[str, list[Link]]:
    """Each commit's links (only those that have any), from one ``git log``."""
    if not commits:
        return {}
    raw = git.git(
        repo, "log", "--no-walk=unsorted", "-z", "--format=%H%n%B", *commits, "--"
    ).stdout.decode("utf-8", "replace")
    out: dict[str, list[Link]] = {}
    for entry in raw.split("\0"):
        sha, _, body = entry.strip("\n").partition("\n")
        found = links(body)
        if found and git.is_object_id(sha):
            out[sha] = found
    return out


def branch_links(repo: Path, tip: str, base: str | None) -> list[tuple[str, list[Link]]]:
    """The commits of ``tip`` not in ``base`` (all of them without one) that name a task,
    newest first, with their links."""
    args = [tip, "--not", base] if base else [tip]
    raw = git.git(repo, "log", "-z", "--format=%H%n%B", *args, "--").stdout.decode(
        "utf-8", "replace"
    )
    out = []
    for entry in raw.split("\0"):
        sha, _, body = entry.strip("\n").partition("\n")
        found = links(body)
        if found and git.is_object_id(sha):
            out.append((sha, found))
    return out
