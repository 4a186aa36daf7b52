"""The HTML of an agent's conversation in a step (docs/sessions.md), beside its checkpoints.

Every event is the agent's (or the model's) text and is escaped like any other value.
The list is written server-side in one plain ``<ol>``, one item an event, so a session of
thousands of events costs the page no script: each text is cut (``TEXT_SHOWN``...) with a
link to the whole of it (``/s/STEP/session/N``, plain text, which ``static/ui.js`` puts
in place), and past ``EVENTS_SHOWN`` items the rest is left to the session's file. A tool
call carries its result (``ok``, ``exit N``, ``interrupted``, ``failed``; a long output's
first lines and its last) and, when it changed files, a link to its checkpoint's page,
where its diff is; each checkpoint beside the list links back to its call. The token counts (``pages.tokens_text``, shared with the timeline) are written
whole: the page has room for them. Token counts per answer are not listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bar import api
from bar.ui.pages import (
    cost_text,
    count,
    esc,
    plural,
    stat_text,
    task_url,
    tokens_text,
    when,
)

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.model.records import Step
    from bar.model.tasks import Task

TEXT_SHOWN = 1500  # characters of a prompt or a reply shown in the list
INPUT_SHOWN = 200  # of a tool call's input
RESULT_SHOWN = 300  # of a tool result
RESULT_LINES = 5  # of its lines, and its last
EVENTS_SHOWN = 5000  # items listed; the rest is in the session's file
# the argument that says best what a call does, for the tools that name one


def section(
    task: Task,
    step: Step,
    summary: dict[str, Any] | None,
    events: list[dict[str, Any]],
    taken: list[Checkpoint],
) -> str:
    """The step's conversation beside its checkpoints: the summary, the events, and the
    checkpoints each linked to the page with its diff and to its call in the list."""
    calls = {str(e.get("id")) for e in events if e.get("type") == "tool_call" and e.get("id")}
    side = ""
    if taken:
        items = "".join(_checkpoint(task, cp, calls) for cp in taken)
        side = (
            '<aside class="session-checkpoints"><h3>Checkpoints</h3>'
            f"<ol class=checkpoints>{items}</ol></aside>"
        )
    body = _facts(task, summary, step) + _events(task, step, events, taken)
    return (
        '<h2 id="conversation">Conversation</h2>'
        f'<div class="session"><section class="conversation">{body}</section>{side}</div>'
    )


def _facts(task: Task, summary: dict[str, Any] | None, step: Step) -> str:
    if summary is None:
        return '<p class="meta">This step kept the conversation but not its summary.</p>'
    rows: list[tuple[str, str]] = []
    agent = " ".join(str(v) for v in (summary.get("agent"), summary.get("agent_version")) if v)
    rows.append(("agent", esc(agent or "-")))
    rows.append(("model", f"<code>{esc(summary.get('model') or '-')}</code>"))
    said = f"<code>{esc(summary.get('session_id') or '-')}</code>"
    if summary.get("resumed_from"):
        back = str(summary["resumed_from"])
        said += (
            f' <span class="meta">resumed from <a href="{esc(task_url(task, "/s/" + back))}">'
            f"step {esc(back)}</a></span>"
        )
    rows.append(("session", said))
    counts = [
        plural(count(summary.get("turns")), "turn"),
        plural(count(summary.get("tool_calls")), "tool call"),
    ]
    for key, word in (("subagents", "subagent"), ("interrupts", "interrupt")):
        if count(summary.get(key)):
            counts.append(plural(count(summary.get(key)), word))
    rows.append(("turns", esc(", ".join(counts))))
    rows.append(("tokens", esc(tokens_text(summary))))
    cost = cost_text(summary)
    rows.append(
        (
            "cost",
            esc(cost)
            if cost
            else '<span class="meta">unknown: agents.prices in config.yaml has no price '
            "for its model</span>",
        )
    )
    gone = summary.get("abandoned")
    if isinstance(gone, dict) and count(gone.get("turns")):
        paid = [tokens_text(gone), *(c for c in [cost_text(gone)] if c)]
        rows.append(
            (
                "abandoned",
                esc(f"{plural(count(gone.get('turns')), 'answer')}: {', '.join(paid)}")
                + ' <span class="meta">on branches the conversation left (a rewind): paid '
                "for, not listed below</span>",
            )
        )
    notes = []
    if count(summary.get("unknown")):
        notes.append(f"{plural(count(summary['unknown']), 'line')} of a kind bar does not know")
    if count(summary.get("unreadable_lines")):
        notes.append(f"{plural(count(summary['unreadable_lines']), 'line')} not readable")
    if summary.get("truncated"):
        notes.append("the transcript was too long to read whole")
    if notes:
        rows.append(("transcript", esc("; ".join(notes))))
    if step.artifacts.session:
        name = step.artifacts.session.removeprefix("artifacts/")
        rows.append(
            (
                "file",
                f'<a href="{esc(task_url(task, "/artifacts/" + name))}">{esc(name)}</a>',
            )
        )
    return (
        '<table class="facts session-facts">'
        + "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
        + "</table>"
    )


def _checkpoint(task: Task, cp: Checkpoint, calls: set[str]) -> str:
    call = (
        f' <a class="to-call" href="#call-{esc(cp.call_id)}">the call</a>'
        if cp.call_id and cp.call_id in calls
        else ""
    )
    return (
        f'<li id="cp-{esc(cp.name)}"><a href="{esc(task_url(task, "/s/" + cp.name))}">'
        f"{esc(cp.name)}</a> {esc(cp.tool or cp.kind)} <code>{esc(cp.target_text)}</code> "
        f"<span class=stat>{esc(stat_text(cp.diff_stat))}</span>{call}</li>"
    )


def _events(task: Task, step: Step, events: list[dict[str, Any]], taken: list[Checkpoint]) -> str:
    if not events:
        return "<p class=empty>No event of the conversation was kept.</p>"
    more = task_url(task, f"/s/{step.step_id}/session/")
    results: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.get("type") == "tool_result" and e.get("id"):
            results.setdefault(str(e["id"]), i)
    paired: set[int] = set()
    calls = {str(e["id"]) for e in events if e.get("type") == "tool_call" and e.get("id")}
    kinds = {
        str(e.get("agent_id")): str(e.get("agent_type") or "subagent")
        for e in events
        if e.get("type") == "subagent"
    }
    checkpoints = {cp.name: cp for cp in taken}
    items: list[str] = []
    left = 0
    for i, e in enumerate(events):
        kind = e.get("type")
        if kind in ("usage", "unknown") or (kind == "tool_result" and i in paired):
            continue  # counted in the summary; a result is shown with its call
        if len(items) >= EVENTS_SHOWN:
            left += 1
            continue
        if kind == "tool_call":
            found = results.get(str(e.get("id") or ""))
            result = events[found] if found is not None and found > i else None
            if result is not None and found is not None:
                paired.add(found)
            item = _call(e, i, result, found, more, task, checkpoints)
        elif kind == "tool_result":
            item = _result(e, i, more, "result")
        elif kind == "message":
            role = "prompt" if e.get("role") == "user" else "reply"
            item = (
                f'<span class="who">{role}</span>'
                f"{_cut(str(e.get('text', '')), TEXT_SHOWN, more + str(i), 'text')}"
            )
        elif kind == "interrupt":
            item = '<span class="who">interrupted</span> the person stopped the agent'
        elif kind == "subagent":
            parent = str(e.get("parent_call") or "")
            by = f' for <a href="#call-{esc(parent)}">its call</a>' if parent in calls else ""
            item = (
                f'<span class="who">subagent</span> <b>{esc(e.get("agent_type") or "?")}</b> '
                f"started{by}"
            )
        else:
            item = f'<span class="who">{esc(kind)}</span>'
        items.append(_item(e, i, str(kind), item, kinds))
    rest = ""
    if left:
        rest = (
            f'<p class="meta">{plural(left, "more event")} not listed: the whole conversation '
            "is in the session's file (above).</p>"
        )
    return f'<ol class="events">{"".join(items)}</ol>{rest}'


def _item(e: dict[str, Any], i: int, kind: str, inner: str, kinds: dict[str, str]) -> str:
    classes = [kind]
    if kind == "message":
        classes.append("user" if e.get("role") == "user" else "assistant")
    agent = e.get("agent_id")
    badge = ""
    if agent:
        classes.append("sub")
        kind_of = kinds.get(str(agent), "subagent")
        badge = f'<span class="badge agent" title="{esc(agent)}">{esc(kind_of)}</span>'
    ident = f' id="call-{esc(e.get("id"))}"' if kind == "tool_call" and e.get("id") else ""
    at = e.get("at")
    stamp = _clock(at) if isinstance(at, str) and at else ""
    return f'<li class="{esc(" ".join(classes))}" data-n="{i}"{ident}>{stamp}{badge}{inner}</li>'


def _clock(iso: str) -> str:
    """When the event was, as every time on the pages is ("3 min ago", the exact time in
    its title: ``pages.when``)."""
    return when(iso)


def _call(
    e: dict[str, Any],
    i: int,
    result: dict[str, Any] | None,
    at: int | None,
    more: str,
    task: Task,
    checkpoints: dict[str, Checkpoint],
) -> str:
    name = esc(e.get("name") or "?")
    cp_name = e.get("checkpoint")
    if isinstance(cp_name, str) and cp_name:
        href = esc(task_url(task, "/s/" + cp_name))
        cp = checkpoints.get(cp_name)
        stat = f" {esc(stat_text(cp.diff_stat))}" if cp is not None else ""
        head = (
            f'<a class="tool" href="{href}" title="the diff of checkpoint {esc(cp_name)}">'
            f'{name}</a> <a class="checkpoint" href="{href}">→ {esc(cp_name)}</a>'
            f'<span class="stat">{stat}</span>'
        )
    else:
        head = f'<b class="tool">{name}</b>'
    args = api.call_target(task, e.get("input"))
    shown = _cut(args, INPUT_SHOWN, more + str(i), "input", tag="code")
    if "data-more" not in shown and isinstance(e.get("input"), dict) and len(e["input"]) > 1:
        shown += f' <a class="more" href="{esc(more + str(i))}" data-more>all of its input</a>'
    out = f'<span class="who">tool</span>{head} {shown}'
    if result is not None and at is not None:
        out += _result(result, at, more, "")
    else:
        out += ' <span class="result none">no result</span>'
    return out


def _result(e: dict[str, Any], i: int, more: str, label: str) -> str:
    """A tool's result: its status (``ok``, ``exit 2``, ``interrupted``, ``failed``) and
    its output, the first lines and the last when it is long (a test run's verdict)."""
    word = api.result_status(e)
    who = f'<span class="who">{esc(label)}</span>' if label else ""
    text = str(e.get("summary") or "")
    shown = "\n".join(api.output_preview(text, RESULT_LINES))
    body = ""
    if shown and shown != text.strip():
        body = (
            f'<div class="summary" data-cut>{esc(shown)}</div><a class="more" '
            f'href="{esc(more + str(i))}" data-more>the whole ({len(text):,} characters)</a>'
        )
    elif text.strip():
        body = _cut(text, RESULT_SHOWN, more + str(i), "summary")
    return (
        f'{who}<div class="result {"ok" if word == "ok" else "bad"}"><b>{esc(word)}</b>{body}</div>'
    )


def _cut(text: str, limit: int, href: str, cls: str, *, tag: str = "div") -> str:
    """``text`` escaped in a ``tag``, cut at ``limit`` characters with a link to all of it."""
    if len(text) <= limit:
        return f'<{tag} class="{cls}">{esc(text)}</{tag}>'
    return (
        f'<{tag} class="{cls}" data-cut>{esc(text[:limit])}…</{tag}>'
        f'<a class="more" href="{esc(href)}" data-more>the whole '
        f"({len(text):,} characters)</a>"
    )
