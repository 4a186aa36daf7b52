"""What a task's step may write, read and reach (docs/sandbox.md, "What a step may do"), as
a ``bar.sandbox.Plan``.

Writable: the worktree; what git needs to commit on the task branch (the quarantine
the step sees as the object store and as the directory of the task branch's ref and of
its reflog, ``bar.sandbox.quarantine``; where the kernel cannot give the step that view, the
store and those directories themselves), the worktree's own admin directory; the task's
own temporary directory (the step's ``TMPDIR``), ``/tmp``, ``/var/tmp`` and ``/dev/shm``
(each the task's own where the step has its own processes); config
``sandbox.allow_write``; with an agent, its home for the task
(``bar.agents.homes``, never the developer's own ``~/.claude`` and the like); the
devices every program writes (``/dev/null``, terminals). Never writable, whatever holds
them: the developer's checkout, the repository's git directory (so its config, hooks,
``info/`` and ``refs/bar/``), ``objects/info`` (commit graph, alternates), ``$BAR_HOME``, the policy file, ``$HOME`` (but for what is
named above) and bar's own code, environment and interpreter (``own_code``). Read-only
though in the worktree, where the step's mount namespace can show them so: the
directories the caller names (``.aide/``, where aide's clients read and the person's
answers are written: ``bar.aide.place``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from bar.agents import AGENTS
from bar.base import hosts
from bar.base.notices import warn
from bar.base.record import record
from bar.errors import AgentSettingsError, CannotConfine
from bar.model.tasks import Task
from bar.sandbox import (
    DEVICES,
    Confinement,
    Plan,
    confine,
    namespace,
    network,
    own_code,
    quarantine,
    support,
    unconfined,
)
from bar.sandbox.namespace import Bind
from bar.sandbox.network import NetPlan
from bar.store import below, files
from bar.store.layout import (
    STEP_COVERS,
    STEP_TEMPORARY,
    TEMPORARY,
    bar_home,
    home_dir,
    projects_dir,
    ui_launch_dir,
)
from bar.worktree.guard import admin_dir, common_dir

# Unix sockets of programs acting with the developer's rights (an ssh agent holds the
# keys ~/.ssh hides): Landlock does not govern connect(), so a confined step is not
# told where they are, and, where it has a mount namespace, their folders are covered
# (``_covered``)
AGENT_SOCKETS = (
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "TMUX",
    "STY",
    "XDG_RUNTIME_DIR",  # (the directory of the session's sockets: ``_runtime_dir``)
)


@record(frozen=True)
class Ground:
    """The task's directories a step's plan names, worked out and made once, before the
    step is planned: its own ``/tmp`` (the ``TMPDIR`` of a step without its own
    processes), ``/var/tmp`` and ``/dev/shm`` (its POSIX shared memory and semaphores,
    ``shm_open``, ``sem_open``, shared by the step's processes alone), each private; the
    directory and the file, mode 0, that cover what it may not see; the repository's
    common directory and the worktree's own admin directory (None: it has none); with
    an agent, its home for the task (``bar.agents.homes``) and, where the agent has
    managed settings, the layer that shows them over ``/etc`` with bar's hooks
    (``bar.agents.managed``)."""

    tmp: Path
    var_tmp: Path
    shm: Path
    empty: Path
    nothing: Path
    common: Path
    admin: Path | None
    agent: str | None = None
    agent_home: Path | None = None
    layer: Path | None = None
    layer_refused: str | None = None  # why the machine's managed settings could not be merged

    @property
    def temporary(self) -> tuple[Path, Path, Path]:
        """The step's own ``/tmp``, ``/var/tmp`` and ``/dev/shm``, in ``TEMPORARY``'s order."""
        return (self.tmp, self.var_tmp, self.shm)


def ground(task: Task, agent: str | None = None) -> Ground:
    """Make the task's directories a step (with ``agent``'s session, if not None) stands
    on (what stands in their place but is no directory is moved aside), and say where
    they are."""
    home = system = unmerged = None
    if agent is not None:
        from bar.agents import homes, managed, settings  # a plain step loads no agent's

        home = homes.path(task, agent)
        try:
            system = managed.system_files(agent, settings.hook_command(agent, task.paths.socket))
        except AgentSettingsError as exc:  # (said only where the layer is laid: _system_layer)
            unmerged = str(exc)
    common = common_dir(task)
    admin = admin_dir(task, common)
    tmp, var_tmp, shm = (task.dir / name for name in STEP_TEMPORARY)
    empty, nothing = (task.dir / name for name in STEP_COVERS)
    for folder in (tmp, var_tmp, shm, empty):
        below.real_dir(folder)
    os.chmod(empty, 0)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(nothing, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0))
    os.chmod(nothing, 0)
    layer = None
    if system is not None:
        layer = task.dir / system.folder
        files.ensure_dir((layer / system.rel).parent)  # (0700: the agent is the same user)
        os.chmod(layer, system.mode)
        files.write_bytes_atomic(layer / system.rel, system.data, mode=0o600)
    return Ground(tmp, var_tmp, shm, empty, nothing, common, admin, agent, home, layer, unmerged)


def step_env(ground: Ground, env: Mapping[str, str], made: Confinement) -> dict[str, str]:
    """``env`` as a confined step gets it (and the repository's hooks, which run confined
    like it): its own ``TMPDIR`` (``/tmp`` where that is its own: ``plan.own_pids``), no
    agent socket, and with an allow-list the variables that name bar's proxy."""
    own = made.plan.own_pids
    boxed = {**env, "TMPDIR": "/tmp" if own else str(ground.tmp)}
    for name in AGENT_SOCKETS:
        boxed.pop(name, None)
    boxed.update(made.network_env())
    return boxed


