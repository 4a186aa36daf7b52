"""A registered repository and its directory under BAR_HOME.

The project directory is ``<name>-<hash4>``: the repository root's directory name and the
first 4 hex digits of a SHA-256 of its resolved absolute path, so two clones with the same
name never share one. A project is found from any directory inside the developer's
checkout or inside one of its task worktrees (which live under the project directory).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from bar.config import Config, load_config
from bar.errors import ConfigError, CorruptFile, NotARepository, NotInitialized
from bar.lock import FileLock
from bar.migrate import upgrade
from bar.proc import run
from bar.store import bar_home, now_iso, read_json, write_json_atomic


def project_dir_name(root: Path) -> str:
    resolved = root.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:4]
    return f"{resolved.name}-{digest}"


@dataclass(frozen=True)
class Project:
    root: Path  # the developer's checkout (main worktree), resolved
    dir: Path  # $BAR_HOME/projects/<name>-<hash4>

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def config_path(self) -> Path:
        return self.dir / "config.yaml"

    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    @property
    def events_path(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def tasks_dir(self) -> Path:
        return self.dir / "tasks"

    @property
    def workspaces_dir(self) -> Path:
        return self.dir / "workspaces"

    @property
    def cache_dir(self) -> Path:
        return self.dir / "cache"

    @property
    def initialized(self) -> bool:
        return self.config_path.is_file()

    @cached_property
    def config(self) -> Config:
        return load_config(self.config_path, self.cache_dir / "config.json")

    def policy_path(self) -> Path:
        """The policy file in the developer's checkout (never a task worktree's copy)."""
        rel = Path(self.config.policy.path)
        return rel if rel.is_absolute() else self.root / rel

    def lock(self, what: str = "", *, wait: bool = True) -> FileLock:
        return FileLock(self.dir / "project.lock", f"project {self.name}", what=what, wait=wait)

    # --- state.json -------------------------------------------------------------

    def active_task_id(self) -> str | None:
        try:
            data = read_json(self.state_path, "state.json")
        except FileNotFoundError:
            return None
        data = upgrade("state", data, self.state_path)
        value = data.get("active_task_id")
        if value is None:
            return None
        from bar.tasks import TASK_ID_RE

        if not isinstance(value, str) or not TASK_ID_RE.match(value):
            raise CorruptFile(
                f"state.json at {self.state_path} has an invalid active_task_id {value!r}",
                hint="pick the active task again with `bar task switch`",
            )
        return value

    def set_active_task(self, task_id: str | None) -> None:
        with self.lock("set active task"):
            write_json_atomic(
                self.state_path,
                {"version": 1, "active_task_id": task_id, "updated_at": now_iso()},
            )


@dataclass(frozen=True)
class Location:
    project: Project
    task_id: str | None  # set when the directory is inside a task worktree


def locate(cwd: Path | None = None) -> Location:
    """Find the project (and task, inside a task worktree) for ``cwd``."""
    here = Path(cwd or os.getcwd())
    res = run(
        "git",
        "-C",
        str(here),
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-common-dir",
        check=False,
    )
    if res.returncode != 0:
        raise NotARepository(
            f"{here} is not inside a git repository",
            hint="run bar from a git checkout (or `git init` one first)",
        )
    lines = res.out.splitlines()
    if len(lines) < 2:
        raise NotARepository(f"{here} is inside a bare git repository; bar needs a worktree")
    toplevel, common = Path(lines[0]), Path(lines[1])
    projects = bar_home().resolve() / "projects"
    try:
        rel = toplevel.resolve().relative_to(projects)
    except ValueError:
        rel = None
    if rel is not None and len(rel.parts) == 3 and rel.parts[1] == "workspaces":
        pdir = projects / rel.parts[0]
        root = _root_of_common_dir(common, toplevel)
        return Location(Project(root=root, dir=pdir), rel.parts[2])
    root = _root_of_common_dir(common, toplevel)
    return Location(Project(root=root, dir=projects / project_dir_name(root)), None)


def _root_of_common_dir(common: Path, toplevel: Path) -> Path:
    # The developer's checkout is the main worktree: the parent of the common .git dir.
    if common.name == ".git":
        return common.parent.resolve()
    return toplevel.resolve()


def find_project(cwd: Path | None = None) -> Location:
    """Like ``locate`` but the project must be registered with ``bar init``."""
    loc = locate(cwd)
    config = loc.project.config_path
    if not loc.project.initialized and (config.is_symlink() or loc.project.state_path.exists()):
        # registered once (state.json is there) but config.yaml is gone or not a file
        what = "missing" if not config.is_symlink() and not config.exists() else "not a file"
        raise ConfigError(
            f"config.yaml at {config} is {what}",
            hint="run `bar init` in the repository to write a fresh one",
        )
    if not loc.project.initialized:
        raise NotInitialized(
            f"{loc.project.root} is not registered with bar",
            hint="run `bar init` in the repository first",
        )
    _ = loc.project.config  # a broken config.yaml is reported before anything else runs
    return loc
