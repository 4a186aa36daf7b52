"""Confinement of a step's command (docs/sandbox.md): what it may write, read and reach.

A ``Plan`` says it in paths: the roots the command may write (and read), the paths it
must never write even where a writable root holds them (the developer's checkout,
``$BAR_HOME``, the repository's git directory: a worktree kept in ``/tmp`` must not make
a checkout that is also in ``/tmp`` writable), the paths it may not read at all, and
whether it may use the network. Everything else is read-only.

``confine`` turns a plan into a ``Confinement``, which starts the command. On Linux the
mechanism is Landlock (``bar.sandbox.landlock``), chosen over bubblewrap by measurement
and by what it needs (docs/sandbox.md): it is in the kernel, needs no helper program and
no user namespaces (so it also works in containers), and costs a millisecond or two per
step (``bench/`` figure 10). What Landlock cannot say, bar says in the plan's terms:

- *read-deny*: Landlock only allows. ``/`` is readable except a hidden path by allowing,
  one by one, every entry beside each directory on the way down to it; the directories on
  the way may still be listed, so a hidden directory's names show but nothing in it can
  be read;
- *a protected path inside a writable root* is carved out the same way: each other entry
  of the root is writable, the root itself is not (a new entry cannot be made directly in
  it; the step's own ``TMPDIR`` is always writable);
- the worktree's ``.git`` file sits in the writable worktree: bar checks it before every
  git operation and puts it back (``bar.worktree.guard``); nothing a step does to it is ever used.

Where the kernel cannot confine (no Landlock, or not Linux) ``confine`` says why, and the
step runs unconfined unless ``sandbox.required`` makes that an error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bar.base.record import field, record
from bar.sandbox.namespace import Bind
from bar.sandbox.network import NetPlan

if TYPE_CHECKING:
    from bar.base.proc import Prepare
    from bar.model.config import SandboxConfig
    from bar.sandbox.exec_quick import Shortcut
    from bar.sandbox.exec_watch import Judge

T = TypeVar("T")

MECHANISM = "landlock"
# set to make bar act as if the kernel could not confine (to try the fallback)
UNAVAILABLE_ENV = "BAR_SANDBOX_UNAVAILABLE"

# devices any program may open for writing, and directories of terminals and shared memory
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
)


@record(frozen=True)
class Plan:
    writable: tuple[Path, ...]
    protected: tuple[Path, ...] = ()
    deny_read: tuple[Path, ...] = ()
    # what it may reach (``bar.sandbox.network``)
    net: NetPlan = field(default_factory=NetPlan)
    # the step's own view of directories (``bar.sandbox.namespace``): the object store
    # in quarantine; else why the step writes the shared store itself
    binds: tuple[Bind, ...] = ()
    # a PID namespace and a /proc of the step's own (``bar.sandbox.namespace``)
    own_pids: bool = False
    # the agent's managed settings, with bar's hooks, laid over /etc (``bar.agents.managed``)
    agent_layer: bool = False
    # directories of the worktree the step sees read-only (a mount in its namespace):
    # aide's files, which the person's answers are read from (``bar.aide.place``)
    read_only: tuple[Path, ...] = ()
    # the processes and threads the step may have at once (0: no limit of bar's), counted
    # in its own user namespace (``bar.sandbox.namespace``): its own alone
    max_processes: int = 0


@record
class Confinement:
    """How a step's command is started: confined when ``mechanism`` is set, else not,
    for ``reason``."""

    plan: Plan
    mechanism: str | None
    reason: str | None = None
    network_confined: bool = False
    _ruleset: Any = None
    _gate: Any = None  # bar's proxy, with ``sandbox.network: allow-list`` (``network.Gate``)
    # the policy's check of every program the next command starts (``exec_watch.Watch``)
    _execs: Any = None
    exec_check: bool = False  # whether the command's programs were judged at exec
    exec_check_reason: str | None = None  # why not, where it was asked for
    _holders: list[Any] = field(default_factory=list)
    _notes: list[str] = field(default_factory=list)

    @property
    def enabled(self) -> bool:
        return self.mechanism is not None

    @property
    def open(self) -> bool:
        """Whether it can still start something confined (not closed yet)."""
        return self._ruleset is not None

    def record(self) -> dict[str, Any]:
        """The step's ``sandbox`` field."""
        rec: dict[str, Any] = {"enabled": self.enabled, "mechanism": self.mechanism}
        if self.enabled:
            rec["writable"] = [str(p) for p in self.plan.writable]
            rec["read_denied"] = [str(p) for p in self.plan.deny_read]
            net = self.plan.net
            rec["network"] = net.mode != "none" or not (net.isolated or self.network_confined)
            rec["network_mode"] = self.plan.net.mode
            rec["objects"] = "quarantine" if self.plan.binds else "shared"
            rec["processes"] = "own" if self.plan.own_pids else "shared"
            if self.plan.max_processes:
                rec["max_processes"] = self.plan.max_processes
            if self.plan.read_only:
                rec["read_only"] = [str(p) for p in self.plan.read_only]
            rec["exec_check"] = self.exec_check
            if self.exec_check_reason:
                rec["exec_check_reason"] = self.exec_check_reason
        else:
            rec["reason"] = self.reason
        return rec

    def check_execs(
        self, judge: Judge, say: Callable[[str], None], shortcut: Shortcut | None = None
    ) -> None:
        """Have ``judge`` answer every program the next command started through ``start``
        (and all it starts) asks to execute (``bar.sandbox.exec_watch``); ``say`` tells
        once why that cannot be; ``shortcut``: what may run without asking ``judge``
        (``bar.sandbox.exec_quick``). Confined commands only."""
        if not self.enabled:
            return
        from bar.sandbox import exec_watch

        self._execs = exec_watch.Watch(
            judge, say, hidden=_real(self.plan.deny_read), shortcut=shortcut
        )
        self.exec_check = self._execs.active
        self.exec_check_reason = self._execs.unavailable
        if self._execs.unavailable is not None:
            say(
                f"programs the step starts are not checked by the policy: {self._execs.unavailable}"
            )

    def stop_checking(self) -> None:
        """Once the command ended: no program is judged any more; ``exec_check`` says
        whether the check held."""
        watch, self._execs = self._execs, None
        if watch is not None:
            watch.close()
            self.exec_check = watch.unavailable is None
            self.exec_check_reason = watch.unavailable

    def start(self, launch: Callable[[Prepare], T]) -> T:
        """Call ``launch`` (which starts the command) so that the command and all it starts
        are confined, and held (``bar.sandbox.holder``: they die with bar). The command
        confines itself, in its process before exec (Landlock, then ``bar.sandbox.lockdown``:
        no setuid bit, no capability): its holder is not confined, so the command can
        neither signal nor trace it."""
        import resource
        import subprocess

        from bar.errors import CannotConfine
        from bar.sandbox import landlock, lockdown, namespace
        from bar.sandbox.holder import Holder
        from bar.store import lock

        ruleset, binds = self._ruleset, self.plan.binds if self.enabled else ()
        pids = self.enabled and self.plan.own_pids
        ids = os.getuid(), os.getgid()
        seccomp = lockdown.Filter.build() if ruleset is not None else None
        capabilities = lockdown.Capabilities() if ruleset is not None else None

        net = self.enabled and self.plan.net.isolated and self.plan.net.mode != "open"
        # (counted where the command has a user namespace of its own, else the limit
        # would count every process of the developer's)
        most = self.plan.max_processes if binds or pids or net else 0
        gate = self._gate
        execs = self._execs if ruleset is not None and self._execs is not None else None
        if execs is not None:
            if execs.active and not execs.begun:  # (the first command only: not its hooks)
                execs.begin()
            else:
                execs = None

        def isolating() -> None:
            namespace.enter(binds, *ids, pids=pids, net=net)
            if gate is not None and net:
                gate.inside()

        # a layer laid over a directory is a file system Landlock saw no rule for: it is
        # read as the directory was (the rule of a mount point counts for nothing beneath)
        layers = [b.target for b in binds if b.layer]
        hidden = _real(self.plan.deny_read) if layers else []

        def confining() -> None:
            if ruleset is not None:
                if pids:  # (the /proc the init mounted is a file system Landlock saw no rule for)
                    ruleset.allow("/proc", landlock.READ | landlock.READ_DIR)
                for target in layers:
                    _allow_except(ruleset, target, hidden, landlock.READ, landlock.READ_DIR)
                ruleset.restrict_this_thread()
            if most:
                resource.setrlimit(resource.RLIMIT_NPROC, (most, most))
            if seccomp is not None:
                seccomp.install()
            if capabilities is not None:
                capabilities.drop()
            if execs is not None:  # (last: its listener answers the exec that follows)
                execs.inside()

        holder = Holder(
            stop_leftovers=self.enabled,
            confine=confining,
            isolate=isolating if binds or pids or net else None,
            init=namespace.mount_proc if pids else None,
            keep=lock.held_descriptors(),
        )
        self._holders.append(holder)
        try:
            started = launch(holder.prepare)
        except subprocess.SubprocessError as exc:
            why = holder.failure()
            if why is None:
                raise
            raise CannotConfine(
                f"the step's namespaces could not be made, so nothing ran: {why}",
                hint="a path bar shows the step changed as the step started: run it again; "
                "if it fails the same way, `bar run --no-sandbox` runs it unconfined",
            ) from exc
        finally:
            holder.started()
            if execs is not None:
                execs.started()
        if gate is not None:
            gate.opened()
        pid = getattr(started, "pid", None)
        if pids and isinstance(pid, int):  # (what bar ui refuses to serve: bar.sandbox.running)
            from bar.sandbox import running

            if (name := running.note(pid)) is not None:
                self._notes.append(name)
        return started

    def stopped(self) -> list[int]:
        """The pids of what the commands started through ``start`` left running and their
        holders stopped when they ended (call once they have)."""
        holders, self._holders = self._holders, []
        if self._notes:
            from bar.sandbox import running

            for name in self._notes:
                running.forget(name)
            self._notes.clear()
        return [pid for holder in holders for pid in holder.stopped()]

    def network_env(self) -> dict[str, str]:
        """What sends the step's programs through bar's proxy (nothing without one)."""
        return self._gate.env() if self._gate is not None else {}

    def close(self) -> None:
        self.stop_checking()
        self.stopped()  # (the reports not read yet are closed)
        if self._gate is not None:
            self._gate.close()
            self._gate = None
        if self._ruleset is not None:
            self._ruleset.close()
            self._ruleset = None


