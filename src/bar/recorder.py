"""Recording steps: the heart of bar.

Every command that changes a task goes through here under the task lock, in an order where
every prefix is recoverable (docs/internals.md):

1. finish what a crashed bar left (a stale ``running.json`` marker becomes an
   ``interrupted`` step with the changes made up to the crash);
2. record changes nobody recorded (hand edits) as a ``manual`` step, so nothing is
   mis-attributed to the next command;
3. write the ``running`` marker, run the command, snapshot, write the patch and output
   artifacts, move the snapshot ref, and only then append the ledger line — the commit
   point — and remove the marker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bar import git, snapshot
from bar.errors import CorruptFile, DirtyWorktree, NotFound, UsageError
from bar.git import DiffStat
from bar.ledger import STEP_ID_RE, Artifacts, Step
from bar.migrate import upgrade
from bar.store import now_iso, read_json, write_json_atomic
from bar.tasks import Task, load_task

SNAPSHOT_EXCLUDES_FILE = "snapshot-excludes.json"


def _ms_since(t0: float) -> int:
    return int((time.monotonic() - t0) * 1000)


@dataclass(frozen=True)
class Marker:
    pid: int
    step_id: str
    started_at: str
    cmd: list[str]
    cwd: str
    snapshot_before: str
    env: dict[str, str]
    pty: bool
    excludes: list[str]


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def read_marker(task: Task) -> Marker | None:
    try:
        rec = read_json(task.marker_path, "running marker")
    except FileNotFoundError:
        return None
    rec = upgrade("marker", rec, task.marker_path)
    step_id = rec.get("step_id")
    before = rec.get("snapshot_before")
    if not isinstance(step_id, str) or not isinstance(before, str):
        raise CorruptFile(f"running marker at {task.marker_path} lacks step_id or snapshot_before")
    # the step id names artifact files and the snapshot goes to git: check both
    if not STEP_ID_RE.match(step_id) or int(step_id) < 1:
        raise CorruptFile(
            f"running marker at {task.marker_path} has an invalid step_id {step_id!r}"
        )
    if not git.is_object_id(before):
        raise CorruptFile(
            f"running marker at {task.marker_path} has an invalid snapshot_before {before!r}"
        )
    cmd = rec.get("cmd")
    env = rec.get("env")
    excludes = rec.get("excludes")
    return Marker(
        pid=_as_int(rec.get("pid")),
        step_id=step_id,
        started_at=str(rec.get("started_at", now_iso())),
        cmd=[str(c) for c in cmd] if isinstance(cmd, list) else [],
        cwd=str(rec.get("cwd", ".")),
        snapshot_before=before,
        env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
        pty=rec.get("pty") is True,
        excludes=[str(e) for e in excludes] if isinstance(excludes, list) else [],
    )


def write_marker(task: Task, marker: Marker) -> None:
    write_json_atomic(
        task.marker_path,
        {
            "version": 1,
            "pid": marker.pid,
            "step_id": marker.step_id,
            "started_at": marker.started_at,
            "cmd": marker.cmd,
            "cwd": marker.cwd,
            "snapshot_before": marker.snapshot_before,
            "env": marker.env,
            "pty": marker.pty,
            "excludes": marker.excludes,
        },
    )


def inner_events_path(task: Task, step_id: str) -> Path:
    """Where ``bar hook`` appends the decisions it took for the running step."""
    return _artifacts_dir(task) / f"{step_id}.policy.jsonl"


def read_inner_events(task: Task, step_id: str) -> list[dict[str, Any]]:
    path = inner_events_path(task, step_id)
    events: list[dict[str, Any]] = []
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return events
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            events.append(rec)
    return events


def _artifacts_dir(task: Task) -> Path:
    """The task's artifacts directory, where steps write; never through a link."""
    path = task.artifacts_dir
    if path.is_symlink():
        raise CorruptFile(
            f"the artifacts directory {path} is a symbolic link; "
            "bar does not follow links in its own files",
            hint="run `bar doctor` to check the task",
        )
    return path


