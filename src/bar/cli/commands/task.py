"""``bar task new|list|show|edit|rename|switch|close|path|reopen|delete|prune``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from bar import api
from bar.cli.render import Painter, plural, print_json, short, totals_text
from bar.errors import BarError, UsageError

if TYPE_CHECKING:
    import argparse

    from bar.changes.unapplied import Unapplied
    from bar.cli.parser import Commands
    from bar.model.project import Location
    from bar.model.tasks import Task
    from bar.task.delete import Deletion


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar task`` and its actions: their options and help (with
    the actions other modules handle: ``bar.cli.parser.TASK_ACTIONS``)."""
    from bar.cli.parser import Formatter, json_opt, on_opts, task_actions, task_ref_opts

    # --- task ---------------------------------------------------------------------
    task = sub.add_parser("task", formatter_class=Formatter)
    tsub = task.add_subparsers(dest="task_command", metavar="ACTION")
    task.set_defaults(_help=task)

    p = tsub.add_parser(
        "new",
        help="create a task with its own branch and worktree",
        formatter_class=Formatter,
        description="Create a task: a branch <prefix><name>-<id> from the base, a worktree\n"
        "for it under $BAR_HOME, and an empty ledger. The new task becomes active.\n"
        "No two open tasks share a name (a closed task's name can be used again), so\n"
        "--task NAME always finds one task.\n\n"
        "--plan puts the task on the board without a worktree (pending), for you or an\n"
        "agent or worker to take later (bar task claim, bar task start; its first\n"
        "bar run starts it too); the active task stays as it is. See docs/board.md.",
        epilog="examples:\n"
        "  bar task new fix-login\n"
        "  bar task new fix-login --base release-2.1 -d 'Fix the login redirect' --tag bug\n"
        "  bar task new fix-login --meta ticket=SHOP-142 --meta team=payments\n"
        "  bar task new ui-login --plan -d 'Login page on the new API'\n"
        "  bar task new fix-login --on builds    # its steps run on the builds workers\n"
        "  bar task new ui-login --plan --on team -d '...'   # a bar worker --claim takes it",
    )
    p.add_argument("name", help="task name: letters, digits, '-', '_', '.'; at most 64")
    p.add_argument("--base", metavar="REF", help="start from this ref (default: git.default_base)")
    p.add_argument("-d", "--description", metavar="DESC", help="what the task is for")
    p.add_argument("--tag", action="append", default=[], metavar="T", help="a tag (repeatable)")
    _meta_opt(p)
    p.add_argument(
        "--plan", action="store_true", help="plan it: pending, no worktree until it is started"
    )

    on_opts(p, detach=False)
    json_opt(p)
    p.set_defaults(_run=new)

    p = tsub.add_parser(
        "list",
        help="list tasks with their state, steps and changes",
        formatter_class=Formatter,
        description="List the open tasks (--all: closed ones too), the active one marked '*',\n"
        "each with its state, its number of steps, its changes since the base and, when\n"
        "someone claimed it, its owner:\n"
        "  pending           planned (bar task new --plan), no worktree yet\n"
        "  active            open, nothing under way\n"
        "  running           a `bar run` is recording a step of it now\n"
        "  applied           its last step applied its last recorded state (bar apply)\n"
        "  missing worktree  open, but its worktree directory is gone: `bar doctor\n"
        "                    --repair` recreates it at its last recorded state\n"
        "  closed            closed with `bar task close`\n"
        "--json gives the same as fields: state (missing-worktree with a dash; on-workers:\n"
        "its steps run on bar workers, on_workers says where), running,\n"
        "applied and worktree_missing, beside task.json's own (board: status, owner,\n"
        "worktree).",
        epilog="examples:\n"
        "  bar task list\n"
        "  bar task list --all --json\n"
        "  bar task list --pending          the planned tasks nobody started",
    )
    p.add_argument("--all", "-a", action="store_true", help="include closed tasks")
    p.add_argument("--pending", action="store_true", help="only planned tasks not started yet")
    json_opt(p)
    p.set_defaults(_run=list_)

    p = tsub.add_parser(
        "show",
        help="show one task in detail",
        formatter_class=Formatter,
        description="Show a task: status and state (see `bar task list --help`), base,\n"
        "branch, worktree, snapshots, steps and changes since the base, and what its agent\n"
        "steps add up to (turns, tool calls, tokens, cost when known). A task is named by\n"
        "its id, the first 4 or more characters of its id, or its name (an open task\n"
        "before closed ones of the same name).",
        epilog="examples:\n  bar task show\n  bar task show fix-login\n  bar task show gVXs",
    )
    task_ref_opts(p)
    json_opt(p)
    p.set_defaults(_run=show)

    p = tsub.add_parser(
        "switch",
        help="make a task the active one",
        formatter_class=Formatter,
        description="Make a task the active one: the task bar acts on (run, log, apply ...)\n"
        "when you are not inside a task's worktree and give no --task. Nothing in any\n"
        "worktree changes; inside a task's worktree, that task still comes first, and\n"
        "switching from there says so (a note on stderr). A closed task is made active\n"
        "with `bar task reopen`.",
        epilog="examples:\n"
        "  bar task switch fix-login      by name\n"
        "  bar task switch gVXs           by the first characters of its id\n"
        '  cd "$(bar task path)"          then into its worktree',
    )
    task_ref_opts(p)
    json_opt(p)
    p.set_defaults(_run=switch)

    p = tsub.add_parser(
        "close",
        help="close a task (its worktree is removed; branch and history stay)",
        formatter_class=Formatter,
        description="Close a task. Its worktree is removed unless --keep-worktree; its branch,\n"
        "ledger and snapshots are kept. Refuses when the worktree holds changes no step\n"
        "recorded, unless --force, which records them as a manual step first.\n"
        "Work no branch has yet is said (its files and steps; JSON: unapplied), with the\n"
        "bar apply command that lands it: a closed task is applied from its record.",
        epilog="examples:\n"
        "  bar task close                    the active task\n"
        "  bar task close fix-login --keep-worktree\n"
        "  bar task close --force            record hand edits as a step, then close\n"
        "  bar task close --task fix-login --keep-worktree\n"
        "  bar task reopen fix-login         changed your mind: active again",
    )
    task_ref_opts(p)
    p.add_argument("--keep-worktree", action="store_true", help="leave the worktree in place")
    p.add_argument("--force", action="store_true", help="record unrecorded changes and close")
    json_opt(p)
    p.set_defaults(_run=close)
    _edit_options(tsub)
    _rename_options(tsub)
    """``bar task path|reopen|delete|prune`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "path",
        help="print the task's worktree path (for cd)",
        formatter_class=Formatter,
        description="Print the path of the task's worktree and nothing else. If the worktree\n"
        "is gone (a closed task, or one deleted by hand), the path is still printed, but\n"
        "bar exits 1 and says how to bring it back.",
        epilog="examples:\n"
        '  cd "$(bar task path)"            into the task you are in, else the active one\n'
        '  cd "$(bar task path fix-login)"  into another task\n'
        "  bar task path --json             {task_id, name, worktree, exists}",
    )
    task_ref_opts(p)
    json_opt(p)
    p.set_defaults(_run=path)
    p = tsub.add_parser(
        "reopen",
        help="make a closed task active again (its worktree recreated)",
        formatter_class=Formatter,
        description="Reopen a closed task: it is active again and becomes the active task.\n"
        "A worktree removed on closing is recreated on the task branch at the last\n"
        "recorded state, uncommitted changes included; a kept one is used as it is.\n"
        "Refuses when the task is open, when its branch was deleted, or when an open\n"
        "task has taken its name since (one open task per name: close that one first).",
        epilog="examples:\n"
        "  bar task reopen fix-login\n"
        "  bar task reopen gVXsTb7x         by id, when several tasks share the name",
    )
    task_ref_opts(p)
    json_opt(p)
    p.set_defaults(_run=reopen)

    p = tsub.add_parser(
        "delete",
        help="delete a closed task: its worktree, branch, snapshots and record",
        formatter_class=Formatter,
        description="Delete a closed task for good: its worktree, its branch, every ref of\n"
        "it under refs/bar/ (refs/bar/tasks/<id>, refs/bar/kept/<id>/, refs/bar/bases/<id>/)\n"
        "and its directory under $BAR_HOME (ledger, outputs, patches). An open task is\n"
        "never deleted (exit 1): close it first. Refuses (exit 5) when work would be\n"
        "lost: changes no `bar apply` landed (or whose applied commit its branch no longer\n"
        "has: someone reset it); changes its steps recorded when it ends back at its base\n"
        "(a rollback to base, an undo), which only it can return to; commits of its branch\n"
        "no step recorded and no other branch or ref keeps (its base too, when that was\n"
        "another task's branch since deleted); edits or ignored files (.env, local data) in\n"
        "a kept worktree. --force deletes it anyway. A deletion that was interrupted is\n"
        "finished by running the command again.",
        epilog="examples:\n"
        "  bar task delete fix-login --dry-run   what would go, and what would be lost\n"
        "  bar task delete fix-login\n"
        "  bar task delete gVXsTb7x --force      even though its work was never applied",
    )
    task_ref_opts(p)
    p.add_argument("--force", action="store_true", help="delete even if work would be lost")
    p.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    json_opt(p)
    p.set_defaults(_run=delete)

    p = tsub.add_parser(
        "prune",
        help="delete every closed task whose work was applied (or that changed nothing)",
        formatter_class=Formatter,
        description="Delete every closed task that is safe to delete, as `bar task delete`\n"
        "would: its work was applied, or it changed nothing. Lists what it deleted and\n"
        "the closed tasks it kept, with why. Each task is judged against what the tasks\n"
        "deleted before it leave (of two tasks that alone hold a commit, one is kept);\n"
        "--dry-run judges as the prune will. Open tasks are never touched. --force also\n"
        "deletes closed tasks whose work would be lost.",
        epilog="examples:\n"
        "  bar task prune --dry-run   what would be deleted and what kept\n"
        "  bar task prune\n"
        "  bar task prune --force     every closed task, applied or not",
    )
    p.add_argument("--force", action="store_true", help="also delete closed tasks never applied")
    p.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    json_opt(p)
    p.set_defaults(_run=prune)
    task_actions(tsub)


def _edit_options(tsub: Commands) -> None:
    from bar.cli.parser import Formatter, json_opt, task_ref_opts

    """``bar task edit`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "edit",
        help="change a task's description, tags or metadata",
        formatter_class=Formatter,
        description="Change what is said about a task: its description, its tags and the\n"
        "keys of its metadata (task.json's `metadata`, where -d and --tag of `bar task\n"
        "new` put theirs). Each key that changes is recorded in the project's events.jsonl\n"
        "(`task.edited`, from what to what; `bar events`); an edit that changes nothing\n"
        "writes nothing. Values are strings, stored with any secret they quote replaced\n"
        "by ***; a key that names a secret (api_key, token) keeps *** alone.\n\n"
        "A task's name, base and status belong to their own commands (bar task rename,\n"
        "close, reopen, sync). A closed task can be edited; a task running a step cannot (exit\n"
        "7): edit it when the step has ended.",
        epilog="examples:\n"
        "  bar task edit -d 'Fix the login redirect on Safari'\n"
        "  bar task edit fix-login --tag urgent --untag later\n"
        "  bar task edit --meta ticket=SHOP-142 --meta reviewer=ana\n"
        "  bar task edit fix-login --unset-meta reviewer\n"
        "  bar task edit -d ''                       remove the description",
    )
    task_ref_opts(p)
    p.add_argument(
        "-d", "--description", metavar="DESC", help="the new description ('' removes it)"
    )
    p.add_argument("--tag", action="append", default=[], metavar="T", help="add a tag (repeatable)")
    p.add_argument(
        "--untag", action="append", default=[], metavar="T", help="remove a tag (repeatable)"
    )
    _meta_opt(p)
    p.add_argument(
        "--unset-meta",
        action="append",
        default=[],
        metavar="KEY",
        help="remove a key of the metadata (repeatable)",
    )
    json_opt(p)
    p.set_defaults(_run=edit)


