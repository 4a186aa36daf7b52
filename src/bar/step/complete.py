"""Recording a step that has ended, or whose ``bar`` was killed while it ran: its snapshot,
its patch and its ledger line (the commit point), then its intent removed
(docs/internals/record.md, "Order of writes").

``bar.step.run`` calls ``complete`` when the command has ended; ``bar.step.recovery``
calls the same ``complete`` with no outcome for a step whose ``bar`` died during it: the
step is recorded as interrupted, with every change made up to then.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bar import git
from bar.base.clock import ms_between, now_iso
from bar.base.notices import note, warn
from bar.base.record import record
from bar.changes import fast
from bar.history import checkpoints, snapshot, steps
from bar.ledger.call_log import Recorded, read_recorded
from bar.model import journals
from bar.model.journals import RunIntent
from bar.model.records import Artifacts, HookRecord, PolicyEventRecord, RunStep, Step
from bar.model.tasks import Task
from bar.redact import Scrubber
from bar.redact import known as known_secrets
from bar.sandbox import network, quarantine
from bar.step import interrupted

if TYPE_CHECKING:
    from bar.base.inotify import Seen


_SIGINT = 2  # (``signal.SIGINT``; that module loads ``enum``)


@record(frozen=True)
class Executed:
    """How the command ended, and what it printed. ``interrupt_key``: the last key the
    person typed was Ctrl-C, read by the program itself (``bar.terminal.pty``). ``cut``:
    its output went past ``run.output_limit``, and what came after was shown, not kept."""

    exit_code: int
    signal: int | None
    artifacts: Artifacts
    interrupt_key: bool = False
    cut: bool = False


def complete(
    task: Task,
    intent: RunIntent,
    executed: Executed | None,
    *,
    policy_events: Sequence[PolicyEventRecord] = (),
    hooks: Sequence[HookRecord] = (),
    scrubber: Scrubber | None = None,
    changed: Seen | None = None,
    stopped: str | None = None,
    within: interrupted.Bound | None = None,
) -> RunStep:
    """Record the step ``intent`` announced: its snapshot, patch and ledger line, then
    remove the intent. ``executed`` None: bar died while the command ran (the step is
    recorded as interrupted, with the output captured up to then). ``changed``: the
    paths changed since the step's last snapshot, as its watch saw them. ``stopped``: why
    bar stopped the command itself (``budget``). ``within``: when the step's processes ran
    (``bar.step.run``): a change made outside it is recorded as a ``manual`` step after
    the step, not as the step's."""
    # Recovery passes no scrubber: the intent's cmd was scrubbed when it was written, by
    # the process that knew the run's pairs and environment.
    scrub = scrubber or known_secrets.scrubber()
    step_id = intent.step_id
    policy_events = [*policy_events, *quarantine.settle_step(task)]  # (before the branch is read)
    recovering = executed is None
    if executed is None and intent.exit_code is not None:
        # the command had ended; only its recording failed: record how it ended
        executed = Executed(
            intent.exit_code, intent.signal, interrupted.found_artifacts(task, step_id)
        )
    ended = intent.ended_at or (
        now_iso() if executed is not None else interrupted.last_sign_of_life(task, step_id, intent)
    )
    label = "" if executed is not None else " (interrupted)"
    message = scrub.scrub_text(f"step {step_id}{label}: {shlex.join(intent.cmd)}")
    # chained onto the step's last checkpoint; what no hook saw since is its residual
    taken = checkpoints.Recorder(task, step_id, intent.snapshot_before, intent.excludes, scrub)
    last_checkpoint = taken.last
    job = steps.PatchJob(task, step_id, intent.snapshot_before)
    # recorded after bar died: what was made after its last sign of life is not the step's
    made = (
        interrupted.split(task, last_checkpoint, interrupted.bound(task, intent))
        if recovering
        else None
    )
    if made is not None:
        snap = interrupted.take_tree(task, last_checkpoint, message, made)
    else:
        if within is not None:  # (``split`` below asks for it once the stamps moved on)
            steps.note_tree(task, last_checkpoint)
        snap = snapshot.take(
            task.worktree,
            task.index,
            task.snapshot_ref,
            last_checkpoint,
            message,
            intent.excludes,
            changed=changed,
            on_tree=job.begin,
        )
        if within is not None and not taken.count and snap.changed:
            made = interrupted.split(task, last_checkpoint, within, snap.tree)
            if made is not None:
                snap = interrupted.take_tree(task, last_checkpoint, message, made)
    if taken.count and snap.commit != last_checkpoint:
        taken.add("residual", snap.commit, started_at=taken.last_ended or ended)
    stat, patch = job.finish(snap.commit, snap.tree if made is not None else None)
    artifacts = (
        executed.artifacts if executed is not None else interrupted.found_artifacts(task, step_id)
    )
    artifacts.patch = patch
    if taken.count:
        artifacts.checkpoints = checkpoints.artifact_name(step_id)
    session, mid_turn = (
        _session(task, intent, taken, scrub) if intent.agent is not None else (None, False)
    )
    if executed is not None and executed.interrupt_key and mid_turn:
        # a full-screen agent reads Ctrl-C as a key: it stopped the agent mid-turn, and
        # whatever code it then chose, the step is one the person interrupted
        executed = Executed(
            executed.exit_code or 128 + _SIGINT, _SIGINT, executed.artifacts, cut=executed.cut
        )
    if intent.agent is not None:
        _mask_home(task, intent, scrub)
    if session is not None:
        artifacts.session = session_artifact(step_id)
    finished = executed is not None and executed.signal is None
    signalled = executed is not None and executed.signal is not None
    recorded = read_recorded(task, step_id, finished=finished, stopped=signalled)
    step = RunStep(
        step_id=step_id,
        started_at=intent.started_at,
        ended_at=ended,
        duration_ms=ms_between(intent.started_at, ended),
        cmd=intent.cmd,
        cwd=intent.cwd,
        env=intent.env,
        exit_code=executed.exit_code if executed is not None else None,
        signal=executed.signal if executed is not None else None,
        interrupted=executed is None,
        pty=intent.pty,
        policy_events=[*policy_events, *recorded.events],
        hooks=list(hooks),
        diff_stat=stat,
        artifacts=artifacts,
        snapshot_before=intent.snapshot_before,
        snapshot=snap.commit,
        head=git.head(task.worktree),
        checkpoints=taken.count,
    )
    if intent.sandbox is not None:
        step.extra["sandbox"] = intent.sandbox
    if connections := network_of(task, step_id):
        step.extra["network"] = connections
    if intent.agent is not None:
        step.extra["agent"] = {**intent.agent, "sessions": len(recorded.sessions)}
        _say_unhooked(intent.agent, recorded, executed)
    if session is not None:
        step.extra["session"] = session
    if stopped is not None:
        step.extra["stopped"] = stopped
    if executed is not None and executed.cut:
        step.extra["output_cut"] = True
    _say_nested(task, step)
    written = steps.append(task, step, scrub)
    task.paths.policy_events(step_id).unlink(missing_ok=True)
    task.paths.network_log(step_id).unlink(missing_ok=True)  # (read above)
    journals.RUN.clear(task.paths)
    if made is not None and not recovering:
        steps.record_hand_edits(task)  # (what was made outside the step, at once)
    return written


