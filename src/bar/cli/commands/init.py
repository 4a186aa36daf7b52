"""``bar init``: register the repository; safe to run again. ``--adopt``: re-attach the
tasks a moved repository left at its old path."""

from __future__ import annotations

from bar import api
from bar.cli.render import plural, print_json


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
