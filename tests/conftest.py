"""Shared fixtures: every test is sealed off from the machine through its environment.

HOME, XDG_CONFIG_HOME and BAR_HOME live in the test's tmp_path, git reads no system or
global config, and authors and dates are fixed. Child processes and git hooks inherit all
of this, so nothing is mocked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from bar.workers.devserver import DevServer

# the helpers every test shares (tests/support), importable as ``helpers``, ``ptys``...;
# and each package's tests, whose file names are unique, for the few that share a fixture
_TESTS = Path(__file__).resolve().parent
_PACKAGES = sorted(
    str(d)
    for d in _TESTS.rglob("*")
    if d.is_dir() and not ({"data", "support", "__pycache__"} & set(d.relative_to(_TESTS).parts))
)
sys.path[:0] = [str(_TESTS / "support"), *_PACKAGES]

# timing belongs in the benchmarks: no property test fails for being slow on a busy machine
# (Hypothesis's default deadline is 200 ms an example)
from hypothesis import settings  # noqa: E402

settings.register_profile("bar", deadline=None)
settings.load_profile("bar")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C and Ctrl-\\ reach the commands the tests start as they reach a user's, even
    when the suite itself was started with them ignored (``make test &`` in a script: a
    shell without job control starts a background command so, and every child inherits
    it); the tests of what bar does with a Ctrl-C need the signal to do something."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which points the SIGKILL sweeps crashed at (``helpers.sweep``): how to pick them again."""
    from helpers import SWEEP_SEED, SWEEP_SHARE

    terminalreporter.write_line(
        f"SIGKILL sweeps: {SWEEP_SHARE:g} of each sweep's points, seed {SWEEP_SEED} "
        f"(TEST_SWEEP_SHARE={SWEEP_SHARE:g} TEST_SWEEP_SEED={SWEEP_SEED} picks them again)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests ``tests/data/long_tests.txt`` names are marked ``long``: ``make test`` runs
    them (first), ``make test-fast`` (work in progress) does not (``long_tests``)."""
    from long_tests import listed

    names = listed()
    for item in items:
        if item.nodeid in names:
            item.add_marker(pytest.mark.long)
    # the modules that hold tests of seconds first (whole, so that a module's fixtures are
    # made once): spread over the workers while the quick ones fill the gaps, rather than
    # one of them starting last and the others waiting for it
    heavy = {name.split("::")[0] for name in names}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in heavy)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting made (the test modules, their items, what they import) lives as long
    as the test process: the cycle collector leaves it out for good (``gc.freeze``) rather
    than walk it again each time the tests' own garbage sets off a full collection."""
    import gc

    gc.freeze()


@pytest.fixture(scope="session")
def shared_resident(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """Where the resident the tests of this test process share listens
    (``BAR_RESIDENT_SOCKET``): loaded once, it serves the bar programs of every test, each
    in its own bar home (a fork takes its caller's environment), where each test's first
    served command would start one of its own, to be stopped when the test ends."""
    if os.environ.get("TEST_SHARED_RESIDENT") == "0":
        return None
    from helpers import BAR_EXE

    path = str(tmp_path_factory.mktemp("resident", numbered=False) / "resident.sock")
    # started now, so that every test meets it, not only those after the first command
    # that starts one (a test that needs bar to run a command itself says so:
    # ``BAR_RESIDENT_IDLE=0``); stopped when the run ends (``no_watcher_left``)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(Path(path).parent),
        "BAR_HOME": str(Path(path).parent),
        "BAR_RESIDENT_SOCKET": path,
        "BAR_RESIDENT_IDLE": "3600",
    }
    # (one that did not start in time is started by the first command that may)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run([BAR_EXE, "resident", "start"], env=env, capture_output=True, timeout=120)
    return path


@pytest.fixture(autouse=True)
def hermetic_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_resident: str | None
) -> Iterator[None]:
    from helpers import seal

    seal(tmp_path, monkeypatch)
    if shared_resident is not None:
        monkeypatch.setenv("BAR_RESIDENT_SOCKET", shared_resident)
    else:
        monkeypatch.delenv("BAR_RESIDENT_SOCKET", raising=False)
    yield
    from bar.changes.fast import resident, watcher

    watcher.stop_all(tmp_path / "barhome")
    resident.stop(str(tmp_path / "barhome"))


def _signal_state() -> dict[str, str]:
    """What the kernel says of this process's signals: which it ignores and which its
    main thread blocks (what every child it starts inherits), however they were set
    (Python, a native library)."""
    with open("/proc/self/status") as status:
        return {
            k: v.strip()
            for k, _, v in (line.partition(":") for line in status)
            if k in ("SigIgn", "SigBlk")
        }


@pytest.fixture(autouse=True)
def signals_as_they_were() -> Iterator[None]:
    """A test leaves the test process's signals as it found them: a SIGINT left ignored
    or blocked is inherited by every command the later tests start, which then outlive
    the Ctrl-C they are sent (seen as a Ctrl-C test failing far from its cause)."""
    before = _signal_state()
    yield
    after = _signal_state()
    assert after == before, (
        f"this test left the test process's signals changed: {before} -> {after}"
    )