def support() -> tuple[str | None, str]:
    """(mechanism, what it offers) where steps can be confined here; (None, why not)."""
    if os.environ.get(UNAVAILABLE_ENV):
        return None, f"{UNAVAILABLE_ENV} is set"
    if not sys.platform.startswith("linux"):
        return None, f"confinement needs Linux's Landlock; this is {sys.platform}"
    from bar.sandbox import landlock

    abi = landlock.abi_version()
    if abi < 1:
        return None, _NO_LANDLOCK
    network = "TCP can be switched off" if abi >= 4 else "the network cannot be switched off"
    return MECHANISM, f"Landlock ABI {abi}: {network}"


_NO_LANDLOCK = (
    "this kernel offers no Landlock (Linux 5.13 or later, with landlock among its security modules)"
)


def status(settings: SandboxConfig, exec_check: bool = True) -> dict[str, Any]:
    """Whether steps run confined under ``settings`` (config ``sandbox``), and how;
    ``exec_check``: whether the policy is to judge each program a step starts."""
    mechanism, detail = support()
    if not settings.enabled:
        mechanism, detail = None, "sandbox.enabled is false"
    objects = processes = None
    checked = False
    if mechanism is not None:  # (whether a step's new objects can wait in a quarantine)
        from bar.sandbox import namespace
        from bar.store.layout import bar_home

        why = namespace.available(str(bar_home()))
        objects = "quarantine" if why is None else "shared"
        detail += (
            "; new objects wait in a quarantine"
            if why is None
            else (f"; steps write the object store itself ({why})")
        )
        lacking = namespace.pids_available(str(bar_home()))
        processes = "own" if lacking is None else "shared"
        detail += (
            "; each step has its own processes, /proc and /tmp"
            if lacking is None
            else f"; steps share processes and /tmp with the machine ({lacking})"
        )
        detail += _network_detail(settings.network, namespace.net_available(str(bar_home())))
        if exec_check:
            from bar.sandbox import exec_watch

            why_not = exec_watch.supported()
            checked = why_not is None
            detail += (
                "; every program a step starts is judged by the policy"
                if checked
                else f"; programs a step starts are not judged as they start ({why_not})"
            )
    return {
        "enabled": mechanism is not None,
        "mechanism": mechanism,
        "detail": detail,
        "required": settings.required,
        "network": settings.network != "none",
        "network_mode": settings.network,
        "objects": objects,
        "processes": processes,
        "exec_check": checked,
    }