def _rename_options(tsub: Commands) -> None:
    from bar.cli.parser import Formatter, json_opt, task_opt

    """``bar task rename`` (``tsub``: the actions of ``bar task``)."""
    p = tsub.add_parser(
        "rename",
        help="give a task another name",
        formatter_class=Formatter,
        description="Give a task another name: the one --task NAME and bar task list use.\n"
        "Its id, branch and worktree stay as they are (the branch keeps the old name: it\n"
        "may be checked out or pushed; its id still finds the task). The new name follows\n"
        "the rules of `bar task new`, and is refused when an open task has it or when it\n"
        "starts another task's id. Recorded in events.jsonl as `task.renamed` (`bar events`).\n"
        "With one name, the task you are in (else the active one) is renamed.",
        epilog="examples:\n"
        "  bar task rename fix-login fix-auth-redirect\n"
        "  bar task rename fix-auth-redirect        the task you are in, else the active one\n"
        "  bar task rename gVXs fix-auth --json",
    )
    p.add_argument(
        "task_ref", nargs="?", metavar="ID|NAME", help="the task (default: the active task)"
    )
    p.add_argument("new_name", metavar="NEW", help="its new name")
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=rename)


def _meta_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a key of the task's metadata (repeatable)",
    )


# --- the command -----------------------------------------------------------------------


