"""The HTML of a step (or checkpoint) and of a comparison between two states.

A patch is listed file by file with its stats; each file's diff is fetched by the page
when the file is opened or scrolled into view (``data-src``), so a patch of thousands of
files shows at once. Binary files, renames and mode changes are said in words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bar.base.cmdline import line_of
from bar.model.records import ApplyStep, RollbackStep, RunStep, Step, SyncStep
from bar.model.tasks import Task
from bar.ui import conversation, patch_pages, views
from bar.ui.calls import Call, pair
from bar.ui.pages import (
    call_item,
    describe,
    duration,
    esc,
    layout,
    plural,
    query,
    result,
    short,
    stat_text,
    task_url,
    when,
)

if TYPE_CHECKING:
    from bar.history.checkpoints import Checkpoint
    from bar.step.live import LiveStep

# files opened (their diffs fetched as they come into view) on a page of at most this many
OPEN_UP_TO = 50


def file_list(index: patch_pages.PatchIndex, src: str) -> str:
    """The files of a patch; ``src``: the URL a file's diff is fetched from, ``{n}`` standing
    for its number."""
    if not index.files:
        return "<p class=empty>No changes.</p>"
    opened = " open" if len(index.files) <= OPEN_UP_TO else ""
    items = []
    for i, f in enumerate(index.files):
        name = esc(f.path)
        if f.old_path and f.old_path != f.path:
            name = f"{esc(f.old_path)} → {name}"
        notes = [f.status] if f.status != "modified" else []
        if f.binary:
            notes.append("binary")
        if f.mode_text:
            notes.append(f"mode {f.mode_text}")
        note = "".join(f'<span class="badge">{esc(n)}</span>' for n in notes)
        body = (
            '<p class="plain">Binary file: its contents are not shown.</p>'
            if f.binary
            else f'<div class="diff" data-src="{esc(src.replace("{n}", str(i)))}"><p class="loading">'
            "diff loads when shown</p></div>"
        )
        items.append(
            f'<details class="file" data-path="{esc(f.path)}"{opened}><summary>'
            f'<span class="path">{name}</span> {note} <span class="add">+{f.additions}</span>'
            f' <span class="del">-{f.deletions}</span></summary>{body}</details>'
        )
    total = (
        f'<p class="meta">{plural(len(index.files), "file")}, <span class="add">+{index.additions}'
        f'</span> <span class="del">-{index.deletions}</span></p>'
    )
    toggle = (
        '<div class="view-toggle" role="group" aria-label="diff layout">'
        '<button type="button" data-format="line-by-line" aria-pressed="true">unified</button>'
        '<button type="button" data-format="side-by-side" aria-pressed="false">side by side'
        "</button></div>"
    )
    return f'{toggle}{total}<div class="files">{"".join(items)}</div>'


def _rows(rows: list[tuple[str, str]]) -> str:
    return (
        "<table class=facts>"
        + "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
        + "</table>"
    )


def step_page(task: Task, step: Step, csrf: str) -> str:
    _, cls = result(step)
    taken = views.checkpoints_of(task, step)
    calls = [Call(cp) for cp in taken]
    rows: list[tuple[str, str]] = [
        ("kind", esc(step.kind)),
        ("started", when(step.started_at)),
        ("duration", esc(duration(step.duration_ms))),
    ]
    if isinstance(step, RunStep):
        rows += [
            ("command", f"<code>{esc(line_of(step.cmd))}</code>"),
            ("cwd", esc(step.cwd)),
            ("result", f'<span class="{cls}">{esc(step.ending.text)}</span>'),
        ]
        if step.pty:
            rows.append(("terminal", "interactive (pty)"))
        own, calls = pair(step.policy_events, taken)  # (its agent's calls: listed below)
        for event in own:
            blocked = " blocked" if event.action == "block" else ""
            where = " <small>(as it ran)</small>" if event.source == "exec" else ""
            rows.append(
                (
                    "policy",
                    f'<span class="policy{blocked}"><b>{esc(event.action)}</b> '
                    f"{esc(event.rule or '(no rule)')}: <code>{esc(event.matched)}</code>"
                    f"{where}</span>",
                )
            )
        for hook in step.hooks:
            rows.append(
                ("hook", f"{esc(hook.phase)} <code>{esc(hook.cmd)}</code> exit {hook.exit_code}")
            )
    else:
        rows.append(("what", f"<code>{esc(describe(step, task))}</code>"))
    if isinstance(step, ApplyStep):
        rows += [("target", esc(step.target_branch)), ("commit", esc(step.commit_sha))]
    if isinstance(step, SyncStep | RollbackStep) and step.base_after:
        rows.append(("base", f"{short(step.base_before)} → {short(step.base_after)}"))
    rows.append(("changes", esc(stat_text(step.diff_stat))))
    rows.append(("snapshot", f"{short(step.snapshot_before)} → {short(step.snapshot)}"))
    parts = [
        f"<h1>Step {esc(step.step_id)} <small>{esc(step.kind)}</small></h1>",
        _step_nav(task, step),
        _rows(rows),
    ]
    if step.snapshot:
        back = task_url(task, f"/actions?to={step.step_id}")
        parts.append(f'<p><a class="button" href="{esc(back)}">Roll back to this step…</a></p>')
    if calls:
        items = "".join(call_item(task, c) for c in calls)
        parts.append(
            f'<h2 id="calls">Calls <small>{esc(plural(len(calls), "call"))}, each with the '
            f'policy\'s decision and its checkpoint</small></h2><ol class="calls">{items}</ol>'
        )
    summary, events = views.session(task, step) if isinstance(step, RunStep) else (None, [])
    if summary is not None or events:
        parts.append(conversation.section(task, step, summary, events, taken))
    connections = step.extra.get("network") if isinstance(step, RunStep) else None
    if isinstance(connections, list) and connections:
        parts.append(_network_section(connections))
    index = views.patch_of(task, step.artifacts.patch)
    parts.append(
        "<h2>Patch</h2>" + file_list(index, task_url(task, f"/s/{step.step_id}/file/{{n}}"))
    )
    if step.artifacts.cast:
        name = step.artifacts.cast.removeprefix("artifacts/")
        parts.append(
            '<h2>Terminal</h2><div class="cast" id="cast" '
            f'data-src="{esc(task_url(task, "/artifacts/" + name))}"><p class="plain">'
            "The terminal player needs the page's libraries (make ui-assets).</p></div>"
        )
    if step.artifacts.output or step.artifacts.cast:
        out, cut = views.output_of(task, step)
        name = f"{step.step_id}.output"  # (an earlier bar's pty step: derived, app.artifact)
        more = (
            f'<p class="meta">Only the first part is shown: <a href="'
            f'{esc(task_url(task, "/artifacts/" + name))}">the whole output</a>.</p>'
            if cut
            else ""
        )
        parts.append(f'<h2>Output</h2>{more}<pre class="output" data-ansi>{esc(_plain(out))}</pre>')
    return layout(
        f"{task.name}: step {step.step_id}",
        "".join(parts),
        csrf=csrf,
        task=task,
        crumbs=[
            (task.project.name, "/"),
            (task.name, task_url(task)),
            (f"step {step.step_id}", ""),
        ],
    )


def live_page(task: Task, live: LiveStep, csrf: str) -> str:
    """The page of a step not recorded yet: what it runs, its checkpoints and output so
    far; while it runs, the page's script follows it (``…/s/STEP/live``, server-sent
    events) and loads the step's recorded page once it ends."""
    seen = views.glance(task, live.step_id)
    if seen.recorded is not None:  # (it ended meanwhile)
        return step_page(task, seen.recorded, csrf)
    state = {
        "running": "running (pid {pid}): not recorded yet",
        "recording": "the command ended (exit {code}); bar is recording the step",
        "interrupted": "interrupted: {left}; not recorded yet",
    }[live.state].format(pid=live.pid, code=live.exit_code, left=live.left())
    rows: list[tuple[str, str]] = [
        ("kind", "run"),
        ("started", when(live.started_at)),
        (
            "running for",
            f'<span class="elapsed" data-since="{esc(live.started_at)}">'
            f"{esc(duration(live.running_ms()))}</span>",
        ),
        ("command", f"<code>{esc(line_of(live.cmd))}</code>"),
        ("cwd", esc(live.cwd)),
        ("state", f'<span class="live-state {esc(live.state)}">{esc(state)}</span>'),
    ]
    if live.pty:
        rows.append(("terminal", "interactive (pty)"))
    if isinstance(live.agent, dict) and live.agent.get("name"):
        rows.append(("agent", esc(str(live.agent["name"]))))
    items = "".join(live_call(task, cp) for cp in seen.checkpoints)
    if live.state == "interrupted":
        said = (
            '<p class="live-note lost">The step is not recorded yet: the next command that '
            "changes the task records it, with what it printed and changed until then "
            "(<code>bar doctor --repair</code> does it now).</p>"
        )
        follow = ""
    else:
        said = (
            '<p class="live-note">The page follows the step as it runs, and shows its record '
            "when it ends.</p>"
        )
        follow = (
            f' data-live="{esc(task_url(task, f"/s/{live.step_id}/live"))}" data-mark="{seen.mark}"'
        )
    if seen.cut:
        said += cut_note(task, live.step_id)
    stdout = esc(_plain(seen.stdout.decode("utf-8", "replace")))
    stderr = esc(_plain(seen.stderr.decode("utf-8", "replace")))
    body = (
        f"<h1>Step {esc(live.step_id)} <small>run</small></h1>{_rows(rows)}{said}"
        f'<div id="live-step"{follow}>'
        # (a step without an agent makes none: the section shows when one comes)
        f'<section id="live-tools"{"" if items or live.agent else " hidden"}><h2>Calls '
        '<small>so far, each with its checkpoint</small></h2><ol class="calls" '
        f'id="live-checkpoints">{items}</ol></section>'
        '<h2>Output</h2><pre class="output live" id="live-output">'
        f'<span data-stream="stdout">=== STDOUT ===\n{stdout}</span>'
        f'<span data-stream="stderr">{"" if stdout.endswith(chr(10)) or not stdout else chr(10)}'
        f"=== STDERR ===\n{stderr}</span></pre></div>"
    )
    return layout(
        f"{task.name}: step {live.step_id} ({live.state})",
        body,
        csrf=csrf,
        task=task,
        crumbs=[
            (task.project.name, "/"),
            (task.name, task_url(task)),
            (f"step {live.step_id}", ""),
        ],
    )