def _artifact(task: Task, step_id: str, suffix: str) -> tuple[Path, str]:
    name = f"{step_id}.{suffix}"
    return _artifacts_dir(task) / name, f"artifacts/{name}"


def _scrub_step(step: Step) -> Step:
    from bar.redact import Scrubber

    scrubber = Scrubber.from_environ(os.environ)
    rec = scrubber.scrub_obj(step.to_record())
    return Step.from_record(rec, "step")


def append_step(task: Task, step: Step) -> Step:
    step = _scrub_step(step)
    task.ledger.append(step)
    return step


def _check_worktree(task: Task) -> None:
    if not task.active:
        raise UsageError(
            f"task {task.name} ({task.id}) is closed",
            hint="create a new task with `bar task new NAME`",
        )
    if not task.worktree.is_dir():
        raise NotFound(
            f"the worktree of task {task.name} is missing: {task.worktree}",
            hint="run `bar doctor` to check the task",
        )


def _clear_leftover_artifacts(task: Task, step_id: str) -> None:
    """Remove files already named like the new step's artifacts before it writes them.

    No recorded step owns them (an interrupted one was recorded by ``recover`` first), and
    writing through one that is a link would write wherever it points.
    """
    for leftover in _artifacts_dir(task).glob(f"{step_id}.*"):
        leftover.unlink(missing_ok=True)


def diff_into_step(task: Task, step_id: str, before: str, after: str) -> tuple[DiffStat, Artifacts]:
    artifacts = Artifacts()
    if before == after:
        return DiffStat.empty(), artifacts
    path, rel = _artifact(task, step_id, "patch")
    path.unlink(missing_ok=True)  # a leftover (or a planted link) is replaced, not written through
    stat = snapshot.write_patch(task.worktree, before, after, path)
    artifacts.patch = rel
    return stat, artifacts


# --- recovery and hand edits ---------------------------------------------------


def recover(task: Task) -> Step | None:
    """Complete a step whose bar process died (the caller holds the task lock).

    Holding the lock proves the marker's owner is gone: the kernel drops an flock with
    its holder. The worktree as it is now is what the step did.
    """
    marker = read_marker(task)
    if marker is None:
        return None
    last = task.ledger.last()
    if last is not None and last.number >= int(marker.step_id):
        task.marker_path.unlink(missing_ok=True)  # the step was recorded before the crash
        return None
    t0 = time.monotonic()
    snap = snapshot.take(
        task.worktree,
        task.index,
        task.snapshot_ref,
        marker.snapshot_before,
        f"step {marker.step_id} (interrupted): {shlex.join(marker.cmd)}",
        marker.excludes,
    )
    stat, artifacts = diff_into_step(task, marker.step_id, marker.snapshot_before, snap.commit)
    out_path, out_rel = _artifact(task, marker.step_id, "output")
    for leftover in _artifacts_dir(task).glob(f"{marker.step_id}.output.*.tmp"):
        leftover.unlink(missing_ok=True)
    if out_path.exists() and out_path.stat().st_size > len(b"=== STDOUT ===\n"):
        artifacts.output = out_rel
    else:
        out_path.unlink(missing_ok=True)
    cast_path, cast_rel = _artifact(task, marker.step_id, "cast")
    if cast_path.exists():
        artifacts.cast = cast_rel
    step = Step(
        step_id=marker.step_id,
        kind="run",
        started_at=marker.started_at,
        ended_at=now_iso(),
        duration_ms=_ms_since(t0),
        cmd=marker.cmd,
        cwd=marker.cwd,
        env=marker.env,
        exit_code=None,
        policy_events=read_inner_events(task, marker.step_id),
        head=git.rev_parse(task.worktree, "HEAD"),
        interrupted=True,
        pty=marker.pty,
        diff_stat=stat,
        artifacts=artifacts,
        snapshot_before=marker.snapshot_before,
        snapshot=snap.commit,
        hooks=[],
    )
    append_step(task, step)
    inner_events_path(task, marker.step_id).unlink(missing_ok=True)
    task.marker_path.unlink(missing_ok=True)
    print(
        f"bar: recorded step {marker.step_id} ({shlex.join(marker.cmd)}) as interrupted: "
        "bar stopped before it finished",
        file=sys.stderr,
    )
    return step


