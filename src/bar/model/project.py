"""A registered repository and its directory under BAR_HOME.

The project directory is ``<name>-<hash4>`` (``bar.store.layout``). A project is found
from any directory inside the developer's checkout or inside one of its task worktrees
(which live under the project directory).
"""

from __future__ import annotations

import contextlib
import os
import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bar.base.clock import now_iso
from bar.base.migrate import upgrade
from bar.base.proc import run
from bar.base.record import record
from bar.errors import ConfigError, CorruptFile, NotARepository, NotInitialized, PolicyError
from bar.model import event_log as events
from bar.model.config import REPO_CONFIG, Config, load_config, render_default
from bar.store import layout
from bar.store.files import ensure_dir, read_json, write_json_atomic, write_text_atomic
from bar.store.layout import TASK_ID_RE, ProjectPaths
from bar.store.lock import FileLock

if TYPE_CHECKING:
    from bar.policy import Policy


# what an agent reads from the repository it works in, and could write for the next
# session to obey (its hooks switched off, a command allowed, an MCP server started):
# ``bar apply`` names each such file it would bring to a branch. A path ending in ``/``
# stands for every file beneath it.
AGENT_SETTINGS = {
    ".claude/": "Claude Code's settings, hooks, commands and agents",
    ".mcp.json": "the MCP servers an agent starts",
    ".codex/": "Codex's settings",
    ".gemini/": "Gemini CLI's settings",
}


@record(frozen=True)
class Project:
    root: Path  # the developer's checkout (main worktree), resolved
    paths: ProjectPaths

    @property
    def dir(self) -> Path:
        return self.paths.dir

    @property
    def name(self) -> str:
        return self.paths.dir.name

    @property
    def initialized(self) -> bool:
        return self.paths.config.is_file()

    @cached_property
    def common_dir(self) -> Path:
        """The repository's git directory (shared by every worktree)."""
        plain = self.root / ".git"
        if plain.is_dir() and not plain.is_symlink():
            return plain
        res = run(
            "git", "-C", str(self.root), "rev-parse", "--path-format=absolute", "--git-common-dir"
        )
        return Path(res.out.strip())

    @cached_property
    def config(self) -> Config:
        return load_config(
            self.paths.config,
            self.paths.config_cache,
            shared=self.shared_config_path(),
            shared_cache=self.paths.shared_config_cache,
        )

    def shared_config_path(self) -> Path:
        """The repository's own settings, shared by the team (``.bar/config.yaml``), read
        from the developer's checkout like the policy, never from a task worktree."""
        return self.root / REPO_CONFIG

    def settings_files(self) -> dict[str, str]:
        """bar's own files in the repository (paths relative to its root), and the
        agents' (``AGENT_SETTINGS``), each with what it decides: a commit that changes one
        changes how bar, or an agent, treats every task."""
        files = {
            REPO_CONFIG: "hooks that run on every step of every task",
            ".bar/policy.yaml": "the policy every command is checked against",
        }
        with contextlib.suppress(ValueError):  # a policy outside the repository
            rel = self.policy_path().relative_to(self.root).as_posix()
            files.setdefault(rel, files[".bar/policy.yaml"])
        return {**files, **AGENT_SETTINGS}

    def policy_path(self) -> Path:
        """The policy file in the developer's checkout (never a task worktree's copy)."""
        rel = Path(self.config.policy.path)
        return rel if rel.is_absolute() else self.root / rel

    def policy(self) -> Policy | None:
        """The policy commands are checked against; None when it is switched off. A
        missing file while the policy is on is an error (fail closed), not a silent
        "allow everything"."""
        return self.policy_file() if self.config.policy.enabled else None

    def policy_file(self) -> Policy:
        """The project's policy file, loaded whether or not the policy is switched on.
        (The policy, and the shell parser behind it, load only when a command is judged.)"""
        from bar.policy import load_policy

        path = self.policy_path()
        if not path.is_file():
            raise PolicyError(
                f"the policy is enabled but {path} does not exist",
                hint="run `bar init` to write the default policy, "
                f"or set policy.enabled: false in {self.paths.config}",
            )
        return load_policy(path, cache_dir=self.paths.cache)

    def lock(self, what: str = "", *, wait: bool = True) -> FileLock:
        return FileLock(self.paths.lock, f"project {self.name}", what=what, wait=wait)

    def log_event(
        self,
        event: str,
        /,
        *,
        task: dict[str, Any] | None = None,
        worktree: dict[str, Any] | None = None,
        error: str | None = None,
        project: dict[str, Any] | None = None,
        changed: dict[str, Any] | None = None,
    ) -> None:
        """Append to the project's lifecycle log (events.jsonl, ``bar.model.event_log``)
        under the project lock: ``task`` and ``worktree`` as the board names them
        (``bar.model.board.task_view``, ``worktree_view``), ``error`` on a failure,
        ``project`` on an event of the project itself, ``changed`` on an edit."""
        with self.lock(f"log {event}"):
            rec = events.append(
                self.paths.events,
                event,
                task=task,
                worktree=worktree,
                error=error,
                project=project,
                changed=changed,
            )
            for told in events.after_logged:
                told(self, rec)

    # --- state.json -------------------------------------------------------------

    def active_task_id(self) -> str | None:
        path = self.paths.state
        try:
            data = read_json(path, "state.json")
        except FileNotFoundError:
            return None
        data = upgrade("state", data, path)
        value = data.get("active_task_id")
        if value is None:
            return None
        if not isinstance(value, str) or not TASK_ID_RE.match(value):
            raise CorruptFile(
                f"state.json at {path} has an invalid active_task_id {value!r}",
                hint="pick the active task again with `bar task switch`",
            )
        return value

    def set_active_task(self, task_id: str | None) -> None:
        with self.lock("set active task"):
            write_json_atomic(
                self.paths.state,
                {"version": 1, "active_task_id": task_id, "updated_at": now_iso()},
            )

    # --- bar init ---------------------------------------------------------------

    def register(self, default_base: str) -> list[Path]:
        """Create what ``bar init`` creates and is missing; return what was created.
        Never overwrites: running it again changes nothing."""
        created: list[Path] = []
        for folder in (self.paths.dir, self.paths.tasks, self.paths.workspaces):
            ensure_dir(folder)
        with self.lock("bar init"):
            if not self.paths.config.exists():
                write_text_atomic(self.paths.config, render_default(default_base))
                created.append(self.paths.config)
            if not self.paths.state.exists():
                write_json_atomic(
                    self.paths.state,
                    {"version": 1, "active_task_id": None, "updated_at": now_iso()},
                )
                created.append(self.paths.state)
        return created


