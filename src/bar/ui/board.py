"""A project's board: its tasks as cards in columns, as bar's board has them (docs/board.md).

The columns are the board's statuses (``bar.model.board``), with the pending tasks someone
took apart from those nobody did: **pending** (planned, nobody's), **claimed** (planned,
an owner took it: ``bar task claim``), **in progress** (a worktree is bound), **done**
(completed). ``?by=owner`` makes a column of each owner instead (nobody's first). A card
says the task's name and id, its description, its owner, its state where it says more than
its column (running, applied, missing worktree, on workers), its steps, changes and cost,
the questions its agent waits on, and its last activity. The overview's filter applies.
The done column lists the newest ``DONE_SHOWN`` unless asked for all (``?done=all``).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from bar import api
from bar.model.board import COMPLETED, IN_PROGRESS, PENDING
from bar.ui import views
from bar.ui.filters import TaskFilter, options
from bar.ui.pages import (
    cost_of,
    description_html,
    esc,
    layout,
    plural,
    stat_text,
    task_filter_form,
    task_url,
    when,
)

CLAIMED = "claimed"
# (column key, its title, what it holds)
COLUMNS = (
    (PENDING, "Pending", "planned; nobody took it yet"),
    (CLAIMED, "Claimed", "planned; an owner took it (bar task claim)"),
    (IN_PROGRESS, "In progress", "its worktree is made"),
    (COMPLETED, "Done", "closed"),
)
DONE_SHOWN = 20
NOBODY = "nobody"
# states a card names because its column does not say them
_SAID_BY_COLUMN = {"pending", "active", "closed"}


def column_of(task: api.Task) -> str:
    status = task.board.status
    if status == PENDING and task.board.owner:
        return CLAIMED
    return status


def board_page(project_name: str, query: Mapping[str, str], csrf: str) -> str:
    project = views.project(project_name)
    keep = TaskFilter.of(query)
    by_owner = query.get("by") == "owner"
    every = api.tasks(project, include_closed=True)
    shown = sorted((s for s in every if keep.keeps(s)), key=views.last_activity, reverse=True)
    url = f"/p/{quote(project.name)}/board"
    if by_owner:
        owners = sorted({s.task.board.owner for s in shown if s.task.board.owner})
        groups = [(NOBODY, "Nobody's", "no owner")] + [(o, f"@{o}", "") for o in owners]
        columns = {
            key: [s for s in shown if (s.task.board.owner or NOBODY) == key] for key, *_ in groups
        }
    else:
        groups = list(COLUMNS)
        columns = {key: [s for s in shown if column_of(s.task) == key] for key, *_ in groups}
    every_done = query.get("done") == "all"
    cells = []
    for key, title, said in groups:
        cards = columns[key]
        more = ""
        if key == COMPLETED and not by_owner and not every_done and len(cards) > DONE_SHOWN:
            link = f"{url}?{urlencode({**dict(query), 'done': 'all'})}"
            more = (
                f'<p class="more"><a href="{esc(link)}">{len(cards) - DONE_SHOWN} more done</a></p>'
            )
            cards = cards[:DONE_SHOWN]
        items = "".join(_card(s, by_owner) for s in cards)
        cells.append(
            f'<section class="column" data-column="{esc(key)}" aria-label="{esc(title)}">'
            f'<h2>{esc(title)} <span class="count">{len(columns[key])}</span></h2>'
            f'<p class="meta">{esc(said)}</p><ol class="cards">{items}</ol>{more}</section>'
        )
    grouping = (
        f'<form class="group-by" method="get" action="{esc(url)}">'
        + "".join(
            f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
            for k, v in query.items()
            if k in ("q", "state", "owner") and v
        )
        + '<label>columns <select name="by">'
        + options([("", "by status"), ("owner", "by owner")], query.get("by", ""))
        + '</select></label> <button type="submit">Show</button></form>'
    )
    body = (
        f"<h1>Board <small>{esc(project.name)}</small></h1>"
        f"{task_filter_form(url, keep, every)}{grouping}"
        f'<div class="board{" by-owner" if by_owner else ""}">{"".join(cells)}</div>'
    )
    return layout(
        f"{project.name}: board",
        body,
        csrf=csrf,
        crumbs=[(project.name, "/"), ("board", "")],
    )


def _card(s: api.TaskSummary, by_owner: bool) -> str:
    t = s.task
    facts = []
    if by_owner:
        facts.append(f'<span class="column-name">{esc(_column_title(column_of(t)))}</span>')
    elif t.board.owner:
        facts.append(f'<span class="owner">@{esc(t.board.owner)}</span>')
    if s.state.state not in _SAID_BY_COLUMN:
        facts.append(f'<span class="state">{esc(s.state.label)}</span>')
    facts.append(plural(s.steps, "step"))
    if s.diff_stat.files:
        facts.append(esc(stat_text(s.diff_stat)))
    cost = cost_of(t)
    if cost != "-":
        facts.append(f'<span class="cost">{esc(cost)}</span>')
    waiting = views.pending_decisions(t)
    if waiting:
        facts.append(
            f'<a class="badge waiting" href="{esc(task_url(t, "/decisions"))}">'
            f"{esc(plural(waiting, 'decision'))} waiting</a>"
        )
    facts.append(when(views.last_activity(s)))
    return (
        f'<li class="card state-{esc(s.state.state)}" data-task="{esc(t.id)}">'
        f'<a class="name" href="{esc(task_url(t))}">{esc(t.name)}</a> <small>{esc(t.id)}</small>'
        f'{description_html(t)}<div class="card-facts">{" · ".join(facts)}</div></li>'
    )


def _column_title(key: str) -> str:
    return next(title for k, title, _ in COLUMNS if k == key)
