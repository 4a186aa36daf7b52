"""Helpers for driving bar in tests: in-process ``main(argv)`` and the installed executable."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest
import yaml

from bar.base import yaml_text
from bar.cli.main import main

BAR_EXE = str(Path(sys.executable).parent / "bar")
SETTLE = 0.2  # seconds: past the racy window of in-process snapshots (conftest)


def seal(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seal bar and git off from the machine: HOME, XDG_CONFIG_HOME and BAR_HOME in
    ``root`` (``home``, ``barhome``), no system or global git config, fixed authors and
    dates: every test's (``conftest.hermetic_seal``), and a run a module's tests share
    (made once in a ``root`` of its own, then entered by each test with this again)."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    for name in list(os.environ):
        # BAR_SANDBOX_UNAVAILABLE stays: make test runs the suite once more with it set
        if name.startswith(("GIT_", "BAR_")) and name != "BAR_SANDBOX_UNAVAILABLE":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("BAR_HOME", str(root / "barhome"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2024-01-15T10:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2024-01-15T10:00:00Z")
    monkeypatch.setenv("GIT_EDITOR", "false")
    monkeypatch.setenv("NO_COLOR", "1")
    # a shortcut of the speed layer that breaks (a git command it relies on fails) raises
    # instead of falling back in silence (``bar.base.speed.fallback``)
    monkeypatch.setenv("BAR_STRICT_FALLBACK", "1")
    # git's automatic packing, and bar's after a step (``bar.git.packing``), in the
    # foreground: nothing left running when a test looks at the object store or ends
    # (git's maintenance after each commit, a git started each time, is off: it packs no
    # test's few objects, and bar's packing is its own)
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[gc]\n\tautoDetach = false\n[maintenance]\n\tauto = false\n"
    )
    # a task's watcher outlives the commands (``bar.changes.fast.watcher``): the test's are stopped
    # when it ends, and would give up on their own after a minute
    monkeypatch.setenv("BAR_WATCHER_IDLE", "60")
    # so does the bar home's resident (``bar.changes.fast.resident``): the same for it
    monkeypatch.setenv("BAR_RESIDENT_IDLE", "60")


@dataclass
class Shared:
    """A repository a module's tests share (those that only read what was made in it once):
    in a sealed home of its own, ``root``, as a test's own repository is in its tmp_path."""

    root: Path
    repo: Path

    def enter(self, monkeypatch: pytest.MonkeyPatch) -> Path:
        """For one test: its home (``seal``) and its repository, the current directory."""
        seal(self.root, monkeypatch)
        monkeypatch.chdir(self.repo)
        return self.repo

    def fsck(self) -> None:
        """When the module ends: ``git fsck`` of the repository is clean (as ``make_repo``
        checks of a test's own)."""
        checked = subprocess.run(
            ["git", "fsck", "--no-progress", "--no-dangling"],
            cwd=self.repo,
            capture_output=True,
            text=True,
        )
        assert checked.returncode == 0 and not checked.stdout.strip(), (
            f"git fsck of {self.repo} after the module: {checked.stdout}{checked.stderr}"
        )