def remove_temp_dir(task: Task) -> None:
    """A closed task runs no more steps: its temporary files go (links are not followed;
    what a step made unreadable goes too: ``store.files.remove_tree``)."""
    for name in (*STEP_TEMPORARY, *STEP_COVERS):
        with contextlib.suppress(OSError):
            files.remove_tree(task.dir / name)


def confinement(
    task: Task,
    ground: Ground,
    *,
    asked: bool,
    paths: tuple[str, ...] = (),
    network: str | None = None,
    env: Mapping[str, str] | None = None,
    network_log: Path | None = None,
    read_only: tuple[Path, ...] = (),
) -> Confinement:
    """How a step's command is confined (``asked``: not ``--no-sandbox``; ``paths``,
    ``network``, ``env`` and ``read_only`` as for ``for_step``; ``network_log``: where
    bar's proxy logs the step's connections); says once why it is not, where the kernel
    cannot, or fails if the project requires confinement."""
    settings = task.project.config.sandbox
    if not asked or not settings.enabled:
        why = "--no-sandbox" if not asked else "sandbox.enabled is false"
        return unconfined(Plan(()), why)
    plan = for_step(task, ground, paths, network, env, read_only)
    made = confine(plan, network_log, warn)
    if made.enabled and not made.plan.own_pids and settings.required:
        made.close()
        lacking = namespace.pids_available(str(task.dir)) or "no object quarantine"
        raise CannotConfine(
            f"the command cannot be given processes and a /tmp of its own: {lacking}",
            hint="run on a kernel that lets an ordinary user make user, mount and PID "
            f"namespaces, or set sandbox.required: false in {task.project.paths.config}",
        )
    if not made.enabled:
        if settings.required:
            raise CannotConfine(
                f"the command cannot be confined: {made.reason}",
                hint="run on a kernel with Landlock, or set sandbox.required: false in "
                f"{task.project.paths.config}",
            )
        warn(f"not confined: {made.reason}; the command runs with your full rights")
    elif made.plan.net.mode != "open" and not made.plan.net.isolated:
        if not made.network_confined:
            warn(
                f"sandbox.network is {made.plan.net.mode}, but this kernel gives the step "
                "no network of its own and cannot limit its connections (Landlock ABI 4 "
                "or later is needed): the command can reach every host"
            )
        else:
            warn(
                f"sandbox.network is {made.plan.net.mode}, but this kernel gives the step no "
                "network of its own: its TCP is limited, its UDP (DNS too) is not"
            )
    return made


