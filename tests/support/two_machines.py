"""Machines that share task histories through one git remote (docs/sharing.md), for tests.

A machine is a clone of one bare repository with a bar home of its own; bar runs there as
the installed executable in a child process, as on a developer's machine. Nothing passes
between two machines but the remote: each has its own BAR_HOME, its own clone and its own
objects, so what one reads of the other's work came through ``bar push`` and ``bar fetch``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from helpers import BAR_EXE, Ran, files_in_commit, files_on_disk


def git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    """Real git in ``cwd``; its stdout (raises on failure)."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr.decode(errors='replace')}"
    return proc.stdout.decode(errors="surrogateescape")


def make_remote(root: Path, files: dict[str, str] | None = None) -> Path:
    """A bare repository ``root/remote.git`` whose main holds one commit of ``files``."""
    seed = root / "seed"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    for rel, text in (files or {"README.md": "hello\n"}).items():
        path = seed / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial")
    bare = root / "remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    git(seed, "push", "-q", str(bare), "main")
    return bare


def remote_refs(bare: Path, prefix: str = "refs/bar/") -> dict[str, str]:
    """The refs of the bare repository under ``prefix``: name -> object id."""
    out = git(bare, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    refs = {}
    for line in out.splitlines():
        name, sha = line.split(" ", 1)
        refs[name] = sha
    return refs


@dataclass
class Machine:
    name: str
    repo: Path  # its clone (the developer's checkout)
    home: Path  # its BAR_HOME

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, "BAR_HOME": str(self.home), **(extra or {})}

    def bar(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 120,
        quiet: bool = False,
    ) -> Ran:
        """``bar ARGS`` on this machine (in its clone); ``quiet``: its stdout not kept."""
        proc = subprocess.run(
            [BAR_EXE, *args],
            cwd=cwd or self.repo,
            env=self.env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
        return Ran(
            proc.returncode,
            (proc.stdout or b"").decode(errors="replace"),
            proc.stderr.decode(errors="replace"),
        )

    def ok(self, *args: str, **kwargs: Any) -> Ran:
        """``bar ARGS``, which must succeed."""
        res = self.bar(*args, **kwargs)
        assert res.code == 0, f"{self.name}: bar {' '.join(args)} exited {res.code}: {res.err}"
        return res

    def json(self, *args: str, **kwargs: Any) -> Any:
        """``bar ARGS --json``, which must succeed: its output read."""
        return self.ok(*args, "--json", **kwargs).json()

    def popen(self, *args: str, stderr: Path | None = None) -> subprocess.Popen[bytes]:
        """``bar ARGS`` started, not waited for; ``stderr``: a file its stderr goes to (to
        be read while it runs), rather than a pipe."""
        with open(stderr, "wb") if stderr is not None else contextlib.nullcontext() as err:
            return subprocess.Popen(
                [BAR_EXE, *args],
                cwd=self.repo,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if err is None else err,
            )

    def git(self, *args: str, input: bytes | None = None) -> str:
        return git(self.repo, *args, input=input)

    def ref(self, name: str) -> str | None:
        """The object ``name`` points to in this clone (None: no such ref)."""
        proc = subprocess.run(
            ["git", "rev-parse", "-q", "--verify", name], cwd=self.repo, capture_output=True
        )
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    @property
    def project_dir(self) -> Path:
        (pdir,) = (self.home / "projects").iterdir()
        return pdir

    def task_dir(self, task_id: str) -> Path:
        return self.project_dir / "tasks" / task_id

    def set_config(self, **sections: dict[str, object]) -> None:
        """Change sections of this machine's config.yaml."""
        path = self.project_dir / "config.yaml"
        data = yaml.safe_load(path.read_text())
        for name, values in sections.items():
            data.setdefault(name, {}).update(values)
        path.write_text(yaml.safe_dump(data))

    def new_task(self, name: str) -> dict[str, Any]:
        made: dict[str, Any] = self.json("task", "new", name)
        return made

    def step(self, task: str, script: str, **kwargs: Any) -> Ran:
        """``bar run -t TASK -- sh -c SCRIPT``, which must succeed."""
        return self.ok("run", "-t", task, "--", "sh", "-c", script, **kwargs)

    def task(self, ref: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("task", "show", ref)
        return shown

    def record(self, task_id: str) -> dict[str, bytes]:
        """The task's ledger and artifacts here, byte for byte, by path in its directory."""
        folder = self.task_dir(task_id)
        out = {"ledger.jsonl": (folder / "ledger.jsonl").read_bytes()}
        for path in sorted((folder / "artifacts").iterdir()):
            out[f"artifacts/{path.name}"] = path.read_bytes()
        return out

    def worktree_matches_last_state(self, task_id: str) -> None:
        """The task's worktree holds exactly the files of the last state its ledger names."""
        lines = (self.task_dir(task_id) / "ledger.jsonl").read_text().splitlines()
        last = json.loads(lines[-1])["snapshot"]
        worktree = Path(self.task(task_id)["worktree"])
        assert files_on_disk(worktree) == files_in_commit(self.repo, last), self.name

    def stop(self) -> None:
        """Stop the watchers and the resident this machine's bar left running."""
        from bar.changes.fast import resident, watcher

        if self.home.is_dir():
            watcher.stop_all(self.home)
            resident.stop(str(self.home))


def clone(root: Path, name: str, url: str) -> Machine:
    """A machine: ``url`` cloned into ``root/NAME``, ``bar init`` run there with its own
    bar home (the policy off; bar's own files out of git's sight, so the checkout is
    clean as ``bar apply`` wants it)."""
    repo = root / name
    git(root, "clone", "-q", url, str(repo))
    with (repo / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write(".bar/\n")
    machine = Machine(name, repo, root / f"{name}-home")
    machine.ok("init")
    machine.set_config(policy={"enabled": False})
    return machine


def fsck(repo: Path) -> None:
    checked = subprocess.run(
        ["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert checked.returncode == 0 and not checked.stdout.strip(), (
        f"git fsck of {repo} after the test: {checked.stdout}{checked.stderr}"
    )


@contextlib.contextmanager
def machines(root: Path, url: str, names: tuple[str, ...] = ("a", "b")) -> Iterator[list[Machine]]:
    """Machines that are clones of ``url``; afterwards their bar processes are stopped and
    (when the test passed) each clone's history must be whole."""
    made: list[Machine] = []
    try:
        for name in names:
            made.append(clone(root, name, url))
        yield made
    finally:
        for machine in made:
            machine.stop()
    for machine in made:
        fsck(machine.repo)


@dataclass
class Pair:
    remote: Path  # the bare repository
    a: Machine
    b: Machine


@contextlib.contextmanager
def pair_of_machines(root: Path, files: dict[str, str] | None = None) -> Iterator[Pair]:
    """Two machines, a and b, cloned from one bare repository over file paths."""
    remote = make_remote(root, files)
    with machines(root, str(remote)) as (a, b):
        yield Pair(remote, a, b)
    fsck(remote)


# --- a real git daemon ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[int]:
    """``git daemon`` serving the repositories under ``base`` on 127.0.0.1 (pushes
    allowed), until the block ends; its port. git-daemon itself is started (not ``git
    daemon``, a parent that would outlive a kill of its child), so its pid is the one
    stopped."""
    daemon = Path(git(base, "--exec-path").strip()) / "git-daemon"
    for _ in range(5):  # a port found free may be taken before the daemon binds it
        port = _free_port()
        proc = subprocess.Popen(
            [
                str(daemon),
                "--export-all",
                "--enable=receive-pack",
                f"--base-path={base}",
                "--listen=127.0.0.1",
                f"--port={port}",
                "--reuseaddr",
                "--informative-errors",
                str(base),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _listening(port, proc):
            break
        proc.kill()
        proc.wait()
    else:
        raise RuntimeError("git daemon did not start listening")
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
