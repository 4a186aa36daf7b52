"""What each page shows, read through the library (``bar.api``) and nothing else.

Pages read only what they show: the timeline reads its hundred steps from the end of the
ledger (and the checkpoints of those steps that have any), never the artifacts; a step's
page reads its patch once to list its files, and each file's diff is fetched on its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar import api
from bar.errors import BarError, NotFound
from bar.model.records import Step
from bar.model.tasks import Task
from bar.store.layout import TASK_ID_RE
from bar.ui import patch_pages

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.step.live import Glance, LiveStep

PER_PAGE = 100
OUTPUT_LIMIT = 2 << 20  # bytes of a step's output shown in the page; the rest by link
# artifact names a URL may ask for: a step's or a checkpoint's patch, output or recording,
# and a step's agent session (its events, one JSON object a line)
ARTIFACT_NAME = re.compile(
    r"^[0-9]{4,9}(\.[0-9]{1,9})?\.(patch|output|cast)$|^[0-9]{4,9}\.session\.jsonl$"
)


class PageNotFound(NotFound):
    """A project, task, step or file the URL names does not exist."""


def project(name: str) -> api.Project:
    for found in api.projects():
        if found.name == name:
            return found
    raise PageNotFound(f"no project {name!r} is registered under this BAR_HOME")


def task(project_name: str, task_id: str) -> Task:
    if not TASK_ID_RE.match(task_id):
        raise PageNotFound(f"{task_id!r} is not a task id")
    the_project = project(project_name)
    if not the_project.paths.task(task_id).task_json.is_file():
        raise PageNotFound(f"project {project_name} has no task {task_id}")
    return api.get_task(api.Location(the_project, None), task_id)


# --- the overview ------------------------------------------------------------------


def overview() -> list[tuple[api.Project, list[api.TaskSummary], str | None]]:
    """Each project with its tasks (newest first), or why they could not be read."""
    shown: list[tuple[api.Project, list[api.TaskSummary], str | None]] = []
    for found in api.projects():
        try:
            listed = api.tasks(found, include_closed=True)
        except BarError as exc:
            shown.append((found, [], str(exc)))
            continue
        listed.sort(key=lambda s: s.task.created_at, reverse=True)
        shown.append((found, listed, None))
    return shown


def last_activity(summary: api.TaskSummary) -> str:
    last = summary.task.ledger.last() if summary.steps else None
    return last.ended_at if last is not None else summary.task.updated_at


def pending_decisions(the_task: Task) -> int:
    """How many of the agent's questions wait for an answer (``bar decide submit``): the
    items of the pending submission."""
    from bar.api import orders

    try:
        waiting = orders.pending_decision(the_task)  # a worker's agent's too
    except BarError:
        return 0
    items = waiting.get("items") if waiting is not None else None
    return len(items) if isinstance(items, list) else 0


# --- the timeline ------------------------------------------------------------------


def page_count(the_task: Task) -> int:
    last = the_task.ledger.last()
    return max(1, -(-(last.number if last else 0) // PER_PAGE))


def steps_page(the_task: Task, page: int) -> list[Step]:
    """Page ``page`` (from 1) of the steps, newest first, read from the end of the ledger:
    the steps numbered from ``(page - 1) * PER_PAGE`` below the newest down, so that the
    lines of the newer pages are passed over unparsed (``Ledger.iter_reverse(below=)``)."""
    newest = the_task.ledger.last()
    if newest is None:
        return []
    top = newest.number - (page - 1) * PER_PAGE
    shown: list[Step] = []
    for step in the_task.ledger.iter_reverse(warn=False, below=top + 1):
        if step.number > top:  # (a line that named another step, parsed: junk)
            continue
        shown.append(step)
        if len(shown) >= PER_PAGE:
            break
    return shown


def flow_status(the_task: Task) -> dict[str, Any] | None:
    """The task's flow (``bar flow``) with bar's state and exact time of each entry
    (``flow.view``), or None: it has none, or its file cannot be read."""
    from bar.aide import flow

    try:
        return flow.view(the_task)
    except BarError:
        return None


def moment(text: str) -> datetime | None:
    try:
        found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def flow_entries(
    the_task: Task, history: list[dict[str, Any]], page: int, pages: int, shown: list[Step]
) -> list[dict[str, Any]]:
    """The flow's history entries made in the time of page ``page``'s steps, newest first:
    after the oldest step shown started (on the last page: any time before too) and, on a
    page after the first, at or before the step just newer than the page started."""
    low = moment(shown[-1].started_at) if shown and page < pages else None
    high = None
    newest = the_task.ledger.last()
    if page > 1 and newest is not None:
        top = newest.number - (page - 1) * PER_PAGE  # the page's newest step
        for step in the_task.ledger.iter_reverse(warn=False, below=top + 2):
            if step.number <= top:
                break
            high = moment(step.started_at)  # (the oldest step newer than the page, so far)
    found = []
    for entry in history:
        at = moment(str(entry.get("at") or entry.get("timestamp", "")))
        if at is None or (low is not None and at <= low) or (high is not None and at > high):
            continue
        found.append(entry)
    found.reverse()
    return found


def steps_after(the_task: Task, number: int) -> list[Step]:
    """The steps newer than step ``number``, newest first (what a live page lacks)."""
    newer: list[Step] = []
    for step in the_task.ledger.iter_reverse(warn=False):
        if step.number <= number:
            break
        newer.append(step)
        if len(newer) >= PER_PAGE:
            break
    return newer


def checkpoints_of(the_task: Task, step: Step) -> list[Checkpoint]:
    if step.kind != "run" or not getattr(step, "checkpoints", 0):
        return []
    return api.checkpoints(the_task, step.step_id)


def checkpoints_in(the_task: Task, step_id: str) -> list[Checkpoint]:
    """Every checkpoint of step ``step_id``, in order (none: it took none)."""
    return api.checkpoints(the_task, step_id)


# --- a step ------------------------------------------------------------------------


def step_or_checkpoint(the_task: Task, ref: str) -> Step | Checkpoint:
    if "." in ref:
        return api.checkpoint(the_task, ref)
    return api.show(the_task, api.parse_step_ref(ref))


def live_step(the_task: Task, ref: str) -> LiveStep | None:
    """The step ``ref`` names if it is the task's step not recorded yet (running, being
    recorded, or left by a bar that died)."""
    live = api.live_step(the_task)
    if live is None or "." in ref or live.step_id != api.parse_step_ref(ref):
        return None
    return live


def glance(the_task: Task, step_id: str) -> Glance:
    """A running step's checkpoints and output so far (the first ``OUTPUT_LIMIT`` bytes
    of it, as a recorded step's page shows)."""
    return api.glance_step(the_task, step_id, OUTPUT_LIMIT)