def for_step(
    task: Task,
    ground: Ground,
    paths: tuple[str, ...] = (),
    network: str | None = None,
    env: Mapping[str, str] | None = None,
    read_only: tuple[Path, ...] = (),
) -> Plan:
    """The plan of a step of ``task`` on its ``ground`` (``ground.agent``: an agent's
    session; ``paths``: where the step's programs are looked for, and the files its
    command names; ``network``: the mode of this run, else the configured one; ``env``:
    the step's environment, whose agents' base URLs are allowed; ``read_only``:
    directories of the worktree the step sees read-only, where its mount namespace can
    show them so: aide's files, ``bar.aide.place``)."""
    settings, agent = task.project.config.sandbox, ground.agent
    common, admin = ground.common, ground.admin
    setup = quarantine.setup(task)
    if isinstance(setup, quarantine.Setup):
        git_dirs, binds = list(setup.writable), setup.binds
    else:
        ref = Path("refs/heads", task.branch).parent
        git_dirs, binds = [common / "objects", common / ref, common / "logs" / ref], ()
        for folder in git_dirs[1:]:
            folder.mkdir(parents=True, exist_ok=True)  # git makes them; in a step it cannot
        _object_dirs(common / "objects")
        if support()[0] is not None:
            warn(f"the step can change the repository's existing objects: {setup}")
    own_pids = bool(binds) and namespace.pids_available(str(task.dir)) is None
    allowed = [_home_path(p) for p in settings.allow_write]
    for path in allowed:
        if not os.path.lexists(path):
            with contextlib.suppress(OSError):  # a directory to write in, as asked
                path.mkdir(mode=0o700, parents=True)
    writable = [
        task.worktree,
        *git_dirs,
        *([admin] if admin is not None else []),
        ground.tmp,
        *((ground.var_tmp, ground.shm) if own_pids else (Path(t) for t in TEMPORARY)),
        *allowed,
        *([ground.agent_home] if ground.agent_home is not None else []),
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
    if binds:  # (the step's mount namespace: bar's git reads no file the step can write)
        binds = (*binds, *_git_config(admin))
    system = _system_layer(ground) if binds else None
    if system is not None:  # (bar's hooks above every settings file the step can write)
        binds = (*binds, system)
    deny_read = [
        *(_home_path(p) for p in (*settings.deny_read, *_keys(task))),
        _launch_pages(),
        *_others_temporary(task),
        *_runtime_dir(),
        *(Path(p) for p in DAEMON_SOCKETS if os.path.lexists(p)),
    ]
    if binds:  # (out of reach, not only unreadable: Landlock does not judge connect())
        binds = (*binds, *_covered(ground, deny_read, writable))
    if own_pids:
        world = [*writable, *protected, *(Path(p) for p in paths), Path.cwd()]
        binds = (*binds, *_own_temporary(task, ground, world, writable, protected, deny_read))
    shown = _read_only(read_only) if binds else ()
    binds = (*binds, *(Bind(str(p), str(p), read_only=True) for p in shown))  # (last: on top)
    return Plan(
        writable=tuple(writable),
        protected=tuple(protected),
        deny_read=tuple(deny_read),
        net=_net(task, network or settings.network, bool(binds), env or {}, agent),
        binds=binds,
        own_pids=own_pids,
        agent_layer=system is not None,
        read_only=shown,
        max_processes=settings.max_processes,
    )


def _read_only(paths: tuple[Path, ...]) -> tuple[Path, ...]:
    """Of ``paths``, the directories of their own (not links): a mount follows a link,
    and would make read-only what it leads to, not what the step writes."""
    found = []
    for path in paths:
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                found.append(path)
    return tuple(found)


# the variables that point an agent at its model's API elsewhere: their hosts are allowed
BASE_URLS = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
    "OPENAI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
)


def _net(
    task: Task, mode: str, namespaces: bool, env: Mapping[str, str], agent: str | None
) -> NetPlan:
    """What the step may reach: in ``mode``, with the configured hosts and those of the
    agents' base URLs (in ``env``, and for Codex the providers of its own settings)."""
    if mode == "open":
        return NetPlan()
    isolated = namespaces and namespace.net_available(str(task.dir)) is None
    entries = (*task.project.config.sandbox.allow_hosts, *base_url_hosts(env, agent))
    patterns = tuple(dict.fromkeys(hosts.parse(e) for e in entries if hosts.invalid(e) is None))
    setting = f"sandbox.allow_hosts in {task.project.paths.config}"
    return network.plan(mode, isolated, patterns, setting)


def base_url_hosts(env: Mapping[str, str], agent: str | None = None) -> list[str]:
    """``host:port`` of each base URL the developer set for an agent: in ``env``
    (``BASE_URLS``), and those the agent's own settings name (``Agent.model_urls``: a
    Codex session's model providers)."""
    urls = [env[name] for name in BASE_URLS if env.get(name)]
    if agent in AGENTS:
        from bar.agents.base import of

        urls += of(agent).model_urls(env)
    if not urls:
        return []
    from urllib.parse import urlsplit

    found = []
    for url in urls:
        with contextlib.suppress(ValueError):
            parts = urlsplit(url)
            if parts.hostname:
                port = parts.port or (443 if parts.scheme == "https" else 80)
                host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
                found.append(f"{host}:{port}")
    return found


