"""The HTML of the overview and the timeline, and the frame every page shares.

Written by hand and escaped at every value (``esc``): no template engine, no script of
anyone else's in the markup. Each page works without JavaScript; ``static/ui.js`` adds
the live timeline, the lazy diffs, colours and the terminal player.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from bar import api
from bar.base.clock import duration_text
from bar.base.cmdline import line_of
from bar.base.notices import plural as plural  # (the pages count as the CLI does)
from bar.errors import BarError
from bar.model.records import (
    KINDS,
    ApplyStep,
    DecisionStep,
    PolicyEventRecord,
    RollbackStep,
    RunStep,
    Step,
    SyncStep,
)
from bar.model.tasks import Task
from bar.ui import assets, views
from bar.ui.calls import Call, pair
from bar.ui.filters import (
    NOBODY,
    RESULTS,
    StepFilter,
    TaskFilter,
    description,
    matching_steps,
    options,
)

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint

# The pages of a task, as its navigation lists them: (label, path below the task's URL).
# A new page of a task is one more entry here and one more route in ``app``.
TASK_PAGES: tuple[tuple[str, str], ...] = (
    ("Timeline", ""),
    ("Compare", "/compare"),
    ("Actions", "/actions"),
    ("Decisions", "/decisions"),
)


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def task_url(task: Task, rest: str = "") -> str:
    return f"/p/{quote(task.project.name)}/t/{quote(task.id)}{rest}"


def short(commit: str | None) -> str:
    return commit[:10] if commit else "-"


def duration(ms: int) -> str:
    """A length of time as every face says it: "0.6 s", "2 min 5 s", "1 h 3 min"
    (``bar.base.clock.duration_text``; ``static/ui.js`` counts a running step's the same)."""
    return duration_text(ms)


def when(iso: str, now: datetime | None = None) -> str:
    """A recorded time (ISO 8601, UTC) as a ``<time>`` element a person reads at a glance,
    "3 min ago" (``ago``; ``static/ui.js`` keeps it true while the page stays open), with
    the exact time in its title and its ``datetime``."""
    at = views.moment(iso)
    if at is None:
        return f"<time>{esc(iso or '-')}</time>"
    return (
        f'<time datetime="{esc(iso)}" title="{esc(exact(at))}" data-ago>{esc(ago(at, now))}</time>'
    )


def exact(at: datetime) -> str:
    """``2026-11-27 08:08:52.937 UTC``: to the millisecond, as bar records it."""
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S.") + f"{at.microsecond // 1000:03d} UTC"


def ago(at: datetime, now: datetime | None = None) -> str:
    """How long ago ``at`` was, as a person says it: "just now", "40 s ago", "3 min ago",
    "5 h ago", "yesterday", "12 days ago", then the date ("27 Nov 2026"); a time ahead
    of this clock (another machine's) by more than a minute is its date and time."""
    seconds = ((now or datetime.now(UTC)) - at).total_seconds()
    if seconds < -60:
        return at.astimezone(UTC).strftime("%-d %b %Y %H:%M UTC")
    if seconds < 10:
        return "just now"
    if seconds < 60:
        return f"{int(seconds)} s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    if days == 1:
        return "yesterday"
    if days < 30:
        return f"{days} days ago"
    return at.astimezone(UTC).strftime("%-d %b %Y")


def stat_text(stat: object) -> str:
    files = getattr(stat, "files", 0)
    if not files:
        return "no changes"
    return (
        f"{plural(files, 'file')} +{getattr(stat, 'additions', 0)} -{getattr(stat, 'deletions', 0)}"
    )


def elapsed_since(iso: str) -> str:
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    return duration(max(0, int((datetime.now(UTC) - then).total_seconds() * 1000)))


def layout(
    title: str,
    body: str,
    *,
    csrf: str,
    crumbs: Sequence[tuple[str, str]] = (),
    task: Task | None = None,
    current: str = "",
) -> str:
    return layout_top(title, csrf=csrf, crumbs=crumbs, task=task, current=current) + body + _BOTTOM


_BOTTOM = "</main></body></html>"


def layout_top(
    title: str,
    *,
    csrf: str,
    crumbs: Sequence[tuple[str, str]] = (),
    task: Task | None = None,
    current: str = "",
) -> str:
    """A page up to the start of its body (``<main>``)."""
    rich = assets.present()
    styles = (
        "".join(f'<link rel="stylesheet" href="/static/vendor/{n}">' for n in assets.STYLES)
        if rich
        else ""
    )
    scripts = (
        '<script src="/static/vendor/diff2html-ui-slim.min.js" defer></script>'
        '<script src="/static/vendor/asciinema-player.min.js" defer></script>'
        if rich
        else ""
    )
    trail = " / ".join(
        f'<a href="{esc(href)}">{esc(label)}</a>' if href else esc(label)
        for label, href in [("bar", "/"), *crumbs]
    )
    nav = ""
    if task is not None:
        waiting = views.pending_decisions(task)
        nav = "".join(
            f'<a href="{esc(task_url(task, rest))}"'
            f"{' aria-current=page' if rest == current else ''}>{esc(label)}"
            f"{_waiting_badge(waiting) if rest == '/decisions' else ''}</a>"
            for label, rest in TASK_PAGES
        )
        board = f"/p/{quote(task.project.name)}/board"
        nav = (
            f'<nav class="task-nav">{nav}<a class="board-link" href="{esc(board)}">Board</a></nav>'
        )
    find = (
        '<form class="find" method="get" action="/search" role="search">'
        '<input type="search" name="q" aria-label="search tasks, steps, commands and files" '
        'placeholder="Search tasks, steps, commands, files" aria-keyshortcuts="/" '
        'title="search everything (key /)"></form>'
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f'<meta name="bar-csrf" content="{esc(csrf)}">'
        f'<meta name="bar-rich" content="{"1" if rich else "0"}">'
        f"<title>{esc(title)} · bar</title>{styles}"
        '<link rel="stylesheet" href="/static/ui.css">'
        f'{scripts}<script type="module" src="/static/ui.js"></script></head><body>'
        f'<header class="top"><div class="crumbs">{trail}</div>{nav}{find}</header><main>'
    )


def _waiting_badge(count: int) -> str:
    if not count:
        return ""
    return (
        f' <span class="badge waiting" title="{esc(plural(count, "question"))} waiting for '
        f'an answer">{count}</span>'
    )


# --- the overview ------------------------------------------------------------------


def overview(csrf: str, query: Mapping[str, str] | None = None) -> str:
    keep = TaskFilter.of(query or {})
    parts = ["<h1>Projects</h1>"]
    shown = views.overview()
    if not shown:
        parts.append(
            "<p class=empty>No project is registered here yet: run <code>bar init"
            "</code> in a repository.</p>"
        )
    else:
        everyone = [s for _, summaries, _ in shown for s in summaries]
        parts.append(task_filter_form("/", keep, everyone))
    for project, summaries, error in shown:
        board = f"/p/{quote(project.name)}/board"
        parts.append(
            f'<section class="project"><h2>{esc(project.name)} '
            f'<small>{esc(project.root)}</small> <a class="board-link" href="{esc(board)}">'
            "board</a></h2>"
        )
        if error:
            parts.append(f'<p class="error">{esc(error)}</p></section>')
            continue
        kept = [s for s in summaries if keep.keeps(s)]
        if not summaries:
            parts.append("<p class=empty>No tasks yet: <code>bar task new NAME</code>.</p>")
        elif not kept:
            parts.append(
                f"<p class=empty>None of its {plural(len(summaries), 'task')} matches the "
                "filter.</p>"
            )
        else:
            # one look at the Temporal server for all the tasks on workers; one that does
            # not answer is said once, above the table, not in every row
            on_workers, problems = api.running_on_workers(project, [s.task for s in summaries])
            parts += [
                f'<div class="error workers-problem" role="alert"><p>Tasks on workers: '
                f"{esc(problem)}, so what runs on them now is not known here.</p>"
                + (f'<p class="hint">hint: {esc(problem.hint)}</p>' if problem.hint else "")
                + "</div>"
                for problem in problems
            ]
            parts.append(
                "<table class=tasks><thead><tr><th>task</th><th>status</th><th>owner</th>"
                "<th>running now</th><th>steps</th><th>changes</th><th>cost</th>"
                "<th>applied</th><th>last activity</th></tr></thead><tbody>"
            )
            parts += [_task_row(s, on_workers) for s in kept]
            parts.append("</tbody></table>")
        parts.append("</section>")
    return layout("Projects", "".join(parts), csrf=csrf)


def task_filter_form(action: str, keep: TaskFilter, summaries: list[api.TaskSummary]) -> str:
    """The filter of a list of tasks: words, state, owner (the choices: those listed)."""
    states = sorted({s.state.state for s in summaries})
    owners = sorted({s.task.board.owner for s in summaries if s.task.board.owner})
    state_choices = [("", "any state"), ("open", "open (not closed)")]
    state_choices += [(w, w.replace("-", " ")) for w in states]
    owner_choices = [("", "anyone's"), (NOBODY, "nobody's"), *((o, o) for o in owners)]
    clear = f' <a href="{esc(action)}">clear</a>' if keep.active else ""
    return (
        f'<form class="filter" method="get" action="{esc(action)}" role="search" '
        'aria-label="filter the tasks"><label>tasks with <input type="search" name="q" '
        f'value="{esc(keep.text)}" placeholder="name, description, owner…"></label> '
        f'<label>state <select name="state">{options(state_choices, keep.state)}</select>'
        f'</label> <label>owner <select name="owner">{options(owner_choices, keep.owner)}'
        f'</select></label> <button type="submit">Filter</button>{clear}</form>'
    )


def description_html(t: Task, limit: int = 140) -> str:
    """The task's description, cut to ``limit`` characters (the whole in its title)."""
    said = description(t)
    if not said:
        return ""
    shown = said if len(said) <= limit else said[: limit - 1].rstrip() + "…"
    return f'<div class="description" title="{esc(said)}">{esc(shown)}</div>'


def owner_html(t: Task) -> str:
    owner = t.board.owner
    return f'<span class="owner">@{esc(owner)}</span>' if owner else '<span class="dim">-</span>'


def cost_of(t: Task) -> str:
    """What the task's agent steps cost: ``$0.1234``, ``unknown`` (a model without a
    price in ``agents.prices``), ``-`` (no agent step)."""
    totals = views.session_totals(t)
    if totals is None:
        return "-"
    return cost_text(totals) or "unknown"


def _task_row(s: api.TaskSummary, on_workers: dict[str, dict[str, Any]]) -> str:
    t = s.task
    running = api.running(t)
    now = (
        f'<code>{esc(line_of(running.cmd))}</code> <span class="elapsed" '
        f'data-since="{esc(running.started_at)}">{esc(elapsed_since(running.started_at))}'
        "</span>"
        if running
        else "-"
    )
    label = s.state.label
    waiting = 0
    if s.state.state == "on-workers":
        seen = on_workers.get(t.id)
        now, label = _on_workers(t, seen)
        if seen is not None and seen.get("running"):
            waiting = views.pending_decisions(t)  # (only a running step's agent asks)
    else:
        waiting = views.pending_decisions(t)
    active = ' <span class="badge">active</span>' if s.active else ""
    if waiting:
        active += (
            f' <a class="badge waiting" href="{esc(task_url(t, "/decisions"))}">'
            f"{esc(plural(waiting, 'decision'))} waiting</a>"
        )
    return (
        f'<tr class="state-{esc(s.state.state)}" data-task="{esc(t.id)}"><td>'
        f'<a href="{esc(task_url(t))}">{esc(t.name)}</a> <small>{esc(t.id)}</small>{active}'
        f"{description_html(t)}</td>"
        f'<td><span class="state">{esc(label)}</span></td><td>{owner_html(t)}</td><td>{now}</td>'
        f"<td>{s.steps}</td><td>{esc(stat_text(s.diff_stat))}</td>"
        f'<td class="cost">{esc(cost_of(t))}</td>'
        f"<td>{'yes' if s.state.applied else 'no'}</td>"
        f"<td>{when(views.last_activity(s))}</td></tr>"
    )


def _on_workers(t: Task, seen: dict[str, Any] | None) -> tuple[str, str]:
    """A task on workers: what runs now and on which worker, and its queue (``seen``:
    what the server said, None when it did not answer: said above the table)."""
    where = api.placement_of(t)
    label = f"on workers ({where.queue if where is not None else '?'})"
    if seen is None:
        return '<span class="hint" title="the Temporal server did not answer">?</span>', label
    running = seen.get("running")
    if running:
        worker = running.get("worker") or "a worker"
        since = str(running.get("since") or "")
        what = running.get("argv") or []
        command = f"<code>{esc(line_of(what))}</code> " if what else "a step "
        return (
            f"{command}on {esc(worker)} "
            f'<span class="elapsed" data-since="{esc(since)}">{esc(elapsed_since(since))}</span>',
            label,
        )
    if seen.get("sent"):
        why = seen.get("why") or f"no worker of queue {seen.get('queue')} has taken it yet"
        return f'<span class="warn">a step waits: {esc(why)}</span>', label
    return "-", label  # nothing runs: as a task here with no step running


# --- the timeline ------------------------------------------------------------------


def timeline(task: Task, page: int, csrf: str, keep: StepFilter | None = None) -> Iterator[str]:
    """The task's timeline, page ``page`` (from 1, newest first), in parts: the page's head
    (what the task is, the step running) before its rows are read, so that the browser
    starts on a long task's page as soon as on a short one's. With a filter (``keep``),
    the steps it keeps, a hundred a page, and no live update (a new step may not match)."""
    keep = keep or StepFilter()
    pages = views.page_count(task)
    page = max(1, page) if keep.active else min(max(1, page), pages)
    newest = task.ledger.last()
    live = (
        f' data-live="{esc(task_url(task, "/events"))}" '
        f'data-last="{newest.number if newest is not None else 0}"'
        if page == 1 and not keep.active
        else ""
    )
    head = (
        f"<h1>{esc(task.name)} <small>{esc(task.id)}</small></h1>"
        f'<p class="meta">branch <code>{esc(task.branch)}</code> from '
        f"<code>{esc(task.base_ref)}</code> at <code>{short(task.base_commit)}</code>"
        f" · {esc(task.status)}{_owner_meta(task)}</p>{description_html(task, 2000)}"
    )
    moved = api.base_moved_text(task)
    if moved:
        head += f'<p class="meta warn base-moved">base moved as it started: {esc(moved)}</p>'
    head += session_totals(task)
    flow = views.flow_status(task)
    if flow is not None:
        head += (
            f'<p class="meta">flow: phase <span class="flow-now">'
            f"{esc(flow.get('current_phase'))}</span>, step "
            f"{esc(flow.get('current_step'))}</p>"
        )
    running = running_html(task) if page == 1 else ""
    yield (
        layout_top(
            f"{task.name}: timeline",
            csrf=csrf,
            task=task,
            current="",
            crumbs=[(task.project.name, "/"), (task.name, "")],
        )
        + f'{head}<div id="running">{running}</div>{step_filter_form(task, keep)}'
        f'<table class="timeline"{live}><thead><tr><th>step</th>'
        "<th>kind</th><th>what</th><th>result</th><th>started</th><th>duration</th>"
        '<th>changes</th></tr></thead><tbody id="steps">'
    )
    try:
        if keep.active:
            shown, total = matching_steps(
                task,
                keep,
                lambda s: (describe(s), result(s)[0]),
                (page - 1) * views.PER_PAGE,
                views.PER_PAGE,
            )
            pages = max(1, -(-total // views.PER_PAGE))
            if page > pages:  # (past the last page of matches: the last one)
                page = pages
                shown, total = matching_steps(
                    task,
                    keep,
                    lambda s: (describe(s), result(s)[0]),
                    (page - 1) * views.PER_PAGE,
                    views.PER_PAGE,
                )
            rows = "".join(step_row(task, s) for s in shown)
        elif flow is not None:
            shown = views.steps_page(task, page)
            history = [e for e in flow.get("history", []) if isinstance(e, dict)]
            entries = views.flow_entries(task, history, page, pages, shown)
            rows = _phased_rows(task, shown, history, entries)
        else:
            shown = views.steps_page(task, page)
            rows = "".join(step_row(task, s) for s in shown)
    except BarError as exc:  # (the head is sent: the page says so where its rows would be)
        yield f"</tbody></table>{error_html(exc)}{_BOTTOM}"
        return
    if keep.active:
        said = f"{plural(total, 'step')} match" + ("es" if total == 1 else "")
        empty = f'<p class="meta filtered" role="status">{esc(said)} the filter.</p>'
    else:
        empty = "" if shown else "<p class=empty>No steps yet: <code>bar run -- CMD</code>.</p>"
    pager = _pager(task, page, pages, keep.query() if keep.active else {})
    yield f"{rows}</tbody></table>{empty}{pager}{_BOTTOM}"


def _owner_meta(task: Task) -> str:
    owner = task.board.owner
    board = f" · board {esc(task.board.status.replace('_', ' '))}"
    return board + (f' · owner <span class="owner">@{esc(owner)}</span>' if owner else "")


def step_filter_form(task: Task, keep: StepFilter) -> str:
    """The timeline's filter: words (command, what it did, result), kind, result, file."""
    kinds = [("", "any kind"), *((k, k) for k in KINDS)]
    results = [("", "any result"), *RESULTS]
    clear = f' <a href="{esc(task_url(task))}">clear</a>' if keep.active else ""
    return (
        f'<form class="filter" method="get" action="{esc(task_url(task))}" role="search" '
        'aria-label="filter the steps"><label>steps with <input type="search" name="q" '
        f'value="{esc(keep.text)}" placeholder="command, result…"></label> '
        f'<label>kind <select name="kind">{options(kinds, keep.kind)}</select></label> '
        f'<label>result <select name="result">{options(results, keep.result)}</select>'
        '</label> <label>file <input type="search" name="file" size="16" '
        f'value="{esc(keep.file)}" placeholder="path"></label> '
        f'<button type="submit">Filter</button>{clear}</form>'
    )


def error_html(exc: BarError) -> str:
    hint = f'<p class="hint">hint: {esc(exc.hint)}</p>' if exc.hint else ""
    return f'<div class="error" role="alert"><p>bar: {esc(exc)}</p>{hint}</div>'


def _phased_rows(
    task: Task, shown: list[Step], history: list[dict[str, Any]], entries: list[dict[str, Any]]
) -> str:
    """The steps under a header per flow phase (each in the phase current when it started),
    with the flow's entries between them where they were made; all newest first."""
    from bar.aide.flow import phase_of

    out: list[str] = []
    group: list[str | None] = []  # the phase whose rows are being written, once there is one

    def under(phase: str | None) -> None:
        if not group or group[0] != phase:
            group[:] = [phase]
            label = f"phase {phase}" if phase else "before the flow started"
            out.append(
                f'<tr class="phase-head" data-phase="{esc(phase or "")}"><th colspan=7>'
                f"{esc(label)}</th></tr>"
            )

    waiting = list(entries)
    for step in shown:
        start = views.moment(step.started_at)
        while (
            waiting
            and start is not None
            and (views.moment(str(waiting[0].get("at") or waiting[0]["timestamp"])) or start)
            > start
        ):
            entry = waiting.pop(0)
            under(str(entry.get("phase")))
            out.append(_flow_row(task, entry))
        under(phase_of(history, step.started_at))
        out.append(step_row(task, step))
    for entry in waiting:
        under(str(entry.get("phase")))
        out.append(_flow_row(task, entry))
    return "".join(out)


def _flow_row(task: Task, entry: dict[str, Any]) -> str:
    state = str(entry.get("state") or "")
    commit = short(str(entry.get("git_commit") or "") or None)
    snap = f"<code>{esc(commit)}</code>"
    if state and state != "base":
        snap = f'<a href="{esc(task_url(task, "/s/" + state))}">state {esc(state)}</a> {snap}'
    elif state:
        snap = f"state base {snap}"
    return (
        f'<tr class="flow-entry" data-flow-step="{esc(entry.get("step"))}"><td>flow</td>'
        f'<td class="action">{esc(entry.get("action"))}</td><td>{esc(entry.get("summary"))}'
        f"</td><td>{esc(entry.get('phase'))} · step {esc(entry.get('step'))}</td>"
        f'<td class="started">{when(str(entry.get("timestamp", "")))}</td>'
        f'<td class="duration"></td><td>{snap}</td></tr>'
    )


def _pager(task: Task, page: int, pages: int, keep: Mapping[str, str] | None = None) -> str:
    if pages == 1 and page == 1:
        return ""
    kept = {k: v for k, v in (keep or {}).items() if v}

    def href(n: int) -> str:
        return f"{task_url(task)}?{urlencode({**kept, 'page': str(n)})}"

    links = []
    if page > 1:
        links.append(f'<a href="{esc(href(page - 1))}" rel=prev>newer</a>')
    links.append(f"page {page} of {pages}")
    if page < pages:
        links.append(f'<a href="{esc(href(page + 1))}" rel=next>older</a>')
    return f'<nav class="pager">{" · ".join(links)}</nav>'


def running_html(task: Task) -> str:
    """The step running now, with its checkpoints so far (empty when none runs)."""
    running = api.running(task)
    if running is None:
        return ""
    taken = api.checkpoints(task, running.step_id)
    cps = "".join(_checkpoint_item(task, cp) for cp in taken)
    return (
        f'<div class="running-step" data-step="{esc(running.step_id)}"><strong><a href="'
        f'{esc(task_url(task, "/s/" + running.step_id))}">step {esc(running.step_id)}</a> '
        f"running</strong> <code>{esc(line_of(running.cmd))}</code>"
        f' for <span class="elapsed" data-since="{esc(running.started_at)}">'
        f"{esc(elapsed_since(running.started_at))}</span>"
        f"{f'<ol class=checkpoints>{cps}</ol>' if cps else ''}</div>"
    )


def describe(step: Step, task: Task | None = None) -> str:
    """What the step did, in a few words (a run: its command; a rollback, an undo or a
    redo as the command line says it, ``api.rollback_text``)."""
    if isinstance(step, RunStep):
        return line_of(step.cmd)
    if isinstance(step, RollbackStep):
        return api.rollback_text(task, step)
    if isinstance(step, ApplyStep):
        return (
            f"applied to {step.target_branch} as {short(step.commit_sha)} ({step.mode}): "
            f"{step.commit_message.splitlines()[0] if step.commit_message else ''}"
        )
    if isinstance(step, SyncStep):
        return f"sync onto {step.onto}" + (
            f", {len(step.conflicts)} conflicts" if step.conflicts else ""
        )
    if isinstance(step, DecisionStep):
        if step.cleaned:
            return f"decide clean: {len(step.cleaned)} answered decision(s) removed"
        chosen = ", ".join(f"{d.get('id')}={d.get('chosen')}" for d in step.decisions)
        via = " (read from a file)" if step.via == "file" else ""
        return f"decision {step.session_id} answered: {chosen}{via}"
    return "changes made by hand between steps"


def result(step: Step) -> tuple[str, str]:
    """The result column's text and its class: the words of ``RunStep.ending``, as the
    command line says them (``stopped``: on purpose, a Ctrl-C, a budget)."""
    if not isinstance(step, RunStep):
        return "done", "ok"
    if step.blocked:
        return "blocked", "blocked"
    ending = step.ending
    return ending.word, "stopped" if ending.tone == "warn" else ending.tone


def step_row(task: Task, step: Step) -> str:
    text, cls = result(step)
    link = task_url(task, f"/s/{step.step_id}")
    extra: list[str] = []
    cps = views.checkpoints_of(task, step)
    calls: list[Call] = [Call(cp) for cp in cps]
    if isinstance(step, RunStep):
        own, calls = pair(step.policy_events, cps)
        extra += [policy_item(event) for event in own]
        for hook in step.hooks:
            extra.append(
                f'<li class="hook{" bad" if hook.exit_code else ""}">hook {esc(hook.phase)} '
                f"<code>{esc(hook.cmd)}</code> exit {hook.exit_code}</li>"
            )
        if step.pty:
            extra.append('<li class="pty">interactive (pty): terminal recording</li>')
        if said := session_line(task, step):
            extra.append(said)
    items = "".join(call_item(task, c) for c in calls)
    details = (f'<ul class="facts">{"".join(extra)}</ul>' if extra else "") + (
        f'<ol class="calls">{items}</ol>' if items else ""
    )
    return (
        f'<tr class="step kind-{esc(step.kind)} {cls}" id="step-{esc(step.step_id)}" '
        f'data-step="{step.number}"><td><a href="{esc(link)}">{esc(step.step_id)}</a></td>'
        f"<td>{esc(step.kind)}</td><td><code>{esc(describe(step, task))}</code>{details}</td>"
        f'<td class="result {cls}">{esc(text)}</td><td class="started">{when(step.started_at)}'
        f'</td><td class="duration">{esc(duration(step.duration_ms))}</td>'
        f"<td>{esc(stat_text(step.diff_stat))}</td></tr>"
    )


def policy_item(event: PolicyEventRecord) -> str:
    """One of the step's own policy events (its command line, a program it started)."""
    blocked = event.action == "block"
    return (
        f'<li class="policy{" blocked" if blocked else ""}">policy <b>{esc(event.action)}'
        f"</b> {esc(event.rule or '(no rule)')}: <code>{esc(event.matched)}</code>"
        f"{' [' + esc(event.source) + ']' if event.source else ''}</li>"
    )


def call_item(task: Task, call: Call) -> str:
    """One tool call of an agent: its checkpoint (a link to its diff), the tool and what it
    was asked, the policy's decision, what became of it, and what it changed."""
    cp = call.checkpoint
    if cp is not None:
        name = f'<a class="checkpoint" href="{esc(task_url(task, "/s/" + cp.name))}">{esc(cp.name)}</a>'
    else:
        name = '<span class="checkpoint none" title="no checkpoint: the call did not run">-</span>'
    parts = [f"{name} <span class=tool>{esc(call.tool)}</span> <code>{esc(call.command)}</code>"]
    if call.decision:
        blocked = " blocked" if call.blocked else ""
        parts.append(f'<span class="policy{blocked}">policy <b>{esc(call.decision)}</b></span>')
    if call.outcome:
        parts.append(f'<span class="outcome">{esc(call.outcome)}</span>')
    if cp is not None:
        parts.append(f"<span class=stat>{esc(stat_text(cp.diff_stat))}</span>")
        if cp.verified is False:
            parts.append('<span class="unverified">unverified</span>')
    return f'<li class="call{" blocked" if call.blocked else ""}">{" · ".join(parts)}</li>'


def _checkpoint_item(task: Task, cp: Checkpoint) -> str:
    decision = f' <span class="policy">{esc(cp.decision)}</span>' if cp.decision else ""
    return (
        f'<li><a href="{esc(task_url(task, "/s/" + cp.name))}">{esc(cp.name)}</a> '
        f"{esc(cp.tool or cp.kind)} <code>{esc(cp.target_text)}</code>{decision} "
        f"<span class=stat>{esc(stat_text(cp.diff_stat))}</span></li>"
    )


# --- agent sessions ---------------------------------------------------------------


def count(value: object) -> int:
    """A count the ledger holds (0 where it holds none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def tokens(n: object) -> str:
    return f"{count(n):,}"


def tokens_text(s: dict[str, Any]) -> str:
    """``12,345 in · 678 out · 90,000 cached`` for a session or a task's totals, whole: the
    page has room for exact counts."""
    parts = [f"{tokens(s.get('input_tokens'))} in", f"{tokens(s.get('output_tokens'))} out"]
    if count(s.get("cache_read_tokens")):
        parts.append(f"{tokens(s['cache_read_tokens'])} cached")
    if count(s.get("cache_write_tokens")):
        parts.append(f"{tokens(s['cache_write_tokens'])} written to the cache")
    return " · ".join(parts)


def cost_text(s: dict[str, Any]) -> str | None:
    """The cost in dollars, if it is known (prices in config.yaml's agents.prices)."""
    cost = s.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        return f"${cost:.4f}"
    return None


def session_totals(task: Task) -> str:
    """The task's agent steps in one line for the timeline's head (empty: none)."""
    totals = views.session_totals(task)
    if totals is None:
        return ""
    parts = [
        plural(count(totals.get("steps")), "agent step"),
        plural(count(totals.get("turns")), "turn"),
        plural(count(totals.get("tool_calls")), "tool call"),
        tokens_text(totals),
        cost_text(totals) or "cost unknown",
    ]
    said = " · ".join(esc(p) for p in parts)
    models = [m for m in totals.get("models", []) if isinstance(m, str)]
    if models:
        said += " · " + ", ".join(f"<code>{esc(m)}</code>" for m in models)
    return f'<p class="meta session-totals">agents: {said}</p>'


def session_line(task: Task, step: Step) -> str:
    """A timeline row's word on an agent step's session: model, turns, tokens, cost, and a
    link to the conversation on the step's page."""
    summary = views.session_summary(step)
    if summary is None:
        return ""
    parts = [
        str(summary.get("model") or summary.get("agent") or "agent"),
        plural(count(summary.get("turns")), "turn"),
        tokens_text(summary),
    ]
    if cost := cost_text(summary):
        parts.append(cost)
    link = task_url(task, f"/s/{step.step_id}#conversation")
    return (
        f'<li class="session"><a href="{esc(link)}">conversation</a>: {esc(" · ".join(parts))}</li>'
    )


def query(**values: str) -> str:
    return urlencode({k: v for k, v in values.items() if v})
