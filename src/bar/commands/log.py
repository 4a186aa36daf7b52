"""``bar log [-n N] [-p]``: the task's steps, newest last."""

from __future__ import annotations

from bar import api
from bar.render import Painter, copy_file, describe, duration, outcome, print_json, stat_text


def log(*, task: str | None, n: int | None, patch: bool, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    steps = api.log(the_task, n)
    if as_json:
        print_json([s.to_record() for s in steps])
        return 0
    paint = Painter(the_task.project.config.output.color)
    if not steps:
        print(f"Task {the_task.name} ({the_task.id}) has no steps yet. "
              "Record one with: bar run -- CMD")  # fmt: skip
        return 0
    for step in steps:
        line = (
            f"{paint(step.step_id, 'bold')}  {step.kind:<8} {outcome(step, paint):<8}  "
            f"{stat_text(step.diff_stat):<22} {duration(step.duration_ms):>7}  {describe(step)}"
        )
        print(line.rstrip())
        if patch and step.artifacts.patch:
            if not copy_file(api.artifact_path(the_task, step.artifacts.patch)):
                print(f"bar: warning: artifact {step.artifacts.patch} is missing")
            print()
    return 0