def _system_layer(ground: Ground) -> Bind | None:
    """The layer over ``/etc`` that gives the step's agent bar's hooks in its managed
    settings (``Ground.layer``), where the kernel lays it."""
    if ground.layer_refused is not None:
        raise AgentSettingsError(ground.layer_refused)
    if ground.layer is None:
        return None
    from bar.agents.managed import TARGET

    bind = Bind(str(ground.layer), TARGET, layer=True, nested=namespace.mounts_inside(TARGET))
    return bind if namespace.layer_available(bind) is None else None


def _git_config(admin: Path | None) -> tuple[Bind, ...]:
    """The worktree's own git configuration (``config.worktree``, read by git when the
    repository sets ``extensions.worktreeConfig``, as ``git sparse-checkout`` does) shown
    read-only to the step: it sits in the admin directory the step writes, and bar's own
    git reads it (a promisor remote, a filter or a protocol planted there would run
    with the developer's rights). Made empty where missing, so there is a file to show."""
    if admin is None:
        return ()
    path = admin / "config.worktree"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:  # (a link or a directory in its place: the guard puts it back)
        return ()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
    finally:
        os.close(fd)
    return (Bind(str(path), str(path), read_only=True),)


def _own_temporary(
    task: Task,
    ground: Ground,
    world: list[Path],
    writable: list[Path],
    protected: list[Path],
    hidden: list[Path],
) -> tuple[Bind, ...]:
    """``/tmp``, ``/var/tmp`` and ``/dev/shm`` of the task's own: each a directory of the
    task's, in which the entries of the real one that lead to the step's ``world`` (its
    worktree, the repository, bar, the programs it runs...) are shown again where they
    were; no other. A step sees and writes no other clone's, no other ``$BAR_HOME``'s
    files there, and no other program's shared memory.

    Landlock judges a path by the rules of the directories it passes through on the way
    up, mounts included: everything shown again inside the step's writable ``/tmp`` would
    be writable (and readable) by that directory's rule. So what is shown again is
    read-only by its mount, the ``writable`` paths in it are shown again writable on
    top, the ``protected`` ones inside those read-only again, and the ``hidden`` ones
    covered by a directory or a file the step may not open."""
    empty, nothing, ours = ground.empty, ground.nothing, ground.temporary
    binds: list[Bind] = []
    for shared, own in zip(TEMPORARY, ours, strict=True):
        view = _Temporary(shared, own)
        binds += view.shown_again(world)
        open_ = [w for w in view.inside(writable) if Path(w) not in ours and os.path.isdir(w)]
        binds += [Bind(w, target) for w in open_ if (target := view.at(w))]
        for path in view.inside(protected):
            target = view.at(path)
            inside_open = any(path == w or path.startswith(w + "/") for w in open_)
            if target and inside_open and os.path.exists(path):
                binds.append(Bind(path, target, read_only=True))
        for path in view.inside(hidden):
            target = view.at(path)
            holds = any(w.startswith(path + "/") for w in view.inside(writable))
            if target and os.path.lexists(path) and not os.path.islink(path) and not holds:
                cover = str(empty) if os.path.isdir(path) else str(nothing)
                binds.append(Bind(cover, target, read_only=True, if_present=True))
    # each shared one replaced by the task's own last, once every view was laid into
    # them: a path is found through what is mounted when it is bound, and the task's
    # directories may be inside one of them (a bar home in /tmp), which is replaced last
    swaps = [Bind(str(own), shared) for shared, own in zip(TEMPORARY, ours, strict=True)]
    inside = [b for b in swaps if (task.dir.as_posix() + "/").startswith(b.target + "/")]
    return (*binds, *(b for b in swaps if b not in inside), *inside)


