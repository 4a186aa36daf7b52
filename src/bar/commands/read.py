"""Reading the record: ``bar log``, ``bar show``, ``bar diff``, ``bar status``."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from bar import git
from bar.errors import CorruptFile, TaskNotFound, UsageError
from bar.ledger import Step, parse_step_ref
from bar.lock import is_locked
from bar.project import find_project
from bar.render import Painter, plural, print_json, short
from bar.tasks import Task, resolve_task


def _task(args: argparse.Namespace) -> Task:
    loc = find_project()
    return resolve_task(loc.project, getattr(args, "task", None), from_cwd=loc.task_id)


def describe(step: Step) -> str:
    """One line saying what a step was."""
    if step.kind == "run":
        text = shlex.join(step.cmd or [])
        return text if len(text) <= 72 else text[:69] + "..."
    if step.kind == "manual":
        return "changes made outside bar"
    if step.kind == "rollback":
        where = "base" if step.target == "base" else f"step {step.target_step}"
        return f"rollback to {where}" + (" (--hard)" if step.hard else "")
    if step.kind == "apply":
        return f"apply ({step.mode}) onto {step.target_branch} as {short(step.commit_sha)}"
    return step.kind


def _outcome(step: Step, paint: Painter) -> str:
    if step.kind != "run":
        return ""
    if step.blocked:
        return paint("blocked", "red")
    if step.interrupted:
        return paint("interrupted", "yellow")
    if step.exit_code == 0:
        return paint("exit 0", "green")
    return paint(f"exit {step.exit_code}", "red")


def _stat_text(step: Step) -> str:
    s = step.diff_stat
    if s is None or s.files == 0:
        return "no changes"
    return f"{plural(s.files, 'file')} +{s.additions} -{s.deletions}"


def _duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    return f"{ms // 60_000}m{(ms % 60_000) // 1000:02d}s"


def _print_artifact(task: Task, rel: str | None) -> None:
    if not rel:
        return
    path = _artifact_path(task, rel)
    try:
        with path.open("rb") as fh:
            out = sys.stdout.buffer
            shutil.copyfileobj(fh, out)
            out.flush()
    except FileNotFoundError:
        print(f"bar: warning: artifact {rel} is missing", file=sys.stderr)


def _artifact_path(task: Task, rel: str) -> Path:
    """Resolve an artifact path from the ledger, refusing anything outside the task (a
    link planted in the artifacts directory included)."""
    path = (task.dir / rel).resolve()
    try:
        path.relative_to(task.dir.resolve())
    except ValueError:
        raise CorruptFile(
            f"artifact {rel} of task {task.name} ({task.id}) leads outside the task "
            f"directory {task.dir}",
            hint="run `bar doctor` to check the task",
        ) from None
    return path


def log(args: argparse.Namespace) -> int:
    task = _task(args)
    ledger = task.ledger
    if args.n is not None and args.n < 0:
        raise UsageError("-n takes a positive number")
    steps = ledger.tail(args.n) if args.n is not None else ledger.read_all()
    if args.json:
        print_json([s.to_record() for s in steps])
        return 0
    paint = Painter(task.project.config.output.color)
    if not steps:
        print(f"Task {task.name} ({task.id}) has no steps yet. Record one with: bar run -- CMD")
        return 0
    for step in steps:
        line = (
            f"{paint(step.step_id, 'bold')}  {step.kind:<8} {_outcome(step, paint):<8}  "
            f"{_stat_text(step):<22} {_duration(step.duration_ms):>7}  {describe(step)}"
        )
        print(line.rstrip())
        if args.patch and step.artifacts.patch:
            _print_artifact(task, step.artifacts.patch)
            print()
    return 0


def show(args: argparse.Namespace) -> int:
    task = _task(args)
    step = task.ledger.get(parse_step_ref(args.step))
    if args.json:
        rec = step.to_record()
        rec["patch_text"] = _read_text(task, step.artifacts.patch)
        rec["output_text"] = _read_text(task, step.artifacts.output)
        print_json(rec)
        return 0
    paint = Painter(task.project.config.output.color)
    print(f"{paint('step ' + step.step_id, 'bold')}  {step.kind}  {describe(step)}")
    rows: list[tuple[str, Any]] = [
        ("started", step.started_at),
        ("duration", _duration(step.duration_ms)),
    ]
    if step.kind == "run":
        rows += [("command", shlex.join(step.cmd or [])), ("cwd", step.cwd)]
        rows.append(
            ("result", _outcome(step, paint) + (f" (signal {step.signal})" if step.signal else ""))
        )
        if step.env:
            rows.append(("env", " ".join(f"{k}={v}" for k, v in step.env.items())))
        if step.pty:
            rows.append(("terminal", "interactive (pty)"))
    if step.kind == "apply":
        rows += [("mode", step.mode), ("target", step.target_branch), ("commit", step.commit_sha)]
    rows.append(("changes", _stat_text(step)))
    if step.diff_stat and step.diff_stat.file_list:
        rows.append(("files", ", ".join(step.diff_stat.file_list)))
    rows.append(("snapshot", f"{short(step.snapshot_before)} -> {short(step.snapshot)}"))
    if step.head:
        rows.append(("head", short(step.head)))
    for event in step.policy_events or []:
        source = f" [{event['source']}]" if event.get("source") else ""
        rows.append(
            ("policy", f"{event.get('action')} {event.get('rule')}: {event.get('matched')}{source}")
        )
    for hook in step.hooks or []:
        rows.append(
            ("hook", f"{hook.get('phase')} {hook.get('cmd')!r} -> exit {hook.get('exit_code')}")
        )
    for key, value in rows:
        print(f"  {key:<9} {value}")
    if step.artifacts.patch:
        print(paint("\n--- patch " + step.artifacts.patch, "cyan"))
        _print_artifact(task, step.artifacts.patch)
    if step.artifacts.output:
        print(paint("\n--- output " + step.artifacts.output, "cyan"))
        _print_artifact(task, step.artifacts.output)
    if step.artifacts.cast:
        print(paint(f"\n(replay the session with: bar replay {step.step_id})", "dim"))
    return 0


def _read_text(task: Task, rel: str | None) -> str | None:
    if not rel:
        return None
    try:
        return _artifact_path(task, rel).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None


def resolve_state(task: Task, ref: str) -> str:
    """A recorded state: ``base`` or a step id (the state after that step)."""
    if ref == "base":
        return task.base_commit
    step = task.ledger.get(parse_step_ref(ref))
    if not step.snapshot:
        raise UsageError(f"step {step.step_id} recorded no snapshot")
    return step.snapshot


def diff(args: argparse.Namespace) -> int:
    task = _task(args)
    a = resolve_state(task, args.from_)
    b = resolve_state(task, args.to) if args.to else task.recorded_snapshot()
    repo = task.project.root
    if args.json:
        stat = git.numstat(repo, a, b)
        rec: dict[str, Any] = {"from": a, "to": b, "diff_stat": stat.to_record()}
        if not args.stat:
            rec["patch"] = git.git(repo, *git.diff_patch_args(a, b)).out
        print_json(rec)
        return 0
    color = Painter(task.project.config.output.color).enabled
    flags = ["--stat"] if args.stat else ["-p"]
    res = git.git(
        repo,
        "-c",
        f"color.ui={'always' if color else 'never'}",
        "diff",
        *git.DIFF_FLAGS[:2],
        *flags,
        a,
        b,
        "--",
    )
    sys.stdout.write(res.out)
    return 0


def status(args: argparse.Namespace) -> int:
    loc = find_project()
    project = loc.project
    info: dict[str, Any] = {
        "project": project.name,
        "root": str(project.root),
        "dir": str(project.dir),
    }
    try:
        task = resolve_task(project, args.task, from_cwd=loc.task_id)
    except TaskNotFound as exc:  # a broken file is an error here too, not "no task"
        if args.task:
            raise
        task = None
        info["task"] = None
        info["message"] = str(exc)
    if task is not None:
        last = task.ledger.last()
        info["task"] = {
            "id": task.id,
            "name": task.name,
            "status": task.status,
            "branch": task.branch,
            "worktree": str(task.worktree),
            "steps": last.number if last else 0,
            "last_step": last.step_id if last else None,
        }
        busy = is_locked(task.dir / "task.lock")
        marker = None
        if task.marker_path.exists():
            from bar.recorder import read_marker

            marker = read_marker(task)
        info["running"] = (
            {
                "step_id": marker.step_id,
                "pid": marker.pid,
                "cmd": marker.cmd,
                "started_at": marker.started_at,
            }
            if marker and busy
            else None
        )
        info["interrupted_step"] = marker.step_id if marker and not busy else None
        info["unrecorded_changes"] = (
            _unrecorded(task) if task.active and task.worktree.is_dir() and not busy else None
        )
    if args.json:
        print_json(info)
        return 0
    paint = Painter(project.config.output.color)
    print(f"project   {project.name}  ({project.root})")
    if task is None:
        print(f"task      none: {info['message']}")
        return 0
    t = info["task"]
    print(
        f"task      {paint(task.name, 'bold')} ({task.id}), {task.status}, {plural(t['steps'], 'step')}"
    )
    print(f"branch    {task.branch}")
    print(f"worktree  {task.worktree}")
    if info["running"]:
        r = info["running"]
        print(
            paint(
                f"running   step {r['step_id']} (pid {r['pid']}): {shlex.join(r['cmd'])}", "yellow"
            )
        )
    if info["interrupted_step"]:
        print(
            paint(
                f"note      step {info['interrupted_step']} was interrupted; the next command records it",
                "yellow",
            )
        )
    changes = info["unrecorded_changes"]
    if changes is None:
        pass
    elif changes:
        print(
            paint("changes   the worktree has changes no step recorded", "yellow")
            + " (recorded before the next step)"
        )
    else:
        print("changes   none unrecorded")
    return 0


def _unrecorded(task: Task) -> bool:
    from bar import snapshot
    from bar.recorder import current_tree_readonly

    recorded = task.recorded_snapshot()
    if snapshot.unchanged_since(task.worktree, task.index, recorded):
        return False
    tree = current_tree_readonly(task)
    return tree != git.tree_of(task.worktree, recorded)
