"""Running one command as a step: the heart of bar.

The caller holds the task lock and has run ``transaction.prepare`` (crashed work finished,
hand edits recorded). Then, in an order where every prefix is recoverable
(docs/internals/record.md):

1. the policy judges the command (a block is recorded as a ``blocked`` step; nothing runs);
2. the confinement is made (the repository's hooks run inside it, ``bar.step.step_hooks``;
   it holds no state, so a crash leaves nothing behind), then ``pre_run`` hooks (a
   failure is recorded as a step ``stopped_by`` ``pre_run``, with the hooks' results;
   nothing runs);
3. the intent (``running.json``) is written, the supervisor starts (``bar.step.supervisor``:
   the channel inner ``bar hook`` calls reach, the agent's hook settings), and the
   command runs with its output shown and streamed, scrubbed, into its artifacts;
4. ``post_run`` hooks, then what the step's processes left running is stopped;
5. ``complete`` (``bar.step.complete``): snapshot, patch, the ledger line (the commit
   point), intent removed.

If bar dies during 3–5, ``bar.step.recovery`` calls the same ``complete`` with no outcome: the
step is recorded as interrupted, with every change made up to then.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from bar import git
from bar.aide import place
from bar.base import file_clock, speed
from bar.base.clock import ms_since, now_iso
from bar.base.inotify import TreeWatch
from bar.base.notices import exact_size, note, warn
from bar.base.proc import Launch, clean_env
from bar.base.record import field, record, replace
from bar.changes import fast
from bar.errors import ExitCode, HookFailed, UsageError, WriteFailed
from bar.history import steps
from bar.model import journals, outcome
from bar.model.journals import RunIntent
from bar.model.records import Artifacts, HookRecord, PolicyEventRecord, RunStep
from bar.model.tasks import Task
from bar.policy import Decision, Policy
from bar.policy.places import Places
from bar.redact import Scrubber, redact_env
from bar.redact import known as known_secrets
from bar.redact.stream import StreamScrubber
from bar.sandbox import Confinement, holder, leftovers, network
from bar.sandbox import plan as sandbox_plan
from bar.session.prices import Budget
from bar.step import step_hooks
from bar.step.complete import Executed, complete
from bar.step.exec_judge import ExecJudge
from bar.step.hints import not_executable, refused_access
from bar.step.interrupted import Bound
from bar.step.supervisor import Supervisor
from bar.step.user_hooks import HookFacts, HookResult
from bar.store.files import create_file
from bar.terminal.pipes import STDERR_HEADER, STDOUT_HEADER, run_piped
from bar.worktree.guard import Guard


@record(frozen=True)
class RunRequest:
    argv: list[str]
    cwd: str = "."  # relative to the worktree (see ``resolve_cwd``)
    env: Mapping[str, str] = field(default_factory=dict)  # from -e K=V
    pty: bool = False
    live: bool = True  # show the command's output as it runs
    agent: str | None = None  # install this agent's hook for the run
    sandbox: bool = True  # False: --no-sandbox (this run only)
    network: str | None = None  # --network (this run only), else sandbox.network
    max_tokens: int | None = None  # an agent's budget (else config agents.budget)
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        # The task lock names the command before the step's scrubber exists: from now on
        # this process scrubs the values of secret-named pairs wherever it writes.
        known_secrets.learn(self.env)


def resolve_cwd(task: Task, value: str | None, here: Path | None = None) -> str:
    """The directory to run in, relative to the worktree; never outside it. Without a
    value: where the developer stands, if that is inside the worktree."""
    root = task.worktree.resolve()
    if value is None:
        current = (here or Path.cwd()).resolve()
        try:
            return current.relative_to(root).as_posix() or "."
        except ValueError:
            return "."
    candidate = Path(value)
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    try:
        rel = target.relative_to(root)
    except ValueError:
        raise UsageError(
            f"--cwd {value!r} is outside the task worktree",
            hint=f"give a directory relative to {root}",
        ) from None
    if not target.is_dir():
        raise UsageError(f"--cwd {value!r} is not a directory in the task worktree")
    return rel.as_posix() or "."


def watch_worktree(task: Task, claim: fast.Claim) -> TreeWatch | None:
    """A watch on the directories of the task's last snapshot, which lets the step's
    snapshots look only at the paths that changed (``bar.base.inotify``); None without
    stamps or without a share of bar's inotify watches and fanotify marks (``claim``).
    With fewer of both than directories, the shallowest are watched and the rest are
    statted (a partial watch). It is not yet begun: the look for hand edits begins it
    (``snapshot.take``'s ``before_look``), or at the latest the step, before its command
    runs."""
    dirs = fast.stamped_dirs(task.index)
    if dirs is None or not speed.fast() or claim.granted + claim.marks == 0:
        return None
    if len(dirs) > claim.granted + claim.marks:
        dirs.sort(key=lambda d: d.count("/") if d else -1)  # (the root first; stable)
    watch = TreeWatch(str(task.worktree), dirs, begin=False, limit=claim.granted, marks=claim.marks)
    watch.snapshot = task.recorded_snapshot()
    return watch


@record(frozen=True)
class _Begun:
    """What a step knows from its start, worked out once and handed to each phase."""

    task: Task
    req: RunRequest
    step_id: str
    began_ns: int  # (before any process of the step: ``RunIntent.from_ns``)
    before: str  # the last recorded state: the step's snapshot_before
    started: str
    t0: float
    scrubber: Scrubber
    env_record: dict[str, str]
    policy: Policy | None
    ground: sandbox_plan.Ground
    read_only: tuple[Path, ...]  # what of the worktree the step sees read-only
    places: Places
    decision: Decision

    def unrun(self, exit_code: int, *, hooks: list[HookRecord] | None = None) -> RunStep:
        """The step of a command that did not run: blocked, or stopped by a hook."""
        return RunStep(
            step_id=self.step_id,
            started_at=self.started,
            ended_at=now_iso(),
            duration_ms=ms_since(self.t0),
            cmd=list(self.req.argv),
            cwd=self.req.cwd,
            env=self.env_record,
            exit_code=exit_code,
            blocked=exit_code == ExitCode.POLICY_BLOCKED,
            pty=self.req.pty,
            snapshot_before=self.before,
            snapshot=self.before,
            hooks=hooks or [],
            policy_events=_events(self.decision),
            head=git.head(self.task.worktree),
        )


@record(frozen=True)
class _Box:
    """The step's confinement, the environment its processes get in it, and since when
    bar reaps what they leave (``bar.sandbox.leftovers``)."""

    confinement: Confinement
    env: dict[str, str]
    adopted_since: float

    def close(self, what: str | None = "a pre_run hook") -> None:
        _close(self.confinement, self.adopted_since, what)


def run_step(task: Task, req: RunRequest, watch: TreeWatch | None = None) -> RunStep:
    """Run ``req`` as the task's next step and record it (caller holds the lock and ran
    ``transaction.prepare``). ``watch``: started before hand edits were looked for (else the
    step's snapshots stat everything)."""
    begun = _begin(task, req)
    # 1. policy
    if begun.decision.blocked:
        return steps.append(task, begun.unrun(ExitCode.POLICY_BLOCKED), begun.scrubber)
    env = clean_env(req.env)
    env.update(_step_env(task, begun.step_id))
    facts = HookFacts(
        project=task.project.name,
        task_id=task.id,
        task_name=task.name,
        step_id=begun.step_id,
        workspace=task.worktree,
        cmd=list(req.argv),
    )
    # 2. pre_run hooks; the repository's run confined like the step, so the confinement
    # is made first (and closed on every way out before the step's own try)
    box = _confine(begun, env)
    fence = _Fence()
    hook_records = _pre_run(begun, box, env, facts, fence)
    # 3. intent, supervisor, the command (with what it must not change noted first)
    guard = Guard(task)
    if watch is not None:  # (begun here if no look for hand edits began it)
        watch.cover(fast.stamped_dirs(task.index) or () if watch.snapshot != begun.before else ())
    supervisor = _supervisor(begun, box, watch)
    judge = _judge_execs(
        task, begun.policy, begun.places, begun.decision, supervisor, box.confinement
    )
    intent = _intend(begun, box, supervisor)
    try:
        supervisor.start()
    except BaseException:
        box.close()
        journals.RUN.clear(task.paths)  # nothing ran: there is no step to record
        raise
    try:
        executed, ended_tick = _command(begun, box, supervisor, judge, fence, watch)
    finally:
        supervisor.close()
    # a sign of life in a later clock tick than anything the command wrote, then how it
    # ended: a bar killed from here on leaves a step recorded with its exit code
    until = journals.touch_run(task.paths, after_tick=ended_tick)
    intent, guarded = _ended(begun, box, intent, executed, guard)
    # 4. post_run hooks (the repository's still confined), then their leftovers stopped
    ran, until = _post_run(begun, box, facts, executed, until)
    # 5. snapshot, patch, ledger line; if they cannot be written (a full disk, a named
    # pipe git would wait on), the intent keeps how the command ended, for the command
    # that records the step later, and its outcome why (said where the step is shown)
    try:
        return complete(
            task,
            intent,
            executed,
            policy_events=[*_events(begun.decision), *guarded],
            hooks=hook_records + ran,
            scrubber=begun.scrubber,
            changed=watch.look() if watch is not None else None,  # (its watcher's next)
            stopped=supervisor.stopped,
            within=fence.within(until),
        )
    except WriteFailed as exc:
        why = str(exc) + (f"\nhint: {exc.hint}" if exc.hint else "")
        outcome.unrecorded(task.paths, begun.step_id, why)
        raise


def _begin(task: Task, req: RunRequest) -> _Begun:
    """The step's number, its state before, its ground (``bar.sandbox.plan.Ground``), its
    scrubber and the policy's decision (said as it is made)."""
    step_id = task.ledger.next_step_id()
    began_ns = file_clock.floor()
    steps.clear_leftovers(task, step_id)
    before = task.recorded_snapshot()
    started = now_iso()
    t0 = time.monotonic()
    scrubber = Scrubber.from_environ(os.environ, req.env)
    policy = task.project.policy()
    ground = sandbox_plan.ground(task, req.agent)
    # aide's files (``bar.aide.place``), which the step sees read-only: an answer there
    # is never the step's own
    aide = (place.root(task),) if place.prepare(task) else ()
    places = Places.of(
        worktree=task.worktree,
        homes=[req.env["HOME"]] if req.env.get("HOME") else [],
        temps=[str(ground.tmp)],
    )
    decision = policy.evaluate_argv(req.argv, places) if policy is not None else Decision("allow")
    for event in decision.events:
        if event.action == "block":  # said as what it is, not as a warning
            note(f"blocked by rule {event.rule}: {event.reason}")
        elif event.action == "warn":
            warn(f"policy warn: rule {event.rule}: {event.reason}")
    # the step's recorded ``env``: the ``-e`` variables and those run.record_env names, the
    # values of secret-looking names recorded as ``***``
    chosen = {n: os.environ[n] for n in task.project.config.run.record_env if n in os.environ}
    chosen.update(req.env)
    return _Begun(
        task=task,
        req=req,
        step_id=step_id,
        began_ns=began_ns,
        before=before,
        started=started,
        t0=t0,
        scrubber=scrubber,
        env_record=dict(redact_env(chosen, scrubber)),
        policy=policy,
        ground=ground,
        read_only=aide,
        places=places,
        decision=decision,
    )


def _confine(begun: _Begun, env: dict[str, str]) -> _Box:
    """The step's confinement (its hooks' and its command's), made before anything runs;
    with an agent, bar's hooks in force for its session (``bar.agents.managed``)."""
    task, req = begun.task, begun.req
    named = (*env.get("PATH", "").split(os.pathsep), *(a for a in req.argv if a.startswith("/")))
    confinement = sandbox_plan.confinement(
        task,
        begun.ground,
        asked=req.sandbox,
        paths=named,
        network=req.network,
        env=env,
        network_log=task.paths.network_log(begun.step_id),
        read_only=begun.read_only,
    )
    boxed = sandbox_plan.step_env(begun.ground, env, confinement) if confinement.enabled else env
    adopted_since = leftovers.become_subreaper() if confinement.enabled else 0.0
    box = _Box(confinement, boxed, adopted_since)
    if req.agent is not None:  # (an agent's session never runs without bar's hooks)
        from bar.agents import managed

        try:
            managed.hooks_in_force(
                task,
                req.agent,
                layered=confinement.enabled and confinement.plan.agent_layer,
                own_tmp=confinement.enabled and confinement.plan.own_pids,
            )
        except BaseException:
            box.close(None)
            raise
    return box


def _pre_run(
    begun: _Begun, box: _Box, env: dict[str, str], facts: HookFacts, fence: _Fence
) -> list[HookRecord]:
    """The ``pre_run`` hooks run; a failed one is recorded as a step that did not run
    (``HookFailed``, with it). The confinement is closed on every way out but success."""
    task = begun.task
    try:
        if task.project.config.hooks.pre_run or step_hooks.shared_count(task, "pre_run"):
            fence.release()  # (the hooks are the step's first processes)
        results = step_hooks.run(
            "pre_run", task, facts, env=env, boxed=box.env, confinement=box.confinement
        )
        failed = next((r for r in results if not r.ok), None)
        if failed is not None:
            _stopped_by_pre_run(begun, box, results, failed)
    except BaseException:
        box.close()
        raise
    return [r.record() for r in results]


def _stopped_by_pre_run(
    begun: _Begun, box: _Box, results: list[HookResult], failed: HookResult
) -> None:
    """Record the step a failed ``pre_run`` hook stopped (like a blocked one: nothing
    ran, with the hooks that did), and raise ``HookFailed`` with it."""
    task, step_id, scrubber = begun.task, begun.step_id, begun.scrubber
    index = len(results) - 1
    said = step_hooks.describe(task, failed, index, box.confinement, scrubber.scrub_text)
    error = HookFailed(
        f"{said}; the command did not run (step {step_id} recorded)",
        hint="fix the hook or remove it from hooks.pre_run in "
        f"{step_hooks.source(task, 'pre_run', index)}",
    )
    step = begun.unrun(ExitCode.HOOK_FAILED, hooks=[r.record() for r in results])
    step.extra["stopped_by"] = "pre_run"
    box.close()  # (its hooks' connections are all logged)
    if connections := network.read_log(task.paths.network_log(step_id)):
        step.extra["network"] = connections
    # what the hooks printed (on bar's stderr, as shown), scrubbed like any step's output
    if printed := b"".join(r.output for r in results):
        path, step.artifacts.output = steps.artifact(task, step_id, "output")
        create_file(path, STDOUT_HEADER + STDERR_HEADER + scrubber.scrub_bytes(printed))
    error.step = steps.append(task, step, scrubber)
    task.paths.network_log(step_id).unlink(missing_ok=True)
    raise error


def _supervisor(begun: _Begun, box: _Box, watch: TreeWatch | None) -> Supervisor:
    task, req = begun.task, begun.req
    return Supervisor(
        task,
        begun.step_id,
        begun.policy,
        begun.scrubber,
        req.agent,
        list(req.argv),
        terminal=req.pty and os.isatty(0),
        snapshot_before=begun.before,
        watch=watch,
        budget=_budget(task, req),
        started_at=begun.started,
        own_tmp=box.confinement.enabled and box.confinement.plan.own_pids,
        places=begun.places,
    )


def _intend(begun: _Begun, box: _Box, supervisor: Supervisor) -> RunIntent:
    """Write the step's intent (``running.json``): from here a crash leaves a step to
    record as interrupted."""
    req = begun.req
    intent = RunIntent(
        pid=os.getpid(),
        step_id=begun.step_id,
        started_at=begun.started,
        cmd=begun.scrubber.scrub_obj(list(req.argv)),
        cwd=req.cwd,
        snapshot_before=begun.before,
        env=begun.env_record,
        pty=req.pty,
        sandbox=box.confinement.record(),
        agent=supervisor.record(),
        from_ns=begun.began_ns,
    )
    journals.RUN.write(begun.task.paths, intent)
    holder.sign_of_life(str(begun.task.paths.marker))  # (touched by a holder that outlives bar)
    return intent


def _command(
    begun: _Begun,
    box: _Box,
    supervisor: Supervisor,
    judge: ExecJudge | None,
    fence: _Fence,
    watch: TreeWatch | None,
) -> tuple[Executed, int]:
    """Run the command, then stop what it left running; how it ran, and a clock tick
    later than anything it wrote."""
    task, confinement = begun.task, box.confinement
    try:
        env = box.env
        env.update(supervisor.env)
        executed = _execute(
            task,
            begun.step_id,
            supervisor.argv,
            begun.req,
            env,
            begun.scrubber,
            confinement,
            supervisor.child_started,
            fence,
        )
        confinement.stop_checking()
        if judge is not None:
            judge.finish()
        if confinement.enabled:
            _stop_leftovers(confinement, box.adopted_since)
        ended_tick = file_clock.ceiling()  # (everything the command wrote is the step's)
        holder.sign_of_life(None)
        if watch is not None and not task.project.config.hooks.post_run:
            fast.prescan_start(task.worktree, task.index)  # (the snapshot's stat, begun now)
    except BaseException:
        box.close("the command")
        raise
    return executed, ended_tick


def _ended(
    begun: _Begun, box: _Box, intent: RunIntent, executed: Executed, guard: Guard
) -> tuple[RunIntent, list[PolicyEventRecord]]:
    """How the command ended, kept beside the intent at once (a bar killed from here on
    leaves a step that is recorded with its exit code, not as interrupted); what the
    guard found changed; why a command that did not run could not."""
    task, req = begun.task, begun.req
    intent = replace(
        intent,
        exit_code=executed.exit_code,
        signal=executed.signal,
        ended_at=now_iso(),
        sandbox=box.confinement.record(),  # (whether its programs were judged: known now)
    )
    outcome.write(
        task.paths, begun.step_id, executed.exit_code, executed.signal, intent.ended_at or ""
    )
    guarded = [
        PolicyEventRecord(rule="bar:guard", action="warn", matched=what) for what in guard.check()
    ]
    output = task.dir / executed.artifacts.output if executed.artifacts.output else None
    unrunnable = (
        not_executable(req.argv[0], task.worktree / req.cwd, box.env)
        if executed.exit_code == ExitCode.CANNOT_EXECUTE
        else None
    )
    if unrunnable is not None:
        note(unrunnable)
    elif box.confinement.enabled and executed.exit_code != 0 and refused_access(output):
        warn(
            "the command ran confined and was refused access (docs/sandbox.md): allow a "
            f"path in sandbox.allow_write in {task.project.paths.config}, or run once "
            "with --no-sandbox"
        )
    return intent, guarded


def _post_run(
    begun: _Begun, box: _Box, facts: HookFacts, executed: Executed, until: int
) -> tuple[list[HookRecord], int]:
    """Run the ``post_run`` hooks, still confined, then stop what they left running;
    their records, and until when the step ran (what the hooks changed is the step's:
    ``bar.step.interrupted``)."""
    task = begun.task
    try:
        results = step_hooks.run(
            "post_run",
            task,
            replace(facts, exit_code=executed.exit_code),
            env=box.env,
            boxed=box.env,
            confinement=box.confinement,
        )
    finally:
        shared = step_hooks.shared_count(task, "post_run")
        box.close("a post_run hook" if shared else None)
    for index, r in enumerate(results):
        if not r.ok:
            warn(step_hooks.describe(task, r, index, box.confinement, begun.scrubber.scrub_text))
    if results:
        until = journals.touch_run(task.paths, after_tick=file_clock.ceiling())
    return [r.record() for r in results], until


class _Fence:
    """The moment the step's first process is released, as a tick of the kernel's file
    clock: a file changed before has an earlier ctime, and is the developer's (edited
    between the look for hand edits and then), not the step's (``bar.step.interrupted``).
    The tick is waited for (a few ms at most), so that it begins just before the release."""

    __slots__ = ("tick",)

    def __init__(self) -> None:
        self.tick = 0

    def release(self) -> None:
        if not self.tick:
            self.tick = file_clock.tick_after(file_clock.ceiling(), close=True)

    def within(self, until: int) -> Bound | None:
        """What the step made: from its release to ``until`` (the first tick after all it
        started had ended); None if either is unknown."""
        if not self.tick or until <= self.tick:
            return None
        return Bound(until, inclusive=False, from_ns=self.tick)


def _judge_execs(
    task: Task,
    policy: Policy | None,
    places: Places,
    decision: Decision,
    supervisor: Supervisor,
    confinement: Confinement,
) -> ExecJudge | None:
    """Have every program the command starts judged as it starts (docs/policy.md), the
    events recorded in the step's decision log beside its agent's; None where the step
    is not confined, has no policy or ``policy.exec_check`` is off."""
    supervisor.judged.update((e.rule, e.matched) for e in decision.events)
    if policy is None or not confinement.enabled or not task.project.config.policy.exec_check:
        return None
    judge = ExecJudge(policy, places, supervisor.append, supervisor.judged)
    confinement.check_execs(judge, warn, judge.shortcut())
    return judge


# --- the command -------------------------------------------------------------------


def _execute(
    task: Task,
    step_id: str,
    argv: list[str],
    req: RunRequest,
    env: dict[str, str],
    scrubber: Scrubber,
    confinement: Confinement,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
    fence: _Fence | None = None,
) -> Executed:
    """Run the command (pipes or pty) with its output scrubbed into the artifacts;
    ``started`` is told the process once it runs; ``fence`` is released just before."""

    def start(launch: Launch) -> subprocess.Popen[bytes]:
        if fence is not None:
            fence.release()
        proc = confinement.start(launch)
        if started is not None:
            started(proc)
        return proc

    out_path, out_rel = steps.artifact(task, step_id, "output")
    cwd = task.worktree / req.cwd
    artifacts = Artifacts()
    if req.pty:
        from bar.terminal.pty import run_in_pty  # termios and the cast writer: --pty only

        # the text in the output file every step has; the recording holds what it adds
        cast_path, cast_rel = steps.artifact(task, step_id, "cast")
        res = run_in_pty(
            argv,
            cwd=cwd,
            env=env,
            cast_path=cast_path,
            output_path=out_path,
            scrub=lambda: StreamScrubber(scrubber),
            start=start,
            limit=task.project.config.run.output_limit,
        )
        _say_cut(task, res.cut)
        artifacts.cast = cast_rel if cast_path.exists() else None
        if res.printed and out_path.exists():
            artifacts.output = out_rel
        else:
            out_path.unlink(missing_ok=True)
        return Executed(res.exit_code, res.signal, artifacts, res.interrupt_key, res.cut)
    piped = run_piped(
        argv,
        cwd=cwd,
        env=env,
        output_path=out_path,
        make_filter=lambda: StreamScrubber(scrubber),
        live=req.live,
        start=start,
        detach=confinement.enabled,
        limit=task.project.config.run.output_limit,
    )
    _say_cut(task, piped.cut)
    artifacts.output = out_rel if piped.printed else None
    return Executed(piped.exit_code, piped.signal, artifacts, cut=piped.cut)


def _say_cut(task: Task, cut: bool) -> None:
    """Say that the step's output went past ``run.output_limit`` (its kept output ends
    with a mark where it stopped)."""
    if cut:
        limit = task.project.config.run.output_limit
        warn(
            f"the command printed more than {exact_size(limit)} on one stream: the rest was "
            f"shown, not kept (run.output_limit in {task.project.paths.config})"
        )


def _close(confinement: Confinement, since: float, what: str | None = "a pre_run hook") -> None:
    """End the step's confinement: stop what ``what``, the last to run in it, left running
    (None: nothing ran in it since the last stop), then release it. Twice is harmless."""
    if confinement.enabled and confinement.open and what is not None:
        _stop_leftovers(confinement, since, what)
    confinement.close()


def _stop_leftovers(confinement: Confinement, since: float, what: str = "the command") -> None:
    stopped = confinement.stopped() + leftovers.stop(since)  # (its holder's, and any missed)
    if stopped:
        warn(
            f"stopped {len(stopped)} process(es) {what} left running "
            f"(pid {', '.join(map(str, stopped[:10]))}): nothing a confined step starts "
            "outlives it"
        )


def _budget(task: Task, req: RunRequest) -> Budget | None:
    """Where the agent is stopped: the run's own limits, else the project's."""
    if req.agent is None:
        return None
    own = task.project.config.agents
    budget = Budget(
        req.max_tokens if req.max_tokens is not None else own.max_tokens,
        req.max_cost_usd if req.max_cost_usd is not None else own.max_cost_usd,
    )
    return budget if budget.set else None


def _step_env(task: Task, step_id: str) -> dict[str, str]:
    """What the command learns about its step (docs/sandbox.md, "Hooks around a step")."""
    return {
        "BAR_PROJECT": task.project.name,
        "BAR_TASK_ID": task.id,
        "BAR_TASK_NAME": task.name,
        "BAR_STEP_ID": step_id,
        "BAR_WORKSPACE": str(task.worktree),
    }


def _events(decision: Decision) -> list[PolicyEventRecord]:
    return [
        PolicyEventRecord(rule=e.rule, action=e.action, matched=e.matched) for e in decision.events
    ]
