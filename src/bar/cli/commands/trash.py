"""``bar trash`` (list what bar moved aside) and ``bar trash restore`` (put it back)."""

from __future__ import annotations

from pathlib import Path

from bar import api
from bar.cli.render import byte_size, plural, print_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar trash``: its options and help."""
    from bar.cli.parser import Formatter, implied_action, json_opt, task_opt

    t = sub.add_parser(
        "trash",
        formatter_class=Formatter,
        description="bar never deletes bytes no recorded state holds. When a command must remove\n"
        "some from a task's worktree (a nested git repository where a rollback puts a\n"
        "file, ignored files under a directory that becomes a file, what a closed task's\n"
        "worktree held), it moves them to the task's trash first and says so. Each move\n"
        "is an entry ($BAR_HOME/projects/<p>/tasks/<id>/trash/<UTC time>-<n>/): paths kept\n"
        "relative to the worktree, modes kept, and a manifest of when, which command and\n"
        "why. An undo of that rollback, or a reopen of the closed task, puts them back by\n"
        "itself. `bar trash` lists the entries (short for `bar trash list`), `bar trash\n"
        "restore` puts paths back. `bar task delete` refuses while the trash holds\n"
        "anything; with --force it empties it with the task.",
        epilog="examples:\n"
        "  bar trash                         what is in the active task's trash\n"
        "  bar trash --task fix-login --json\n"
        "  bar trash restore                 put back the newest entry\n"
        "  bar trash restore vendor          the newest vendor/ moved aside\n"
        "  bar trash restore 20261127T101500Z-1 --to /tmp/old   an entry, elsewhere",
    )
    tsub = t.add_subparsers(dest="trash_command", metavar="ACTION")
    t.set_defaults(_help=t, _run=list_, task=None, as_json=False)
    implied_action(t, "list", lambda word: word.startswith("-") and word not in ("-h", "--help"))
    p = tsub.add_parser(
        "list",
        help="list the entries of the task's trash (the default)",
        formatter_class=Formatter,
        description="List the task's trash, oldest entry first: each entry's name, the command\n"
        "(and step) that moved it and why, then each path with its kind (file, dir,\n"
        "nested-repo, symlink), its size and, for a nested repository, its HEAD.",
        epilog="examples:\n  bar trash list\n  bar trash list --task 2 --json",
    )
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=list_)
    p = tsub.add_parser(
        "restore",
        help="put paths back from the trash",
        formatter_class=Formatter,
        description="Put back what the trash holds, at its path in the task's worktree (or under\n"
        "--to DIR). Name entries (all their paths) or paths (the newest entry holding\n"
        "each; a directory names everything below it); nothing named: the newest entry.\n"
        "Nothing is ever overwritten: a path that exists (but an empty directory where a\n"
        "directory goes back) stays in the trash, the command says what blocks it and\n"
        "exits 6. What comes back into the worktree is like any hand edit: the next\n"
        "command records it (ignored files excepted).",
        epilog="examples:\n"
        "  bar trash restore\n"
        "  bar trash restore vendor d/cache.log\n"
        "  bar trash restore 20261127T101500Z-1 --to ~/rescued",
    )
    p.add_argument("what", nargs="*", metavar="ENTRY|PATH", help="default: the newest entry")
    p.add_argument("--to", metavar="DIR", help="restore under DIR instead of the worktree")
    task_opt(p)
    json_opt(p)
    p.set_defaults(_run=restore)


# --- the command -----------------------------------------------------------------------


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
