"""``bar log [-n N] [-p] [--tools]``: the task's steps, newest last."""

from __future__ import annotations

from bar import api
from bar.records import RunStep
from bar.render import (
    Painter,
    checkpoint_line,
    copy_file,
    describe,
    duration,
    outcome,
    plural,
    print_json,
    stat_text,
)


def log(*, task: str | None, n: int | None, patch: bool, as_json: bool, tools: bool = False) -> int:
    the_task = api.get_task(api.open_project(), task)
    steps = api.log(the_task, n)
    if as_json:
        records = []
        for s in steps:
            rec = s.to_record()
            if isinstance(s, RunStep) and s.checkpoints:
                rec["checkpoint_list"] = [
                    c.to_record() for c in api.checkpoints(the_task, s.step_id)
                ]
            records.append(rec)
        print_json(records)
        return 0
    paint = Painter(the_task.project.config.output.color)
    if not steps:
        print(f"Task {the_task.name} ({the_task.id}) has no steps yet. "
              "Record one with: bar run -- CMD")  # fmt: skip
        return 0
    for step in steps:
        # padded before painting: colour codes must not count as width
        line = (
            f"{paint(step.step_id, 'bold')}  {step.kind:<8} "
            f"{paint.pad(outcome(step, paint), 8)}  "
            f"{stat_text(step.diff_stat):<22} {duration(step.duration_ms):>7}  {describe(step)}"
        )
        print(line.rstrip())
        if isinstance(step, RunStep) and step.checkpoints:
            if tools:
                for cp in api.checkpoints(the_task, step.step_id):
                    print(f"  {checkpoint_line(cp, paint)}".rstrip())
            else:
                print(paint(f"      {plural(step.checkpoints, 'checkpoint')} "
                            "(bar log --tools lists them)", "dim"))  # fmt: skip
        if patch and step.artifacts.patch:
            if not copy_file(api.artifact_path(the_task, step.artifacts.patch)):
                print(f"bar: warning: artifact {step.artifacts.patch} is missing")
            print()
    return 0
