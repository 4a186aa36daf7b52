"""``bar verify [--step STATE] [--record]``: every byte of a recorded state against the
worktree."""

from __future__ import annotations

from typing import Any

from bar import api
from bar.base import progress
from bar.cli.render import Painter, byte_size, plural, print_json
from bar.errors import UsageError


def verify(*, task: str | None, step: str | None, record: bool, as_json: bool) -> int:
    the_task = api.get_task(api.open_project(), task)
    with progress.Progress("verify: hashing files") as shown:

        def tick(done: int, total: int) -> None:
            shown.total = total
            shown.update(done)

        if record:
            if step is not None:
                last = the_task.ledger.last()
                if last is None or step not in (last.step_id, str(last.number)):
                    raise UsageError(
                        "--record records the worktree as the next step: it compares with "
                        "the last recorded state, not with --step",
                        hint="bar verify --record  (or: bar verify --step STATE, to only look)",
                    )
            before, made, after = api.verify_and_record(the_task, on_progress=tick)
        else:
            before = api.verify(the_task, step, on_progress=tick)
            made, after = None, before
    if as_json:
        data: dict[str, Any] = before.to_json()
        if record:
            data["recorded_step"] = made.step_id if made is not None else None
            data["after"] = after.to_json()
        print_json(data)
        return 0 if after.matches else 1
    paint = Painter(the_task.project.config.output.color)
    named = "base" if before.state == "base" else f"step {before.state}"
    for d in before.differences:
        print(f"{paint(d.kind.ljust(9), 'yellow')} {d.path}  ({d.detail})")
    for path in before.not_compared:
        print(f"{'skipped'.ljust(9)} {path}  (a filter attribute converts it: not compared)")
    size = byte_size(before.bytes_hashed)
    if before.matches:
        print(
            paint("verified", "green")
            + f": the worktree holds {named} exactly ({plural(before.files, 'entry')}, "
            f"{size} hashed in {before.seconds:.1f} s)"
        )
        return 0
    counts = ", ".join(f"{n} {kind}" for kind, n in before.counts().items() if n)
    print(
        paint("differs", "red") + f": the worktree is not {named} ({counts}; "
        f"{plural(before.files, 'entry')}, {size} hashed in {before.seconds:.1f} s)"
    )
    if record:
        if made is not None:
            print(f"recorded step {made.step_id} (manual): what differed is now in the record")
        if not after.matches:
            print(
                paint("still differs", "red")
                + f" after recording: {plural(len(after.differences), 'path')} "
                "(changing while bar read them, or never recorded: ignored by a rule HEAD "
                "does not hold)"
            )
            return 1
        return 0
    if step is None:
        print(
            "hint: `bar verify --record` records them as a manual step, so a rollback and "
            "an undo keep them"
        )
    return 1