def neighbours(the_task: Task, step: Step) -> tuple[str | None, str | None]:
    """The ids of the steps just before and just after ``step`` (None: there is none), read
    from the end of the ledger down to the one before it; an unreadable line is passed over
    like a step that is not there."""
    # (the lines of the steps after the next are passed over unparsed; only when the next
    # one cannot be read is the rest of the ledger read for the one after it)
    before, after = _around(the_task, step, step.number + 2)
    if after is None:
        newest = the_task.ledger.last()
        if newest is not None and newest.number > step.number + 1:
            before, after = _around(the_task, step, None)
    return before, after


def _around(the_task: Task, step: Step, below: int | None) -> tuple[str | None, str | None]:
    after: str | None = None
    for other in the_task.ledger.iter_reverse(warn=False, below=below):
        if other.number > step.number:
            after = other.step_id
        elif other.number < step.number:
            return other.step_id, after
    return None, after


def patch_of(the_task: Task, rel: str | None) -> patch_pages.PatchIndex:
    """The files of a recorded patch (none when the step changed nothing)."""
    if not rel:
        return patch_pages.PatchIndex(b"")
    try:
        return patch_pages.of_file(artifact(the_task, rel.removeprefix("artifacts/")))
    except FileNotFoundError:
        return patch_pages.PatchIndex(b"")


def output_of(the_task: Task, step: Step) -> tuple[str, bool]:
    """The step's output as text (the first ``OUTPUT_LIMIT`` bytes), and whether it was cut."""
    rel = step.artifacts.output
    if rel:
        try:
            data = patch_pages.read_regular(
                artifact(the_task, rel.removeprefix("artifacts/")), OUTPUT_LIMIT + 1
            )
        except FileNotFoundError:
            return "", False
    else:
        data = derived_output(the_task, step.step_id, OUTPUT_LIMIT + 1) or b""
    return data[:OUTPUT_LIMIT].decode("utf-8", "replace"), len(data) > OUTPUT_LIMIT


def derived_output(the_task: Task, step_id: str, limit: int | None = None) -> bytes | None:
    """The output of a pty step an earlier bar recorded (no output file of its own),
    derived from its recording (at most ``limit`` bytes); None if it has no recording."""
    from bar.terminal.cast import text_of_cast

    cast = artifact(the_task, f"{step_id}.cast")
    if not cast.is_file() or cast.is_symlink():
        return None
    out = bytearray()
    try:
        for piece in text_of_cast(cast):
            out += piece
            if limit is not None and len(out) >= limit:
                break
    except BarError:  # a broken recording: what could be read
        pass
    return bytes(out if limit is None else out[:limit])


