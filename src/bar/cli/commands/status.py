"""``bar status``: project, task, worktree, running step, unrecorded changes."""

from __future__ import annotations

from typing import Any

from bar import api
from bar.base.cmdline import line_of
from bar.cli.render import Painter, plural, print_json, totals_text, visible

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar status``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "status",
        formatter_class=Formatter,
        description="Where the task stands: its steps, a running or interrupted step, and\n"
        "whether the worktree holds changes no step recorded (see them with\n"
        "`bar diff --unrecorded`; the next step records them), and which files no step\n"
        "records (over 1 GiB, mostly holes, hard links); what its agent steps add up to\n"
        "(turns, tool calls, tokens, cost when known).",
        epilog="examples:\n"
        "  bar status                  the task you are in, else the active one\n"
        "  bar status --task fix-login\n"
        "  bar status --json           for scripts: the same as fields",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=status)


# --- the command -----------------------------------------------------------------------


def status(*, task: str | None, as_json: bool) -> int:
    loc = api.open_project()
    info = api.status(loc, task)
    totals = api.session_totals(info.task) if info.task is not None else None
    workers = api.on_workers(info.task) if info.task is not None else None
    if as_json:
        data = info.to_json()
        if data.get("task") is not None:
            data["task"]["session_totals"] = totals
            data["task"]["on_workers"] = workers
        print_json(data)
        return 0
    project = loc.project
    paint = Painter(project.config.output.color)
    print(f"project   {project.name}  ({project.root})")
    print(f"config    {project.paths.config}  (yours)")
    shared = project.shared_config_path()
    if shared.is_file():
        print(f"          {shared}  (the repository's, added to yours)")
    if project.config.policy.enabled:
        print(f"policy    on: every command is checked against {project.policy_path()}")
    else:
        print(paint("policy    off (policy.enabled: false): no command is checked", "yellow"))
    t = info.task
    if t is None:
        print(f"task      none: {info.no_task_reason}")
        return 0
    state = info.state.label if info.state else t.status
    print(f"task      {paint(t.name, 'bold')} ({t.id}), {state}, {plural(info.steps, 'step')}")
    print(f"branch    {t.branch}")
    moved = api.base_moved_text(t)
    if moved:
        print(paint(f"base      {t.base_ref} at {t.base_commit[:10]} ({moved})", "yellow"))
    if totals is not None:
        print(f"agents    {totals_text(totals)}")
    if workers is not None:
        _workers_lines(workers, paint)
    elif t.pending:
        print(f"worktree  {t.worktree}  (not made yet: bar task start {t.name})")
    elif info.state is not None and info.state.worktree_missing:
        print(paint(f"worktree  {t.worktree} is missing", "red"))
        print("          hint: `bar doctor --repair` recreates it at the last recorded state")
    else:
        print(f"worktree  {t.worktree}")
    if info.running:
        r = info.running
        print(paint(f"running   step {r.step_id} (pid {r.pid}): {line_of(r.cmd)}", "yellow"))
        if info.checkpoints:
            print(
                f"          {plural(info.checkpoints, 'checkpoint')} so far "
                f"(bar show {r.step_id}.{info.checkpoints}; rollback --to one between turns)"
            )
    if info.interrupted:
        left = info.interrupted
        how = (
            "was interrupted"
            if left.exit_code is None
            else f"ended (exit {left.exit_code}) and is not recorded yet"
        )
        print(paint(f"note      step {left.step_id} {how}; the next command records it", "yellow"))
    if info.decision is not None:
        asked = info.decision
        what = f": {asked['task']}" if asked.get("task") else ""
        print(
            paint(
                f"decide    the agent waits for your answer to decision {asked['session_id']}"
                f"{what} ({plural(asked['items'], 'question')})",
                "yellow",
            )
        )
        named = f" --task {t.name}" if task is not None else ""
        print(f"          answer with: bar decide answer{named}  (it shows each question)")
    if info.blocked is not None:
        said = info.blocked.splitlines()
        print(paint(f"changes   not looked at: {said[0]}", "red"))
        for line in said[1:]:
            print(f"          {line}")
    if info.unrecorded_changes:
        print(
            paint("changes   the worktree has changes no step recorded", "yellow")
            + " (recorded before the next step)"
        )
        print("          see them with: bar diff --unrecorded")
    elif info.unrecorded_changes is not None:
        print(
            "changes   none unrecorded (ignored files and nested repositories' own files never are)"
        )
    if info.unrecorded_changes is not None:
        print(
            "          closing the task moves those to its trash (bar trash), reopening puts "
            "them back"
        )
    if info.left_out:
        _left_out_lines(info.left_out, paint)
    if info.unresolved_conflicts:
        held = [visible(p) for p in info.unresolved_conflicts]
        holds = "holds" if len(held) == 1 else "hold"
        print(
            paint(
                f"conflicts {', '.join(held)} still {holds} the conflict markers of a sync", "red"
            )
        )
        print(
            "          resolve them in the worktree, record with any bar run; "
            "bar apply refuses until then"
        )
    watch = info.watch
    marks = watch.get("marks") if watch is not None else None
    by = f", {marks:,} by fanotify" if isinstance(marks, int) and marks else ""
    if watch is not None and watch["mode"] == "watching":
        print(
            f"watch     on: {watch['dirs']:,} {'directory' if watch['dirs'] == 1 else 'directories'}"
            f" watched (pid {watch['pid']}{by}); a command looks only at what moved"
            + ("" if watch["sure"] else " (once the next command has looked at everything)")
        )
    elif watch is not None and watch["mode"] == "partial":
        scanned = watch.get("scanned")
        rest = f"the other {scanned:,}" if isinstance(scanned, int) else "the others"
        print(
            f"watch     partial: {watch['dirs']:,} directories watched (pid {watch['pid']}{by}), "
            f"{rest} statted by each command (bar's inotify watches and fanotify marks are "
            "shared by all tasks)"
            + ("" if watch["sure"] else " (once the next command has looked at everything)")
        )
    elif watch is not None:
        print(f"watch     off, every file is statted by each command: {watch['reason']}")
    box = info.sandbox
    if box.get("enabled"):
        print(f"sandbox   steps run confined ({box['detail']})")
    elif box:
        print(paint(f"sandbox   steps run unconfined: {box['detail']}", "yellow"))
    for path in info.nested_repos:
        print(
            paint(
                f"nested    {visible(path)} is a git repository of its own: bar records only the "
                "commit it is at, not its files (edits inside are not recorded or "
                "rolled back)",
                "yellow",
            )
        )
    return 0