@record(frozen=True)
class Location:
    project: Project
    task_id: str | None  # set when the directory is inside a task worktree
    # set when it is inside a worktree made with no task (``bar.task.lanes``): its name
    lane: str | None = None


def locate(cwd: Path | None = None) -> Location:
    """Find the project (and task, inside a task worktree) for ``cwd``."""
    here = Path(cwd or os.getcwd())
    found = discover(here)
    if found is None:
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
        found = Path(lines[0]), Path(lines[1])
    root, project_dir, task_id = layout.place(*found)
    lane = None
    # a worktree of no task: workspaces/lanes/<name> under the project directory
    if (
        task_id is None
        and found[0].parent.name == "lanes"
        and found[0].parent.parent.resolve() == (project_dir / "workspaces").resolve()
    ):
        lane = found[0].name
    return Location(Project(root, ProjectPaths(project_dir)), task_id, lane)


def discover(here: Path) -> tuple[Path, Path] | None:
    """The top of the worktree holding ``here`` and the repository's common git
    directory, as ``git rev-parse --show-toplevel --git-common-dir`` gives them, read from
    the ``.git`` found walking up, which saves starting git for every command. None
    (ask git) in anything but the plain cases: a directory that may be a git directory
    itself, another file system on the way, a file not owned by this user (git's
    ``safe.directory``), settings that move or remove the worktree, discovery limits."""
    if "GIT_CEILING_DIRECTORIES" in os.environ or "GIT_DISCOVERY_ACROSS_FILESYSTEM" in os.environ:
        return None
    uid = os.geteuid()
    try:
        top = os.path.realpath(here)
        device = os.stat(top).st_dev
        while True:
            dot = os.path.join(top, ".git")
            if os.path.lexists(dot):
                return _from_dot_git(top, dot, uid)
            if os.path.lexists(os.path.join(top, "HEAD")):
                return None  # git would look at this as a git directory
            parent = os.path.dirname(top)
            if parent == top or os.stat(parent).st_dev != device:
                return None
            top = parent
    except OSError:
        return None