def network_of(task: Task, step_id: str) -> list[dict[str, Any]]:
    """The connections the step's proxy logged (``bar.sandbox.network``), once it closed."""
    return network.read_log(task.paths.network_log(step_id))


def _mask_home(task: Task, intent: RunIntent, scrub: Scrubber) -> None:
    """The session ended: the known secrets leave what the agent wrote in its home
    (``bar.agents.homes.mask_secrets``)."""
    from datetime import datetime

    from bar.agents import AGENTS, homes

    name = str((intent.agent or {}).get("name") or "")
    if name not in AGENTS or not scrub.secrets:
        return
    since = datetime.fromisoformat(intent.started_at.replace("Z", "+00:00")).timestamp() - 2
    try:
        homes.mask_secrets(task, name, since, scrub.scrub_values)
    except OSError as exc:
        warn(f"the secrets in the agent's own records were not masked: {exc}")


def session_artifact(step_id: str) -> str:
    return f"artifacts/{step_id}.session.jsonl"


def _session(
    task: Task, intent: RunIntent, taken: checkpoints.Recorder, scrub: Scrubber
) -> tuple[dict[str, object] | None, bool]:
    """The agent's conversation in the step, kept beside it (``bar.session``): the ledger
    line's ``session`` (None when the agent wrote no transcript bar knows), and whether
    it ended in the middle of a turn the person interrupted."""
    from bar.agents import AGENTS, homes
    from bar.agents.base import of
    from bar.session.capture import Capture

    name = str((intent.agent or {}).get("name") or "")
    if name not in AGENTS:
        return None, False
    prices = task.project.config.agents.prices
    home = homes.path(task, name)
    capture = Capture(home, name, intent.started_at, prices, package=of(name).package)
    try:
        found = capture.finish(
            scrub,
            task.dir / session_artifact(intent.step_id),
            checkpoints.read(task, intent.step_id),
            list(intent.cmd),
        )
    except OSError as exc:
        warn(f"the agent's conversation was not kept: {exc}")
        return None, False
    if found is None:
        return None, False
    summary, learnt = found
    for n, call in learnt:  # (a call the agent's events did not name: found in its transcript)
        taken.amend(n, verified=True, call_id=call)
    sid = summary.get("session_id")
    if sid and capture.resumed:
        for earlier in task.ledger.iter_reverse(warn=False):
            before = getattr(earlier, "extra", {}).get("session")
            if isinstance(before, dict) and before.get("session_id") == sid:
                summary["resumed_from"] = earlier.step_id
                break
    return summary, capture.ended_mid_turn


