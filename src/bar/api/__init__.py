"""bar as a library: the calls every face makes.

The command line, ``bar hook``, and the web page and MCP server to come all drive bar
through these functions and the records they return (``Task``, the step records of
``bar.model.records``, ``ApplyResult``, ``Status``…), never through ``main(argv)`` and never
through each other. Every call that changes a task takes the task's lock, reloads it,
finishes what a crashed bar left and records hand edits (``transaction.prepare``) before it
acts, so no face can forget to.

    loc = api.open_project()                     # the project of the current directory
    task = api.get_task(loc)                     # the task you are in, else the active one
    step = api.run(task, RunRequest(["make", "test"]))
    api.rollback(task, "base")
    api.apply(task, mode="commit")

Each verb's module is imported by the call that uses it: a ``bar log`` must not pay for
loading the runner, the supervisor, the terminal code and the shell parser. This is the
one place below the faces where imports sit inside functions.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base.record import field, record
from bar.errors import (
    BarError,
    CorruptFile,
    NotARepository,
    NotFound,
    NotInitialized,
    StepNotFound,
    Unreachable,
    UsageError,
)
from bar.history import queued as queued_steps
from bar.history import states
from bar.history.diffs import Diff, apply_diff, diff, unrecorded
from bar.model import journals
from bar.model.project import Location, Project, find_project, locate, policy_for, running_socket
from bar.model.records import RollbackStep, RunStep, Step, parse_step_ref
from bar.model.tasks import Task, list_tasks, load_task, resolve_task
from bar.store.files import write_text_atomic
from bar.store.lock import is_locked
from bar.task.state import TaskSummary, is_running, summarize
from bar.task.status import Status, status

if TYPE_CHECKING:
    from bar.changes.apply import ApplyResult
    from bar.changes.rollback import Plan
    from bar.changes.sync import SyncPlan
    from bar.changes.trash import Entry as TrashEntry
    from bar.changes.trash import Restored
    from bar.changes.undo import Plan as UndoPlan
    from bar.formats.gitai import Exported, Imported
    from bar.history.blame import Blame
    from bar.history.checkpoints import Checkpoint
    from bar.history.lineage import RevBlame
    from bar.history.verify import Report as VerifyReport
    from bar.ledger.select import Selection
    from bar.policy import Decision, Policy
    from bar.project.doctor import Doctor, Finding, Group
    from bar.project.relocated import Adopted, Moved
    from bar.share.adopt import Adopted as TaskAdopted
    from bar.share.fetch import Fetched
    from bar.share.prepush import Installed as PushHook
    from bar.share.push import Pushed
    from bar.share.remotes import Remote
    from bar.step.live import Event, Follower, Glance, LiveStep, Mark, Started
    from bar.step.run import RunRequest
    from bar.task import delete as task_delete
    from bar.task import reopen as task_reopen
    from bar.task.close import Closed
    from bar.task.edit import Edit, Edited
    from bar.task.rename import Renamed

__all__ = [
    "Diff",
    "Location",
    "Project",
    "RunPlace",
    "Status",
    "Task",
    "TaskSummary",
    "adopt_project",
    "agent_of",
    "apply",
    "apply_diff",
    "artifact_path",
    "blame",
    "branches",
    "call_target",
    "check_command",
    "checkpoint",
    "checkpoints",
    "close_task",
    "cost_text",
    "delete_task",
    "diff",
    "doctor",
    "edit_task",
    "explain_command",
    "follower_of",
    "get_task",
    "glance_step",
    "init_project",
    "list_tasks",
    "live_selected",
    "live_step",
    "load_task",
    "locate",
    "log",
    "new_task",
    "open_project",
    "output_of",
    "parse_meta",
    "parse_step_ref",
    "place_run",
    "plan_rollback",
    "policy_for",
    "projects",
    "prune_tasks",
    "read_artifact",
    "read_output",
    "reopen_task",
    "resolve_cwd",
    "rollback",
    "run",
    "running",
    "running_socket",
    "session",
    "session_totals",
    "show",
    "status",
    "step_selected",
    "summarize",
    "switch_task",
    "sync",
    "tasks",
    "tokens_text",
    "trash_entries",
    "trash_restore",
    "undo",
    "unrecorded",
    "verify",
    "verify_and_record",
    "wait_for_step",
    "watch_steps",
]


# --- projects ------------------------------------------------------------------------


def open_project(cwd: Path | None = None) -> Location:
    """The registered project (and the task, inside a task worktree) of ``cwd``."""
    if cwd is None:
        from bar.changes import fast

        found = fast.prescan_location()  # (found while the command's code loaded)
        if found is not None:
            return found
    try:
        return find_project(cwd)
    except NotInitialized:
        from bar.project.relocated import not_registered

        raise not_registered(locate(cwd).project) from None


@record(frozen=True)
class Initialized:
    project: Project
    created: list[Path]
    moved: list[Moved] = field(default_factory=list)  # its tasks left at an old path


def init_project(cwd: Path | None = None) -> Initialized:
    """Register the repository of ``cwd`` (``bar init``); running it again changes nothing.
    A repository that moved is not registered anew (``adopt_project``)."""
    from bar.policy import DEFAULT_POLICY_TEXT
    from bar.project.relocated import refuse_if_moved

    project = locate(cwd).project
    if not git.has_commit(project.root):
        raise NotARepository(
            f"{project.root} has no commit yet",
            hint="make a first commit (git commit --allow-empty -m init), then run bar init",
        )
    moved = refuse_if_moved(project)
    base = "main" if git.branch_exists(project.root, "main") else None
    created = project.register(base or git.current_branch(project.root) or "main")
    policy_path = project.policy_path()
    if not policy_path.exists():
        policy_path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(policy_path, DEFAULT_POLICY_TEXT)
        policy_path.chmod(0o644)  # a file of the repository, not one of bar's own
        created.append(policy_path)
    if created:
        project.log_event("project.initialized", project={"root": str(project.root)})
    return Initialized(project, created, moved)


def adopt_project(cwd: Path | None = None, which: str | None = None) -> Adopted:
    """Re-attach the tasks a moved repository left at its old path (``bar init --adopt``)."""
    from bar.project.relocated import adopt

    return adopt(locate(cwd).project, which or None)


def check_command(
    command: str | Sequence[str],
    *,
    policy: Policy | None = None,
    cwd: Path | None = None,
    at_exec: bool = False,
) -> Decision:
    """Judge a shell line (str) or an argument vector with ``policy``, else the policy of
    the project of ``cwd``, else bar's default policy; ``at_exec``: the vector as the
    exec check of a step judges a program about to run."""
    return explain_command(command, policy=policy, cwd=cwd, at_exec=at_exec).decision


@record(frozen=True)
class Explained:
    """A decision, with the form judged (line, argv or exec), the words an exec is
    judged as, and what the rules saw of each unit (``bar policy explain``)."""

    decision: Decision
    form: str
    views: list[tuple[str, ...]]
    words: list[str] | None = None


def explain_command(
    command: str | Sequence[str],
    *,
    policy: Policy | None = None,
    cwd: Path | None = None,
    at_exec: bool = False,
) -> Explained:
    """``check_command`` with what the rules were tried on. The homes (``$HOME``, the
    password database's) are known as ``~`` whatever the shell expanded; at exec, a
    word naming an entry of ``cwd`` (default: here) is judged as the path it names."""
    import os
    import shutil

    from bar import shell
    from bar.policy import Decision
    from bar.policy.places import Places
    from bar.policy.rules import exec_words, seen

    chosen = policy if policy is not None else policy_for(cwd)
    places = Places.of()
    form = "line" if isinstance(command, str) else "exec" if at_exec else "argv"
    where = str(cwd or Path.cwd())
    words: list[str] | None = None
    if isinstance(command, str):
        analysis = shell.analyse_line(command)
    elif at_exec:
        argv = list(command)
        path = argv[0] if not argv or "/" in argv[0] else shutil.which(argv[0]) or argv[0]
        words = exec_words(
            path,
            argv,
            places,
            cwd=where,
            exists=lambda w: os.path.lexists(os.path.join(where, w)),
        )
        analysis = shell.analyse_argv(words)
    else:
        analysis = shell.analyse_argv(list(command))
    views = seen(analysis, places)
    if chosen is None:
        return Explained(Decision("allow"), form, views, words)
    if isinstance(command, str):
        decision = chosen.evaluate_line(command, places)
    elif at_exec:
        assert words is not None
        decision = chosen.evaluate_exec(words[0], words, places)
    else:
        decision = chosen.evaluate_argv(list(command), places)
    return Explained(decision, form, views, words)


# --- tasks ---------------------------------------------------------------------------


def get_task(loc: Location, ref: str | None = None) -> Task:
    """The task named ``ref`` (id or name), else the one whose worktree we are in, else
    the active task. In a worktree no task is bound to, a task must be named: the
    active one works elsewhere."""
    if ref is None and loc.lane is not None:
        raise UsageError(
            f"this is the worktree {loc.lane}, and no task is bound to it: bar records "
            "nothing here",
            hint=f"`bar task bind TASK {loc.lane}` makes it a task's worktree (or name a "
            "task with --task to act on that one, in its own worktree)",
        )
    return resolve_task(loc.project, ref, from_cwd=loc.task_id)


def tasks(project: Project, *, include_closed: bool = False) -> list[TaskSummary]:
    active_id = project.active_task_id()
    return [summarize(t, active_id) for t in list_tasks(project) if include_closed or t.active]


def new_task(
    project: Project,
    name: str,
    *,
    base: str | None = None,
    description: str | None = None,
    tags: Sequence[str] = (),
    meta: Mapping[str, str] | None = None,
    plan: bool = False,
) -> Task:
    """Create a task with its branch and worktree; it becomes the active task. With
    ``plan``: a ``pending`` task, no worktree until it is started. ``meta``: keys of
    its metadata beside the description and tags (``bar.task.edit.check_key``)."""
    from bar.task.edit import check_key
    from bar.task.new import create_task

    for key in meta or {}:
        check_key(key, "--meta")
    return create_task(
        project,
        name,
        base=base,
        description=description,
        tags=list(tags),
        meta=dict(meta or {}),
        plan=plan,
    )


def parse_meta(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` words (``--meta``) as a mapping; a bad or repeated key is a
    ``UsageError`` naming it."""
    from bar.task.edit import parse_meta as parse

    return parse(pairs)


def edit_task(task: Task, change: Edit) -> Edited:
    """Change the task's metadata (description, tags, keys of its own) under its lock;
    each key that changed is named, from what to what, in events.jsonl."""
    from bar.task.edit import edit

    return edit(task, change)


def rename_task(task: Task, new: str) -> Renamed:
    """Give ``task`` the name ``new`` (its branch and worktree keep theirs)."""
    from bar.task.rename import rename

    return rename(task, new)


def switch_task(task: Task) -> Task:
    if not task.active:
        raise BarError(
            f"task {task.name} ({task.id}) is closed and cannot be made active",
            hint=f"`bar task reopen {task.id}` makes it active again",
        )
    task.project.set_active_task(task.id)
    return task


def close_task(task: Task, *, keep_worktree: bool = False, force: bool = False) -> Closed:
    """Close the task (``completed`` on the board); its worktree is removed unless kept,
    its branch and record stay. Refuses while the worktree holds changes no step
    recorded, unless ``force``, which records them as a manual step first."""
    from bar.model import placement
    from bar.task.close import close

    if placement.of(task.project, task.id) is not None:
        from bar.workers import client

        client.take_back(task.project, task.id)  # what its workers recorded last
        client.recall(task.project, task)  # its workflow ends with it
        task = load_task(task.project, task.id)
    closed = close(task, keep_worktree=keep_worktree, force=force)
    from bar.history import telemetry

    telemetry.enqueue(task, None)  # the task's own span (the sender reads the task anew)
    return _with_unapplied(closed)


def _with_unapplied(closed: Closed) -> Closed:
    """A closed task's result, with what of its work no branch has yet."""
    from bar.base.record import replace
    from bar.changes.unapplied import unapplied

    if closed.task.active:
        return closed
    return replace(closed, unapplied=unapplied(closed.task))


# --- the task board (docs/board.md) --------------------------------------------------


def base_moved_text(task: Task) -> str | None:
    """Where a planned task's base moved to as it started, and who started it, in words
    (after the base itself), or None: it starts from the base it was planned on."""
    from bar.task.start import base_moved_text as said

    return said(task)


def start_task(task: Task, *, activate: bool = True) -> Task:
    """Make a planned task's worktree (``in_progress``); a started task is left as it is."""
    from bar.task.start import start

    return start(task, activate=activate)


def claim_task(
    task: Task,
    owner: str,
    *,
    start: bool = False,
    activate: bool = False,
    reassign: bool = False,
) -> Task:
    """Take the task for ``owner`` (``board.Claimed`` if another holds it, unless
    ``reassign``); ``start``: start it too."""
    from bar.task.claim import claim

    return claim(task, owner, start=start, activate=activate, reassign=reassign)


def create_worktree(project: Project, name: str, *, base: str | None = None) -> dict[str, Any]:
    """Make the worktree ``name`` with no task (``bar.task.lanes``); its registry entry."""
    from bar.task import lanes

    return lanes.create(project, name, base)


def create_task_worktree(task: Task, name: str) -> Task:
    """Start the pending task with its worktree called ``name``."""
    from bar.task import lanes

    return lanes.create_for(task, name)


def worktree_named(project: Project, name: str) -> dict[str, Any] | None:
    """The registry entry of the worktree called ``name`` (not removed), if any."""
    from bar.task import registry

    return registry.named(project, name)


def remove_lane(project: Project, name: str) -> dict[str, Any]:
    """Remove the worktree ``name`` of no task (refused while it holds changes)."""
    from bar.task import lanes

    return lanes.remove(project, name)


def bind_task(task: Task, name: str) -> tuple[Task, list[Step]]:
    """Make the worktree ``name`` (of no task) the task's; the step recording what it
    held beyond the task's record, if anything."""
    from bar.task import lanes

    return lanes.bind(task, name)


def unclaim_task(task: Task, *, owner: str | None = None) -> Task:
    """Clear the task's owner (``owner``: only if that one holds it)."""
    from bar.task.claim import unclaim

    return unclaim(task, owner=owner)


def keep_worktree(task: Task) -> Task:
    """Mark the task's worktree to stay when the task closes."""
    from bar.task.close import keep

    return keep(task)


def remove_worktree(task: Task, *, complete: bool = False, force: bool = False) -> Closed:
    """Remove the task's worktree; ``complete``: close the task too, else it goes back
    to ``pending``."""
    from bar.task.close import remove_worktree as remove

    done = remove(task, complete=complete, force=force)
    return _with_unapplied(done) if complete else done


def board(project: Project, op: str, args: dict[str, object]) -> dict[str, Any]:
    """One operation of the task board (``bar.api.board_orders``: create, list, claim,
    start, worktrees, keep, remove, events), done here."""
    from bar.api.board_orders import perform

    return perform(project, op, args)


def worktrees(project: Project) -> list[dict[str, Any]]:
    """The worktree registry's entries (``workspaces/index.json``); a registry that is
    missing or unreadable is said (on stderr) and shown as the disk implies."""
    from bar.base.notices import warn
    from bar.task import registry

    entries, wrong = registry.view(project)
    if wrong:
        warn(f"{wrong}: `bar doctor --repair` writes it again")
    return entries


def events(
    project: Project, n: int | None = 20, *, upto: int | None = None
) -> list[dict[str, Any]]:
    """The last ``n`` events of the project's lifecycle log (all with None), of those
    before the offset ``upto`` (``events_end``; None: all)."""
    from bar.model import event_log as log

    return log.recent(project.paths.events, n, upto=upto)


def events_end(project: Project) -> int:
    """Where the project's lifecycle log ends now: show the events before it, then
    follow from it, and none is lost or shown twice."""
    from bar.model import event_log as log

    return log.end(project.paths.events)


def follow_events(project: Project, *, start: int | None = None) -> Iterator[dict[str, Any]]:
    """The events appended from now on (from the offset ``start``, if given), as they
    come."""
    from bar.model import event_log as log

    return log.follow(project.paths.events, start=start)


# a closed task reopened, deleted, or every closed task pruned: see those modules
def reopen_task(project: Project, ref: str) -> task_reopen.Reopened:
    from bar.task.reopen import reopen

    return reopen(project, ref)


def delete_task(
    project: Project, ref: str, *, force: bool = False, dry_run: bool = False
) -> task_delete.Deletion:
    from bar.task.delete import delete

    return delete(project, ref, force=force, dry_run=dry_run)


def prune_tasks(
    project: Project, *, force: bool = False, dry_run: bool = False
) -> task_delete.Pruned:
    from bar.task.delete import prune

    return prune(project, force=force, dry_run=dry_run)


# --- changing a task -----------------------------------------------------------------


def _locked(task: Task, what: str, *, wait: bool) -> AbstractContextManager[Task]:
    """``transaction.holding``: the task's lock held, the task reloaded (it may have
    changed while we waited); the caller runs ``transaction.prepare`` its own way."""
    from bar.step import transaction

    return transaction.holding(task, what, wait=wait)


def _changing(task: Task, what: str, *, wait: bool) -> AbstractContextManager[Task]:
    """``transaction.changing``: locked, reloaded, a crash's leftovers finished and hand
    edits recorded; then the caller acts."""
    from bar.step import transaction

    return transaction.changing(task, what, wait=wait)


def run(task: Task, request: RunRequest, *, wait: bool = True) -> RunStep:
    """Run a command as the task's next step. The step's ``exit_code`` is the command's."""
    from bar.changes import fast
    from bar.git import packing
    from bar.model import placement
    from bar.step import transaction
    from bar.step.run import run_step, watch_worktree

    placement.refuse_local(task.project, task.id, task.name)
    with _locked(task, f"bar run {shlex.join(request.argv)}", wait=wait) as fresh:
        if fresh.pending:
            from bar.base.notices import note
            from bar.task.start import start

            fresh = start(fresh, activate=False)  # its first step starts it
            note(f"task {fresh.name} was planned: started it (its worktree: {fresh.worktree})")
        fresh.require_worktree()
        # the task's watcher has watched since the last command (``bar.changes.fast.watcher``); else
        # the step watches from before hand edits are looked for: nothing escapes both
        # (with its share of bar's inotify watches: ``bar.changes.fast.watches``)
        claim = None if fast.watching(fresh.index) else fast.claim_for(fresh)
        watch = watch_worktree(fresh, claim) if claim is not None else None
        began = time.monotonic()
        try:
            transaction.prepare(fresh, before_look=watch.begin if watch is not None else None)
            step = run_step(fresh, request, watch)
            queued_steps.flush(fresh)  # what orders asked for while it ran
            if (
                watch is not None
                and claim is not None
                and fast.keep_watching(fresh, watch, time.monotonic() - began, claim)
            ):
                watch = None  # the watcher watches from here, with the claim
        finally:
            if watch is not None:
                watch.close()
            if claim is not None:
                claim.release()  # (unless a watcher took it)
        # the loose objects its steps wrote, packed once they pile up (``bar.git.packing``)
        packing.after_step(fresh.project.common_dir, fresh.project.dir)
        return step


def agent_of(argv: list[str]) -> str | None:
    """The agent ``argv`` starts a session of (``claude``, ``codex``, ``gemini``), which
    ``bar run`` supervises as ``--agent`` would; None if none."""
    from bar.agents.detect import agent_of as detect

    return detect(argv)


@record(frozen=True)
class RunPlace:
    """Where a ``bar run`` step runs, and as what, chosen from its options."""

    queue: str | None  # the workers' queue it is sent to; None: it runs here
    task_queue: bool  # that queue is the task's own (it was sent to workers), not --on
    agent: str | None  # the agent bar supervises it as; None: a plain command
    agent_seen: bool  # that agent was seen in the command, not named by --agent


def place_run(
    task: Task,
    argv: list[str],
    *,
    on: str | None,
    agent: str | None,
    no_agent: bool,
    limited: bool,
    detach: bool,
) -> RunPlace:
    """Where ``bar run ARGV`` runs: on ``on``'s workers, else on the task's own queue if
    it was sent to workers, else here; and the agent it is supervised as: ``agent``, else
    the one ``argv`` starts (none with ``no_agent``). A step that runs here with session
    limits (``limited``: --max-tokens, --max-cost) needs an agent; ``detach`` needs a queue."""
    placed = placement_of(task) if on is None else None
    queue = on if placed is None else placed.queue
    if detach and queue is None:
        raise UsageError("--detach sends a step to workers: give --on QUEUE")
    seen = agent is None and not no_agent
    chosen = agent_of(argv) if seen else agent
    if queue is None and chosen is None and limited:
        raise UsageError(
            "--max-tokens and --max-cost limit an agent's session, and this command is not "
            "one bar supervises as an agent",
            hint="add --agent claude|codex|gemini if it runs one",
        )
    return RunPlace(queue, placed is not None, chosen, seen and chosen is not None)


def resolve_cwd(task: Task, value: str | None) -> str:
    """The directory a step runs in, relative to the worktree's root. ``value`` (``--cwd``)
    is relative to the worktree's root, or absolute inside it; None: where bar was
    started when that is inside the task's worktree, else the worktree's root."""
    from bar.step.run import resolve_cwd as resolve

    return resolve(task, value)


def plan_rollback(task: Task, to: str | None) -> Plan:
    """What ``rollback`` would change; writes nothing."""
    from bar.changes.rollback import plan

    return plan(task, to)


def rollback(
    task: Task, to: str | None = None, *, hard: bool = False, wait: bool = True
) -> RollbackStep | Checkpoint:
    """Restore a recorded state (``base``, a step id, a checkpoint; None: the state before
    the last step), as a step of its own that can be undone the same way. While a step
    runs (an agent session between turns), its ``bar run`` does it, as a checkpoint."""
    from bar.changes import rollback as verb
    from bar.step import transaction

    during = _rollback_in_running_step(task, to, hard)
    if during is not None:
        return during
    with _locked(task, "bar rollback", wait=wait) as fresh:
        target = verb.target_of(fresh, to)  # decided before hand edits are recorded
        transaction.prepare(fresh)
        return verb.rollback(fresh, target, hard=hard)


def trash_entries(task: Task) -> list[TrashEntry]:
    """What bar moved to the task's trash, oldest first (``bar.changes.trash``)."""
    from bar.changes import trash

    return trash.entries(task)


def trash_restore(
    task: Task, wanted: list[str], to: Path | None = None, *, wait: bool = True
) -> Restored:
    """Put back what ``wanted`` names (entry ids or paths; none: the newest entry) at its
    path in the worktree, or under ``to``; never over anything there. Under the task's
    lock: no command of bar writes the worktree meanwhile."""
    from bar.changes import trash

    with _locked(task, "bar trash restore", wait=wait) as fresh:
        return trash.restore(fresh, trash.select(fresh, wanted), to, quiet=True)


def verify(
    task: Task, state: str | None = None, on_progress: Callable[[int, int], None] | None = None
) -> VerifyReport:
    """Every file of a recorded state (None: the last) hashed and compared with the
    worktree, byte for byte (``bar.history.verify``). Reads only; takes no lock."""
    from bar.changes.orders import last_state
    from bar.history import verify as proving

    task.require_worktree()
    name, commit = last_state(task)
    if state is not None:
        found = states.resolve(task, state)
        name, commit = found.name, found.commit
    return proving.check(task.worktree, commit, name, scratch=task.dir, on_progress=on_progress)


def verify_and_record(
    task: Task, *, wait: bool = True, on_progress: Callable[[int, int], None] | None = None
) -> tuple[VerifyReport, Step | None, VerifyReport]:
    """``verify`` against the last state, under the task's lock; what differs is recorded
    as a ``manual`` step (the files no stat shows changed are hashed whatever their stat
    says). The report before, the step recorded (None: nothing differed), the report
    after."""
    from bar.history import verify as proving
    from bar.step import transaction

    with _locked(task, "bar verify --record", wait=wait) as fresh:
        transaction.finish_pending(fresh)
        before = verify(fresh, on_progress=on_progress)
        if before.matches:
            return before, None, before
        last = fresh.ledger.last()
        proving.mark_for_recording(fresh.index, before)
        transaction.prepare(fresh)
        recorded = load_task(fresh.project, fresh.id)
        step = recorded.ledger.last()
        after = verify(recorded)
        made = step if step is not None and (last is None or step.number > last.number) else None
        return before, made, after


def _rollback_in_running_step(task: Task, to: str | None, hard: bool) -> Checkpoint | None:
    """Ask the running step's ``bar run`` to roll back to ``to`` (None: no step is
    running; or no target named, or ``--hard``, which wait for the step to end)."""
    running = journals.RUN.read(task.paths)
    if to is None or hard or running is None or not task.paths.socket.exists():
        return None  # as usual: wait for the step to end (or fail at once with --no-wait)
    if not is_locked(task.paths.lock):
        return None
    from bar.errors import StepBusy
    from bar.history import checkpoints  # (only when a step runs: not on a plain rollback)
    from bar.step import channel

    reply = channel.request(str(task.paths.socket), "rollback", "-", to.encode())
    if reply is None:
        return None  # the step has just ended: roll back as usual
    if reply.exit_code != 0:
        message, _, hint = reply.stderr.decode("utf-8", "replace").partition("\nhint: ")
        error = StepBusy(message, hint=hint or None)
        error.exit_code = reply.exit_code
        raise error
    done = checkpoints.Checkpoint.from_record(running.step_id, json.loads(reply.stdout))
    assert done is not None
    return done


def sync(
    task: Task,
    onto: str | None = None,
    *,
    allow_conflicts: bool = False,
    dry_run: bool = False,
    wait: bool = True,
) -> SyncPlan:
    """Merge branch ``onto`` (default: the base branch) into the task; its tip is the new base."""
    from bar.changes import sync as verb

    if dry_run:
        return verb.plan(task, onto, dry=True)
    with _changing(task, "bar task sync", wait=wait) as fresh:
        return verb.sync(fresh, onto, allow_conflicts=allow_conflicts)


def undo(
    task: Task, *, redo: bool = False, dry_run: bool = False, wait: bool = True
) -> tuple[UndoPlan, RollbackStep | None]:
    """Undo the last step not undone (``redo``: redo the last undone one) as a rollback."""
    from bar.changes import undo as verb

    if dry_run:
        return verb.plan(task, redo=redo, dry_run=True), None
    with _changing(task, "bar redo" if redo else "bar undo", wait=wait) as fresh:
        return verb.undo(fresh, redo=redo)


def apply(
    task: Task,
    *,
    mode: str = "commit",
    target: str | None = None,
    message: str | None = None,
    dry_run: bool = False,
    wait: bool = True,
    at: str | None = None,
    preview: bool = False,
    create: bool = False,
    start: str | None = None,
) -> ApplyResult:
    """Land the task's work on ``target`` (default: the branch it was created from,
    ``bases.branch``) as one commit or a merge; ``at``: a recorded state (``3``, ``3.2``);
    ``dry_run``: only say what would happen (``preview``: with the text of the change).
    ``create``: ``target`` does not exist yet: make it, at ``start`` (default: the task's
    base). A task without its worktree is applied from its record."""
    from bar.changes import apply as verb
    from bar.step import transaction

    if start is not None and not create:
        raise UsageError("a start point is for a branch --create makes")
    if create and not target:
        raise UsageError("--create makes the branch --target names", hint="add --target NEW-BRANCH")
    making = verb.Create(start) if create else None
    if dry_run:
        state = states.resolve(task, at) if at else None
        return verb.dry_run(
            task,
            mode=mode,
            target_branch=target,
            message=message,
            at=state,
            preview=preview,
            create=making,
        )
    with _locked(task, "bar apply", wait=wait) as fresh:  # (prepared by verb.apply)
        state = states.resolve(fresh, at) if at else None
        return verb.apply(
            fresh,
            mode=mode,
            target_branch=target,
            message=message,
            at=state,
            prepare=(
                transaction.prepare_from_record if verb.from_record(fresh) else transaction.prepare
            ),
            create=making,
        )


# --- reading the record --------------------------------------------------------------


def log(task: Task, n: int | None = None, chosen: Selection | None = None) -> list[Step]:
    """The task's steps, oldest first (the last ``n`` only, read from the end); ``chosen``:
    only those its filters let through (``log_selection``), the last ``n`` of them."""
    if n is not None and n < 0:
        raise UsageError("-n takes a number of steps, 0 or more")
    if chosen is not None and not chosen.everything:
        from bar.ledger.select import select

        kept = select(task.dir, task.ledger.read_all(), chosen)
        return kept if n is None else kept[len(kept) - n :] if n else []
    return task.ledger.tail(n) if n is not None else task.ledger.read_all()


def log_selection(
    *,
    grep: str | None = None,
    ignore_case: bool = False,
    kinds: Sequence[str] = (),
    agent: str | None = None,
    since: str | None = None,
) -> Selection:
    """``bar log``'s filters (``--grep``, ``--kind``, ``--agent``, ``--since``), checked."""
    from bar.ledger.select import selection

    return selection(grep=grep, ignore_case=ignore_case, kinds=kinds, agent=agent, since=since)


def log_rows(
    task: Task,
    make: Callable[[Step], list[Any]],
    tag: str,
    check: Callable[[list[Any]], bool],
) -> list[list[Any]]:
    """``make(step)`` for every step of the task, oldest first: the rows made from the
    ledger's lines are kept beside it (``bar.ledger.rows``; ``check`` tells a row read back
    that ``make`` could have made), so a long task's full log makes rows only for the steps
    recorded since the last one."""
    from bar.ledger import rows

    return rows.rows(task.ledger, task.paths.kept_rows("log"), make, tag, check)


def show(task: Task, step_ref: str | None = None) -> Step:
    """The step ``step_ref`` names; None: the latest, as ``git show`` shows HEAD."""
    if step_ref is not None:
        return task.ledger.get(parse_step_ref(step_ref))
    last = task.ledger.last()
    if last is None:
        raise StepNotFound(
            f"task {task.name} ({task.id}) has no steps yet",
            hint="record one with: bar run -- CMD",
        )
    return last


def rollback_text(task: Task | None, step: RollbackStep) -> str:
    """A rollback, an undo or a redo in words, the same on every face: an undo or redo
    says what the step it names was (``undo of step 0006 (rollback to step 0003)``),
    read from ``task``'s ledger (None: its id alone)."""
    from bar.ledger.describe import rollback_text as said

    named = step.undo_of or step.redo_of
    undone: Step | None = None
    if named and task is not None:
        try:
            undone = task.ledger.get(named)
        except BarError:
            undone = None  # a line a crash tore: its id alone is said
    return said(step, undone)


def checkpoints(task: Task, step_id: str) -> list[Checkpoint]:
    """The checkpoints of a step (of the running one too), in order."""
    from bar.history import checkpoints as cps

    return cps.read(task, step_id)


def checkpoint(task: Task, name: str) -> Checkpoint:
    """One checkpoint, named ``STEP.N`` (``3.2``, ``0003.2``)."""
    from bar.history import checkpoints as cps

    return cps.lookup(task, name)


def blame(task: Task, path: str, at: str | None = None) -> Blame:
    """Each line of ``path`` (relative to the worktree) in a recorded state (default: the
    last), with the step or checkpoint that last changed it."""
    from bar.history.blame import blame as verb

    return verb(task, path, states.resolve(task, at) if at else None)


def from_a_running_step(local_port: int, remote_port: int) -> bool:
    """Whether the local TCP connection from ``local_port`` to ``remote_port`` was made
    by a process of a running step (what ``bar ui`` never serves)."""
    from bar.sandbox import running

    return running.holds_socket(local_port, remote_port)


def ui_launch_dir() -> Path:
    """Where ``bar ui`` leaves the page that hands the browser its token (hidden from
    every step)."""
    from bar.store.layout import ui_launch_dir as where

    return where()


def blame_rev(project: Project, path: str, rev: str) -> RevBlame:
    """Each line of ``path`` as the commit ``rev`` has it, traced through the commits'
    ``Bar-Task``/``Bar-Step`` links (squash merges too) to the task step or tool call
    that wrote it, and the prompt before it; a line no task here wrote takes what an
    imported git-ai note says of it (``bar notes import``)."""
    from bar.base.record import replace
    from bar.formats.gitai import Notes
    from bar.history.lineage import blame_rev as verb

    found = verb(project, path, rev)
    notes = Notes(project)
    if notes.commits:  # lines no task here wrote, as the imported git-ai notes tell
        for i, line in enumerate(found.lines):
            if line.traced.origin is None:
                said = notes.line(line.traced.commit, *line.source)
                if said is not None:
                    traced = replace(line.traced, authorship=said)
                    found.lines[i] = replace(line, traced=traced)
    return found


def artifact_path(task: Task, rel: str) -> Path:
    """An artifact the ledger names; refused if it leads outside the task directory (a
    link planted in the artifacts directory included)."""
    path = (task.dir / rel).resolve()
    if not path.is_relative_to(task.dir.resolve()):
        raise CorruptFile(
            f"artifact {rel} of task {task.name} ({task.id}) leads outside the task "
            f"directory {task.dir}",
            hint="run `bar doctor` to check the task",
        )
    return path


def output_of(task: Task, step: Step) -> Iterator[bytes] | None:
    """A step's output in bar's format (``=== STDOUT ===`` ...), in pieces as it is read;
    None if it printed nothing. A pty step of an earlier bar kept no output file: its
    text is derived from its recording (``bar.terminal.cast.text_of_cast``)."""
    if step.artifacts.output:
        return _pieces(artifact_path(task, step.artifacts.output))
    if step.artifacts.cast:
        from bar.terminal.cast import text_of_cast

        return text_of_cast(artifact_path(task, step.artifacts.cast))
    return None


def read_output(task: Task, step: Step) -> bytes | None:
    """``output_of`` as one string of bytes (None: it printed nothing, or its file is gone)."""
    pieces = output_of(task, step)
    try:
        return None if pieces is None else b"".join(pieces)
    except NotFound:
        return None


def _pieces(path: Path) -> Iterator[bytes]:
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                yield chunk
    except FileNotFoundError:
        raise NotFound(f"artifact {path} is missing") from None


def read_artifact(task: Task, rel: str | None) -> bytes | None:
    if not rel:
        return None
    try:
        return artifact_path(task, rel).read_bytes()
    except FileNotFoundError:
        return None


def doctor(project: Project, *, repair: bool = False) -> Doctor:
    """Check every file, ledger line, ref and worktree; with ``repair``, fix what can be
    fixed without losing anything. ``Doctor.ok`` says whether anything is left."""
    from bar.project.doctor import Doctor

    if not project.dir.is_dir():
        from bar.project.relocated import not_registered

        raise not_registered(project)
    doc = Doctor(project)
    doc.check()
    if repair:
        doc.repair()
    return doc


def doctor_groups(doc: Doctor) -> list[Finding | Group]:
    """``doc``'s findings in order, those alike (the same problem in many files) put
    together: ``bar.project.doctor.grouped``."""
    from bar.project.doctor import grouped

    return grouped(doc.findings)


def projects() -> list[Project]:
    """Every project registered under ``$BAR_HOME``, by name (what ``bar ui`` lists)."""
    from bar.project.known import registered

    return registered()


def branches(project: Project) -> list[str]:
    """The repository's own branches, the most recently committed first: where a task can
    be applied (the branches bar makes for tasks and worktrees, under ``git.branch_prefix``,
    are left out)."""
    prefix = project.config.git.branch_prefix
    return [b for b in git.local_branches(project.root) if not (prefix and b.startswith(prefix))]


def running(task: Task) -> journals.RunIntent | None:
    """The step a ``bar run`` is recording in the task right now, if one is."""
    return journals.RUN.read(task.paths) if task.active and is_running(task) else None


def live_step(task: Task, chosen: Selection | None = None) -> LiveStep | None:
    """The task's step that is not in the ledger yet: running, being recorded, or left by
    a ``bar run`` that died (``state``), with what is known of it (``bar.step.live``);
    ``chosen``: only if ``bar log``'s filters (``log_selection``) let it through."""
    if not task.active or not task.paths.marker.exists():
        return None  # (what nearly every ``bar log`` finds: no more to load)
    from bar.step import live

    found = live.current(task)
    if found is None or chosen is None:
        return found
    return found if live_selected(task, found, chosen) else None


def live_selected(task: Task, found: LiveStep, chosen: Selection) -> bool:
    """Whether ``bar log``'s filters let through a step not recorded yet: a run step, by
    its command, its agent, when it started, and what it printed so far."""
    if chosen.everything:
        return True
    from bar.ledger.select import holds_running
    from bar.step import live

    agent = found.agent.get("name") if isinstance(found.agent, dict) else None
    return holds_running(
        chosen,
        cmd=found.cmd,
        agent=agent if isinstance(agent, str) else None,
        started_at=found.started_at,
        lines=lambda: live.output_lines(task, found.step_id),
    )


def step_selected(task: Task, step: Step, chosen: Selection) -> bool:
    """Whether ``bar log``'s filters let ``step`` through (``bar log --follow`` asks of
    each step recorded as it comes)."""
    if chosen.everything:
        return True
    from bar.ledger.select import select

    steps = [step]
    named = step.undo_of or step.redo_of if isinstance(step, RollbackStep) else None
    if named:  # (what an undo or redo undid is part of what the log says of it)
        try:
            steps.insert(0, task.ledger.get(named))
        except StepNotFound:
            pass
    return any(kept is step for kept in select(task.dir, steps, chosen))


def follower_of(task: Task, step_ref: str, mark: Mark | None = None) -> Follower:
    """A follower of step ``step_ref``'s output and checkpoints, from ``mark`` (default:
    its start) to its recorded end: a step that is recorded (its record gives it all at
    once), the one running or left by a bar that died, or the next one to start. Any
    other is not there to follow."""
    from bar.model.records import format_step_id
    from bar.step import live

    step_id = parse_step_ref(step_ref)
    live_now = live.current(task)
    newest = task.ledger.last()
    upcoming = format_step_id(
        max(newest.number if newest is not None else 0, live_now.number if live_now else 0) + 1
    )
    if live_now is None or live_now.step_id != step_id:
        if step_id != upcoming:
            task.ledger.get(step_id)  # (says so if there is no such step)
        elif live.recorded(task, step_id) is None:
            steps_run_here(task)  # (one to wait for)
    return live.Follower(task, step_id, mark)


def steps_run_here(task: Task) -> None:
    """Refuse to wait for a step of a task whose steps do not run on this machine: a
    closed task, a copy fetched from another one, a task sent to workers."""
    if task.read_only:
        raise UsageError(
            f"task {task.name} is a copy fetched from another machine: no step runs in it here",
            hint=f"`bar log --task {task.id}` lists its steps; `bar fetch` brings new ones",
        )
    if not task.active:
        raise UsageError(
            f"task {task.name} is closed: no step runs in it",
            hint=f"`bar log --task {task.id}` lists its steps; `bar task reopen {task.name}` "
            "opens it again",
        )
    where = placement_of(task)
    if where is not None:
        raise UsageError(
            f"task {task.name} runs its steps on workers (queue {where.queue}), not here",
            hint="their output streams to the terminal of `bar run --on`; `bar status` says "
            "what runs there, and `bar fetch` brings their records",
        )


def glance_step(task: Task, step_id: str, limit: int | None = None) -> Glance:
    """One look at step ``step_id`` while it runs: its output (the first ``limit`` bytes
    at least, if given) and checkpoints so far; its record, if it ended meanwhile."""
    from bar.step import live

    return live.glance(task, step_id, limit)


def watch_steps(task: Task, after: int) -> Iterator[Event | Started]:
    """The task's steps after step number ``after`` as they come: each that starts, its
    checkpoints, each recorded, each whose bar died; until the caller stops."""
    from bar.step import live

    return live.watch(task, after)


def wait_for_step(task: Task) -> LiveStep:
    """The task's step running now, else the next one to start (this waits for it; refused
    where no step would come: ``steps_run_here``)."""
    from bar.step import live

    if live.current(task) is None:
        steps_run_here(task)
    return live.next_step(task)


# --- agent sessions (docs/sessions.md) -----------------------------------------------


def session(task: Task, step_ref: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A step's agent session: the ledger line's ``session`` summary (None: the step ran
    no agent whose transcript bar read) and its events in order (``bar.session.events``).
    ``step_ref`` may name a checkpoint (``3.2``): the events up to the tool call that made
    it, and that call's result (``NotFound`` when no call of the session made it)."""
    from bar.history import checkpoints as cps
    from bar.session import stored

    if cps.parse_name(step_ref) is None:
        step = show(task, step_ref)
        return stored.summary(step), stored.events(task, step)
    cp = cps.lookup(task, step_ref)
    step = show(task, cp.step_id)
    found = stored.events(task, step)
    if not found:
        return stored.summary(step), []
    return stored.summary(step), _events_until(found, cp)


def _events_until(events: list[dict[str, Any]], cp: Checkpoint) -> list[dict[str, Any]]:
    """The events up to the tool call that made ``cp``, and that call's result."""
    at = next(
        (
            i
            for i, e in enumerate(events)
            if e["type"] == "tool_call" and e.get("checkpoint") == cp.name
        ),
        None,
    )
    if at is None:
        made = {"residual": "changes no hook reported", "rollback": "a rollback"}.get(cp.kind)
        raise NotFound(
            f"no tool call in the session of step {cp.step_id} made checkpoint {cp.name}"
            + (f" ({made})" if made else ""),
            hint=f"`bar show {cp.step_id} --session` shows the whole session",
        )
    call = events[at]["id"]
    result = [e for e in events[at + 1 :] if e["type"] == "tool_result" and e.get("id") == call]
    return [*events[: at + 1], *result[:1]]


def session_totals(task: Task) -> dict[str, Any] | None:
    """What the task's agent steps add up to (steps, turns, tool calls, tokens, cost when
    every step's is known, models); None: no step kept a session."""
    from bar.session import stored

    return stored.task_totals(task)


def tokens_text(summary: dict[str, Any]) -> str:
    """``1.2k in, 340 out, 5.0k cached``: the tokens of a session or of a task's totals."""
    from bar.session import stored

    return stored.tokens_text(summary)


def call_target(task: Task, args: Any) -> str:
    """What an agent's tool call acted on, in one line (its command, its file relative to
    the worktree, ...): ``bar.session.events.call_target``."""
    from bar.session.events import call_target as target

    return target(args, str(task.worktree))


def result_status(result: dict[str, Any]) -> str:
    """A session's tool result in one word (``ok``, ``exit 2``, ``interrupted``,
    ``failed``): ``bar.session.events.status``."""
    from bar.session.events import status

    return status(result)


def output_preview(text: str, lines: int = 3) -> list[str]:
    """A tool's output in a few lines, its last one included:
    ``bar.session.events.preview``."""
    from bar.session.events import preview

    return preview(text, lines)


def cost_text(summary: dict[str, Any]) -> str | None:
    """``$0.0123`` for a session or a task's totals whose cost is known, else None."""
    from bar.session import stored

    return stored.cost_text(summary)


# --- sharing through git remotes (docs/sharing.md) -----------------------------------


def remote(project: Project, name: str | None = None) -> Remote:
    """The remote ``name`` (a remote of the repository or a URL), else ``share.remote``,
    else ``origin``."""
    from bar.share.remotes import resolve

    return resolve(project, name)


def push(
    project: Project,
    tasks: Sequence[Task],
    to: Remote,
    *,
    allow: Sequence[str] = (),
    dry_run: bool = False,
    progress: Any = None,
) -> Pushed:
    """Publish the tasks' histories to ``to`` (fast-forward only), after scanning what
    would leave; a finding not in ``allow`` keeps that task's history here."""
    from bar.share.push import push as verb

    return verb(
        project, list(tasks), to, allow=frozenset(allow), dry_run=dry_run, progress=progress
    )


def fetch(project: Project, source: Remote, *, progress: Any = None) -> Fetched:
    """Bring the remote's task histories here: new ones and updates as read-only copies;
    this machine's own tasks are compared, never changed."""
    from bar.model import placement
    from bar.share import fetch as fetching

    fetched = fetching.fetch(project, source, progress=progress)
    for one in fetched.tasks:
        if one.outcome == fetching.BEHIND and placement.of(project, one.task_id) is not None:
            from bar.workers import client

            # a task that runs on workers: what they recorded is its record here too
            moved = client.came_back(project, one.task_id)
            one.outcome = fetching.UPDATED
            one.steps = load_task(project, one.task_id).ledger_steps()
            one.message = "steps recorded on workers, brought here" + (
                f"; {moved}" if moved else ""
            )
    return fetched


def adopt_task(project: Project, task: Task) -> TaskAdopted:
    """Continue here a task another machine recorded (a fetched copy, or a task of this
    machine that went on elsewhere): its worktree at the last recorded state. A task
    that runs on workers comes back (none of its steps may be running there)."""
    from bar.model import placement
    from bar.share.adopt import adopt

    if placement.of(project, task.id) is not None:
        from bar.share.adopt import Adopted
        from bar.workers import client

        client.take_back(project, task.id)  # its last steps first
        client.recall(project, task)
        task = start_task(load_task(project, task.id))
        return Adopted(task, "", task.ledger_steps(), "")
    return adopt(project, task)


if TYPE_CHECKING:
    from bar.model.placement import Placement


def on_workers(task: Task) -> dict[str, Any] | None:
    """Where a task sent to workers runs and what its workflow says now: the step
    running (and on which worker), the steps waiting, the last results, a question from
    its agent; ``error`` instead when the server does not answer. None: it runs here."""
    where = placement_of(task)
    if where is None:
        return None
    from bar.workers import client

    out: dict[str, Any] = where.to_json()
    try:
        out["now"] = client.state(task.project, task)
    except BarError as exc:
        out["error"] = str(exc)
        if exc.hint:
            out["hint"] = exc.hint
    return out


def running_on_workers(
    project: Project, tasks: Sequence[Task]
) -> tuple[dict[str, dict[str, Any]], list[Unreachable]]:
    """For a page listing ``tasks``: what runs now on workers for each one sent there
    (task id to ``{"queue", "running", "sent", "why"}``), as the Temporal server says it
    with no worker to ask, and why each server that does not answer does not, said once
    (its tasks are left out). Nothing is asked when none of them runs on workers."""
    placed = [t for t in tasks if placement_of(t) is not None]
    if not placed:
        return {}, []
    from bar.workers import client

    return client.running_now(project, placed)


# --- workers (docs/workers.md): imported only by the commands that talk to a server ---

if TYPE_CHECKING:
    from bar.workers.client import Followed, Sent, StepOrder


def temporal_server(project: Project, given: str | None) -> str:
    """The Temporal server: ``given`` (``--server``), else ``BAR_TEMPORAL``, else
    ``workers.server``."""
    from bar.workers import temporal

    return temporal.server_of(project, given)


def run_dev_server(port: int, db: str | None, *, say: Any) -> int:
    """``bar worker dev-server``: a Temporal dev server on 127.0.0.1 in the foreground
    until Ctrl-C or SIGTERM (``db``: its database file, else in memory). Inside a
    project whose workers.namespace is not ``default``, that namespace is made too."""
    from bar.store.layout import bar_home
    from bar.workers import devserver

    namespaces: list[str] = []
    try:
        namespaces.append(open_project().project.config.workers.namespace)
    except BarError:
        pass  # (anywhere: no project, or one whose config cannot be read)
    log = bar_home() / "logs" / f"temporal-dev-server-{port}.log"
    return devserver.serve(port, Path(db) if db else None, log, say, namespaces)


def send_to_workers(
    task: Task, queue: str, server: str | None, *, plan: bool = False, say: Any = None
) -> Sent:
    """Send the task to the workers of ``queue``: its history pushed, its worktree here
    removed, its workflow started; ``plan``: a ``bar worker --claim`` takes it."""
    from bar.workers import client

    address = temporal_server(task.project, server)
    return client.send(
        task.project,
        task,
        queue,
        address,
        claim={"argv": []} if plan else None,
        say=say or (lambda _: None),
    )


def order_step(task: Task, step: StepOrder) -> str:
    """Send one step to the task's workers; its request id."""
    from bar.workers import client

    return client.order(task.project, task, step)


def follow_step(task: Task, request: str, *, show: Any, say: Any) -> Followed:
    """Stream the step's output until it ends; then its history is fetched back."""
    from bar.workers import client

    return client.follow(task.project, task, request, show=show, say=say)


def cancel_step(task: Task) -> dict[str, Any]:
    """Stop the task's running step wherever it runs: here its ``bar run`` gets SIGINT
    (as Ctrl-C: the step is recorded with how it ended); on workers, the worker does the
    same and drops the steps waiting behind it."""
    import os
    import signal

    where = placement_of(task)
    if where is not None:
        from bar.workers import client

        client.cancel(task.project, task)
        return {"task_id": task.id, "where": "workers", "queue": where.queue, "step_id": None}
    intent = running(task)
    if intent is None or not intent.pid:
        raise NotFound(f"task {task.name} has no step running", hint="`bar status`")
    try:
        os.kill(intent.pid, signal.SIGINT)
    except ProcessLookupError:
        raise NotFound(
            f"task {task.name}'s step {intent.step_id} is no longer running",
            hint="its next command records it",
        ) from None
    return {"task_id": task.id, "where": "here", "queue": None, "step_id": intent.step_id}


def placement_of(task: Task) -> Placement | None:
    """Where a task sent to workers runs (its queue, server, workflow), or None: here."""
    from bar.model import placement

    return placement.of(task.project, task.id)


def own_tasks(project: Project) -> list[Task]:
    """The open and closed tasks of this machine (not fetched copies)."""
    return [t for t in list_tasks(project) if not t.read_only]


def install_push_hook(project: Project) -> PushHook:
    """Install the ``pre-push`` hook that pushes task histories with the branch (a hook
    that was there is kept and run first)."""
    from bar.share.prepush import install

    return install(project)


def tasks_pushed(project: Project, lines: Sequence[str]) -> list[Task]:
    """The tasks of this machine behind the commits a ``git push`` sends (the pre-push
    hook's stdin ``lines``)."""
    from bar.share.prepush import tasks_pushed as found

    return found(project, list(lines))


# --- attribution for other tools, and review of a pushed branch (docs/sharing.md) ----

if TYPE_CHECKING:
    from bar.history.trace import TraceRecord
    from bar.share.review import Review


def export_trace(task: Task) -> list[TraceRecord]:
    """The task's attribution as Agent Trace records (``bar.history.trace``): one per
    apply whose commit is here, and one for the last recorded state if none landed it."""
    from bar.history.trace import export

    return export(task)


def export_atif(task: Task, step_ref: str | None = None) -> dict[str, Any]:
    """The task's agent sessions as an ATIF trajectory (``bar.formats.atif``);
    ``step_ref``: that step's session alone."""
    from bar.formats import atif

    return atif.export(task, step_ref)


def export_otel(task: Task, step_ref: str | None = None) -> dict[str, Any]:
    """The task's spans (``step_ref``: that step's alone) as one OTLP/JSON export request
    (``bar.formats.otel``); ``MissingExtra`` without the OpenTelemetry SDK."""
    from bar.formats import otel

    steps = [show(task, step_ref)] if step_ref is not None else None
    return otel.otlp_json(otel.task_spans(task, steps, with_task=step_ref is None))


def export_notes(
    project: Project, tasks: list[Task] | None, rev: str | None, *, force: bool = False
) -> Exported:
    """git-ai authorship notes on the applied commits of ``tasks`` (default: every task
    here), in ``rev``'s history when given (``bar.formats.gitai``)."""
    from bar.formats import gitai

    listed = tasks if tasks is not None else list_tasks(project)
    return gitai.export(project, listed, rev, force=force)


def import_notes(project: Project, ref: str | None = None) -> Imported:
    """Read the git-ai notes of ``ref`` (default ``refs/notes/ai``) for ``bar blame --rev``."""
    from bar.formats import gitai

    return gitai.import_notes(project, ref or gitai.NOTES_REF)


def review(project: Project, branch: str, base: str | None = None) -> Review:
    """The tasks, steps, sessions and policy decisions behind the commits of ``branch``
    that ``base`` (default: git.default_base) lacks (``bar.share.review``);
    ``NotFound`` when none of those commits names a task."""
    from bar.share.review import review as verb

    return verb(project, branch, base)
