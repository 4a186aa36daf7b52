"""The whole on-disk layout of bar's data (docs/storage.md), in one place.

```
$BAR_HOME/projects/<name>-<hash4>/
    config.yaml  state.json  events.jsonl  project.lock  cache/
    tasks/<id>/  task.json  ledger.jsonl  ledger.*.rows  artifacts/  index  index.stamps  task.lock
                 running.json  rollback.json  apply.json  sync.json  (intent journals)
                 bar.sock  (the channel of the running step)
                 git/  (the task's own git directory: HEAD, the side index's shared part)
                 trash/<UTC time>-<n>/  (what bar moved aside: manifest.json, files/)
    workspaces/<id>/  the task's git worktree
    workers/<id>.json  where a task sent to workers runs (this machine's view, not shared)
```

Every other module asks here for a path; none builds one by hand.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from bar.base.record import record

TASK_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8}$")
STEP_ID_RE = re.compile(r"^[0-9]{4,9}$")
STATE_ID_RE = re.compile(r"^[0-9]{4,9}(\.[0-9]{1,9})?$")  # a step or a checkpoint (0003.2)
# an artifact is a plain file in the task's artifacts/ directory, nothing else
ARTIFACT_RE = re.compile(r"^artifacts/(?!\.)[A-Za-z0-9._-]+$")

# In a task's worktree, where aide's clients look for its decisions and its flow
# (reference 003 §1.1, 004 §3.1): copies bar keeps of its own files (``bar.aide.place``),
# bookkeeping, never a change of a step or of a hand edit: no snapshot takes them.
AIDE_DIR = ".aide"
AIDE_FILES = (".aide/decisions", ".aide/flow-status.json")


def home_dir() -> Path:
    """The user's home, always absolute: ``HOME`` where it names one, else the password
    database's (an empty or relative ``HOME`` would name a different place in every
    directory, and ``/`` in bar's own processes)."""
    value = os.environ.get("HOME", "")
    if os.path.isabs(value):
        return Path(value)
    import pwd

    return Path(pwd.getpwuid(os.getuid()).pw_dir)


# what covers a hidden path in a step's own /tmp (``bar.sandbox.plan``): a directory and
# a file of the task's, mode 0 on purpose
STEP_COVERS = ("empty", "hidden")
# the machine's shared directories every program may write: where the step has its own
# processes, each is a directory of the task's in the step's view (``bar.sandbox.plan``).
# ``/dev/shm`` too: the shared memory of the developer's running programs (a browser's,
# a database's) is files there, open to whoever may write the directory
TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")
# a step's own /tmp, /var/tmp and /dev/shm (``TEMPORARY``'s order): directories of the
# task's, its files in them
STEP_TEMPORARY = ("tmp", "var-tmp", "shm")


def ui_launch_dir() -> Path:
    """Where ``bar ui`` leaves the page that hands the browser its token: private to the
    developer, hidden from every step (``bar.sandbox.plan``)."""
    return bar_home() / "ui"


def bar_home() -> Path:
    """``BAR_HOME``, else ``~/.bar``; absolute (a relative value is taken from where the
    command was started, and every process it starts is handed the absolute one)."""
    value = os.environ.get("BAR_HOME")
    if not value:
        return home_dir() / ".bar"
    return Path(os.path.abspath(os.path.expanduser(value)))


def projects_dir(home: Path | None = None) -> Path:
    return (home or bar_home()) / "projects"


def project_dir_name(root: Path) -> str:
    """``<name>-<hash4>``: two clones with the same name never share a directory."""
    import hashlib  # not on the paths that run inside a task worktree

    resolved = root.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:4]
    return f"{resolved.name}-{digest}"


def place(toplevel: Path, common: Path) -> tuple[Path, Path, str | None]:
    """The developer's checkout, the project directory and (in a task worktree) the task
    id of the git worktree at ``toplevel`` whose common git directory is ``common``: the
    paths ``git rev-parse --show-toplevel --git-common-dir`` gives, absolute."""
    projects = projects_dir().resolve()
    # the developer's checkout is the main worktree: the parent of the common .git dir
    root = common.parent.resolve() if common.name == ".git" else toplevel.resolve()
    try:
        rel = toplevel.resolve().relative_to(projects)
    except ValueError:
        rel = None
    if rel is not None and len(rel.parts) == 3 and rel.parts[1] == "workspaces":
        return root, projects / rel.parts[0], rel.parts[2]
    return root, projects / project_dir_name(root), None


