"""``bar init``: register the repository; safe to run again. ``--adopt``: re-attach the
tasks a moved repository left at its old path."""

from __future__ import annotations

from bar import api
from bar.cli.render import plural, print_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bar.cli.parser import Commands


# --- the command line ------------------------------------------------------------------


def options(sub: Commands) -> None:
    """The command line of ``bar init``: its options and help."""
    from bar.cli.parser import Formatter, json_opt

    p = sub.add_parser(
        "init",
        formatter_class=Formatter,
        description="Register the current git repository (it needs at least one commit).\n"
        "Creates the project's config.yaml and state.json under $BAR_HOME and, if absent,\n"
        "a commented default policy at .bar/policy.yaml. Safe to run again.\n\n"
        "A project is found by the repository's path, so a repository moved (mv repo\n"
        "repo2) seems new to bar. Its tasks' snapshot refs (refs/bar/tasks/<id>) move\n"
        "with it, though, and bar init finds the project that holds those tasks under\n"
        "the old path: it then registers nothing and names that project. --adopt\n"
        "re-attaches it here: the project directory takes the new path's name, each\n"
        "task.json the new repository root, and `git worktree repair` relinks the task\n"
        "worktrees; an empty project registered here since the move is replaced. Run\n"
        "it again to finish an adoption that was stopped. A repository that lacks what\n"
        "the tasks' ledgers last recorded (an older copy, cp -a before the last steps)\n"
        "adopts nothing (exit 1); the one that has it adopts, even tasks such a copy\n"
        "took before. See docs/tasks.md.",
        epilog="examples:\n"
        "  bar init                       register this repository\n"
        "  bar init --adopt               after a move: take its tasks along\n"
        "  bar init --adopt shop-1e49     the same, when several projects hold its tasks\n"
        "  bar init --share               git push sends the task histories behind it too",
    )
    p.add_argument(
        "--adopt",
        nargs="?",
        const="",
        metavar="PROJECT",
        help="re-attach the tasks this repository left at its old path (the project's\n"
        "directory name is needed only when more than one holds them)",
    )
    p.add_argument(
        "--share",
        action="store_true",
        help="install a git pre-push hook that pushes the histories of the tasks behind\n"
        "the pushed commits (bar push); a refused history stops the push",
    )
    json_opt(p)
    p.set_defaults(_run=init)


# --- the command -----------------------------------------------------------------------


def init(*, adopt: str | None, as_json: bool, share: bool = False) -> int:
    if adopt is not None:
        return _adopt(adopt, as_json)
    result = api.init_project()
    project = result.project
    hook = api.install_push_hook(project) if share else None
    if hook is not None and not as_json:
        if hook.already:
            print(f"The pre-push hook is installed already: {hook.path}")
        else:
            print(f"Installed {hook.path}: git push sends the task histories behind the commits")
        if hook.kept is not None:
            print(f"  the hook that was there runs first: {hook.kept}")
    if as_json:
        print_json(
            {
                "project": project.name,
                "root": str(project.root),
                "dir": str(project.dir),
                "created": [str(p) for p in result.created],
                "push_hook": str(hook.path) if hook is not None else None,
                "moved": [
                    {"project": m.name, "dir": str(m.dir), "old_root": m.old_root, "tasks": m.tasks}
                    for m in result.moved
                ],
            }
        )
        return 0
    if result.created:
        print(f"Registered {project.root} as project {project.name}")
        for path in result.created:
            print(f"  created {path}")
        print("Next: bar task new NAME")
    else:
        print(f"{project.root} is already registered as project {project.name}")
    for moved in result.moved:
        print(f"Tasks of this repository are also in {moved.describe()}")
        print(
            f"  re-attach them here (replacing {project.name} while it has no task): "
            f"bar init --adopt {moved.name}"
        )
    return 0


def _adopt(which: str, as_json: bool) -> int:
    done = api.adopt_project(which=which)
    project, moved = done.project, done.moved
    if as_json:
        print_json(
            {
                "project": project.name,
                "root": str(project.root),
                "dir": str(project.dir),
                "adopted": moved.name if moved else None,
                "old_root": moved.old_root if moved else None,
                "replaced_empty": done.replaced_empty,
                "rewritten": done.rewritten,
                "repaired": [str(p) for p in done.repaired],
            }
        )
        return 0
    if moved is not None:
        print(f"Adopted {moved.describe()}: now project {project.name} at {project.root}")
        if done.replaced_empty:
            print(f"  replaced the empty project {project.name} registered here since the move")
    else:
        print(f"Finished re-attaching the tasks of project {project.name} to {project.root}")
    print(
        f"  {plural(len(done.rewritten), 'task')} pointed here, "
        f"{plural(len(done.repaired), 'worktree')} relinked"
    )
    print("Next: bar task list")
    return 0
