"""Workers on one machine as on several (docs/workers.md), for tests.

A real ``temporal server start-dev`` on 127.0.0.1 (a free port, a database file in the
test's directory), a developer machine and worker machines, each a clone of one bare
repository with its own ``BAR_HOME`` (``two_machines``), and real ``bar worker``
processes: nothing passes between them but the git remote and the Temporal server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import BAR_EXE
from two_machines import Machine, clone, fsck, make_remote

from bar.workers.devserver import DevServer

HEARTBEAT = 3  # seconds: a killed worker is noticed quickly


@dataclass
class Worker:
    machine: Machine
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def said(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    root: Path
    server: DevServer
    remote: Path
    dev: Machine
    machines: dict[str, Machine]
    queue: str
    workers: dict[str, Worker] = field(default_factory=dict)

    def start_worker(self, name: str, *args: str, env: dict[str, str] | None = None) -> Worker:
        """``bar worker --queue QUEUE ARGS`` on machine ``name``, ready when it returns."""
        machine = self.machines[name]
        log = self.root / f"worker-{name}-{len(self.workers)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [BAR_EXE, "worker", "--queue", self.queue, *args],
                cwd=machine.repo,
                env=machine.env({"BAR_WORKER_NAME": name, **(env or {})}),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        worker = Worker(machine, name, proc, log)
        self.workers[name] = worker
        deadline = time.monotonic() + 60
        while "takes steps" not in worker.said():
            assert proc.poll() is None, f"worker {name} exited {proc.returncode}: {worker.said()}"
            assert time.monotonic() < deadline, f"worker {name} did not start: {worker.said()}"
            time.sleep(0.1)
        return worker

    def stop_worker(self, name: str, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        worker = self.workers.pop(name)
        with contextlib.suppress(ProcessLookupError):
            worker.proc.send_signal(sig)
        return worker.proc.wait(timeout=timeout)

    def running_on(self, timeout: float = 60) -> str:
        """The worker whose ``bar run`` child runs a step now (waits for one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, worker in self.workers.items():
                kids = subprocess.run(
                    ["pgrep", "-P", str(worker.proc.pid)], capture_output=True, text=True
                ).stdout.split()
                if kids:
                    return name
            time.sleep(0.1)
        raise AssertionError("no worker started the step")

    def published(self, task: str, path: str, timeout: float = 60) -> None:
        """Wait until the running step of ``task`` (a name or id) has published progress
        whose worktree holds ``path`` (``bar.workers.published``): a worker lost from then on
        loses nothing of it."""
        task_id = self.dev.json("task", "show", task)["id"]
        spec = f"refs/bar/progress/{task_id}:state/{path}"
        wait_for(
            lambda: (
                subprocess.run(
                    ["git", "-C", str(self.remote), "cat-file", "-e", spec], capture_output=True
                ).returncode
                == 0
            ),
            timeout,
            f"a progress of {task} holding {path}",
        )

    def stop(self) -> None:
        for name in list(self.workers):
            with contextlib.suppress(Exception):
                self.stop_worker(name, signal.SIGKILL, timeout=20)
        for machine in (self.dev, *self.machines.values()):
            machine.stop()


def wait_for(check: Any, timeout: float = 60, what: str = "it") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen in {timeout:.0f}s")


@contextlib.contextmanager
def cluster(
    root: Path,
    server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
    workers: tuple[str, ...] = ("w1", "w2"),
    files: dict[str, str] | None = None,
) -> Iterator[Cluster]:
    """A developer machine and worker machines on one remote and one Temporal server."""
    monkeypatch.setenv("BAR_TEMPORAL", server.address)
    remote = make_remote(root, files)
    dev = clone(root, "dev", str(remote))
    dev.set_config(workers={"heartbeat": HEARTBEAT})
    machines = {name: clone(root, name, str(remote)) for name in workers}
    queue = f"q-{root.name[-24:]}-{os.getpid()}"
    made = Cluster(root, server, remote, dev, machines, queue)
    try:
        yield made
    finally:
        made.stop()
    for machine in (dev, *machines.values()):
        fsck(machine.repo)