def _say_unhooked(agent: dict[str, object], recorded: Recorded, executed: Executed | None) -> None:
    """An agent that ran and never called bar's hooks (not even at its start) ran its
    commands unchecked: say so rather than let the step look supervised."""
    if recorded.sessions or recorded.events or executed is None or agent.get("hooks") == "none":
        return
    if executed.exit_code in (126, 127):
        return  # the agent did not start
    warn(
        f"{agent.get('name')} never called bar's hooks in this step: the commands it ran "
        "were not checked by the policy (docs/agents.md lists the versions bar knows)"
    )


def _say_nested(task: Task, step: RunStep) -> None:
    """Nested repositories (a ``git init`` or clone inside the worktree, submodules) are
    recorded as the commit they are at, never their files: the step lists them
    (``nested_repos``) and bar says so whenever a new one appears."""
    nested = fast.nested_repositories(task.index)
    if not nested:
        return
    step.extra["nested_repos"] = nested
    last = task.ledger.last()
    known = set(getattr(last, "extra", {}).get("nested_repos") or [])
    for path in nested:
        if path not in known:
            warn(
                f"{path} is a git repository of its own: bar records only the commit it is "
                "at, not its files; edits inside it are not recorded and a rollback does "
                "not restore them"
            )


def finish_interrupted(task: Task, intent: RunIntent) -> list[Step]:
    """The step a stopped ``bar run`` left (its journal, ``journals.RUN``): recorded as it
    ended, or as interrupted if it had not; nothing if it was recorded before bar stopped."""
    last = task.ledger.last()
    if last is not None and last.number >= int(intent.step_id):
        journals.RUN.clear(task.paths)  # the step was recorded before the crash
        return []
    step = complete(task, intent, None)
    what = f"recorded step {intent.step_id} ({shlex.join(intent.cmd)})"
    if intent.exit_code is not None:
        note(
            f"{what}: it exited {intent.exit_code}; bar stopped (or failed) before it was recorded"
        )
    else:
        note(f"{what} as interrupted: bar stopped before it finished")
    return [step]


journals.RUN.finished_by(finish_interrupted)