def live_call(task: Task, cp: Checkpoint) -> str:
    """A tool call of a running step's agent, as its checkpoint came (``call_item``, the
    timeline's and the recorded page's row of a call)."""
    return call_item(task, Call(cp))


def cut_note(task: Task, step_id: str) -> str:
    """What a running step's page says of an output longer than it shows."""
    href = task_url(task, f"/artifacts/{step_id}.output")
    return (
        '<p class="meta cut">The output is long: only its first part is shown here, and '
        f'it goes on in <a href="{esc(href)}">the output file</a>.</p>'
    )


_CONNECTIONS_SHOWN = 200


def _network_section(connections: list[Any]) -> str:
    """The step's connections (``network``): a table, refused ones marked."""
    entries = [c for c in connections if isinstance(c, dict)]
    refused = sum(1 for c in entries if not c.get("allowed"))
    rows = []
    for c in entries[:_CONNECTIONS_SHOWN]:
        if not c.get("allowed"):
            fate = '<span class="policy blocked"><b>refused</b></span>'
        elif c.get("error"):
            fate = f"failed: {esc(str(c.get('error')))}"
        else:
            fate = "allowed"
        rows.append(
            f"<tr><td><code>{esc(str(c.get('host')))}:{esc(str(c.get('port')))}</code></td>"
            f"<td>{fate}</td><td>{int(c.get('bytes_out') or 0)}</td>"
            f"<td>{int(c.get('bytes_in') or 0)}</td><td>{esc(str(c.get('via', '')))}</td>"
            f"<td>{when(str(c.get('started_at', '')))}</td></tr>"
        )
    more = len(entries) - _CONNECTIONS_SHOWN
    note = f'<p class="meta">{more} more in the step\'s record.</p>' if more > 0 else ""
    said = f"{len(entries)} connection(s)" + (f", {refused} refused" if refused else "")
    return (
        f'<h2>Network</h2><p class="meta">{esc(said)}</p><table class="facts network">'
        "<tr><th>host</th><th>what bar did</th><th>bytes out</th><th>bytes in</th>"
        f"<th>via</th><th>started</th></tr>{''.join(rows)}</table>{note}"
    )


