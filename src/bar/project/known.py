"""Every project registered under ``$BAR_HOME``: what a face that is not started inside a
repository (``bar ui``) lists.

A project directory does not name its repository; its tasks do (``task.json``'s
``repo_root``), and so does the lifecycle log (``project.initialized``). The newest of
those is taken: after ``bar init --adopt`` the tasks name the new place.
"""

from __future__ import annotations

import json
from pathlib import Path

from bar.errors import BarError
from bar.model.project import Project
from bar.store.files import read_json
from bar.store.layout import TASK_ID_RE, ProjectPaths, projects_dir


def registered() -> list[Project]:
    """The registered projects (a directory with a ``config.yaml``), by name."""
    home = projects_dir()
    if not home.is_dir():
        return []
    found: list[Project] = []
    for pdir in sorted(home.iterdir()):
        if pdir.is_symlink() or not pdir.is_dir():
            continue
        paths = ProjectPaths(pdir)
        if not paths.config.is_file():
            continue
        root = _root(paths)
        if root is not None:
            found.append(Project(root, paths))
    return found


def _root(paths: ProjectPaths) -> Path | None:
    newest: tuple[str, str] | None = None  # (updated_at, repo_root)
    if paths.tasks.is_dir():
        for entry in paths.tasks.iterdir():
            if not TASK_ID_RE.match(entry.name):
                continue
            try:
                rec = read_json(entry / "task.json", "task.json")
            except (BarError, OSError):
                continue
            root, when = rec.get("repo_root"), str(rec.get("updated_at") or "")
            if isinstance(root, str) and (newest is None or when > newest[0]):
                newest = (when, root)
    if newest is not None:
        return Path(newest[1])
    try:
        lines = paths.events.read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") == "project.initialized":
            root = rec.get("root")
            if isinstance(root, str):
                return Path(root)
    return None