@pytest.fixture(scope="session", autouse=True)
def no_watcher_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The watchers and residents of homes a test made on its own (module fixtures, a test's own
    BAR_HOME) are stopped when the run ends, not left to their idle time."""
    yield
    from bar.changes.fast import resident, watcher

    for sock in tmp_path_factory.getbasetemp().rglob(watcher.SOCKET):
        watcher.stop(sock.parent / "index")
    for sock in tmp_path_factory.getbasetemp().rglob(resident.SOCKET):
        resident.stop(str(sock.parent))


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A Temporal dev server for the worker tests of this test process, started at the
    first that asks (``workers.cluster``): each cluster serves a queue of its own, so the
    modules share it rather than each starting one. A test that stops or restarts its
    server starts its own."""
    from bar.workers.devserver import DevServer

    server = DevServer(tmp_path_factory.mktemp("temporal") / "temporal.db").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process snapshots distrust a directory changed within 0.1 s of them, not 2 s:
    a directory's ctime cannot be set back, so tests that want trusted stamps wait
    ``helpers.SETTLE`` instead of the production window (which covers coarse clocks of
    other file systems; the local ones here tick in milliseconds)."""
    from bar.changes.fast import stamps

    monkeypatch.setattr(stamps, "RACY_NS", 100_000_000)


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    """Run real git in ``repo`` and return its stdout (raises on failure)."""
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True)
    return proc.stdout.decode()


MakeRepo = Callable[..., Path]


def fsck_args(repo: Path) -> list[str]:
    """``git fsck`` of ``repo``; told there is no commit-graph or multi-pack index to verify
    where there is none (git's maintenance writes them, off in the tests: ``helpers.seal``),
    which spares it starting a git for each."""
    objects = repo / ".git" / "objects"
    graphs = ("info/commit-graph", "info/commit-graphs", "pack/multi-pack-index")
    if any(os.path.lexists(objects / name) for name in graphs):
        return ["fsck", "--no-progress", "--no-dangling"]
    off = ["-c", "core.commitGraph=false", "-c", "core.multiPackIndex=false"]
    return [*off, "fsck", "--no-progress", "--no-dangling"]


@pytest.fixture(scope="session")
def empty_git_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``git init -b main`` makes, once: each repository of a test starts as a copy
    of it (the same files, without a git process per test)."""
    made = tmp_path_factory.mktemp("git-init") / "repo"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(made.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "init", "-q", "-b", "main", str(made)],
        env={**env, "GIT_CONFIG_GLOBAL": os.devnull},
        capture_output=True,
        check=True,
    )
    return made / ".git"


@pytest.fixture
def make_repo(
    tmp_path: Path, request: pytest.FixtureRequest, empty_git_dir: Path
) -> Iterator[MakeRepo]:
    """Build a real repository with one commit per ``files`` mapping given. When the test
    ends, ``git fsck`` of each must be clean (nothing a step does breaks the developer's
    history: docs/sandbox.md, "The object store and the refs: a quarantine"), unless the
    test breaks it on purpose (``breaks_history``)."""
    counter = iter(range(1000))
    made: list[Path] = []

    def factory(files: dict[str, str | bytes] | None = None, name: str | None = None) -> Path:
        repo = tmp_path / (name or f"repo{next(counter)}")
        made.append(repo)
        repo.mkdir(parents=True)
        shutil.copytree(empty_git_dir, repo / ".git", symlinks=True)
        content = files if files is not None else {"README.md": "hello\n"}
        for rel, data in content.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                path.write_bytes(data)
            else:
                path.write_text(data)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
        return repo

    yield factory
    if request.node.get_closest_marker("breaks_history") is not None:
        return
    for repo in made:
        if (repo / ".git").is_dir():
            checked = subprocess.run(
                ["git", *fsck_args(repo)],
                cwd=repo,
                capture_output=True,
                text=True,
            )
            assert checked.returncode == 0 and not checked.stdout.strip(), (
                f"git fsck of {repo.name} after the test: {checked.stdout}{checked.stderr}"
            )


@pytest.fixture
def repo(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh repository that is also the current directory."""
    path = make_repo()
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def inited(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """``repo`` after ``bar init``: a registered project, the current directory."""
    from helpers import bar

    assert bar(capfd, "init").code == 0
    return repo


@pytest.fixture
def inited_clean(repo: Path, capfd: pytest.CaptureFixture[str]) -> Path:
    """``inited`` with the policy off and the policy file ``bar init`` wrote committed,
    so the checkout is clean (as ``bar apply`` wants it)."""
    from helpers import init_clean

    return init_clean(repo, capfd)


@pytest.fixture(params=["fast", "slow"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways: the speed layer on (the default) and off (``BAR_FAST=0``); a test that
    takes ``speed`` runs in each (both modes give the same record: docs/internals/record.md,
    "The record never lies")."""
    if request.param == "slow":
        monkeypatch.setenv("BAR_FAST", "0")
    return str(request.param)
