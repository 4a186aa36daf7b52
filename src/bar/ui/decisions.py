"""The Decisions page: the agent's pending questions (``bar decide submit``), a form to
answer them, and the decisions answered before.

Each item shows its title, location, context and options with their scores, pros and
cons; the recommendation is chosen to begin with and a note may go with each choice. The
answer is a POST (with the CSRF token) that goes through ``bar.api.orders.decide_answer``, so through
the orders layer: while a step runs, that step's ``bar run`` records it. It names the
session it answers, so a submission that replaced the one on screen is not answered by
mistake. A refused answer is shown as bar's own sentence above the form.
"""

from __future__ import annotations

from typing import Any

from bar.aide import decide
from bar.api import orders
from bar.errors import BarError
from bar.model.tasks import Task
from bar.ui.pages import esc, layout, plural, task_url, when
from bar.ui.security import CSRF_FIELD

PAST_SHOWN = 50  # answered decisions listed, newest first


def _page(task: Task, body: str, csrf: str) -> str:
    return layout(
        f"{task.name}: decisions",
        body,
        csrf=csrf,
        task=task,
        current="/decisions",
        crumbs=[(task.project.name, "/"), (task.name, task_url(task)), ("decisions", "")],
    )


def _location(item: dict[str, Any]) -> str:
    loc = item.get("location")
    if not isinstance(loc, dict):
        return ""
    return (
        f'<p class="location"><code>{esc(loc.get("file"))}:{esc(loc.get("start"))}-'
        f"{esc(loc.get('end'))}</code></p>"
    )


def _list(cls: str, label: str, values: object) -> str:
    if not isinstance(values, list) or not values:
        return ""
    items = "".join(f"<li>{esc(v)}</li>" for v in values)
    return f'<div class="{cls}"><b>{label}</b><ul>{items}</ul></div>'


def _option(ident: int, option: dict[str, Any], chosen: str | None, recommend: str | None) -> str:
    value = str(option.get("value"))
    checked = " checked" if value == chosen else ""
    score = option.get("score")
    score_html = f'<span class="score">{esc(score)}</span>' if score is not None else ""
    rec = ' <span class="badge rec">recommended</span>' if value == recommend else ""
    return (
        f'<label class="option{" recommended" if value == recommend else ""}">'
        f'<input type="radio" name="chosen-{ident}" value="{esc(value)}"{checked}> '
        f"<b>{esc(option.get('label'))}</b> <code>{esc(value)}</code>{rec} {score_html}"
        f"{_list('pros', 'pros', option.get('pros'))}{_list('cons', 'cons', option.get('cons'))}"
        "</label>"
    )


def _item(item: dict[str, Any], form: dict[str, str]) -> str:
    ident = int(item["id"])
    recommend = item.get("recommend")
    chosen = form.get(f"chosen-{ident}", recommend)
    options = "".join(_option(ident, o, chosen, recommend) for o in item.get("options", []))
    context = f'<p class="context">{esc(item["context"])}</p>' if item.get("context") else ""
    note = esc(form.get(f"note-{ident}", ""))
    return (
        f'<fieldset class="decide-item" id="item-{ident}"><legend>{ident}. '
        f"{esc(item.get('title'))}</legend>{_location(item)}{context}"
        f'<div class="options">{options}</div><label class="wide">note <input '
        f'name="note-{ident}" value="{note}" size="60" placeholder="optional"></label>'
        "</fieldset>"
    )


def _pending_html(task: Task, waiting: dict[str, Any], csrf: str, form: dict[str, str]) -> str:
    meta = waiting.get("_meta", {})
    sid = str(meta.get("session_id", ""))
    items = [i for i in waiting.get("items", []) if isinstance(i, dict)]
    hidden = (
        f'<input type="hidden" name="{CSRF_FIELD}" value="{esc(csrf)}">'
        f'<input type="hidden" name="session" value="{esc(sid)}">'
    )
    head = (
        f"<h2>Waiting for you: {plural(len(items), 'question')} <small>decision "
        f"{esc(sid)}, asked {when(str(meta.get('created_at', '')))}</small></h2>"
        f'<p class="meta">{esc(waiting.get("task", ""))} · from '
        f"<code>{esc(waiting.get('source', ''))}</code></p>"
    )
    return (
        f'<section class="pending">{head}<form method="post" class="decide" '
        f'action="{esc(task_url(task, "/decisions/answer"))}">{hidden}'
        f"{''.join(_item(i, form) for i in items)}"
        '<button type="submit">Answer</button></form></section>'
    )