def _network_detail(mode: str, lacking: str | None) -> str:
    """What ``sandbox.network: mode`` gives a step here (``lacking``: why a step can have
    no network namespace of its own)."""
    if mode == "open":
        return "; steps reach every host (sandbox.network: open)"
    what = "sandbox.allow_hosts, through bar's proxy" if mode == "allow-list" else "no host"
    if lacking is None:
        return f"; each step has a network of its own and reaches {what}"
    from bar.sandbox import landlock

    if landlock.abi_version() >= 4:
        return (
            f"; steps reach {what} over TCP, by Landlock's port rules, UDP ungoverned ({lacking})"
        )
    return f"; steps reach every host: nothing here can keep them to {mode} ({lacking})"


def unconfined(plan: Plan, reason: str) -> Confinement:
    return Confinement(plan, None, reason)


def confine(
    plan: Plan, network_log: Path | None = None, say: Callable[[str], None] | None = None
) -> Confinement:
    """A confinement for ``plan``; unconfined (with the reason) where the kernel cannot;
    ``CannotConfine`` where bar's own files are hard links (``own_code``). With an
    allow-list, bar's proxy logs each connection to ``network_log`` and tells ``say``
    of each host it refused."""
    mechanism, detail = support()
    if mechanism is None:
        return unconfined(plan, detail)
    from bar.sandbox import landlock, network

    abi = landlock.abi_version()
    gate = None
    if plan.net.gated and network_log is not None:
        gate = network.Gate(plan.net, network_log, say or (lambda _: None))
    # without a namespace of its own, the step's TCP is what Landlock lets it: none, or
    # only to bar's proxy (a rule names a port, not an address: no other port is safe)
    ports: tuple[int, ...] | None = None
    if not plan.net.isolated and plan.net.mode == "none":
        ports = ()
    elif not plan.net.isolated and gate is not None:
        ports = (gate.address[1],)
    try:
        ruleset = landlock.Ruleset(abi, connect_ports=ports)
    except BaseException:
        if gate is not None:
            gate.close()
        raise
    try:
        everything = ruleset.handled
        _allow_except(ruleset, "/", _real(plan.deny_read), landlock.READ, landlock.READ_DIR)
        holes = _real((*plan.protected, *plan.deny_read))
        for root in _real(plan.writable):
            _allow_except(ruleset, root, holes, everything, 0)
    except BaseException:
        ruleset.close()
        if gate is not None:
            gate.close()
        raise
    made = Confinement(
        plan,
        MECHANISM,
        network_confined=ruleset.network_confined,
        _ruleset=ruleset,
        _gate=gate,
    )
    from bar.sandbox import own_code

    own_code.refuse_if_linked(made)  # (what no rule of the kernel's can keep read-only)
    return made


