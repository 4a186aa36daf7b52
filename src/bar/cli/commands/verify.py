"""``bar verify [--step STATE] [--record]``: every byte of a recorded state against the
worktree."""

from __future__ import annotations

from typing import Any

from bar import api
from bar.base import progress
from bar.cli.render import Painter, byte_size, plural, print_json
from bar.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar verify``: its options and help."""
    from bar.cli.parser import Formatter, json_opt, task_opt

    p = sub.add_parser(
        "verify",
        formatter_class=Formatter,
        description="Read every file of a recorded state (default: the last) in the task's\n"
        "worktree, hash its bytes as git hashes a blob, and compare them, its type and its\n"
        "mode with the record; list what the worktree holds beside them that the next\n"
        "step would record (not ignored). It writes nothing and gives the same answer\n"
        "whatever the speed settings.\n\n"
        "Why: every other look (bar status, the look for hand edits before each command)\n"
        "trusts what the kernel says changed (a file's size and times, inotify). A write\n"
        "through a shared memory map (mmap MAP_SHARED) to an already-dirty page changes\n"
        "neither and raises no event: only reading the bytes shows it. Where git converts\n"
        "line endings, a file is compared with git's checkout of it (or the raw bytes\n"
        "the snapshot kept); a path a filter attribute names is listed as not compared.\n\n"
        "Each path that differs is listed: modified (other bytes, or a nested repository\n"
        "at another commit), mode (the executable bit), type (a file now a link, a\n"
        "directory or a nested repository, or back), missing, extra (not in the state,\n"
        "not ignored). Exit 0: the worktree holds the state; 1: it differs.\n\n"
        "--record records what differs as a manual step (it reads every file under the\n"
        "task's lock, then has git hash those again whatever their stat says), so a\n"
        "rollback and an undo keep those bytes; it exits 0 once the record holds them.",
        epilog="examples:\n"
        "  bar verify                  the worktree against the last recorded state\n"
        "  bar verify --step 3         ... against the state after step 0003 (or base, 3.2)\n"
        "  bar verify --record         record what differs as a manual step\n"
        "  bar verify --json           for scripts: every difference as fields",
    )
    task_opt(p)
    p.add_argument(
        "--step",
        metavar="STATE",
        help="the recorded state to compare with: base, STEP or STEP.N (default: the last)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="record what differs from the last state as a manual step",
    )
    json_opt(p)
    p.set_defaults(_run=verify)


# --- the command -----------------------------------------------------------------------


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