def shared_repo(
    factory: pytest.TempPathFactory, name: str, fill: Callable[[Path], Any]
) -> tuple[Shared, Any]:
    """A repository with one commit (README.md), as the ``repo`` fixture makes, then
    ``fill(repo)`` with the seal on and the repository the current directory (through
    the installed bar: a module's fixture has no test's capfd); what ``fill`` returns
    (JSON) comes back with it. Made once for the whole run: the first of its processes
    (pytest-xdist's) to ask makes it under a lock, the others wait for it and share it.
    Its watcher and resident give up on their own (``seal``: after a minute idle)."""
    base = factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = Shared(run / f"shared-{name}", run / f"shared-{name}" / "repo")
    made = shared.root / "made.json"
    with open(run / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            shutil.rmtree(shared.root, ignore_errors=True)
            shared.repo.mkdir(parents=True)
            with pytest.MonkeyPatch.context() as mp:
                seal(shared.root, mp)
                (shared.repo / "README.md").write_text("hello\n")
                for argv in (
                    ["init", "-q", "-b", "main"],
                    ["add", "-A"],
                    ["commit", "-qm", "initial"],
                ):
                    subprocess.run(["git", *argv], cwd=shared.repo, check=True)
                mp.chdir(shared.repo)
                value = fill(shared.repo)
            made.write_text(json.dumps(value))
    return shared, json.loads(made.read_text())


@dataclass
class Gate:
    """A step's command that runs until the test opens its gate (makes the file ``path``):
    the step is running for exactly as long as the test needs it running, where a sleep
    would have to outlast the slowest machine's checks and then be waited out. (A test
    that fails before it opens the gate leaves no command behind for more than
    ``LIMIT`` seconds.)"""

    path: Path
    LIMIT: ClassVar[int] = 300

    @property
    def script(self) -> str:
        return (
            f"i=0; until [ -e {self.path} ] || [ $i -ge {self.LIMIT * 10} ]; "
            "do sleep 0.1; i=$((i+1)); done"
        )

    def open(self) -> None:
        self.path.touch()


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def bar(capfd: pytest.CaptureFixture[str], *args: str) -> Ran:
    """Run ``bar ARGS`` in-process and capture what it printed."""
    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return Ran(code, out, err)


def bar_exe(
    *args: str,
    cwd: Path | None = None,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Ran:
    """Run the installed ``bar`` executable in a child process."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [BAR_EXE, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=full_env,
        timeout=timeout,
    )
    return Ran(
        proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    )


def pty_step(cwd: Path, script: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``bar run --pty -- sh -c SCRIPT`` started in the background, its streams on
    /dev/null (a test that kills it while the step runs)."""
    return subprocess.Popen(
        [BAR_EXE, "run", "--pty", "--", "sh", "-c", script],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def bar_home() -> Path:
    return Path(os.environ["BAR_HOME"])


def project_dir() -> Path:
    (pdir,) = (bar_home() / "projects").iterdir()
    return pdir


def task_dir(task_id: str) -> Path:
    return project_dir() / "tasks" / task_id


def seen_alive_after(task_id: str, *paths: Path, timeout: float = 60) -> None:
    """Wait until the running step of ``task_id`` shows bar alive in a later clock tick
    than the last change of ``paths`` (and of their directories): from then on, what
    they hold is the step's if bar is killed (``bar.step.interrupted.alive_until``, what
    the next command judges by), however slow the machine. The deadline only keeps a
    broken run from hanging."""
    import time
    from types import SimpleNamespace

    from bar.model import journals
    from bar.step.interrupted import alive_until
    from bar.store.layout import TaskPaths

    task = SimpleNamespace(paths=TaskPaths(task_dir(task_id)))
    changed = max(os.lstat(p).st_ctime_ns for path in paths for p in (path, path.parent))
    deadline = time.monotonic() + timeout
    while True:
        intent = journals.RUN.read(task.paths)
        if intent is not None and alive_until(task, intent.step_id) > changed:  # type: ignore[arg-type]
            return
        assert time.monotonic() < deadline, f"bar showed no sign of life after {paths}"
        time.sleep(0.01)


def running_task(argv: list[str], timeout: float = 60) -> str:
    """The task whose running step runs ``argv`` (its intent journal says so)."""
    import time

    from bar.model import journals
    from bar.store.layout import TaskPaths

    deadline = time.monotonic() + timeout
    while True:
        for folder in (project_dir() / "tasks").iterdir():
            intent = journals.RUN.read(TaskPaths(folder))
            if intent is not None and intent.cmd == argv:
                return folder.name
        assert time.monotonic() < deadline, f"no task runs {argv}"
        time.sleep(0.01)


def ledger(task_id: str) -> list[dict[str, Any]]:
    path = task_dir(task_id) / "ledger.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def new_task(capfd: pytest.CaptureFixture[str], name: str = "t1", *extra: str) -> dict[str, Any]:
    res = bar(capfd, "task", "new", name, "--json", *extra)
    assert res.code == 0, res.err
    data: dict[str, Any] = res.json()
    return data


def worktree(task: dict[str, Any]) -> Path:
    return Path(task["worktree"])


def files_on_disk(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (but .git, and bar's copies for aide's clients) as
    content, with 'x' for executables and '-> target' for symlinks: what a snapshot should
    hold, minus ignored files."""
    files: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] == ".git" or _aide_copy(rel.as_posix()):
            continue
        if p.is_symlink():
            files[rel.as_posix()] = b"-> " + os.readlink(p).encode()
        elif p.is_file():
            mode = b"x:" if os.access(p, os.X_OK) else b"-:"
            files[rel.as_posix()] = mode + p.read_bytes()
    return files


def _aide_copy(rel: str) -> bool:
    """The copies of a task's decisions and flow bar keeps in its worktree for aide's
    clients (``.aide/``: docs/decide-flow.md), which no snapshot holds."""
    return rel in (".aide/.gitignore", ".aide/flow-status.json") or rel.startswith(
        ".aide/decisions/"
    )


def files_in_commit(repo: Path, commit: str) -> dict[str, bytes]:
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", commit], cwd=repo, capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    files: dict[str, bytes] = {}
    for item in out.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        mode, _type, sha = meta.split()
        data = subprocess.run(
            ["git", "cat-file", "blob", sha], cwd=repo, capture_output=True, check=True
        ).stdout
        if mode == "120000":
            files[path] = b"-> " + data
        else:
            files[path] = (b"x:" if mode == "100755" else b"-:") + data
    return files


def replay_patches(repo: Path, task_id: str, base_commit: str, dest: Path) -> dict[str, bytes]:
    """Apply every patch of the task in order to ``base_commit`` in ``dest`` with git apply."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", base_commit], cwd=repo, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-f", "-"], cwd=dest, input=archive, check=True)
    for step in ledger(task_id):
        patch = step.get("artifacts", {}).get("patch")
        if patch:
            subprocess.run(
                ["git", "apply", "--binary", "--whitespace=nowarn", str(task_dir(task_id) / patch)],
                cwd=dest,
                check=True,
                capture_output=True,
            )
    return files_on_disk(dest)


def set_config(**sections: dict[str, object]) -> None:
    """Change sections of the project's config.yaml (the one project under BAR_HOME)."""
    path = project_dir() / "config.yaml"
    data = yaml_text.load(path.read_text())
    for name, values in sections.items():
        data[name] = {**(data.get(name) or {}), **values}
    path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper))  # (as safe_dump, in C)


SUPPORT = Path(__file__).resolve().parent  # tests/support: these helpers, the fake agents
TESTS = SUPPORT.parent
DATA = TESTS / "data"  # recorded events, corpora, attack scripts
ROOT = TESTS.parent  # the project
FAKE_AGENT_PATH = SUPPORT / "fake_agent.py"


def load_fake_agent() -> ModuleType:
    """tests/support/fake_agent.py as a module, for tests that read its constants and helpers."""
    spec = importlib.util.spec_from_file_location("fake_agent", FAKE_AGENT_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_agent"] = module
    spec.loader.exec_module(module)
    return module


def run_claude(cwd: Path, tmp_path: Path, prompt: str, *commands: str) -> None:
    """``bar run --agent claude`` of the fake Claude Code (tests/support/fake_agent.py),
    keeping its transcript: ``prompt``, then each command or ``write:PATH=TEXT``, each
    answer of 100 tokens in, 20 out and 1000 read from a cache."""
    run_fake_agent("claude", cwd, tmp_path, prompt, *commands)


def run_fake_agent(agent: str, cwd: Path, tmp_path: Path, prompt: str, *commands: str) -> None:
    """``run_claude`` for any of the fake agents (claude, codex, gemini)."""
    program = tmp_path / "bin" / agent
    program.parent.mkdir(exist_ok=True)
    program.write_text(
        f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT_PATH} --agent {agent} --transcript "$@"\n'
    )
    program.chmod(0o755)
    argv = [str(program), "--prompt", prompt, "--usage", "100,20,1000", *commands]
    res = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", agent, "--", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def run_writer(cwd: Path, tmp_path: Path, script: list[dict[str, Any]], name: str = "s") -> None:
    """``bar run --agent claude`` of the stand-in that plays ``script`` into a Claude Code
    transcript and calls bar's hooks (tests/support/session_writer.py: its turns)."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(script))
    writer = [sys.executable, str(SUPPORT / "session_writer.py"), str(path)]
    res = subprocess.run(
        [BAR_EXE, "run", "--no-pty", "--agent", "claude", "--", *writer],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def commit_files(repo: Path, files: dict[str, str], message: str) -> None:
    """Write ``files`` (path -> text) in ``repo`` and commit everything there."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for args in (["add", "-A"], ["commit", "-qm", message]):
        subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)


