"""What a task's step may write, read and reach (SPEC §8), as a ``bar.sandbox.Plan``.

Writable: the worktree; what git needs to commit on the task branch (the quarantine
the step sees as the object store and as the directory of the task branch's ref and of
its reflog, ``bar.sandbox.quarantine``; where the kernel cannot give the step that view, the
store and those directories themselves), the worktree's own admin directory; the task's own temporary directory (the step's ``TMPDIR``), ``/tmp`` and
``/var/tmp``; config ``sandbox.allow_write``; with an agent, its home for the task
(``bar.agents.homes``, never the developer's own ``~/.claude`` and the like); the
devices every program writes (``/dev/null``, terminals). Never writable, whatever holds
them: the developer's checkout, the repository's git directory (so its config, hooks,
``info/`` and ``refs/bar/``), ``objects/info`` (commit graph, alternates), ``$BAR_HOME``, the policy file, ``$HOME`` (but for what is
named above) and bar's own code, environment and interpreter (``own_code``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from bar.base.notices import warn
from bar.errors import CannotConfine
from bar.git.guard import admin_dir, common_dir
from bar.sandbox import (
    DEVICES,
    Confinement,
    Plan,
    confine,
    own_code,
    quarantine,
    support,
    unconfined,
)
from bar.store.layout import bar_home, home_dir
from bar.task.tasks import Task

TEMPORARY = ("/tmp", "/var/tmp")
# Unix sockets of programs acting with the developer's rights (an ssh agent holds the
# keys ~/.ssh hides): Landlock does not govern connect(), so a confined step is not
# told where they are
AGENT_SOCKETS = ("SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "TMUX", "STY")


def temp_dir(task: Task) -> Path:
    """The task's own temporary directory (made if missing)."""
    path = task.dir / "tmp"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def step_env(task: Task, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as a confined step gets it (and the repository's hooks, which run confined
    like it): its own ``TMPDIR``, and no agent socket."""
    boxed = {**env, "TMPDIR": str(temp_dir(task))}
    for name in AGENT_SOCKETS:
        boxed.pop(name, None)
    return boxed


def remove_temp_dir(task: Task) -> None:
    """A closed task runs no more steps: its temporary files go (links are not followed)."""
    import shutil

    shutil.rmtree(task.dir / "tmp", ignore_errors=True)


def confinement(task: Task, agent: str | None, *, asked: bool) -> Confinement:
    """How a step's command is confined (``asked``: not ``--no-sandbox``); says once why
    it is not, where the kernel cannot, or fails if the project requires confinement."""
    settings = task.project.config.sandbox
    if not asked or not settings.enabled:
        why = "--no-sandbox" if not asked else "sandbox.enabled is false"
        return unconfined(Plan(()), why)
    made = confine(for_step(task, agent))
    if not made.enabled:
        if settings.required:
            raise CannotConfine(
                f"the command cannot be confined: {made.reason}",
                hint="run on a kernel with Landlock, or set sandbox.required: false in "
                f"{task.project.paths.config}",
            )
        warn(f"not confined: {made.reason}; the command runs with your full rights")
    elif not settings.network and not made.network_confined:
        warn(
            "sandbox.network is false, but this kernel cannot switch the network off "
            "(Landlock ABI 4 or later is needed); the command can reach it"
        )
    return made


def for_step(task: Task, agent: str | None) -> Plan:
    settings = task.project.config.sandbox
    common = common_dir(task)
    admin = admin_dir(task, common)
    setup = quarantine.prepare(task)
    if isinstance(setup, quarantine.Setup):
        git_dirs, binds, shared = list(setup.writable), setup.binds, ""
    else:
        ref = Path("refs/heads", task.branch).parent
        git_dirs, binds, shared = (
            [common / "objects", common / ref, common / "logs" / ref],
            (),
            setup,
        )
        for folder in git_dirs[1:]:
            folder.mkdir(parents=True, exist_ok=True)  # git makes them; in a step it cannot
        _object_dirs(common / "objects")
        if support()[0] is not None:
            warn(f"the step can change the repository's existing objects: {setup}")
    agent_state: list[Path] = []
    if agent is not None:
        from bar.agents import homes  # a plain step does not load the agents'

        agent_state.append(homes.path(task, agent))
    allowed = [_home_path(p) for p in settings.allow_write]
    for path in allowed:
        if not os.path.lexists(path):
            with contextlib.suppress(OSError):  # a directory to write in, as asked
                path.mkdir(mode=0o700, parents=True)
    writable = [
        task.worktree,
        *git_dirs,
        *([admin] if admin is not None else []),
        temp_dir(task),
        *(Path(t) for t in TEMPORARY),
        *allowed,
        *agent_state,
        *(Path(d) for d in DEVICES),
    ]
    # what git reads as the truth about the objects, which a commit never writes: the
    # commit graph (parents and dates of commits), alternates (where else objects are),
    # the list of packs
    object_info = common / "objects" / "info"
    protected = [
        task.project.root,
        common,
        bar_home(),
        task.project.policy_path(),
        home_dir(),
        object_info,
        *own_code.places(),
    ]
    return Plan(
        writable=tuple(writable),
        protected=tuple(protected),
        deny_read=tuple(_home_path(p) for p in (*settings.deny_read, *_keys(task))),
        network=settings.network,
        binds=binds,
        shared_objects=shared,
    )


_FANOUT = tuple(f"{n:02x}" for n in range(256))


def _object_dirs(store: Path) -> None:
    """Make every directory a new object goes in (the 256 fan-out directories, ``pack``)
    and ``info``, where a step writes the store itself. Keeping ``info`` read-only makes
    the store a directory where nothing new can be made (``bar.sandbox``), so git must
    find those ready."""
    try:
        present = set(os.listdir(store))
    except OSError:
        present = set()
    for name in (*_FANOUT, "pack", "info"):
        if name not in present:
            with contextlib.suppress(OSError):
                (store / name).mkdir()


def _keys(task: Task) -> tuple[str, ...]:
    """Private keys of bar's own that no step reads: the client key a worker shows its
    Temporal server (``workers.tls_key``)."""
    key = task.project.config.workers.tls_key
    return (key,) if key else ()


def _home_path(value: str) -> Path:
    if value == "~" or value.startswith("~/"):
        return home_dir() / value[2:]
    return Path(value).expanduser()
