"""Rollback, apply and undo from the page: a preview first, then a confirmation.

The preview is what ``--dry-run`` computes (``api.plan_rollback``, ``api.apply(...,
dry_run=True)``, ``api.undo(..., dry_run=True)``). Its confirmation form carries what was
previewed (the target state's commit, the target branch's tip and the tree an apply would
make, the newest step), and the action runs only if the dry run still says the same:
another process may have recorded a step, or moved the branch, meanwhile. An error is
bar's own sentence and hint, as the command line prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bar import api
from bar.errors import ApplyConflict, BarError
from bar.history.checkpoints import Checkpoint
from bar.model.tasks import Task
from bar.ui import views
from bar.ui.filters import options
from bar.ui.pages import (
    ago,
    describe,
    error_html,
    esc,
    layout,
    plural,
    short,
    stat_text,
    task_url,
)
from bar.ui.security import CSRF_FIELD

if TYPE_CHECKING:
    from bar.changes.apply import ApplyResult

_VERB = {"A": "recreate", "M": "restore", "D": "delete", "T": "restore"}
PATCH_SHOWN = 512 * 1024  # characters of an apply's patch put in its preview


class Changed(BarError):
    """The task or the target moved between the preview and the confirmation."""


def _page(task: Task, title: str, body: str, csrf: str) -> str:
    return layout(
        f"{task.name}: {title}",
        body,
        csrf=csrf,
        task=task,
        current="/actions",
        crumbs=[(task.project.name, "/"), (task.name, task_url(task)), (title, "")],
    )


def _form(
    task: Task,
    action: str,
    csrf: str,
    fields: dict[str, str],
    inner: str,
    button: str,
    *,
    danger: bool = False,
) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">'
        for k, v in {CSRF_FIELD: csrf, **fields}.items()
    )
    cls = ' class="danger"' if danger else ""
    return (
        f'<form method="post" action="{esc(task_url(task, action))}">{hidden}{inner}'
        f"<button type=submit{cls}>{esc(button)}</button></form>"
    )


def last_step(task: Task) -> str:
    last = task.ledger.last()
    return last.step_id if last else ""


def actions_page(task: Task, csrf: str, to: str = "", error: BarError | None = None) -> str:
    states = views.recorded_states(task, describe)
    last = task.ledger.last()
    before_last = (
        f"the state before the last step ({last.step_id})" if last is not None else "the base"
    )
    rollback = _form(
        task,
        "/rollback/preview",
        csrf,
        {},
        (
            f"<label>to state {state_select(states, 'to', to, before_last)}</label> "
            '<label><input type="checkbox" name="hard" value="1"> also reset the task branch '
            "(--hard)</label> "
        ),
        "Preview rollback",
    )
    apply = _form(
        task,
        "/apply/preview",
        csrf,
        {},
        (
            '<label>mode <select name="mode"><option>commit</option><option>merge</option>'
            f"</select></label> <label>target branch {branch_select(task)}</label> "
            f"<label>state {state_select(states, 'at', '', 'the last recorded state')}</label> "
            '<label class="wide">message <input name="message" size="60" placeholder="'
            "the task's name and description\"></label> "
        ),
        "Preview apply",
    )
    undo = _form(task, "/undo/preview", csrf, {}, "", "Preview undo of the last step")
    body = (
        f"<h1>Actions</h1>{error_html(error) if error else ''}"
        "<p>Each action shows first what it would do (as <code>--dry-run</code>), then asks "
        "you to confirm.</p>"
        f'<section class="action" id="rollback"><h2>Roll back</h2>{rollback}</section>'
        f'<section class="action" id="apply"><h2>Apply</h2>{apply}</section>'
        f'<section class="action" id="undo"><h2>Undo</h2>{undo}</section>'
    )
    return _page(task, "actions", body, csrf)


SAID_SHOWN = 70  # characters of what made a state, in a picker's option


def state_select(states: list[views.State], name: str, chosen: str, default: str) -> str:
    """A list of the recorded states to pick one from (``views.recorded_states``): the
    action's default first (its value empty), each step, the checkpoints inside it
    indented under it, the base. A state asked for that is not listed (``?to=``, from a
    step's page) is listed first, as asked: bar says if it names none."""
    now = datetime.now(UTC)
    choices = [("", default)]
    names = {s.name for s in states}
    if chosen and chosen not in names and not _same_step(chosen, names):
        choices.append((chosen, f"{chosen} (as asked)"))
    for s in states:
        what = s.what if len(s.what) <= SAID_SHOWN else s.what[: SAID_SHOWN - 1] + "…"
        at = views.moment(s.at) if s.at else None
        when = f" · {ago(at, now)}" if at is not None else ""
        indent = "\u2003↳ " if s.checkpoint else ""
        choices.append((s.name, f"{indent}{s.name} · {what}{when}"))
    picked = _same_step(chosen, names) or chosen
    return f'<select name="{esc(name)}" class="state-picker">{options(choices, picked)}</select>'


def _same_step(asked: str, names: set[str]) -> str:
    """The listed name of the state ``asked`` names in another form (``3`` for ``0003``,
    ``3.2`` for ``0003.2``); empty when none is listed."""
    step, dot, n = asked.partition(".")
    if not (step.isascii() and step.isdigit()) or (dot and not (n.isascii() and n.isdigit())):
        return ""
    padded = f"{int(step):04d}" + (f".{int(n)}" if dot else "")
    return padded if padded in names else ""


def branch_select(task: Task) -> str:
    """The branches to apply to (``api.branches``), the task's base branch chosen."""
    listed = views.branches(task)
    base = task.base_ref
    choices: list[tuple[str, str]] = []
    if base not in listed:
        choices.append(("", f"the base branch ({base})"))
    else:
        choices.append((base, f"{base} (the task's base)"))
    choices += [(b, b) for b in listed if b != base]
    return f'<select name="target" class="branch-picker">{options(choices, base)}</select>'


def _done(task: Task, title: str, text: str, csrf: str) -> str:
    body = (
        f'<h1>{esc(title)}</h1><p class="done" role="status">{esc(text)}</p>'
        f'<p><a href="{esc(task_url(task))}">Back to the timeline</a></p>'
    )
    return _page(task, title.lower(), body, csrf)


def _changes(changes: Sequence[object]) -> str:
    rows = "".join(
        f"<li><b>{esc(_VERB.get(getattr(c, 'status', ''), getattr(c, 'status', '')))}</b> "
        f"<code>{esc(getattr(c, 'path', ''))}</code></li>"
        for c in changes
    )
    return f'<ul class="changes">{rows}</ul>' if rows else "<p>No file would change.</p>"


# --- rollback ----------------------------------------------------------------------


def rollback_preview(task: Task, form: dict[str, str], csrf: str) -> str:
    to, hard = form.get("to", "").strip() or None, form.get("hard") == "1"
    plan = api.plan_rollback(task, to)
    lines = [
        f"Rolling back to {plan.target.describe()} ({short(plan.target.commit)}) would "
        f"change {plural(len(plan.changes), 'path')}:"
    ]
    extra = ""
    if hard:
        extra += (
            f"<p>and reset branch <code>{esc(task.branch)}</code> to {short(plan.target.head)}</p>"
        )
    if plan.target.base and plan.target.base != task.base_commit:
        extra += f"<p>and make {short(plan.target.base)} the task's base again (as it was then)</p>"
    confirm = _form(
        task,
        "/rollback",
        csrf,
        {
            "to": to or "",
            "hard": "1" if hard else "",
            "expect": plan.target.commit,
            "last": last_step(task),
        },
        "",
        f"Confirm: roll back to {plan.target.describe()}",
        danger=True,
    )
    body = (
        f'<h1>Roll back: preview</h1><div class="preview"><p>{esc(lines[0])}</p>'
        f"{_changes(list(plan.changes))}{extra}<p class=dim>(dry run: nothing was changed)"
        f"</p></div>{confirm}"
    )
    return _page(task, "rollback preview", body, csrf)


def rollback(task: Task, form: dict[str, str], csrf: str) -> str:
    to, hard = form.get("to", "") or None, form.get("hard") == "1"
    plan = api.plan_rollback(task, to)
    if plan.target.commit != form.get("expect") or last_step(task) != form.get("last"):
        raise Changed(
            "the task changed since the preview, so nothing was rolled back",
            hint="preview the rollback again",
        )
    step = api.rollback(task, to, hard=hard, wait=False)
    if isinstance(step, Checkpoint):
        text = (
            f"Rolled back to {step.target} inside the running step {step.step_id}: "
            f"{plural(step.diff_stat.files, 'file')} changed (checkpoint {step.name})."
        )
    else:
        text = (
            f"Rolled back to {step.target_text}: {plural(step.diff_stat.files, 'file')} "
            f"changed (step {step.step_id}). Undo it from Actions (bar undo)."
        )
    return _done(task, "Rolled back", text, csrf)


# --- apply -------------------------------------------------------------------------


def _apply_args(form: dict[str, str]) -> dict[str, str | None]:
    mode = form.get("mode", "commit")
    if mode not in ("commit", "merge"):
        raise BarError(f"{mode!r} is not a mode of apply", hint="choose commit or merge")
    return {
        "mode": mode,
        "target": form.get("target", "").strip() or None,
        "message": form.get("message", "").strip() or None,
        "at": form.get("at", "").strip() or None,
    }


def _dry_apply(task: Task, args: dict[str, str | None]) -> ApplyResult:
    return api.apply(
        task,
        mode=str(args["mode"]),
        target=args["target"],
        message=args["message"],
        at=args["at"],
        dry_run=True,
    )


def apply_preview(task: Task, form: dict[str, str], csrf: str) -> str:
    args = _apply_args(form)
    try:
        result = _dry_apply(task, args)
    except ApplyConflict as exc:
        paths = "".join(f"<li><code>{esc(p)}</code></li>" for p in exc.paths)
        return _page(
            task, "apply preview", f"<h1>Apply: preview</h1>{error_html(exc)}<ul>{paths}</ul>", csrf
        )
    summary = stat_text(result.stat)
    if result.nothing_to_do:
        text = f"Nothing to apply: {result.target_branch} already has the task's changes."
        return _page(task, "apply preview", f"<h1>Apply: preview</h1><p>{esc(text)}</p>", csrf)
    parts = [
        f"<p>Applying task {esc(task.name)} to <code>{esc(result.target_branch)}</code> "
        f"({esc(result.mode)}) would change {esc(summary)}; no conflicts.</p>",
        f'<p>commit message:</p><pre class="message">{esc(result.message)}</pre>',
    ]
    if result.checkout and result.refusal is None:
        parts.append(
            f"<p>{esc(result.target_branch)} is checked out in "
            f"<code>{esc(result.checkout)}</code>; it would be updated.</p>"
        )
    if result.settings:
        parts.append(
            f"<p class=warn>This changes bar's settings for the repository: "
            f"{esc(', '.join(result.settings))}; review them below.</p>"
        )
    changes = api.apply_diff(task, result)
    patch = changes.text()
    cut = "\n[… the rest in Compare]" if len(patch) > PATCH_SHOWN else ""
    parts.append(
        f'<pre class="stat">{esc(changes.text(stat_only=True))}</pre>'
        f'<pre class="patch" data-diff>{esc(patch[:PATCH_SHOWN] + cut)}</pre>'
        "<p class=dim>(dry run: nothing was changed)</p>"
    )
    if result.refusal is not None:
        parts.append(error_html(result.refusal))
        confirm = ""
    else:
        fields = {k: v or "" for k, v in args.items()}
        fields.update(
            target=result.target_branch,
            expect_before=result.target_before,
            expect_tree=result.tree or "",
        )
        confirm = _form(
            task,
            "/apply",
            csrf,
            fields,
            "",
            f"Confirm: apply to {result.target_branch}",
            danger=True,
        )
    body = f'<h1>Apply: preview</h1><div class="preview">{"".join(parts)}</div>{confirm}'
    return _page(task, "apply preview", body, csrf)


def apply(task: Task, form: dict[str, str], csrf: str) -> str:
    args = _apply_args(form)
    result = _dry_apply(task, args)
    if result.refusal is not None:
        raise result.refusal
    if (result.target_before, result.tree or "") != (
        form.get("expect_before"),
        form.get("expect_tree"),
    ):
        raise Changed(
            f"{result.target_branch} or the task changed since the preview, so nothing was applied",
            hint="preview the apply again",
        )
    done = api.apply(
        task,
        mode=str(args["mode"]),
        target=args["target"],
        message=args["message"],
        at=args["at"],
        wait=False,
    )
    text = (
        f"Applied task {task.name} to {done.target_branch} as {short(done.commit)} "
        f"({done.mode}): {stat_text(done.stat)}."
    )
    if done.checkout:
        text += f" Updated the checkout at {done.checkout}."
    return _done(task, "Applied", text, csrf)


# --- undo --------------------------------------------------------------------------


def undo_preview(task: Task, csrf: str) -> str:
    plan, _ = api.undo(task, dry_run=True)
    if plan.unrecorded:
        head = (
            f"Your unrecorded changes ({plural(len(plan.unrecorded), 'file')}) would be "
            f"recorded as a manual step ({plan.step.step_id}) and undone:"
        )
        changes = list(plan.unrecorded)
    else:
        head = (
            f"Undo of step {plan.step.step_id} ({plan.step.kind}) would change "
            f"{plural(len(plan.changes), 'path')}:"
        )
        changes = list(plan.changes)
    confirm = _form(
        task,
        "/undo",
        csrf,
        {"expect": plan.target.commit, "last": last_step(task)},
        "",
        f"Confirm: undo step {plan.step.step_id}",
        danger=True,
    )
    body = (
        f'<h1>Undo: preview</h1><div class="preview"><p>{esc(head)}</p>'
        f"{_changes(changes)}<p class=dim>(dry run: nothing was changed)</p></div>{confirm}"
    )
    return _page(task, "undo preview", body, csrf)


def undo(task: Task, form: dict[str, str], csrf: str) -> str:
    plan, _ = api.undo(task, dry_run=True)
    if plan.target.commit != form.get("expect") or last_step(task) != form.get("last"):
        raise Changed(
            "the task changed since the preview, so nothing was undone",
            hint="preview the undo again",
        )
    plan, step = api.undo(task, wait=False)
    assert step is not None
    text = (
        f"Undid step {plan.step.step_id}: {plural(step.diff_stat.files, 'file')} changed "
        f"(step {step.step_id})."
    )
    return _done(task, "Undone", text, csrf)