def _step_nav(task: Task, step: Step) -> str:
    """Links to the step before and the step after (the first step has none before it, the
    last none after), each with the key that follows it (``p``, ``n``: ``static/ui.js``)."""
    before, after = views.neighbours(task, step)
    return _nav(task, "step", before, after, "steps")


def _nav(task: Task, word: str, before: str | None, after: str | None, label: str) -> str:
    links = []
    if before is not None:
        links.append(
            f'<a href="{esc(task_url(task, "/s/" + before))}" rel="prev" aria-keyshortcuts="p"'
            f' aria-label="previous: {word} {esc(before)}" title="previous {word} (key p)">'
            f'<span aria-hidden="true">← </span>{word} {esc(before)}</a>'
        )
    if after is not None:
        links.append(
            f'<a href="{esc(task_url(task, "/s/" + after))}" rel="next" aria-keyshortcuts="n"'
            f' aria-label="next: {word} {esc(after)}" title="next {word} (key n)">'
            f'{word} {esc(after)}<span aria-hidden="true"> →</span></a>'
        )
    if not links:
        return ""
    return f'<nav class="step-nav" aria-label="{esc(label)}">{"".join(links)}</nav>'


def _checkpoint_nav(task: Task, cp: Checkpoint) -> str:
    """Links to the checkpoint before and the one after in the same step (the first has
    none before it, the last none after: its step's page, linked in the title, has the
    whole), with the keys ``p`` and ``n`` as on a step's page."""
    names = [c.name for c in views.checkpoints_in(task, cp.step_id)]
    at = names.index(cp.name) if cp.name in names else -1
    before = names[at - 1] if at > 0 else None
    after = names[at + 1] if 0 <= at < len(names) - 1 else None
    return _nav(task, "checkpoint", before, after, f"checkpoints of step {cp.step_id}")


