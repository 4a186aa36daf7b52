"""One search over every project under ``$BAR_HOME``: tasks, steps, commands and files.

``/search?q=WORDS`` (the box at the top of every page) lists, each in its own group:

- **tasks** whose name, id, description, owner, branch or board status say every word;
- **steps** whose id, kind, result (``exit 1``, ``blocked``), agent and model, or what a
  step that ran no command did (a rollback, an apply and its message) say them;
- **commands**: each command run, a step's own and each shell command its agent ran
  (with the policy's decision, linked to its checkpoint);
- **files**: each file a step changed, with the steps that changed it.

A word matches wherever it is in the text, whatever the case; every word must. ``in=``
keeps one group, ``project=`` one project. The ledgers are read from the newest step
down, and a line that cannot hold the words is passed over unparsed
(``StepFilter.raw_may_keep``); each group lists its ``SHOWN`` newest matches and says how
many more there are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bar import api
from bar.errors import BarError
from bar.history.checkpoints import Checkpoint
from bar.model.records import PolicyEventRecord, RunStep, Step
from bar.model.tasks import Task
from bar.ui import views
from bar.ui.calls import is_call
from bar.ui.filters import StepFilter, description, has_all, options, words
from bar.ui.pages import describe, esc, layout, plural, result, stat_text, task_url, when

SHOWN = 50  # matches listed in each group
GROUPS = (("tasks", "Tasks"), ("steps", "Steps"), ("commands", "Commands"), ("files", "Files"))


@dataclass
class Found:
    """What a search found, group by group: (task, HTML of one item), and the counts."""

    items: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k, _ in GROUPS})
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(dict(GROUPS), 0))

    def add(self, group: str, item: str) -> None:
        self.counts[group] += 1
        if len(self.items[group]) < SHOWN:
            self.items[group].append(item)


def search(text: str, *, only: str = "", project: str = "") -> Found:
    """Every match of ``text`` (see the module), in the groups ``only`` names (all: "")
    and the projects ``project`` names (all: "")."""
    terms = words(text)
    found = Found()
    if not terms:
        return found
    wanted = {only} if only in dict(GROUPS) else set(dict(GROUPS))
    raw = StepFilter(text=text)
    for proj in api.projects():
        if project and proj.name != project:
            continue
        try:
            tasks = api.list_tasks(proj)
        except BarError:
            continue
        tasks.sort(key=lambda t: t.updated_at, reverse=True)
        for task in tasks:
            if "tasks" in wanted and _task_matches(task, terms):
                found.add("tasks", _task_item(task))
            if wanted - {"tasks"}:
                _search_ledger(task, terms, raw, wanted, found)
    return found


def _task_matches(task: Task, terms: list[str]) -> bool:
    board = task.board
    return has_all(
        terms,
        task.name,
        task.id,
        description(task),
        board.owner,
        task.branch,
        board.status.replace("_", " "),
        task.status,
    )


def _search_ledger(
    task: Task, terms: list[str], raw: StepFilter, wanted: set[str], found: Found
) -> None:
    files_seen: dict[str, list[Step]] = {}
    for step in task.ledger.iter_reverse(warn=False, may_match=raw.raw_may_keep):
        if "steps" in wanted and has_all(terms, *_step_facts(step)):
            found.add("steps", _step_item(task, step))
        if "commands" in wanted:
            _commands(task, step, terms, found)
        if "files" in wanted:
            for path in step.diff_stat.file_list:
                if has_all(terms, path):
                    files_seen.setdefault(path, []).append(step)
    for path, steps in files_seen.items():
        found.add("files", _file_item(task, path, steps))


def _step_facts(step: Step) -> list[str]:
    text, _ = result(step)
    facts = [step.step_id, step.kind, text]
    if isinstance(step, RunStep):
        summary = views.session_summary(step)
        if summary is not None:
            facts += [str(summary.get("agent") or ""), str(summary.get("model") or "")]
    else:
        facts.append(describe(step))
    return facts


def _commands(task: Task, step: Step, terms: list[str], found: Found) -> None:
    if not isinstance(step, RunStep):
        return
    if has_all(terms, describe(step)):
        found.add("commands", _command_item(task, step, describe(step), None, ""))
    calls = [e for e in step.policy_events if is_call(e) and has_all(terms, *_call_facts(e))]
    if not calls:
        return
    taken: dict[str, Checkpoint] = {}
    if getattr(step, "checkpoints", 0):
        try:
            taken = {cp.call_id: cp for cp in api.checkpoints(task, step.step_id) if cp.call_id}
        except BarError:
            taken = {}
    seen: set[tuple[str | None, str]] = set()
    for event in calls:
        command = event.command or event.matched
        if (event.tool_use_id, command) in seen:  # (one call, a rule each)
            continue
        seen.add((event.tool_use_id, command))
        cp = taken.get(event.tool_use_id or "")
        decision = event.decision or event.action
        found.add("commands", _command_item(task, step, command, cp, decision))


def _call_facts(event: PolicyEventRecord) -> list[str]:
    """What an agent's call says of itself: its command, the policy's decision and rule,
    and what became of it (``blocked`` for a call the policy blocked)."""
    decision = event.decision or event.action
    said = "blocked" if decision == "block" else decision
    return [event.command or event.matched, said, event.rule or "", event.outcome or ""]


def _where(task: Task) -> str:
    return (
        f'<a href="{esc(task_url(task))}">{esc(task.name)}</a> '
        f"<small>{esc(task.id)} · {esc(task.project.name)}</small>"
    )


def _task_item(task: Task) -> str:
    owner = f" · @{esc(task.board.owner)}" if task.board.owner else ""
    said = description(task)
    return (
        f'<li class="found task">{_where(task)} <span class="meta">'
        f"{esc(task.board.status.replace('_', ' '))}{owner} · {when(task.updated_at)}</span>"
        f"{f'<div class=description>{esc(said)}</div>' if said else ''}</li>"
    )


def _step_link(task: Task, ref: str, label: str) -> str:
    return f'<a href="{esc(task_url(task, "/s/" + ref))}">{esc(label)}</a>'


def _step_item(task: Task, step: Step) -> str:
    text, cls = result(step)
    return (
        f'<li class="found step">{_step_link(task, step.step_id, "step " + step.step_id)} '
        f"{esc(step.kind)} <code>{esc(describe(step))}</code> "
        f'<span class="result {cls}">{esc(text)}</span> · {when(step.started_at)} · in '
        f"{_where(task)}</li>"
    )


def _command_item(
    task: Task, step: Step, command: str, cp: Checkpoint | None, decision: str
) -> str:
    if cp is not None:
        link = _step_link(task, cp.name, cp.name)
        by = f" · {esc(cp.tool or 'call')} · {esc(stat_text(cp.diff_stat))}"
    elif decision:
        link = _step_link(task, step.step_id, step.step_id)
        by = " · agent's call, no checkpoint"
    else:
        link = _step_link(task, step.step_id, step.step_id)
        by = f" · {esc(result(step)[0])}"
    policy = ""
    if decision:
        blocked = " blocked" if decision == "block" else ""
        policy = f' · <span class="policy{blocked}">policy <b>{esc(decision)}</b></span>'
    return (
        f'<li class="found command">{link} <code>{esc(command)}</code>{by}{policy} · '
        f"{when(step.started_at)} · in {_where(task)}</li>"
    )


def _file_item(task: Task, path: str, steps: list[Step]) -> str:
    links = ", ".join(_step_link(task, s.step_id, s.step_id) for s in steps[:10])
    more = f" and {len(steps) - 10} more" if len(steps) > 10 else ""
    return (
        f'<li class="found file"><code class="path">{esc(path)}</code> changed in '
        f"{plural(len(steps), 'step')} ({links}{more}), last {when(steps[0].started_at)} · "
        f"in {_where(task)}</li>"
    )


def search_page(query: Mapping[str, str], csrf: str) -> str:
    text = query.get("q", "").strip()
    only = query.get("in", "")
    project = query.get("project", "")
    projects = [(p.name, p.name) for p in api.projects()]
    form = (
        '<form class="filter search-form" method="get" action="/search" role="search">'
        f'<label>search <input type="search" name="q" value="{esc(text)}" autofocus '
        'placeholder="words"></label> '
        f'<label>in <select name="in">{options([("", "everything"), *GROUPS], only)}'
        "</select></label> "
        f'<label>project <select name="project">'
        f"{options([('', 'every project'), *projects], project)}</select></label> "
        '<button type="submit">Search</button></form>'
    )
    if not words(text):
        body = (
            f"<h1>Search</h1>{form}<p class=empty>Give a word or more: a task's name or "
            "owner, a command, a file, a result such as <code>blocked</code>.</p>"
        )
        return layout("search", body, csrf=csrf, crumbs=[("search", "")])
    found = search(text, only=only, project=project)
    total = sum(found.counts.values())
    unknown = ""
    if project and project not in dict(projects):
        unknown = (
            f'<p class="error" role="alert">bar: no project {esc(repr(project))} is registered under '
            "this BAR_HOME; search every project.</p>"
        )
    parts = [
        f"<h1>Search <small>{esc(text)}</small></h1>{form}{unknown}"
        '<p class="meta" role="status">'
        f"{total} {'match' if total == 1 else 'matches'}"
        + (
            " (" + ", ".join(f"{found.counts[k]} {label.lower()}" for k, label in GROUPS) + ")"
            if total
            else ""
        )
        + "</p>"
    ]
    for key, label in GROUPS:
        if only and key != only:
            continue
        items = found.items[key]
        more = found.counts[key] - len(items)
        note = (
            f'<p class="meta">and {more} more: add a word, or pick a project.</p>'
            if more > 0
            else ""
        )
        listed = (
            f'<ol class="found">{"".join(items)}</ol>{note}'
            if items
            else f"<p class=empty>No {label.lower()} match.</p>"
        )
        parts.append(
            f'<section class="results" id="found-{key}"><h2>{esc(label)} '
            f'<span class="count">{found.counts[key]}</span></h2>{listed}</section>'
        )
    return layout(f"search: {text}", "".join(parts), csrf=csrf, crumbs=[("search", "")])