def _from_dot_git(top: str, dot: str, uid: int) -> tuple[Path, Path] | None:
    import stat

    st = os.lstat(dot)
    if stat.S_ISDIR(st.st_mode):
        admin = common = dot
    elif stat.S_ISREG(st.st_mode):
        with open(dot, "rb") as f:
            said = f.read(4097)
        if not said.startswith(b"gitdir: ") or said.count(b"\n") > 1 or len(said) > 4096:
            return None
        admin = os.path.realpath(os.path.join(top, os.fsdecode(said[8:].rstrip(b"\r\n"))))
        try:
            with open(os.path.join(admin, "commondir"), "rb") as f:
                named = os.fsdecode(f.read(4097).rstrip(b"\r\n"))
            common = os.path.realpath(os.path.join(admin, named))
        except FileNotFoundError:
            common = admin
    else:
        return None
    if admin == dot and os.path.lexists(os.path.join(dot, "commondir")):
        return None
    if any(os.stat(p).st_uid != uid for p in (top, dot, admin)):
        return None
    if not os.path.isfile(os.path.join(admin, "HEAD")):
        return None
    # (a worktree's own ``config.worktree``, which bar makes for every task worktree it
    # confines, is read by git only where the common configuration sets
    # ``extensions.worktreeConfig``: such a configuration says "worktree", and git is asked)
    with open(os.path.join(common, "config"), "rb") as f:
        config = f.read().lower()
    if b"worktree" in config or b"include" in config or _BARE.search(config):
        return None  # the worktree is elsewhere, or there is none: git knows
    return Path(top), Path(common)


# a line setting core.bare to anything but false (a bare name means true)
_BARE = re.compile(rb"^[ \t]*bare\b(?![ \t]*=[ \t]*false[ \t]*\r?$)", re.MULTILINE)


def find_project(cwd: Path | None = None) -> Location:
    """Like ``locate`` but the project must be registered with ``bar init``."""
    loc = locate(cwd)
    paths = loc.project.paths
    if not loc.project.initialized and (paths.config.is_symlink() or paths.state.exists()):
        # registered once (state.json is there) but config.yaml is gone or not a file
        what = (
            "missing"
            if not paths.config.is_symlink() and not paths.config.exists()
            else "not a file"
        )
        raise ConfigError(
            f"config.yaml at {paths.config} is {what}",
            hint="run `bar init` in the repository to write a fresh one",
        )
    if not loc.project.initialized:
        raise NotInitialized(
            f"{loc.project.root} is not registered with bar",
            hint="run `bar init` in the repository first",
        )
    _ = loc.project.config  # a broken config.yaml is reported before anything else runs
    return loc


def policy_for(cwd: Path | None = None, *, even_if_disabled: bool = False) -> Policy | None:
    """The policy that applies in ``cwd``: its project's (None if switched off there,
    unless ``even_if_disabled``), or bar's default outside a registered repository."""
    return policy_and_channel(cwd, even_if_disabled=even_if_disabled)[0]


def running_socket(cwd: Path | None = None) -> Path | None:
    """The channel of the step running in the task whose worktree holds ``cwd``, if one
    is running (for a ``bar hook`` started by an agent that was not started by bar)."""
    try:
        loc = find_project(cwd)
    except (NotARepository, NotInitialized):
        return None
    return _channel(loc)


def policy_and_channel(
    cwd: Path | None = None, *, even_if_disabled: bool = False
) -> tuple[Policy | None, Path | None]:
    """``policy_for`` and ``running_socket`` of ``cwd`` from one look for the project
    (``bar hook`` asks both before every command of an agent bar did not start)."""
    try:
        loc = find_project(cwd)
        policy = loc.project.policy_file() if even_if_disabled else loc.project.policy()
    except (NotARepository, NotInitialized):
        from bar.policy import default_policy

        cache = layout.bar_home() / "cache"
        ensure_dir(cache)
        return default_policy(cache_dir=cache), None
    return policy, _channel(loc)


def _channel(loc: Location) -> Path | None:
    if loc.task_id is None:
        return None
    socket = loc.project.paths.task(loc.task_id).socket
    return socket if socket.exists() else None
