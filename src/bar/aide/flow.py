"""``bar flow``: where the work of a task stands, in phases and steps, with a snapshot each.

The format is aide flow's FlowStatus (docs/decide-flow.md; its field names are fixed), kept as
``flow-status.json`` in the task directory exactly as aide writes it, so that a client that
only knows aide reads it: ``task_id`` (the start, ``2025-01-15T10-30-00``),
``current_phase``, ``current_step``, ``started_at`` and ``history[]`` of {``timestamp``,
``action``, ``phase``, ``step``, ``summary``, ``git_commit?``}, times to the second with
the local offset (``2025-01-15T10:30:00+08:00``), and no key of bar's. What bar needs
besides is in a file of its own, ``flow-states.json`` (versioned): for each entry, bar's
name of the state ``git_commit`` holds (``3``, ``3.2``, ``base``), which ``--rollback``
returns to, and the entry's time to the millisecond (UTC), by which ``phase_of`` places
steps. An older bar wrote ``state`` into the entries, with milliseconds: such a file is
read as it is, and the next action writes it in aide's shape. Phases come from
``flow.phases`` (default ``PHASES``).

``step`` counts the entries (every action is one more, as in the seed's example).
``back-step`` returns to the state before the last ``next-step`` of the current phase that
no ``back-step`` took back yet; ``back-part`` to the state in which a phase (by default the
one before) was last entered. Each entry's ``git_commit`` is a snapshot commit whose
message follows the seed: ``[bar] impl: finished the user model``, ``[bar] verify issue:
...``, ``[bar] impl back-step: ...``; where the snapshot already existed with another
message, a commit of the same tree and parents with the flow's message is made and kept
under ``refs/bar/flow/<task id>/``.

With ``flow.commits: branch`` each entry's commit is instead a commit on the task branch
(``commit_on_branch``), as aide's flow makes one. ``flow-status.json`` is copied to where
aide's clients look, ``.aide/flow-status.json`` in the worktree (``bar.aide.place``).

Every change goes through an order (``bar.changes.orders``), so an agent inside a running step
can move its own flow: its ``bar run`` takes the snapshot as a checkpoint of the step.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bar import git
from bar.aide import place
from bar.base.clock import now_iso
from bar.base.migrate import upgrade
from bar.base.notices import warn
from bar.changes import orders
from bar.errors import BarError, CorruptFile, UsageError
from bar.git import BAR_IDENTITY
from bar.history.checkpoints import Checkpoint
from bar.model.tasks import Task
from bar.store.files import write_bytes_atomic, write_json_atomic

PHASES = ("flow-design", "impl", "verify", "docs", "finish")
ACTIONS = ("start", "next-step", "back-step", "next-part", "back-part", "issue", "error")
FILE = "flow-status.json"
STATES = "flow-states.json"  # bar's own: each entry's state and exact time
REFS = "refs/bar/flow/"
KEYS = ("task_id", "current_phase", "current_step", "started_at", "history")  # seed 004 §3
ENTRY_KEYS = ("timestamp", "action", "phase", "step", "summary", "git_commit")


class FlowError(BarError):
    """An action the flow's state does not allow (nothing was changed)."""


def path(task: Task) -> Path:
    return task.dir / FILE


def phases(task: Task) -> tuple[str, ...]:
    return task.project.config.flow.phases or PHASES