def record_manual(task: Task) -> Step | None:
    """Record changes made in the worktree since the last step (caller holds the lock)."""
    before = task.recorded_snapshot()
    step_id = task.ledger.next_step_id()
    started = now_iso()
    t0 = time.monotonic()
    snap = snapshot.take(
        task.worktree, task.index, task.snapshot_ref, before, f"step {step_id} manual: hand edits"
    )
    if not snap.changed:
        return None
    stat, artifacts = diff_into_step(task, step_id, before, snap.commit)
    step = Step(
        step_id=step_id,
        kind="manual",
        started_at=started,
        ended_at=now_iso(),
        duration_ms=_ms_since(t0),
        diff_stat=stat,
        artifacts=artifacts,
        snapshot_before=before,
        snapshot=snap.commit,
        head=git.rev_parse(task.worktree, "HEAD"),
    )
    step = append_step(task, step)
    print(
        f"bar: recorded step {step_id} (manual): {stat.files} file(s) changed outside bar",
        file=sys.stderr,
    )
    return step


def prepare(task: Task) -> None:
    """What every writing command does first, under the task lock: finish what a crashed
    bar left, then record hand edits."""
    from bar import apply, rollback

    _check_worktree(task)
    recover(task)
    rollback.finish_interrupted(task)
    apply.finish_interrupted(task)
    record_manual(task)


def has_unrecorded_changes(task: Task) -> bool:
    recorded = task.recorded_snapshot()
    if snapshot.unchanged_since(task.worktree, task.index, recorded):
        return False
    tree = snapshot.write_tree(task.worktree, task.index)
    return tree != git.tree_of(task.worktree, recorded)