def _past_html(task: Task) -> str:
    done = decide.sessions(task)
    if not done:
        return "<h2>Answered</h2><p class=empty>No decision answered yet.</p>"
    rows = []
    for sid in reversed(done[-PAST_SHOWN:]):
        try:
            rec = decide.record(task, sid)
        except BarError as exc:
            rows.append(f'<li><code>{esc(sid)}</code> <span class="bad">{esc(exc)}</span></li>')
            continue
        items = {i.get("id"): i for i in rec.get("input", {}).get("items", [])}
        chosen = []
        for d in rec.get("output", {}).get("decisions", []):
            item = items.get(d.get("id"), {})
            labels = {o.get("value"): o.get("label") for o in item.get("options", [])}
            off = (
                ' <span class="badge">not the recommendation</span>'
                if item.get("recommend") not in (None, d.get("chosen"))
                else ""
            )
            note = f' <q class="note">{esc(d["note"])}</q>' if d.get("note") else ""
            chosen.append(
                f"<li>{esc(item.get('title', d.get('id')))}: <b>{esc(labels.get(d.get('chosen'), ''))}"
                f"</b> <code>{esc(d.get('chosen'))}</code>{off}{note}</li>"
            )
        rows.append(
            f'<li class="answered" data-session="{esc(sid)}"><code>{esc(sid)}</code> '
            f"{esc(rec.get('input', {}).get('task', ''))} <small>answered "
            f"{when(str(rec.get('completed_at', '')))}</small><ul>{''.join(chosen)}</ul></li>"
        )
    more = f" <small>(the {PAST_SHOWN} newest)</small>" if len(done) > PAST_SHOWN else ""
    return f'<h2>Answered{more}</h2><ul class="past">{"".join(rows)}</ul>'


def decisions_page(
    task: Task,
    csrf: str,
    *,
    form: dict[str, str] | None = None,
    error: BarError | None = None,
    done: str = "",
) -> str:
    from bar.ui.pages import error_html

    waiting = orders.pending_decision(task)
    parts = ["<h1>Decisions</h1>"]
    if done:
        parts.append(f'<p class="done" role="status">{esc(done)}</p>')
    if error is not None:
        parts.append(error_html(error))
    if waiting is not None:
        parts.append(_pending_html(task, waiting, csrf, form or {}))
    elif not done:
        parts.append(
            "<p class=empty>Nothing is waiting for an answer: an agent asks with "
            "<code>bar decide submit</code>.</p>"
        )
    parts.append(_past_html(task))
    return _page(task, "".join(parts), csrf)


def answers_of(task: Task, form: dict[str, str]) -> list[dict[str, Any]]:
    """The form's choices as a DecideOutput's list (checked by ``decide`` when answered)."""
    waiting = orders.pending_decision(task) or {}
    decisions: list[dict[str, Any]] = []
    for item in waiting.get("items", []):
        if not isinstance(item, dict):
            continue
        ident = item.get("id")
        if f"chosen-{ident}" not in form:
            continue  # decide says which item is not answered
        note = form.get(f"note-{ident}", "").strip()
        decisions.append(
            {"id": ident, "chosen": form[f"chosen-{ident}"], **({"note": note} if note else {})}
        )
    return decisions


def answer(task: Task, form: dict[str, str], csrf: str) -> str:
    """Answer the pending decision the form showed; the page again, saying what was done."""
    done = orders.decide_answered(
        task, answers_of(task, form), session_id=form.get("session") or None, wait=False
    )
    text = f"Answered decision {done['session_id']}."
    step = done.get("step")
    if isinstance(step, dict):
        text += f" Recorded as step {step.get('step_id')}."
    elif done.get("on_workers"):
        text += " Sent to the agent on its worker; the step there records it."
    elif done.get("queued"):
        text += " A step is running: the decision step is recorded when it ends."
    return decisions_page(task, csrf, done=text)


def failed(task: Task, form: dict[str, str], csrf: str, error: BarError) -> str:
    return decisions_page(task, csrf, form=form, error=error)