@record(frozen=True)
class ProjectPaths:
    dir: Path

    @property
    def config(self) -> Path:
        return self.dir / "config.yaml"

    @property
    def state(self) -> Path:
        return self.dir / "state.json"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def tasks(self) -> Path:
        return self.dir / "tasks"

    @property
    def workspaces(self) -> Path:
        return self.dir / "workspaces"

    @property
    def cache(self) -> Path:
        return self.dir / "cache"

    @property
    def telemetry(self) -> Path:
        """Steps waiting to be sent as spans (``bar.history.telemetry``)."""
        return self.dir / "telemetry"

    @property
    def config_cache(self) -> Path:
        return self.cache / "config.json"

    @property
    def shared_config_cache(self) -> Path:
        return self.cache / "repo-config.json"

    @property
    def lock(self) -> Path:
        return self.dir / "project.lock"

    def task(self, task_id: str) -> TaskPaths:
        return TaskPaths(self.tasks / task_id)

    def placement(self, task_id: str) -> Path:
        """Where a task sent to workers runs (``bar.model.placement``): beside the task
        directory, which a fetch swaps whole."""
        return self.dir / "workers" / f"{task_id}.json"

    def workspace(self, task_id: str) -> Path:
        return self.workspaces / task_id


@record(frozen=True)
class TaskPaths:
    dir: Path

    @property
    def task_json(self) -> Path:
        return self.dir / "task.json"

    @property
    def ledger(self) -> Path:
        return self.dir / "ledger.jsonl"

    def kept_rows(self, name: str) -> Path:
        """What a command derives from each step (``log``: what ``bar log`` shows; ``undo``:
        what the undo chain needs), kept while it is the ledger's (``bar.ledger.rows``): a
        cache, made again whenever it is not."""
        return self.dir / f"ledger.{name}.rows"

    @property
    def applied_summary(self) -> Path:
        """What the ledger's lines up to some point say of whether the task's state is
        applied (``bar.task.applied``): a cache."""
        return self.dir / "ledger.applied.json"

    @property
    def artifacts(self) -> Path:
        return self.dir / "artifacts"

    @property
    def index(self) -> Path:
        """The side index snapshots are built in (``GIT_INDEX_FILE``)."""
        return self.dir / "index"

    @property
    def lock(self) -> Path:
        return self.dir / "task.lock"

    @property
    def marker(self) -> Path:
        """The running step's intent journal."""
        return self.dir / "running.json"

    @property
    def quarantine_state(self) -> Path:
        """Where the task branch was when a step's quarantine was made or last settled
        (``bar.sandbox.quarantine``): there while a quarantine waits to be settled."""
        return self.dir / "quarantine.json"

    @property
    def rollback_journal(self) -> Path:
        return self.dir / "rollback.json"

    @property
    def apply_journal(self) -> Path:
        return self.dir / "apply.json"

    @property
    def sync_journal(self) -> Path:
        return self.dir / "sync.json"

    @property
    def removal_journal(self) -> Path:
        """A removal of the worktree (a close) under way (``bar.task.removal``)."""
        return self.dir / "removing.json"

    @property
    def removing(self) -> Path:
        """Where a removal moves the worktree whole before it deletes what the record
        holds (``bar.task.removal``)."""
        return self.dir / "removing"

    @property
    def git_dir(self) -> Path:
        """The task's own git directory (``bar.git.pin_own``): git run on the side index
        uses it, with the repository's common directory. It holds a ``HEAD`` (a rollback
        checks out one recorded state from another there) and the shared part of the
        side index, which is split: an edit rewrites a small file, not the whole index."""
        return self.dir / "git"

    @property
    def trash(self) -> Path:
        """What bar moved out of the worktree that no recorded state holds, one folder a
        move (``trash/<UTC time>-<n>/``: ``manifest.json``, ``files/<path>``), put back by
        ``bar trash restore`` (``bar.changes.trash``)."""
        return self.dir / "trash"

    @property
    def socket(self) -> Path:
        """Where the running step's ``bar run`` listens for ``bar hook`` (and later
        ``bar mcp``); it exists only while a step runs."""
        return self.dir / "bar.sock"

    def artifact(self, step_id: str, suffix: str) -> tuple[Path, str]:
        """(path, the relative name the ledger records) of a step's artifact."""
        name = f"{step_id}.{suffix}"
        return self.artifacts / name, f"artifacts/{name}"

    def network_log(self, step_id: str) -> Path:
        """The connections a running step made or was refused, appended by ``bar run``'s
        proxy as they end (``bar.sandbox.network``), so a crash of bar loses none."""
        return self.artifacts / f"{step_id}.network.jsonl"

    def policy_events(self, step_id: str) -> Path:
        """The decisions taken for a running step by its hooks, appended by ``bar run``
        as they come, so a crash of bar loses none of them."""
        return self.artifacts / f"{step_id}.policy.jsonl"