def whole_cast(path: Path) -> bytes:
    """A pty step's recording with every output in its events, as a player reads it
    (the stored one refers to the step's text for most of it: ``bar.terminal.textref``)."""
    from bar.terminal.cast import full_cast

    if path.is_symlink():
        raise OSError(f"{path} is a link")  # (answered as an artifact that is no plain file)
    return b"".join(full_cast(path))


def artifact(the_task: Task, name: str) -> Path:
    """The file of artifact ``name`` (``0003.output``): a plain name of the task's
    artifacts directory that resolves inside it, never a path a URL made up."""
    if not ARTIFACT_NAME.match(name):
        raise PageNotFound(f"{name!r} is not an artifact of a step")
    path = api.artifact_path(the_task, f"artifacts/{name}")
    if path.parent != (the_task.dir / "artifacts").resolve():
        raise PageNotFound(f"artifact {name} is not in the task's artifacts directory")
    return the_task.dir / "artifacts" / name


# --- an agent's session ------------------------------------------------------------


def session_summary(step: Step) -> dict[str, Any] | None:
    """The ``session`` of a step's ledger line (model, turns, tokens...), if it has one."""
    found = step.extra.get("session")
    return found if isinstance(found, dict) else None


def session(the_task: Task, step: Step) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A step's session: its summary and its events, in order (none: no session kept)."""
    if not step.artifacts.session and session_summary(step) is None:
        return None, []
    return api.session(the_task, step.step_id)


def session_text(the_task: Task, ref: str, n: str) -> str:
    """The whole text of event ``n`` of a step's session, which its page shows cut: a
    message's text, a tool call's input, a tool result's summary."""
    found = step_or_checkpoint(the_task, ref)
    if not isinstance(found, Step):
        raise PageNotFound(f"{ref} is a checkpoint: its step's page has the conversation")
    _, events = session(the_task, found)
    if not (n.isascii() and n.isdigit()) or int(n) >= len(events):
        raise PageNotFound(f"the session of step {found.step_id} has no event {n}")
    event = events[int(n)]
    if event.get("type") == "message":
        return str(event.get("text", ""))
    if event.get("type") == "tool_result":
        return str(event.get("summary", ""))
    if event.get("type") == "tool_call":
        return json.dumps(event.get("input"), indent=2, ensure_ascii=False)
    return json.dumps(event, indent=2, ensure_ascii=False)


def session_totals(the_task: Task) -> dict[str, Any] | None:
    """What the task's agent steps add up to (tokens, cost, turns); the ledger is read
    only past where the last look ended (``bar.session.stored.task_totals``)."""
    return api.session_totals(the_task)


# --- comparing two states -----------------------------------------------------------


def compare(the_task: Task, start: str, end: str) -> tuple[api.Diff, patch_pages.PatchIndex]:
    """The diff between two recorded states, as ``bar diff --from START --to END``."""
    diff = api.diff(the_task, start or "base", end or None)
    key = (str(diff.repo), diff.from_commit, diff.to_commit)
    found = patch_pages.of_commits(key)
    if found is None:
        text = diff.patch()
        try:
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = text.encode("utf-8", "replace")
        found = patch_pages.of_commits(key, data)
        assert found is not None
    return diff, found


@dataclass(frozen=True)
class State:
    """A recorded state a picker offers: its name (``base``, ``3``'s id, ``0003.2``), what
    made it, and when."""

    name: str
    what: str
    at: str = ""
    checkpoint: bool = False


def recorded_states(
    the_task: Task, describe: Callable[[Step], str], limit: int = 200
) -> list[State]:
    """The states the task recorded, newest first, for the pickers of the Actions page:
    its last ``limit`` steps that recorded one (an apply moves no state of the task), each
    followed by the checkpoints taken inside it, newest first, then the base."""
    found: list[State] = []
    for step in reversed(the_task.ledger.tail(limit)):
        if not step.snapshot or step.kind == "apply":
            continue
        found.append(State(step.step_id, f"{step.kind}: {describe(step)}", step.started_at))
        for cp in reversed(checkpoints_of(the_task, step)):
            found.append(
                State(cp.name, f"{cp.tool or cp.kind}: {cp.target_text}", cp.ended_at, True)
            )
    found.append(State("base", f"the task's base, {the_task.base_commit[:10]}"))
    return found


def branches(the_task: Task, limit: int = 300) -> list[str]:
    """The branches a task can be applied to, the most recently committed first (its base
    branch among them when it is one); at most ``limit``."""
    return api.branches(the_task.project)[:limit]


def states(the_task: Task, limit: int = 200) -> list[str]:
    """Names of recent states for the compare form: base, then steps newest first."""
    names = [s.step_id for s in the_task.ledger.tail(limit) if s.snapshot and s.kind != "apply"]
    return ["base", *reversed(names)]
