"""``bar flow ACTION SUMMARY`` and ``bar flow status``: the task's phases and steps."""

from __future__ import annotations

from bar import api
from bar.aide import flow
from bar.api import orders
from bar.cli.render import Painter, print_json, short


def act(
    *,
    action: str,
    summary: str,
    task: str | None,
    as_json: bool,
    rollback: bool = False,
    phase: str | None = None,
) -> int:
    the_task = api.get_task(api.open_project(), task)
    done = orders.flow_act(the_task, action, summary, rollback=rollback, phase=phase)
    if as_json:
        print_json(done)
        return 0
    entry = done["entry"]
    assert isinstance(entry, dict)
    print(
        f"{entry['phase']}, step {entry['step']}: {action} {summary!r} "
        f"(snapshot {short(str(entry['git_commit']))}, state {entry['state']})"
    )
    rolled = done.get("rollback")
    if isinstance(rolled, dict):
        name = rolled.get("checkpoint") or rolled.get("step_id")
        # a rollback step names its state in target_step (its target is the kind, "step")
        state = rolled.get("target_step") or rolled.get("target")
        undo = "bar undo takes it back" if rolled.get("step_id") else "roll back again to undo it"
        print(f"  files restored to state {state} (rollback {name}; {undo})")
    return 0


def status(*, task: str | None, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    current = flow.status(the_task)
    if as_json:
        print_json(current)
        return 0
    if current is None:
        print(f'Task {the_task.name} has no flow yet. Start one with: bar flow start "SUMMARY"')
        return 0
    paint = Painter(the_task.project.config.output.color)
    phases = flow.phases(the_task)
    print(
        paint(f"phase {current['current_phase']}, step {current['current_step']}", "bold")
        + f"  (phases: {' > '.join(phases)}; started {current['started_at']})"
    )
    for entry in current["history"]:
        commit = short(entry.get("git_commit"))
        print(
            f"  {entry['step']:>3}  {entry['action']:<9}  {entry['phase']:<12} {commit}  "
            f"{entry['summary']}"
        )
    return 0