def _file(task: Task) -> dict[str, Any] | None:
    """``flow-status.json`` as it is, or None before ``bar flow start``."""
    try:
        data = json.loads(path(task).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CorruptFile(f"cannot read {path(task)}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise CorruptFile(f"{path(task)} is not a flow status (no history)")
    if not all(isinstance(e, dict) for e in data["history"]):
        raise CorruptFile(f"{path(task)} has a history entry that is not an object")
    return data


def _kept(task: Task) -> list[dict[str, Any]]:
    """``flow-states.json``'s entries: {``git_commit``, ``state``, ``at``} each, in the
    order of the history's ([] when there is none yet)."""
    where = task.dir / STATES
    try:
        data = json.loads(where.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise CorruptFile(f"cannot read {where}: {exc}") from None
    if not isinstance(data, dict):
        raise CorruptFile(f"{where} does not hold a JSON object")
    entries = upgrade("flow-states", data, where).get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise CorruptFile(f"{where} has no list of entries")
    return entries


def _seed_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A history entry with the seed's keys only, its time as the seed writes it."""
    found = {k: entry[k] for k in ENTRY_KEYS if k in entry}
    if "timestamp" in found:
        found["timestamp"] = seed_time(found["timestamp"])
    return found


def _seed_status(data: Mapping[str, Any]) -> dict[str, Any]:
    found = {k: data[k] for k in KEYS if k in data}
    if "started_at" in found:
        found["started_at"] = seed_time(found["started_at"])
    found["history"] = [_seed_entry(e) for e in data["history"]]
    return found


def seed_time(text: object) -> object:
    """A time bar wrote, as the seed writes it: ``2025-01-15T10:30:00+08:00`` (an older
    bar's milliseconds dropped); what is not a time, as it is."""
    if not isinstance(text, str):
        return text
    try:
        return dt.datetime.fromisoformat(text).isoformat(timespec="seconds")
    except ValueError:
        return text


def _extras(
    history: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """For each history entry, bar's {``git_commit``, ``state``, ``at``}: the one kept for
    it in ``flow-states.json`` (at its place, else the last of its commit), else what an
    older bar wrote into the entry itself."""
    found: list[dict[str, Any]] = []
    for i, entry in enumerate(history):
        commit = entry.get("git_commit")
        mine: Mapping[str, Any] = {}
        if i < len(kept) and kept[i].get("git_commit") == commit:
            mine = kept[i]
        elif isinstance(commit, str) and commit:
            mine = next((k for k in reversed(kept) if k.get("git_commit") == commit), {})
        state = mine.get("state") or entry.get("state")
        found.append(
            {
                "git_commit": commit,
                "state": state if isinstance(state, str) else None,
                "at": str(mine.get("at") or entry.get("timestamp") or ""),
            }
        )
    return found


def status(task: Task) -> dict[str, Any] | None:
    """The task's FlowStatus as the seed has it, or None before ``bar flow start``."""
    data = _file(task)
    return _seed_status(data) if data is not None else None


def view(task: Task) -> dict[str, Any] | None:
    """``status``, each history entry with bar's ``state`` (or None) and ``at`` (its time
    to the millisecond): what bar's own pages and commands read, never written."""
    data = _file(task)
    if data is None:
        return None
    found = _seed_status(data)
    extras = _extras(data["history"], _kept(task))
    found["history"] = [
        {**entry, "state": extra["state"], "at": extra["at"]}
        for entry, extra in zip(found["history"], extras, strict=True)
    ]
    return found


def history(task: Task) -> list[dict[str, Any]] | None:
    """The history of the task's flow as ``view`` has it (None: it has none)."""
    current = view(task)
    return list(current["history"]) if current is not None else None


def _moment(text: str) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def phase_of(history: Sequence[Mapping[str, Any]], started_at: str) -> str | None:
    """The phase current at ``started_at`` (a step's start): the phase of the last entry
    of ``history`` made at or before it (by its ``at`` where ``history`` has it, as
    ``view`` gives it, else by its ``timestamp``); None before the flow started."""
    when = _moment(started_at)
    if when is None:
        return None
    found: str | None = None
    for entry in history:
        at = _moment(str(entry.get("at") or entry.get("timestamp", "")))
        if at is not None and at <= when:
            found = str(entry.get("phase"))
    return found


def message(action: str, phase: str, summary: str) -> str:
    """The snapshot commit's message (seed §5, with ``bar`` for ``aide``)."""
    if action in ("issue", "error", "back-step", "back-part"):
        return f"[bar] {phase} {action}: {summary}"
    return f"[bar] {phase}: {summary}"


def plan(
    current: Mapping[str, Any] | None, action: str, names: Sequence[str], to: str | None = None
) -> tuple[str, int, int | None]:
    """(the phase after ``action``, its step, the index of the history entry it returns
    to, if it goes back); a ``FlowError`` when the flow's state does not allow it."""
    if action not in ACTIONS:
        raise UsageError(f"{action!r} is not a flow action", hint="one of " + ", ".join(ACTIONS))
    if current is None:
        if action != "start":
            raise FlowError(
                "the task's flow has not started", hint='start it: bar flow start "SUMMARY"'
            )
        return names[0], 1, None
    if action == "start":
        raise FlowError(
            f"the task's flow has started already (phase {current['current_phase']}, "
            f"step {current['current_step']})",
            hint="go on with next-step, next-part, issue, ...",
        )
    phase, history = str(current["current_phase"]), list(current["history"])
    step = int(current["current_step"]) + 1
    where = names.index(phase) if phase in names else -1
    if where < 0:
        raise FlowError(
            f"the flow's phase {phase} is not one of flow.phases ({', '.join(names)})",
            hint="put it back in flow.phases in your config.yaml",
        )
    if action == "next-part":
        if where + 1 >= len(names):
            raise FlowError(
                f"{phase} is the last phase: there is no next part",
                hint="record the end with next-step, or go back with back-part",
            )
        return names[where + 1], step, None
    if action == "back-part":
        target = to if to is not None else (names[where - 1] if where > 0 else None)
        if target is None:
            raise FlowError(f"{phase} is the first phase: there is no part before it")
        if target not in names[:where]:
            raise FlowError(
                f"{target} is not a phase before {phase}",
                hint="the phases before it: " + (", ".join(names[:where]) or "none"),
            )
        return target, step, _entered(history, target)
    if action == "back-step":
        return phase, step, _step_back(history, phase)
    return phase, step, None


def _entered(history: list[Mapping[str, Any]], phase: str) -> int:
    """The index of the entry that last entered ``phase``."""
    for i in range(len(history) - 1, -1, -1):
        if history[i].get("phase") == phase and (i == 0 or history[i - 1].get("phase") != phase):
            return i
    raise FlowError(f"the flow was never in phase {phase}")


def _step_back(history: list[Mapping[str, Any]], phase: str) -> int:
    """The index of the entry before the last ``next-step`` of ``phase`` (in its latest
    stretch) that no ``back-step`` took back."""
    owed = 0
    for i in range(len(history) - 1, 0, -1):
        entry = history[i]
        if entry.get("phase") != phase or history[i - 1].get("phase") != phase:
            break
        if entry.get("action") == "back-step":
            owed += 1
        elif entry.get("action") == "next-step":
            if owed == 0:
                return i - 1
            owed -= 1
    raise FlowError(
        f"there is no step to go back to in phase {phase}",
        hint="back-part returns to an earlier phase",
    )


def on_branch(task: Task) -> None:
    """Refuse (a ``FlowError``) a flow whose commits go on the task branch
    (``flow.commits: branch``) while the worktree is not on it: its commit would land
    where its HEAD is not."""
    said = git.git(task.worktree, "symbolic-ref", "-q", "HEAD", check=False).out.strip()
    if said != f"refs/heads/{task.branch}":
        raise FlowError(
            f"the worktree is not on the task branch {task.branch} (HEAD: {said or 'detached'}), "
            "and flow.commits is branch: the flow's commit would land elsewhere",
            hint=f"`git switch {task.branch}` in the worktree, or set flow.commits: snapshot in "
            f"{task.project.paths.config}",
        )


def commit_on_branch(ctx: orders.Context, state: str, text: str) -> str:
    """``flow.commits: branch``: a commit of the recorded state ``state``'s files on the
    task branch, with the flow's message, as aide's flow commits the project (reference
    004 §5: ``git add -A`` and ``git commit``): the branch moves to it (compare-and-swap),
    the worktree's index then holds its tree, and a ref under ``refs/bar/flow/<task id>/``
    keeps it should the branch be reset. Inside a running step, the step's view of its
    branch shows it (``Context.branch_moved``). Its author is the developer's, as of
    ``bar apply``'s commits."""
    task = ctx.task
    cwd, ref = task.worktree, f"refs/heads/{task.branch}"
    head = git.rev_parse(cwd, ref)
    made = git.commit_tree(cwd, git.tree_of(cwd, state), [head] if head else [], text)
    git.update_ref(cwd, ref, made, head, f"bar: {text.splitlines()[0]}")
    git.git(cwd, "update-ref", "-m", "bar: flow", f"{REFS}{task.id}/{made}", made)
    ctx.branch_moved()
    staged = git.git(cwd, "reset", "-q", check=False)  # (the index, as after `git commit -a`)
    if staged.returncode != 0:
        warn(
            f"the flow's commit {made[:10]} is on {task.branch}, but the worktree's index was "
            f"not brought to it ({staged.err.strip() or 'git reset failed'}): `git reset` there "
            "does it"
        )
    return made


def keep_commit(task: Task, commit: str, text: str) -> str:
    """``commit`` if its message is ``text``; else a commit of its tree and parents with
    that message, kept under ``refs/bar/flow/<task id>/``."""
    cwd = task.git_cwd
    if git.out(cwd, "log", "-1", "--format=%B", commit).strip() == text.strip():
        return commit
    parents = git.out(cwd, "rev-parse", f"{commit}^@").split()
    made = git.commit_tree(cwd, git.tree_of(cwd, commit), parents, text, identity=BAR_IDENTITY)
    git.git(cwd, "update-ref", "-m", "bar: flow", f"{REFS}{task.id}/{made}", made)
    return made


@orders.register("flow", "any")
def _act(ctx: orders.Context, args: Mapping[str, object]) -> dict[str, object]:
    action, summary = orders.require_args(args, "action", "summary")
    to = args.get("phase")
    data = _file(ctx.task)
    current = _seed_status(data) if data is not None else None
    extras = _extras(data["history"], _kept(ctx.task)) if data is not None else []
    names = phases(ctx.task)
    phase, step, back_to = plan(current, action, names, str(to) if isinstance(to, str) else None)
    branch = ctx.task.project.config.flow.commits == "branch"
    if branch:
        on_branch(ctx.task)  # (before anything is changed)
    rolled: dict[str, Any] | None = None
    if args.get("rollback"):
        if back_to is None or current is None:
            raise UsageError("--rollback goes with back-step and back-part")
        state = extras[back_to]["state"]
        if not isinstance(state, str):
            raise FlowError(f"entry {back_to + 1} of the flow names no state to return to")
        done = ctx.rollback(state)
        rolled = done.to_record()
    text = message(action, phase, summary)
    name, commit = ctx.state(f"flow {action}: {summary}", text)
    moment = dt.datetime.now().astimezone()
    now = moment.isoformat(timespec="seconds")
    entry = {
        "timestamp": now,
        "action": action,
        "phase": phase,
        "step": step,
        "summary": summary,
        "git_commit": commit_on_branch(ctx, commit, text)
        if branch
        else keep_commit(ctx.task, commit, text),
    }
    new = {
        "task_id": current["task_id"]
        if current and "task_id" in current
        else moment.strftime("%Y-%m-%dT%H-%M-%S"),
        "current_phase": phase,
        "current_step": step,
        "started_at": current["started_at"] if current else now,
        "history": [*(current["history"] if current else []), entry],
    }
    mine = {"git_commit": entry["git_commit"], "state": name, "at": now_iso()}
    # bar's file first: should the second write not happen, the entry is not in the
    # history, and its state in bar's file names nothing
    write_json_atomic(ctx.task.dir / STATES, {"version": 1, "entries": [*extras, mine]})
    text_out = json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomic(path(ctx.task), text_out.encode("utf-8", "backslashreplace"))
    place.copy_flow(ctx.task)  # where aide's clients look
    taken = ctx.last_checkpoint()
    return {
        "flow": new,
        "entry": {**entry, "state": name},
        "rollback": rolled,
        "checkpoint": taken.to_record() if isinstance(taken, Checkpoint) else None,
    }
