"""``bar trash`` (list what bar moved aside) and ``bar trash restore`` (put it back)."""

from __future__ import annotations

from pathlib import Path

from bar import api
from bar.cli.render import byte_size, plural, print_json


def list_(*, task: str | None, as_json: bool) -> int:
    loc = api.open_project()
    the_task = api.get_task(loc, task)
    found = api.trash_entries(the_task)
    if as_json:
        print_json(
            {
                "task": the_task.id,
                "size": sum(e.size for e in found),
                "entries": [
                    {**e.to_json(), "dir": str(the_task.paths.trash / e.id)} for e in found
                ],
            }
        )
        return 0
    if not found:
        print(f"The trash of task {the_task.name} is empty.")
        return 0
    total = sum(e.size for e in found)
    print(
        f"Trash of task {the_task.name}: {plural(len(found), 'entry')}, {byte_size(total)} "
        f"({the_task.paths.trash})"
    )
    for e in found:
        step = f", step {e.step}" if e.step else ""
        print(f"{e.id}  {e.command}{step}: {e.reason}")
        for i in e.items:
            head = f"  HEAD {i.head[:12]}" if i.head else ""
            print(f"  {i.kind:<11}  {byte_size(i.size):>8}  {i.shown}{head}")
    print("Put back with: bar trash restore ENTRY|PATH... (bar task delete empties it)")
    return 0


def restore(*, task: str | None, what: list[str], to: str | None, as_json: bool) -> int:
    from bar.errors import Conflict

    loc = api.open_project()
    the_task = api.get_task(loc, task)
    dest = Path(to).absolute() if to else None
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
    done = api.trash_restore(the_task, what, dest)
    if as_json:
        print_json(
            {
                "task": the_task.id,
                "restored": [
                    {"entry": e, **i.to_json(), "to": str(where)} for e, i, where in done.put_back
                ],
                "blocked": [{"entry": e, **i.to_json(), "why": why} for e, i, why in done.blocked],
            }
        )
    else:
        for _e, i, where in done.put_back:
            print(f"put back {i.path} ({i.kind}, {byte_size(i.size)}) at {where}")
    if done.blocked:
        lines = "; ".join(why for _e, _i, why in done.blocked)
        raise Conflict(
            f"{plural(len(done.blocked), 'path')} not put back: {lines}; nothing was overwritten "
            "and it stays in the trash",
            hint="move what is there out of the way and run it again, or put it elsewhere "
            "with --to DIR",
        )
    return 0