def _plain(text: str) -> str:
    """Without the colour library, escapes are noise: strip them."""
    from bar.ui import assets

    if assets.present():
        return text
    from bar.terminal.text import clean_text

    return clean_text(text.encode("utf-8", "replace"))


def _said(verified: bool | None) -> str:
    return "-" if verified is None else "yes" if verified else "no: unverified"


def _call_link(task: Task, cp: Checkpoint) -> str:
    """The agent's call that made the checkpoint, in its step's conversation."""
    if not cp.call_id:
        return "-"
    href = task_url(task, f"/s/{cp.step_id}#call-{cp.call_id}")
    return f'<a href="{esc(href)}"><code>{esc(cp.call_id)}</code></a>'


def checkpoint_page(task: Task, cp: Checkpoint, csrf: str) -> str:
    rows: list[tuple[str, str]] = [
        ("kind", esc(cp.kind)),
        ("tool", esc(cp.tool or "-")),
        ("what", f"<code>{esc(cp.target_text)}</code>"),
        ("policy", esc(cp.decision or "-")),
        ("in the agent's transcript", _said(cp.verified)),
        ("call", _call_link(task, cp)),
        ("ended", when(cp.ended_at)),
        ("changes", esc(stat_text(cp.diff_stat))),
        ("snapshot", f"{short(cp.snapshot_before)} → {short(cp.snapshot)}"),
    ]
    step_link = task_url(task, f"/s/{cp.step_id}")
    back = task_url(task, f"/actions?to={cp.name}")
    index = views.patch_of(task, cp.patch)
    body = (
        f'<h1>Checkpoint {esc(cp.name)} <small>of <a href="{esc(step_link)}">step '
        f"{esc(cp.step_id)}</a></small></h1>{_checkpoint_nav(task, cp)}{_rows(rows)}"
        f'<p><a class="button" href="{esc(back)}">Roll back to this checkpoint…</a></p>'
        f"<h2>Patch</h2>{file_list(index, task_url(task, f'/s/{cp.name}/file/{{n}}'))}"
    )
    return layout(
        f"{task.name}: checkpoint {cp.name}",
        body,
        csrf=csrf,
        task=task,
        crumbs=[
            (task.project.name, "/"),
            (task.name, task_url(task)),
            (f"checkpoint {cp.name}", ""),
        ],
    )


def state_picker(task: Task, name: str, value: str) -> str:
    options = "".join(f'<option value="{esc(s)}">' for s in views.states(task))
    return (
        f'<input name="{esc(name)}" value="{esc(value)}" list="states-{esc(name)}" '
        f'size="10" placeholder="base, 3, 3.2"><datalist id="states-{esc(name)}">'
        f"{options}</datalist>"
    )


def compare_page(task: Task, start: str, end: str, csrf: str) -> str:
    form = (
        f'<form class="compare" method="get" action="{esc(task_url(task, "/compare"))}">'
        f"<label>from {state_picker(task, 'from', start or 'base')}</label> "
        f"<label>to {state_picker(task, 'to', end)}</label> "
        '<button type="submit">Compare</button> <small>states: <code>base</code>, a step '
        "(<code>3</code>), a checkpoint (<code>3.2</code>); an empty “to” is the last "
        "recorded state</small></form>"
    )
    diff, index = views.compare(task, start, end)
    src = task_url(task, "/compare/file?" + query(**{"from": start or "base", "to": end}))
    src += "&n={n}"
    title = f'<p class="meta">{short(diff.from_commit)} → {short(diff.to_commit)}</p>'
    body = f"<h1>Compare</h1>{form}{title}{file_list(index, src)}"
    return layout(
        f"{task.name}: compare",
        body,
        csrf=csrf,
        task=task,
        current="/compare",
        crumbs=[(task.project.name, "/"), (task.name, task_url(task)), ("compare", "")],
    )