def ref(task_ref: str | None, task: str | None, *, needed: str | None = None) -> str | None:
    """The task an action names: its word (``bar task close fix-login``) or ``--task``,
    which every other command takes. ``needed``: the action, which needs one named."""
    if task_ref is not None and task is not None and task_ref != task:
        raise UsageError(
            f"two tasks were named: {task_ref!r} and --task {task!r}",
            hint="name the task once, as a word or with --task",
        )
    chosen = task_ref if task_ref is not None else task
    if chosen is None and needed is not None:
        raise UsageError(
            f"bar task {needed} needs the task to act on",
            hint=f"bar task {needed} ID|NAME (or --task ID|NAME); `bar task list` shows them",
        )
    return chosen


def _note_where_you_are(loc: Location, active: Task) -> None:
    """Inside a task's worktree, that task wins over the active one (``--task`` aside):
    a task just made active elsewhere is not the one the next command here acts on."""
    if loc.task_id is None or loc.task_id == active.id:
        return
    try:
        here = api.get_task(loc)
        name = f"{here.name} ({here.id})"
    except BarError:
        name = loc.task_id
    print(
        f"note: you are in the worktree of task {name}; commands here act on it, "
        f"not on {active.name} (cd elsewhere, or pass --task {active.name})",
        file=sys.stderr,
    )