def current_tree_readonly(task: Task) -> str:
    """The worktree's tree as a snapshot would see it, without touching the task's state.

    Works on a copy of the side index, so it never races a running step.
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bar-peek-", dir=task.dir) as tmp:
        index = Path(tmp) / "index"
        try:
            shutil.copyfile(task.index, index)
        except FileNotFoundError:
            pass
        return snapshot.write_tree(task.worktree, index)


# --- run -------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest:
    argv: list[str]
    cwd: str = "."  # relative to the worktree
    env: Mapping[str, str] | None = None  # from -e K=V
    pty: bool = False
    excludes: Sequence[str] = ()  # worktree paths kept out of the snapshot
    live: bool = True
    agent: str | None = None  # install this agent's policy hook for the run


def resolve_cwd(task: Task, value: str | None, here: Path | None = None) -> str:
    """Validate ``--cwd`` (relative to the worktree; never outside it)."""
    root = task.worktree.resolve()
    if value is None:
        cur = (here or Path.cwd()).resolve()
        try:
            return cur.relative_to(root).as_posix() or "."
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


def _record_env(task: Task, req: RunRequest) -> dict[str, str]:
    from bar.redact import redact_env

    chosen: dict[str, str] = {}
    for name in task.project.config.run.record_env:
        if name in os.environ:
            chosen[name] = os.environ[name]
    chosen.update(req.env or {})
    return dict(redact_env(chosen))


def child_env(task: Task, step_id: str, req: RunRequest) -> dict[str, str]:
    from bar.proc import clean_env

    env = clean_env(req.env)
    env.update(
        {
            "BAR_PROJECT": task.project.name,
            "BAR_TASK_ID": task.id,
            "BAR_TASK_NAME": task.name,
            "BAR_STEP_ID": step_id,
            "BAR_WORKSPACE": str(task.worktree),
            "BAR_HOME": str(task.project.dir.parent.parent),
        }
    )
    return env


def _execute(
    task: Task, step_id: str, req: RunRequest, cwd: Path, env: dict[str, str]
) -> tuple[int, int | None, bool, Artifacts, str]:
    """Run the command (pipes or pty) with its output scrubbed into the artifacts."""
    from bar.redact import Scrubber, StreamScrubber

    scrubber = Scrubber.from_environ(os.environ, dict(req.env or {}))
    out_path, out_rel = _artifact(task, step_id, "output")
    artifacts = Artifacts()
    if req.pty:
        from bar.ptyrun import run_in_pty

        cast_path, cast_rel = _artifact(task, step_id, "cast")
        res = run_in_pty(
            req.argv,
            cwd=cwd,
            env=env,
            cast_path=cast_path,
            output_path=out_path,
            scrub=lambda: StreamScrubber(scrubber),
        )
        exit_code, sig, printed = res.exit_code, res.signal, res.printed
        artifacts.cast = cast_rel if cast_path.exists() else None
        if not printed:
            out_path.unlink(missing_ok=True)
    else:
        from bar.capture import run_piped

        outcome = run_piped(
            req.argv,
            cwd=cwd,
            env=env,
            output_path=out_path,
            make_filter=lambda: StreamScrubber(scrubber),
            live=req.live,
        )
        exit_code, sig, printed = outcome.exit_code, outcome.signal, outcome.printed
    return exit_code, sig, printed, artifacts, out_rel


def _facts(task: Task, step_id: str, argv: Sequence[str], exit_code: int | None) -> Any:
    from bar.hooks import HookFacts

    return HookFacts(
        project=task.project.name,
        task_id=task.id,
        task_name=task.name,
        step_id=step_id,
        workspace=task.worktree,
        cmd=list(argv),
        exit_code=exit_code,
    )


def run_step(task: Task, req: RunRequest, *, wait: bool = True) -> tuple[Step, int]:
    """Run one command as a step of ``task``; return the recorded step and bar's exit code."""
    with task.lock(f"bar run {shlex.join(req.argv)}", wait=wait):
        task = load_task(task.project, task.id)  # may have changed while we waited
        prepare(task)
        config = task.project.config
        ledger = task.ledger
        step_id = ledger.next_step_id()
        _clear_leftover_artifacts(task, step_id)
        before = task.recorded_snapshot()
        started = now_iso()
        t0 = time.monotonic()
        env_record = _record_env(task, req)
        policy_events: list[dict[str, Any]] = []
        hook_records: list[dict[str, Any]] = []

        def finish(**fields: Any) -> Step:
            step = Step(
                step_id=step_id,
                kind="run",
                started_at=started,
                ended_at=now_iso(),
                duration_ms=_ms_since(t0),
                cmd=list(req.argv),
                cwd=req.cwd,
                env=env_record,
                policy_events=policy_events,
                hooks=hook_records,
                pty=req.pty,
                snapshot_before=before,
                **fields,
            )
            return append_step(task, step)

        # 1. policy
        if config.policy.enabled:
            from bar.policy_gate import check_argv

            decision = check_argv(task.project, req.argv)
            policy_events.extend(e.to_record() for e in decision.events)
            for event in decision.events:
                if event.action in ("warn", "block"):
                    print(
                        f"bar: policy {event.action}: rule {event.rule}: {event.reason}",
                        file=sys.stderr,
                    )
            if decision.blocked:
                step = finish(
                    exit_code=126,
                    blocked=True,
                    diff_stat=DiffStat.empty(),
                    snapshot=before,
                    head=git.rev_parse(task.worktree, "HEAD"),
                )
                print(
                    f"bar: blocked by policy; nothing ran (step {step_id} recorded)",
                    file=sys.stderr,
                )
                return step, 126

        cwd = task.worktree / req.cwd
        env = child_env(task, step_id, req)

        # 2. pre_run hooks
        if config.hooks.pre_run:
            from bar.hooks import run_hooks

            results = run_hooks(
                "pre_run",
                config.hooks.pre_run,
                _facts(task, step_id, req.argv, None),
                cwd=task.worktree,
                base_env=env,
                timeout=config.hooks.timeout,
            )
            hook_records.extend(r.to_record() for r in results)
            failed = next((r for r in results if not r.ok), None)
            if failed is not None:
                from bar.errors import HookFailed

                raise HookFailed(
                    f"{failed.describe()}; the command did not run",
                    hint="fix the hook or remove it from hooks.pre_run in config.yaml",
                )

        # 3. marker, then the command (with the agent's hook installed meanwhile)
        excludes = list(req.excludes)
        agent_hook = None
        if req.agent:
            from bar.agents import install_hook, settings_path
            from bar.commands.agent import hook_command

            excludes.append(settings_path(req.agent))
        write_marker(
            task,
            Marker(
                pid=os.getpid(),
                step_id=step_id,
                started_at=started,
                cmd=list(req.argv),
                cwd=req.cwd,
                snapshot_before=before,
                env=env_record,
                pty=req.pty,
                excludes=excludes,
            ),
        )
        if req.agent:
            agent_hook = install_hook(req.agent, task.worktree, hook_command(req.agent, task.dir))
            agent_hook.__enter__()
            if req.agent == "gemini":
                # project hooks run only in trusted folders; this one bar made for the task
                env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
            elif req.agent == "codex":
                print(
                    "bar: Codex runs bar's hook only once it is trusted: accept it in /hooks "
                    "(or pass --dangerously-bypass-hook-trust to codex)",
                    file=sys.stderr,
                )
        try:
            exit_code, sig, printed, artifacts, out_rel = _execute(task, step_id, req, cwd, env)
        finally:
            if agent_hook is not None:
                agent_hook.__exit__(None, None, None)
        if printed:
            artifacts.output = out_rel
        # 4. post_run hooks
        if config.hooks.post_run:
            from bar.hooks import run_hooks

            results = run_hooks(
                "post_run",
                config.hooks.post_run,
                _facts(task, step_id, req.argv, exit_code),
                cwd=task.worktree,
                base_env={**env, "BAR_EXIT_CODE": str(exit_code)},
                timeout=config.hooks.timeout,
            )
            hook_records.extend(r.to_record() for r in results)
            for r in results:
                if not r.ok:
                    print(f"bar: warning: {r.describe()}", file=sys.stderr)

        # 5. snapshot, patch, ledger line (the commit point), marker removed
        snap = snapshot.take(
            task.worktree,
            task.index,
            task.snapshot_ref,
            before,
            f"step {step_id}: {shlex.join(req.argv)}",
            excludes,
        )
        stat, patch_artifacts = diff_into_step(task, step_id, before, snap.commit)
        artifacts.patch = patch_artifacts.patch
        policy_events.extend(read_inner_events(task, step_id))
        step = finish(
            exit_code=exit_code,
            signal=sig,
            diff_stat=stat,
            artifacts=artifacts,
            snapshot=snap.commit,
            head=git.rev_parse(task.worktree, "HEAD"),
        )
        inner_events_path(task, step_id).unlink(missing_ok=True)
        task.marker_path.unlink(missing_ok=True)
        return step, exit_code


def ensure_clean_or_record(task: Task, *, force: bool) -> None:
    """For close: refuse when unrecorded changes exist, unless ``force`` records them."""
    if not has_unrecorded_changes(task):
        return
    if not force:
        raise DirtyWorktree(
            f"task {task.name} has changes no step recorded",
            hint="record them with `bar run`, roll them back, or close with --force "
            "(which records them as a manual step first)",
        )
    record_manual(task)


# POSIX's portable names: str.isalnum() would also let 'é' and '²' through
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_from_pairs(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME_RE.fullmatch(name) or "\0" in value:
            raise UsageError(f"-e expects NAME=VALUE, got {pair!r}")
        env[name] = value
    return env
