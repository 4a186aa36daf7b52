"""Timing machinery shared by the figures: children, fixtures, interleaving, medians.

Machines running this are shared and noisy, so no figure is ever a bare time. Each one is
a ratio of two medians measured in the same run: a warm-up call of every contender is
discarded, then the contenders are called in turn (A, B, A, B, ...) so a burst of load from
a neighbour hits both sides alike.

Children are timed from just before ``Popen`` to ``waitpid`` returning. A peak RSS is
measured through ``peak.py`` (``Fixture.run(peak=True)``): the ``wait4`` of a child forked
from this process would count this process's own memory too.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import genrepo  # noqa: E402

from bar.changes.fast import resident, watcher  # noqa: E402

IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench Author",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench Author",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


class BenchError(Exception):
    """A command the benchmark depends on failed: the figure cannot be measured."""


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Outcome:
    seconds: float
    returncode: int
    stdout: bytes
    stderr: bytes
    maxrss_kb: int = 0  # measured only with ``Fixture.run(peak=True)``


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: Path | None = None,
    capture: bool = False,
    ok: Sequence[int] = (0,),
    timeout: float = 1800,
) -> Outcome:
    """Run one child to completion and time it. Raises BenchError (with the child's
    stderr) if its exit code is not in ``ok``."""
    stdin_fh = open(stdin, "rb") if stdin else subprocess.DEVNULL  # noqa: SIM115
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=stdin_fh,
            stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        timer = threading.Timer(timeout, _kill_group, (proc.pid,))
        timer.start()
        try:
            out = proc.stdout.read() if proc.stdout else b""
            _, status = os.waitpid(proc.pid, 0)
            seconds = time.perf_counter() - t0
        finally:
            timer.cancel()
            if proc.stdout:
                proc.stdout.close()
            if stdin:
                stdin_fh.close()  # type: ignore[union-attr]
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    if proc.returncode not in ok:
        shown = " ".join(str(a) for a in argv)
        if len(shown) > 300:
            shown = shown[:300] + "..."
        raise BenchError(
            f"`{shown}` (in {cwd}) exited with {proc.returncode}: "
            f"{stderr.decode(errors='replace').strip()[-2000:]}"
        )
    return Outcome(seconds, proc.returncode, out, stderr)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def interleave(
    contenders: Mapping[str, Callable[[], float]],
    repeat: int,
    warmup: int,
    *,
    settle: float = 0.0,
) -> dict[str, list[float]]:
    """Call every contender ``warmup`` times (discarded), then ``repeat`` rounds in turn.
    What the set-up wrote (a generated repository, a clone: hundreds of megabytes) is
    flushed first: the kernel writing it back while the rounds run would slow every
    fsync of the contenders (bar makes a few in each command) by what the benchmark
    itself did, not by what they do. ``settle``: seconds left between two commands,
    untimed, as a developer typing them leaves (what a command leaves to do after it
    answered, such as the resident forking a new spare, is then not the next one's)."""
    os.sync()
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            time.sleep(settle)
            samples[name].append(fn())
    return samples


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio(samples: Mapping[str, Sequence[float]], a: str, b: str) -> float:
    return median(samples[a]) / median(samples[b])


def round_ratios(samples: Mapping[str, Sequence[float]], a: str, b: str) -> list[float]:
    """The ratio within each round: its spread shows how noisy the machine was."""
    return [x / y for x, y in zip(samples[a], samples[b], strict=True)]


# --- the figure's world: a repository, a BAR_HOME, the tools --------------------------


@dataclass
class Tools:
    bar: Path
    python: Path  # the interpreter bar runs on
    stepback: Path | None = None
    stepback_python: Path | None = None


@dataclass
class Fixture:
    """A fresh directory per figure and size: its own clone of the generated repository,
    its own BAR_HOME, nothing shared with another figure."""

    dir: Path
    base_repo: Path
    tools: Tools
    base_env: dict[str, str]
    seed: int
    timeout: float = 1800
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.home = self.dir / "bar-home"
        self.env = {**self.base_env, "BAR_HOME": str(self.home)}
        # Warnings bar printed while it was measured: a figure can be right and still
        # show that bar complained about something a user would see.
        self.bar_warnings: dict[str, int] = {}

    # running things

    def run(
        self,
        argv: Sequence[str | Path],
        cwd: Path,
        *,
        env: Mapping[str, str] | None = None,
        stdin: Path | None = None,
        capture: bool = False,
        ok: Sequence[int] = (0,),
        peak: bool = False,
    ) -> Outcome:
        """Run ``argv``; ``peak``: also measure its peak RSS, through ``peak.py`` (whose
        figures, time included, are then the command's own)."""
        command = [str(a) for a in argv]
        measured = self.dir / "peak.out"  # (written by peak.py)
        if peak:
            command = [str(self.tools.python), str(HERE / "peak.py"), str(measured), *command]
        out = spawn(
            command,
            cwd=cwd,
            env=env or self.env,
            stdin=stdin,
            capture=capture,
            ok=ok,
            timeout=self.timeout,
        )
        if peak:
            rss, seconds, *_ = measured.read_text(encoding="ascii").split()
            out = Outcome(float(seconds), out.returncode, out.stdout, out.stderr, int(rss))
        if argv and Path(argv[0]) == self.tools.bar:
            self.await_watchers()
        if argv and Path(argv[0]) == self.tools.bar and b"bar: warning" in out.stderr:
            for line in out.stderr.decode(errors="replace").splitlines():
                if line.startswith("bar: warning"):
                    key = line[:160]
                    self.bar_warnings[key] = self.bar_warnings.get(key, 0) + 1
        return out

    def await_watchers(self) -> None:
        """A step that handed its watch to a new watcher (``bar.changes.fast.watcher``), or started
        the bar home's resident (``bar.changes.fast.resident``), returns before that process has
        loaded: wait for it here, outside any timing, so that its start-up does not land
        in the next contender's time."""
        for sock in self.home.glob("projects/*/tasks/*/watcher.sock"):
            if _new(sock):
                watcher.status(sock.parent / "index")
        if _new(self.home / resident.SOCKET):
            resident.ready(str(self.home))

    def stop_watchers(self) -> None:
        """Stop the watchers and the resident of this figure's bar home."""
        watcher.stop_all(self.home)
        resident.stop(str(self.home))

    def t(self, argv: Sequence[str | Path], cwd: Path, **kw: object) -> float:
        """Seconds one command took."""
        return self.run(argv, cwd, **kw).seconds  # type: ignore[arg-type]

    def git_processes(self, argv: Sequence[str | Path], cwd: Path) -> int:
        """How many git processes one run of ``argv`` starts (git's own trace of every
        process it begins, children included), outside any timing."""
        trace = self.dir / "git-trace.jsonl"
        trace.unlink(missing_ok=True)
        self.run(argv, cwd, env={**self.env, "GIT_TRACE2_EVENT": str(trace)})
        if not trace.exists():
            return 0
        with trace.open("rb") as fh:
            return sum(1 for line in fh if b'"event":"start"' in line)

    def git(self, cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
        return self.run(["git", *args], cwd, capture=True, env=env).stdout.decode().strip()

    def bar(self, cwd: Path, *args: str | Path, capture: bool = False) -> Outcome:
        return self.run([self.tools.bar, *args], cwd, capture=capture)

    # building the world

    def clone(self, name: str = "repo", checkout: bool = False) -> Path:
        """A private copy of the generated repository, objects hard-linked.

        bar never reads or writes the developer's checkout in what we time (tasks live in
        their own worktrees, applies go to branches not checked out), so by default the
        clone's files are not written: on a slow disk that alone took most of a figure.
        With ``checkout`` the files are written, ignored build output included."""
        dest = self.dir / name
        no_checkout = [] if checkout else ["--no-checkout"]
        self.run(["git", "clone", "-q", "--local", *no_checkout, self.base_repo, dest], self.dir)
        self.git(dest, "remote", "remove", "origin")
        if checkout:
            genrepo.populate_ignored(dest, self.seed)
        return dest

    def init(self, repo: Path) -> None:
        self.bar(repo, "init")

    def new_task(self, repo: Path, name: str) -> tuple[str, Path]:
        """``bar task new``; returns the task id and its worktree (with ignored files)."""
        import json

        rec = json.loads(self.bar(repo, "task", "new", name, "--json", capture=True).stdout)
        worktree = Path(rec["worktree"])
        genrepo.populate_ignored(worktree, self.seed)
        return str(rec["id"]), worktree

    def task_dir(self, task_id: str) -> Path:
        found = list(self.home.glob(f"projects/*/tasks/{task_id}"))
        if len(found) != 1:
            raise BenchError(f"cannot find the directory of task {task_id} under {self.home}")
        return found[0]

    def project_dir(self) -> Path:
        found = list(self.home.glob("projects/*/config.yaml"))
        if len(found) != 1:
            raise BenchError(f"cannot find the project under {self.home}")
        return found[0].parent


def base_env(home: Path) -> dict[str, str]:
    """The environment of every child: nothing inherited that could change git's or
    bar's behaviour (no GIT_*, BAR_*, user config), fixed identity, no colour."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Bench Author\n"
        "\temail = bench@example.com\n[advice]\n\tdetachedHead = false\n"
    )
    # PYTHON* too: e.g. PYTHONDONTWRITEBYTECODE would slow every start of bar.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "BAR_", "PYTHON"))}
    env.update(IDENTITY)
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "NO_COLOR": "1",
        }
    )
    return env


def _new(sock: Path) -> bool:
    """Whether the socket ``sock`` was made in the last few seconds."""
    try:
        return time.time() - sock.lstat().st_mtime < 10
    except OSError:
        return False