def new(
    *,
    name: str,
    base: str | None,
    description: str | None,
    tag: list[str],
    as_json: bool,
    meta: list[str] | None = None,
    plan: bool = False,
    on: str | None = None,
    server: str | None = None,
) -> int:
    pairs = api.parse_meta(meta or [])
    loc = api.open_project()
    project = loc.project
    # a task for workers gets no worktree here: its steps make one where they run
    task = api.new_task(
        project,
        name,
        base=base,
        description=description,
        tags=tag,
        meta=pairs,
        plan=plan or on is not None,
    )
    if on is not None:
        from bar.cli.commands.workers import new_on

        if not plan:
            task = api.switch_task(task)  # as a task made here is
        return new_on(task, on, server, as_json, claim=plan)
    if plan:
        if as_json:
            print_json(api.summarize(task, project.active_task_id()).to_json())
            return 0
        print(f"Planned task {task.name} ({task.id}): pending, no worktree yet")
        print(f"  base      {task.base_ref} at {short(task.base_commit)}")
        print(f"Next: bar task start {task.name}  (or bar task claim {task.name} --owner NAME)")
        return 0
    _note_where_you_are(loc, task)
    if as_json:
        print_json(api.summarize(task, task.id).to_json())
        return 0
    paint = Painter(project.config.output.color)
    print(f"Created task {paint(task.name, 'bold')} ({task.id}), now active")
    print(f"  branch    {task.branch}  (from {task.base_ref} at {short(task.base_commit)})")
    print(f"  worktree  {task.worktree}")
    print("Next: bar run -- <command>")
    return 0