def run_sh(capfd: pytest.CaptureFixture[str], script: str) -> Ran:
    """``bar run -- sh -c SCRIPT``, which must succeed."""
    res = bar(capfd, "run", "--", "sh", "-c", script)
    assert res.code == 0, res.err
    return res


def init_clean(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """``bar init`` with the policy off; the developer commits the policy file bar init
    wrote, so the checkout is clean (as apply wants it)."""
    assert bar(capfd, "init").code == 0
    set_config(policy={"enabled": False})
    for args in (["add", ".bar"], ["commit", "-qm", "add bar policy"]):
        subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)
    return repo


def git_commands(trace: Path) -> list[str]:
    """The git subcommands a ``GIT_TRACE2_EVENT`` file saw start (none: no file)."""
    names = []
    for line in trace.read_text().splitlines() if trace.exists() else ():
        event = json.loads(line)
        if event["event"] == "cmd_name":
            names.append(event["name"])
    return names


def git_argvs(trace: Path) -> list[list[str]]:
    """The command line of every git a ``GIT_TRACE2_EVENT`` file saw start."""
    found = []
    for line in trace.read_text().splitlines() if trace.exists() else ():
        event = json.loads(line)
        if event["event"] == "start":
            found.append(list(event["argv"]))
    return found


def side_index_of(task: dict[str, Any]) -> Path:
    """The task's side index (``tasks/<id>/index``), by which its watcher is asked."""
    return task_dir(str(task["id"])) / "index"


