"""``bar init``: register the repository; safe to run again."""

from __future__ import annotations

import argparse

from bar import git
from bar.config import render_default
from bar.errors import NotARepository
from bar.events import append_event
from bar.project import locate
from bar.render import print_json
from bar.store import ensure_dir, now_iso, write_json_atomic, write_text_atomic


def init(args: argparse.Namespace) -> int:
    project = locate().project
    if not git.has_commit(project.root):
        raise NotARepository(
            f"{project.root} has no commit yet",
            hint="make a first commit (git commit --allow-empty -m init), then run bar init",
        )
    created: list[str] = []
    ensure_dir(project.dir)
    ensure_dir(project.tasks_dir)
    ensure_dir(project.workspaces_dir)
    with project.lock("bar init"):
        if not project.config_path.exists():
            base = "main" if git.branch_exists(project.root, "main") else None
            base = base or git.current_branch(project.root) or "main"
            write_text_atomic(project.config_path, render_default(base))
            created.append(str(project.config_path))
        if not project.state_path.exists():
            write_json_atomic(
                project.state_path,
                {"version": 1, "active_task_id": None, "updated_at": now_iso()},
            )
            created.append(str(project.state_path))
    policy_path = project.policy_path()
    if not policy_path.exists():
        from bar.policy import DEFAULT_POLICY_TEXT

        policy_path.parent.mkdir(parents=True, exist_ok=True)
        policy_path.write_text(DEFAULT_POLICY_TEXT)
        created.append(str(policy_path))
    if created:
        append_event(project, "project.initialized", root=str(project.root))
    if args.json:
        print_json(
            {
                "project": project.name,
                "root": str(project.root),
                "dir": str(project.dir),
                "created": created,
            }
        )
        return 0
    if created:
        print(f"Registered {project.root} as project {project.name}")
        for path in created:
            print(f"  created {path}")
        print("Next: bar task new NAME")
    else:
        print(f"{project.root} is already registered as project {project.name}")
    return 0