def rename(*, task_ref: str | None, task: str | None, new_name: str, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), ref(task_ref, task))
    done = api.rename_task(the_task, new_name)
    renamed = done.task
    if as_json:
        print_json(
            {**api.summarize(renamed, renamed.project.active_task_id()).to_json(), "was": done.old}
        )
        return 0
    print(f"Renamed task {done.old} ({renamed.id}) to {renamed.name}")
    print(f"  branch    {renamed.branch}  (kept: the id in it finds the task)")
    return 0


def list_(*, all: bool, as_json: bool, pending: bool = False) -> int:
    project = api.open_project().project
    rows = api.tasks(project, include_closed=all)
    if pending:
        rows = [r for r in rows if r.task.pending]
    if as_json:
        print_json([r.to_json() for r in rows])
        return 0
    if not rows:
        if pending:
            print("No pending task. Plan one with: bar task new NAME --plan")
            return 0
        print("No tasks." + ("" if all else " (closed tasks: bar task list --all)"))
        print("Create one with: bar task new NAME")
        return 0
    paint = Painter(project.config.output.color)
    width = max(len(r.task.name) for r in rows)
    state_width = max(len(r.state.label) for r in rows)
    # what the agents cost, a column of its own once any task's cost is known
    costs = [api.cost_text({"cost_usd": r.cost_usd}) or "" for r in rows]
    cost_width = max(map(len, costs))
    for r, cost in zip(rows, costs, strict=True):
        mark = paint("*", "green") if r.active else " "
        stat = r.diff_stat
        changes = f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"
        label = f"{r.state.label:<{state_width}}"
        state = paint(label, _STATE_COLOURS[r.state.state]) if r.state.state != "active" else label
        owner = f"  @{r.task.board.owner}" if r.task.board.owner else ""
        if r.task.origin is not None:
            owner += f"  from {r.task.origin.get('remote', '?')} (read-only: bar task adopt)"
        where = r.to_json()["on_workers"] if r.state.state == "on-workers" else None
        if where:
            owner += f"  queue {where['queue']}"
        spent = f"  {cost:>{cost_width}}" if cost_width else ""
        print(
            f"{mark} {r.task.id}  {r.task.name:<{width}}  {state}  "
            f"{plural(r.steps, 'step'):>9}{spent}  {changes}{owner}"
        )
    if any(r.state.worktree_missing for r in rows):
        print("A missing worktree is recreated at its last recorded state by: bar doctor --repair")
    return 0


_STATE_COLOURS = {
    "fetched": "cyan",
    "pending": "cyan",
    "on-workers": "cyan",
    "running": "yellow",
    "applied": "green",
    "closed": "dim",
    "missing-worktree": "red",
}


def show(*, task_ref: str | None, as_json: bool, task: str | None = None) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, ref(task_ref, task))
    summary = api.summarize(the_task, loc.project.active_task_id())
    totals = api.session_totals(the_task)
    if as_json:
        print_json({**summary.to_json(), "session_totals": totals})
        return 0
    paint = Painter(loc.project.config.output.color)
    print(
        f"{paint(the_task.name, 'bold')} ({the_task.id})" + ("  [active]" if summary.active else "")
    )
    desc = the_task.metadata.get("description")
    if desc:
        print(f"  {desc}")
    closed = f" (closed {the_task.closed_at})" if the_task.closed_at else ""
    print(f"  status      {the_task.status}{closed}")
    print(f"  state       {summary.state.label}")
    owner = f", claimed by {the_task.board.owner}" if the_task.board.owner else ""
    where = api.placement_of(the_task)
    if where is not None:
        owner += f", on the workers of queue {where.queue}"
    print(f"  board       {the_task.board.status}{owner}")
    print(f"  base        {the_task.base_ref} at {short(the_task.base_commit)}")
    moved = api.base_moved_text(the_task)
    if moved:
        print(paint(f"              ({moved})", "yellow"))
    print(f"  branch      {the_task.branch}")
    gone = " (missing: `bar doctor --repair` recreates it)" if the_task.active else " (removed)"
    if the_task.pending:
        gone = f" (not made yet: `bar task start {the_task.name}`)"
    if the_task.on_workers:
        gone = " (none here: on the worker that runs its next step)"
    print(f"  worktree    {the_task.worktree}" + ("" if the_task.worktree.exists() else gone))
    print(f"  snapshots   {the_task.snapshot_ref}")
    tags = the_task.metadata.get("tags")
    if tags:
        print(f"  tags        {', '.join(map(str, tags))}")
    for key, value in _own_metadata(the_task):
        print(f"  meta        {key}={value}")
    stat = summary.diff_stat
    print(f"  steps       {summary.steps}")
    if totals is not None:
        print(f"  agents      {totals_text(totals)}")
    print(
        f"  changes     {plural(stat.files, 'file')}, +{stat.additions} -{stat.deletions} since base"
    )
    print(f"  created     {the_task.created_at}")
    return 0