# why the record leaves a file out (``bar.history.side_index.LEFT_OUT``), in a few words
_LEFT_OUT_WHY = {"large": "over 1 GiB", "holes": "mostly holes", "links": "hard links"}


def _left_out_lines(left_out: dict[str, str], paint: Painter) -> None:
    """The worktree's files no step records, by why, with what brings them in."""
    for why in sorted(set(left_out.values())):
        files = [p for p, w in left_out.items() if w == why]
        shown = ", ".join(visible(f) for f in files[:5]) + (
            f" and {len(files) - 5} more" if len(files) > 5 else ""
        )
        words = _LEFT_OUT_WHY.get(why, why)
        print(
            paint(
                f"left out  {plural(len(files), 'file')} not recorded ({words}): {shown}", "yellow"
            )
        )
    print("          no step records them while they stay so; see docs/sandbox.md")


def _workers_lines(workers: dict[str, Any], paint: Painter) -> None:
    """Where a task on workers runs, and what its workflow says now."""
    print(f"runs on   queue {workers['queue']} at {workers['server']} (bar task adopt: here again)")
    if workers.get("error"):
        print(paint(f"          {workers['error']}", "yellow"))
        if workers.get("hint"):
            print(f"          hint: {workers['hint']}")
        return
    now = workers.get("now") or {}
    running = now.get("running")
    if running:
        worker = running.get("worker") or "a worker"
        line = f"running   on {worker} since {running.get('since')}: {line_of(running['argv'])}"
        print(paint(line, "yellow"))
    if now.get("why"):
        print(paint(f"          {now['why']}", "yellow"))
    waiting = now.get("waiting") or []
    if waiting:
        print(f"waiting   {plural(len(waiting), 'step')} after it")
    results = now.get("results") or []
    if results:
        last = results[-1]
        code = last.get("exit_code")
        print(
            f"last      step {last.get('step_id')} {last.get('status')} on "
            f"{last.get('worker', '?')}" + (f", exit {code}" if code is not None else "")
        )
    question = now.get("question")
    if question:
        print(
            paint(
                f"decide    its agent asks (decision {question.get('session_id')}): "
                "bar decide answer",
                "yellow",
            )
        )