class _Temporary:
    """The step's own ``shared`` (``/tmp``): the directory ``own``, and the entries of the
    real one shown again in it."""

    def __init__(self, shared: str, own: Path) -> None:
        self.shared, self.own, self.prefix = shared, own, shared + "/"
        self.shown: set[str] = set()

    def inside(self, paths: list[Path]) -> list[str]:
        """The paths of ``paths`` inside the shared one, as the kernel reads them
        (``/tmp/../etc`` is not in /tmp)."""
        clean = (os.path.normpath(p) for p in paths)
        return sorted({p for p in clean if p.startswith(self.prefix)})

    def shown_again(self, world: list[Path]) -> list[Bind]:
        """Read-only, each entry of the real one that leads to a path of ``world``."""
        binds = []
        for name in sorted({p[len(self.prefix) :].split("/")[0] for p in self.inside(world)}):
            source = self.prefix + name
            if name and os.path.isdir(source) and not os.path.islink(source):
                below.real_dir(self.own / name)
                binds.append(Bind(source, str(self.own / name), read_only=True, if_present=True))
                self.shown.add(source)
        return binds

    def at(self, path: str) -> str | None:
        """Where ``path`` is, in the step's own (None: not shown there)."""
        rel = path[len(self.prefix) :]
        return str(self.own / rel) if self.prefix + rel.split("/")[0] in self.shown else None


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


def _launch_pages() -> Path:
    """Where ``bar ui`` leaves the page that hands its token to the browser (made here,
    so that it is hidden even when made while the step runs)."""
    folder = ui_launch_dir()
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


# the sockets of daemons that act for whoever may connect with more than their rights (a
# container engine starts a container that mounts / writable; a virtual machine manager
# likewise; the system bus's services, polkit's rules granting an active session what they
# grant, mount disks and install packages): the developer may, and so could a step
DAEMON_SOCKETS = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/libvirt/libvirt-sock",
    "/var/run/libvirt/libvirt-sock",
    "/var/snap/lxd/common/lxd/unix.socket",
    "/var/lib/incus/unix.socket",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
)


def _runtime_dir() -> list[Path]:
    """The developer's runtime directory (``$XDG_RUNTIME_DIR``, ``/run/user/<uid>``):
    the sockets of their session, each a way out of any confinement for a process that
    connects to it: the session bus (which starts programs as the developer: systemd's
    transient units), the gpg and ssh agents (which sign with their keys), the display."""
    found = [os.environ.get("XDG_RUNTIME_DIR", ""), f"/run/user/{os.getuid()}"]
    return [Path(p) for p in dict.fromkeys(found) if p and os.path.isdir(p)]


def _covered(ground: Ground, hidden: list[Path], writable: list[Path]) -> tuple[Bind, ...]:
    """Each of ``hidden`` (but those in the machine's /tmp, /var/tmp and /dev/shm, which
    the step's own hide as they show them: ``_own_temporary``; and one that holds a path
    the step writes, which a setting may name: Landlock alone keeps that one) covered, in
    the step's mount namespace, by a directory or a file no one without a capability may
    open: Landlock keeps it from being read, but not a socket in it from being connected
    to (a gpg agent's in ``~/.gnupg``)."""
    empty, nothing = ground.empty, ground.nothing
    written = [os.path.realpath(w) for w in writable]
    binds = []
    for real in dict.fromkeys(os.path.realpath(path) for path in hidden):
        if any(real == t or real.startswith(t + "/") for t in TEMPORARY):
            continue
        if any(w == real or w.startswith(real + "/") for w in written):
            continue
        if os.path.isdir(real):
            binds.append(Bind(str(empty), real, read_only=True, if_present=True))
        elif os.path.lexists(real):
            binds.append(Bind(str(nothing), real, read_only=True, if_present=True))
    return tuple(binds)


def _others_temporary(task: Task) -> list[Path]:
    """The /tmp, /var/tmp and /dev/shm of every other task in the bar home (which a step
    may read): what their steps left there is theirs, as the machine's is."""
    found: list[Path] = []
    own = os.path.realpath(task.dir)
    try:
        projects = list(os.scandir(projects_dir()))
    except OSError:
        return found
    for project in projects:
        try:
            tasks = list(os.scandir(os.path.join(project.path, "tasks")))
        except OSError:
            continue
        for other in tasks:
            if os.path.realpath(other.path) == own:
                continue
            found += (Path(other.path, name) for name in STEP_TEMPORARY)
    return [p for p in found if os.path.lexists(p)]


def _keys(task: Task) -> tuple[str, ...]:
    """Private keys of bar's own that no step reads: the client key a worker shows its
    Temporal server (``workers.tls_key``)."""
    key = task.project.config.workers.tls_key
    return (key,) if key else ()


def _home_path(value: str) -> Path:
    if value == "~" or value.startswith("~/"):
        return home_dir() / value[2:]
    return Path(value).expanduser()