def _own_metadata(the_task: Task) -> list[tuple[str, str]]:
    """The metadata keys besides the description and tags, values as text."""
    import json

    return [
        (key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for key, value in sorted(the_task.metadata.items())
        if key not in ("description", "tags")
    ]


def edit(
    *,
    task_ref: str | None,
    description: str | None,
    tag: list[str],
    untag: list[str],
    meta: list[str],
    unset_meta: list[str],
    as_json: bool,
    task: str | None = None,
) -> int:
    from bar.task.edit import Edit

    change = Edit(
        description=description,
        tags=tag,
        untags=untag,
        meta=api.parse_meta(meta),
        unset=unset_meta,
    )
    loc = api.open_project()
    edited = api.edit_task(api.get_task(loc, ref(task_ref, task)), change)
    the_task = edited.task
    if as_json:
        summary = api.summarize(the_task, loc.project.active_task_id())
        print_json({**summary.to_json(), "changed": edited.changed})
        return 0
    if not edited.changed:
        print(f"Task {the_task.name} ({the_task.id}): nothing changed")
        return 0
    print(f"Edited task {the_task.name} ({the_task.id}):")
    for key, values in edited.changed.items():
        print(f"  {key}: {_said(values['from'])} -> {_said(values['to'])}")
    return 0


def _said(value: object) -> str:
    """A metadata value as the edit's summary shows it (``(none)`` when absent)."""
    import json

    if value is None:
        return "(none)"
    return json.dumps(value, ensure_ascii=False)


def switch(*, task_ref: str | None, as_json: bool, task: str | None = None) -> int:
    loc = api.open_project()
    the_task = api.switch_task(api.get_task(loc, ref(task_ref, task, needed="switch")))
    _note_where_you_are(loc, the_task)
    if as_json:
        print_json(api.summarize(the_task, the_task.id).to_json())
    else:
        print(f"Active task: {the_task.name} ({the_task.id})")
        print(f"  worktree  {the_task.worktree}")
    return 0


def close(
    *,
    task_ref: str | None,
    keep_worktree: bool,
    force: bool,
    as_json: bool,
    task: str | None = None,
) -> int:
    loc = api.open_project()
    closed = api.close_task(
        api.get_task(loc, ref(task_ref, task)), keep_worktree=keep_worktree, force=force
    )
    done = closed.task
    if as_json:
        print_json(
            {
                **api.summarize(done, loc.project.active_task_id()).to_json(),
                "unapplied": closed.unapplied.to_json() if closed.unapplied else None,
            }
        )
        return 0
    print(f"Closed task {done.name} ({done.id}): completed")
    if closed.worktree_removed:
        print(f"  worktree removed; branch {done.branch} and the ledger are kept")
    elif done.worktree.exists():
        print(f"  worktree kept at {done.worktree}")
    if closed.unapplied is not None:
        print_unapplied(closed.unapplied, Painter(loc.project.config.output.color))
    return 0


def print_unapplied(work: Unapplied, paint: Painter) -> None:
    """Say what of a closed task's work no branch has, and the command that lands it."""
    stat = work.stat
    files = ", ".join(stat.file_list[:5]) + (", ..." if len(stat.file_list) > 5 else "")
    steps = (
        f"step {work.steps[0]}"
        if len(work.steps) == 1
        else f"steps {', '.join(work.steps[:5])}{', ...' if len(work.steps) > 5 else ''}"
    )
    since = f" since the apply of step {work.applied_step}" if work.applied_step else ""
    what = f"{plural(stat.files, 'file')} +{stat.additions} -{stat.deletions}"
    print(
        paint(f"  not applied: {work.target_branch} does not have its work", "yellow")
        + f" ({what}: {files}{'; from ' + steps if work.steps else ''}{since})"
    )
    if work.conflicts:
        print(
            f"  applying it onto {work.target_branch} would conflict in "
            f"{', '.join(work.conflicts[:5])}: `bar task reopen {work.task_ref}`, then "
            f"`bar task sync --onto {work.target_branch}` brings it up to date first"
        )
    print(f"  land it: {work.command}")


def path(*, task_ref: str | None, as_json: bool, task: str | None = None) -> int:
    the_task = api.get_task(api.open_project(), ref(task_ref, task))
    exists = the_task.worktree.is_dir()
    if as_json:
        print_json(
            {
                "task_id": the_task.id,
                "name": the_task.name,
                "worktree": str(the_task.worktree),
                "exists": exists,
            }
        )
    else:
        print(the_task.worktree)
    if exists:
        return 0
    hint = (
        "`bar doctor --repair` recreates it at the last recorded state"
        if the_task.active
        else f"`bar task reopen {the_task.id}` recreates it and makes the task active again"
    )
    raise BarError(f"the worktree of task {the_task.name} ({the_task.id}) is gone", hint=hint)


def reopen(*, task_ref: str | None, as_json: bool, task: str | None = None) -> int:
    loc = api.open_project()
    named = ref(task_ref, task, needed="reopen")
    assert named is not None
    reopened = api.reopen_task(loc.project, named)
    done = reopened.task
    _note_where_you_are(loc, done)
    if as_json:
        print_json({**api.summarize(done, done.id).to_json(), "recreated": reopened.recreated})
        return 0
    print(f"Reopened task {done.name} ({done.id}), now active")
    how = "recreated at the last recorded state" if reopened.recreated else "kept since closing"
    print(f"  worktree  {done.worktree}  ({how})")
    print(f"  branch    {done.branch}")
    return 0


def delete(
    *, task_ref: str | None, force: bool, dry_run: bool, as_json: bool, task: str | None = None
) -> int:
    loc = api.open_project()
    named = ref(task_ref, task, needed="delete")
    assert named is not None
    done = api.delete_task(loc.project, named, force=force, dry_run=dry_run)
    if as_json:
        print_json(done.to_json())
        return 0
    paint = Painter(loc.project.config.output.color)
    _print_deletion(done, paint)
    if dry_run:
        if done.lost and not force:
            print("It would refuse without --force.")
        print(paint("(dry run: nothing was deleted)", "dim"))
    return 0


def prune(*, force: bool, dry_run: bool, as_json: bool) -> int:
    loc = api.open_project()
    pruned = api.prune_tasks(loc.project, force=force, dry_run=dry_run)
    if as_json:
        print_json(pruned.to_json())
        return 0
    paint = Painter(loc.project.config.output.color)
    if not pruned.deleted:
        print("No closed task to delete." if not pruned.skipped else "Nothing deleted.")
    for done in pruned.deleted:
        _print_deletion(done, paint)
    for kept in pruned.skipped:
        print(f"Kept task {kept.name} ({kept.task_id}): " + "; ".join(kept.lost))
    if pruned.skipped and not force:
        print(paint("(--force deletes these too)", "dim"))
    if dry_run:
        print(paint("(dry run: nothing was deleted)", "dim"))
    return 0


def _print_deletion(done: Deletion, paint: Painter) -> None:
    verb = "Deleted" if done.deleted else "Would delete"
    print(f"{verb} task {paint(done.name, 'bold')} ({done.task_id})")
    for item in done.removed:
        print(f"  {item}")
    for item in done.kept:
        print(f"  kept {item}")
    if done.lost:
        lost = "lost" if done.deleted else "would be lost"
        print(f"  {lost}: " + "; ".join(done.lost))