def watcher_started(
    capfd: pytest.CaptureFixture[str], repo: Path, prepare: Any = None
) -> tuple[dict[str, Any], Path]:
    """A task whose second step handed its watch to a watcher, now sure of what it saw
    (``prepare``: called with the worktree before the first step)."""
    from bar.changes.fast import watcher

    init_clean(repo, capfd)
    task = new_task(capfd)
    if prepare is not None:
        prepare(worktree(task))
    # the first step stamps; the second watches, then hands over; the third makes the
    # watcher sure (a full look). On a loaded machine a step may end unsure of its own
    # watch (a change within the racy window) and hand nothing over: the next one does
    said = None
    for attempt in range(8):
        assert bar(capfd, "run", "--", "true").code == 0
        said = watcher.status(side_index_of(task)) if attempt >= 2 else None
        if said is not None and said["sure"] is True:
            break
        if attempt >= 2:
            import time

            time.sleep(SETTLE)
    assert said is not None and said["sure"] is True, said
    return task, worktree(task)


def plain_git_tree(wt: Path, tmp: Path) -> str:
    """The tree plain git writes of ``wt`` from a fresh index holding its HEAD (the
    oracle: a file HEAD holds is kept, ignored or not, as git keeps a tracked file)."""
    index = tmp / "oracle-index"
    index.unlink(missing_ok=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=wt, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=wt, env=env, check=True)
    return subprocess.run(
        ["git", "write-tree"], cwd=wt, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def recorded_tree(repo: Path, task: dict[str, Any]) -> str:
    """The tree of the last state the task's ledger recorded."""
    last = ledger(str(task["id"]))[-1]["snapshot"]
    return subprocess.run(
        ["git", "rev-parse", f"{last}^{{tree}}"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


# --- SIGKILL sweeps ----------------------------------------------------------------------
# A sweep crashes a command at each of its write points in turn. ``make test`` (what CI
# runs) visits a seeded share of each sweep's points, ``make test-long`` all of them:
# TEST_SWEEP_SHARE (0 < share <= 1) and TEST_SWEEP_SEED, read once here (each test's
# environment is sealed). The seed changes every day unless set, so that runs on
# successive days cover different points; the run's header names it.
SWEEP_SHARE = min(1.0, max(0.01, float(os.environ.get("TEST_SWEEP_SHARE") or 1)))
SWEEP_SEED = os.environ.get("TEST_SWEEP_SEED") or __import__("time").strftime("%Y%m%d")


def sweep(last: int, first: int = 1) -> list[int]:
    """The points, numbered ``first`` to ``last``, a sweep crashes at: all of them, or a
    share (``SWEEP_SHARE``) picked by ``SWEEP_SEED`` and the test's name, the first and the
    last always among them."""
    import random

    numbers = list(range(first, last + 1))
    keep = max(2, round(len(numbers) * SWEEP_SHARE))
    if keep >= len(numbers):
        return numbers
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    pick = random.Random(f"{SWEEP_SEED}:{test}:{first}:{last}")
    middle = pick.sample(numbers[1:-1], keep - 2)
    return sorted({numbers[0], numbers[-1], *middle})


def fault_trace(repo: Path, tmp: Path, *args: str) -> list[str]:
    """The crash points ``bar ARGS`` passes in ``repo``, in order (``BAR_FAULT_TRACE``)."""
    file = tmp / "trace"
    file.unlink(missing_ok=True)
    res = bar_exe(*args, cwd=repo, env={"BAR_FAULT_TRACE": str(file)})
    assert res.code == 0, res.err
    return [line.split(" ", 1)[1] for line in file.read_text().splitlines()]


def walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root``, links not followed, as ``rglob("*")`` lists them, but
    passing over one that goes while the walk reads it: a bar home holds files and
    directories that live for an instant (the working directory a daemon makes and
    removes as it starts: ``bar.base.proc.work_nowhere``; a file replaced by rename)."""
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            yield Path(here) / name


def held_bytes(path: Path) -> bytes | None:
    """The bytes of the regular file at ``path`` (never through a link); None where
    none is there, or it went before it was read."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def drain(fifo: Path) -> bytes:
    """The next line written to ``fifo``, with its newline: a ``BAR_FAULT_TRACE`` that is
    a FIFO, where bar writes one line an open and waits at its point until the line is
    read (``bar.base.faults``); b"\\n" is the end (``end_drain``). An open that meets only
    the end of the last line's writer (it closed as this one opened) is made again."""
    while True:
        fd = os.open(fifo, os.O_RDONLY)
        try:
            data = b""
            while not data.endswith(b"\n") and (chunk := os.read(fd, 4096)):
                data += chunk
        finally:
            os.close(fd)
        if data:
            return data


def end_drain(fifo: Path) -> None:
    """Have the reader that ``drain``s ``fifo`` read the end (an empty line), and wait
    until it did."""
    from bar.base import faults

    fd = os.open(fifo, os.O_WRONLY)
    try:
        os.write(fd, b"\n")
        faults.until_read(fd)
    finally:
        os.close(fd)


def point_at(points: list[str], n: int, probe_id: str, task_id: str) -> str:
    """The ``n``th point of a probe's trace, by its label and how many of that label
    came before it (``BAR_FAULT_AT=LABEL@K``), the probe's task id in it made the task's:
    the number of points before it varies with timing (a stamps or racy file is written
    only when the clock says so), the label and its count do not."""
    label = points[n - 1]
    return f"{label.replace(probe_id, task_id)}@{points[:n].count(label)}"


def timed(point: str) -> bool:
    """A point some runs pass and others do not, as the clock has it: a stamps or racy
    file, and the watcher's mode note (``watch.json``, written when a watcher took the
    step's watch: one sure of what it saw, started in time, which a loaded machine may
    not give)."""
    return "stamps" in point or ".racy" in point or "watch.json" in point


def examples(full: int) -> int:
    """How many examples a long property test draws: ``full`` in ``make test-long``, the
    sweeps' share of them in ``make test`` (each day's seed draws others where the test
    is not derandomized)."""
    return max(100, round(full * SWEEP_SHARE))


def _fanotify_usable() -> bool:
    from bar.base.fanotify import Marks

    marks = Marks.open()
    if marks is None:
        return False
    marks.close()
    return True


# what marks directories with fanotify (``bar.base.fanotify``): not where the kernel (before
# Linux 5.13) or a container's system-call filter gives this user no fanotify
needs_fanotify = pytest.mark.skipif(
    not _fanotify_usable(), reason="this kernel gives this user no fanotify"
)


def host_pids(*words: bytes) -> list[int]:
    """The pids (as bar sees them) of the running processes whose command line holds
    each of ``words``: a step in a PID namespace of its own knows its processes by
    other numbers."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                line = f.read()
        except OSError:
            continue
        if name.isdigit() and all(w in line for w in words) and process_alive(int(name)):
            found.append(int(name))
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` now (its children, theirs, ...)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            kids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for thread in kids:
            try:
                with open(f"/proc/{parent}/task/{thread}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                continue
        if parent != pid:
            found.append(parent)
    return found


def all_gone(pids: list[int], timeout: float = 60) -> None:
    """Wait until none of ``pids`` runs (a killed bar's holder and the step it held stop
    by themselves: ``bar.sandbox.holder``). The deadline only keeps a broken run from
    hanging."""
    import time

    assert pids, "no process to wait for"
    deadline = time.monotonic() + timeout
    while alive := [p for p in pids if process_alive(p)]:
        assert time.monotonic() < deadline, f"still running: {alive}"
        time.sleep(0.02)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def calls_to(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[Any]:
    """The first argument of every call of ``owner.name`` from now on in this process,
    each added to the list returned (the call itself goes on as before)."""
    taken: list[Any] = []
    real = getattr(owner, name)

    def taking(first: Any, *rest: Any, **named: Any) -> Any:
        taken.append(first)
        return real(first, *rest, **named)

    monkeypatch.setattr(owner, name, taking)
    return taken


def parsed_steps(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ledger records bar parses into steps from now on in this process
    (``bar.model.ledger_file.step_from_record``), each added to the list returned."""
    from bar.model import ledger_file

    return calls_to(monkeypatch, ledger_file, "step_from_record")