def _real(paths: tuple[Path, ...]) -> list[str]:
    """The paths as the kernel sees them (links resolved); missing ones left out. The
    kernel resolves each (an O_PATH descriptor names the file it reached): a few calls
    a path, where ``os.path.realpath`` makes one per component, in Python."""
    found = []
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # (no /proc: resolved the slow way)
            real = os.path.realpath(path)
            if os.path.lexists(real):
                found.append(real)
        finally:
            os.close(fd)
    return found


def _allow_except(ruleset: Any, root: str, holes: list[str], rights: int, along: int) -> None:
    """Allow ``rights`` on ``root`` and everything beneath it except ``holes``: on the way
    down to a hole each entry beside it is allowed by itself, and the directories on the
    way get only ``along`` (which covers everything beneath them, holes included)."""
    prefix = root.rstrip("/") + "/"
    inside = [h for h in holes if h.startswith(prefix)]
    if root in holes:
        return
    if not inside:
        ruleset.allow(root, rights)
        return
    if along:
        ruleset.allow(root, along)
    # the names in ``root`` that are holes, and those that lead down to one
    names = {h[len(prefix) :].partition("/") for h in inside}
    hidden = {name for name, sep, _ in names if not sep}
    leading = {name for name, sep, _ in names if sep}
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if entry.name in hidden:
            continue
        if entry.name in leading and entry.is_dir(follow_symlinks=False):
            _allow_except(ruleset, entry.path, inside, rights, along)
        else:
            ruleset.allow(entry.path, rights, follow=False)
